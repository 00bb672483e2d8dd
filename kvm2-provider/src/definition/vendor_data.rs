//! The cloud-init vendor data the provider puts in every seed: the QEMU guest
//! agent (address discovery depends on it) and Squid as the egress proxy.
//!
//! # Merge rule
//!
//! cloud-init reads vendor data first and the request's user data over it.
//! Both are `#cloud-config` documents; for every top-level key present in
//! both, **the user data wins and replaces the vendor value** (cloud-init's
//! default merge, `dict(replace)+list()+str()`). So:
//!
//! - user data that sets `packages` replaces this list: it must list
//!   `qemu-guest-agent` and `squid` itself if it still wants them;
//! - user data that sets `runcmd` or `write_files` replaces ours, and the
//!   proxy is then not configured by the provider;
//! - `vendor_data: {enabled: false}` in user data switches vendor data off
//!   entirely (the VM then gets neither agent nor proxy from the provider).
//!
//! Keys the user data does not mention keep the vendor values. Every value
//! written here is typed (port number, parsed address ranges), so nothing a
//! user configures can change the YAML's structure.

pub use provider_api::config::ProxySettings;

use crate::Error;

/// Where the Squid configuration is written. Debian's package keeps an
/// existing file (cloud-init installs with `--force-confold`), and the file
/// is written after package installation (`defer: true`) in any case.
pub const SQUID_CONFIG_PATH: &str = "/etc/squid/squid.conf";

/// Renders the vendor-data `#cloud-config` document from the config's
/// proxy settings (their client ranges are `Cidr`s, parsed once when the
/// config was read).
///
/// The proxy is a non-caching forward proxy that allows `CONNECT` to port
/// 443 only, from `allowed_clients` only.
///
/// # Errors
/// [`Error::InvalidValue`] when the port is 0 or no client range is given
/// (a proxy nobody may use is a configuration mistake).
pub fn render(settings: &ProxySettings) -> Result<String, Error> {
    if settings.port == 0 {
        return Err(Error::invalid("proxy port", "must be 1 to 65535"));
    }
    if settings.allowed_clients.is_empty() {
        return Err(Error::invalid(
            "proxy client ranges",
            "at least one range must be allowed",
        ));
    }
    let clients: Vec<String> = settings
        .allowed_clients
        .iter()
        .map(ToString::to_string)
        .collect();
    let squid = [
        "# Written by the kvm2 provider: CONNECT to 443 only, no caching.".to_owned(),
        format!("http_port {}", settings.port),
        format!("acl clients src {}", clients.join(" ")),
        "acl ssl_ports port 443".to_owned(),
        "acl CONNECT method CONNECT".to_owned(),
        "http_access deny !CONNECT".to_owned(),
        "http_access deny CONNECT !ssl_ports".to_owned(),
        "http_access allow clients".to_owned(),
        "http_access deny all".to_owned(),
        "cache deny all".to_owned(),
        "access_log none".to_owned(),
    ];
    let mut out = String::from(
        "#cloud-config\n\
         # Vendor data from the kvm2 provider. User data overrides any top-level\n\
         # key set here (see docs/kvm2-provider.md, \"Cloud-init\").\n\
         package_update: true\n\
         packages:\n  - qemu-guest-agent\n  - squid\n\
         write_files:\n",
    );
    out.push_str(&format!(
        "  - path: {SQUID_CONFIG_PATH}\n    permissions: '0644'\n    defer: true\n    content: |\n"
    ));
    for line in &squid {
        out.push_str("      ");
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(
        "runcmd:\n  - [systemctl, enable, --now, qemu-guest-agent]\n  - [systemctl, restart, squid]\n",
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::config::values::Cidr;

    fn settings() -> ProxySettings {
        ProxySettings::new(
            3128,
            vec![
                Cidr::parse("10.0.0.0/8").unwrap(),
                Cidr::parse("fd00::/8").unwrap(),
            ],
        )
    }

    #[test]
    fn renders_agent_and_proxy() {
        let doc = render(&settings()).unwrap();
        assert!(doc.starts_with("#cloud-config\n"));
        assert!(doc.contains("  - qemu-guest-agent\n"));
        assert!(doc.contains("  - squid\n"));
        assert!(doc.contains("      http_port 3128\n"));
        assert!(doc.contains("      acl clients src 10.0.0.0/8 fd00::/8\n"));
        assert!(doc.contains("      http_access deny CONNECT !ssl_ports\n"));
        assert!(doc.contains("[systemctl, enable, --now, qemu-guest-agent]"));
        // Every line of the block scalar is indented under `content: |`.
        let block: Vec<&str> = doc
            .lines()
            .skip_while(|l| !l.ends_with("content: |"))
            .skip(1)
            .take_while(|l| !l.starts_with("runcmd"))
            .collect();
        assert_eq!(block.len(), 11);
        assert!(block.iter().all(|l| l.starts_with("      ")));
    }

    #[test]
    fn rejects_unusable_settings() {
        let mut s = settings();
        s.port = 0;
        assert!(render(&s).is_err());
        let mut s = settings();
        s.allowed_clients.clear();
        assert!(render(&s).is_err());
    }
}
