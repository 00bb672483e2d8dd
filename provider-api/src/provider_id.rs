//! [`ProviderId`]: the provider-assigned identity of an instance.

use std::fmt;
use std::str::FromStr;

use crate::ident::{Identifier, ParseError};
use crate::provider_type::ProviderType;

/// The rule text of [`ProviderId`].
pub const PROVIDER_ID_RULE: &str = "must be a provider ID of the form \
     <type>://<provider>/<host>/<instance>, each part an identifier";

/// Where an instance lives: `<type>://<provider>/<host>/<instance>`, e.g.
/// `kvm2://kvm2-home/host1/ep-e7749fc11676e12e`.
///
/// * `type`: the [`ProviderType`] (`kvm2`);
/// * `provider`: the config entry's name;
/// * `host`: the host (target) inside that entry;
/// * `instance`: the instance name (for kvm2 the domain name, from
///   [`name_from_uid`](crate::name_from_uid)).
///
/// Parsing is strict: exactly four parts, each an [`Identifier`], nothing
/// before, after or between (no query, fragment, port, user info,
/// percent-encoding, empty or extra segments, trailing slash). `Display` and
/// [`parse`](Self::parse) round-trip. Serde (de)serializes it as that string.
///
/// ```
/// use provider_api::ProviderId;
/// let id = ProviderId::parse("kvm2://kvm2-home/host1/ep-e7749fc11676e12e").unwrap();
/// assert_eq!(id.host().as_str(), "host1");
/// assert_eq!(id.to_string(), "kvm2://kvm2-home/host1/ep-e7749fc11676e12e");
/// assert!(ProviderId::parse("kvm2://kvm2-home/host1/../x").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderId {
    provider_type: ProviderType,
    provider: Identifier,
    host: Identifier,
    instance: Identifier,
}

impl ProviderId {
    /// Builds an ID from its parts (all already valid).
    pub fn new(
        provider_type: ProviderType,
        provider: Identifier,
        host: Identifier,
        instance: Identifier,
    ) -> Self {
        ProviderId {
            provider_type,
            provider,
            host,
            instance,
        }
    }

    /// Parses the `<type>://<provider>/<host>/<instance>` form.
    ///
    /// # Errors
    /// [`ParseError`] with [`PROVIDER_ID_RULE`] (or the provider type rule for
    /// an unknown scheme) when `s` is not exactly that form.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::new(PROVIDER_ID_RULE);
        let (scheme, rest) = s.split_once("://").ok_or_else(bad)?;
        let provider_type = ProviderType::parse(scheme)?;
        let mut parts = rest.split('/');
        let (Some(provider), Some(host), Some(instance), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let id = |p: &str| Identifier::parse(p).map_err(|_| bad());
        Ok(ProviderId {
            provider_type,
            provider: id(provider)?,
            host: id(host)?,
            instance: id(instance)?,
        })
    }

    /// The provider type (the scheme).
    pub fn provider_type(&self) -> ProviderType {
        self.provider_type
    }

    /// The provider config entry's name.
    pub fn provider(&self) -> &Identifier {
        &self.provider
    }

    /// The host (target) the instance lives on.
    pub fn host(&self) -> &Identifier {
        &self.host
    }

    /// The instance name on that host.
    pub fn instance(&self) -> &Identifier {
        &self.instance
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}/{}/{}",
            self.provider_type, self.provider, self.host, self.instance
        )
    }
}

impl fmt::Debug for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProviderId({self})")
    }
}

impl FromStr for ProviderId {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        Self::parse(s)
    }
}

impl serde::Serialize for ProviderId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ProviderId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        ProviderId::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_canonical_form() {
        let id = ProviderId::parse("kvm2://e/h/ep-1").unwrap();
        assert_eq!(id.provider_type(), ProviderType::Kvm2);
        assert_eq!(id.provider().as_str(), "e");
        assert_eq!(id.host().as_str(), "h");
        assert_eq!(id.instance().as_str(), "ep-1");
        assert_eq!(format!("{id:?}"), "ProviderId(kvm2://e/h/ep-1)");
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "",
            "kvm2:/e/h/n",
            "kvm2://e/h",
            "kvm2://e/h/n/",
            "kvm2://e/h/n/x",
            "kvm2://e//n",
            "kvm2:///h/n",
            "kvm2://e/h/N",
            "kvm2://e/h/n?x=1",
            "kvm2://e/h/n#f",
            "kvm2://u@e/h/n",
            "kvm2://e:22/h/n",
            "kvm2://e/h/%2e%2e",
            "kvm2://e/h/..",
            "kvm2://e/h/n ",
            " kvm2://e/h/n",
            "KVM2://e/h/n",
        ] {
            assert!(ProviderId::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            ProviderId::parse("kvm2://e/h").unwrap_err().rule(),
            PROVIDER_ID_RULE
        );
        assert_eq!(
            ProviderId::parse("gcp://e/h/n").unwrap_err().rule(),
            crate::provider_type::PROVIDER_TYPE_RULE
        );
    }

    #[test]
    fn serde_uses_the_string_form() {
        let id = ProviderId::parse("kvm2://e/h/n").unwrap();
        let v: ProviderId = serde_saphyr::from_str("kvm2://e/h/n").unwrap();
        assert_eq!(v, id);
        assert!(serde_saphyr::from_str::<ProviderId>("kvm2://e/h").is_err());
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(
            p in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?",
            h in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?",
            n in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?",
        ) {
            let id = ProviderId::new(
                ProviderType::Kvm2,
                Identifier::parse(&p).unwrap(),
                Identifier::parse(&h).unwrap(),
                Identifier::parse(&n).unwrap(),
            );
            prop_assert_eq!(ProviderId::parse(&id.to_string()).unwrap(), id);
        }

        #[test]
        fn arbitrary_input_never_panics_and_valid_parts_are_inert(s in "(kvm2://)?.{0,60}") {
            if let Ok(id) = ProviderId::parse(&s) {
                crate::ident::tests::assert_inert(id.host().as_str());
                crate::ident::tests::assert_inert(id.instance().as_str());
                crate::ident::tests::assert_inert(id.provider().as_str());
                prop_assert_eq!(id.to_string(), s);
            }
        }
    }
}
