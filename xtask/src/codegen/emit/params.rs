//! `params.rs`: the string constants libvirt's API description defines
//! (`<macro … string='…'>`), nearly all of them typed-parameter names, as
//! Rust constants named without the `VIR_` prefix.

use std::fmt::Write as _;

use super::super::api_xml::Api;

pub(super) fn params(api: &Api) -> String {
    let mut out = String::from(
        "//! libvirt's named string constants: the typed-parameter names \
         (a [`TypedParam`](crate::TypedParam)'s `field`, found with\n\
         //! [`TypedParam::find`](crate::TypedParam::find)) that calls such as\n\
         //! `domain_get_blkio_parameters` or `connect_get_all_domain_stats` \
         answer with, and the\n//! names their setters take. Each is \
         libvirt's `VIR_…` macro without the prefix.\n\n",
    );
    for (name, (value, version)) in &api.strings {
        let short = name.strip_prefix("VIR_").unwrap_or(name);
        let since = if version.is_empty() {
            String::new()
        } else {
            format!(" (libvirt {version})")
        };
        // `{value:?}` is a Rust string literal of the value.
        let _ = writeln!(out, "/// `{name}`{since}.");
        let _ = writeln!(out, "pub const {short}: &str = {value:?};");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_lose_the_prefix_and_keep_the_value() {
        let mut api = Api::default();
        api.strings.insert(
            "VIR_DOMAIN_BLKIO_WEIGHT".into(),
            ("weight".into(), "0.9.0".into()),
        );
        let text = params(&api);
        assert!(
            text.contains(
                "/// `VIR_DOMAIN_BLKIO_WEIGHT` (libvirt 0.9.0).\npub const DOMAIN_BLKIO_WEIGHT: &str = \"weight\";"
            ),
            "{text}"
        );
    }
}
