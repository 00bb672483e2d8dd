//! [`ProviderType`]: the kinds of provider a config entry can name.

use std::fmt;
use std::str::FromStr;

use crate::ident::ParseError;

/// The kind of a provider: selects the config block, the constructor in the
/// [`Registry`](crate::Registry) and the scheme of its [`ProviderId`](crate::ProviderId)s.
///
/// The set is closed in this crate because each type's config block is part
/// of the providers config schema defined here; adding a type means adding
/// its block. Implementations live in their own crates and register a
/// constructor for their type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProviderType {
    /// VMs on libvirt/KVM hosts reached over SSH (the `kvm2-provider` crate).
    Kvm2,
    /// Pods running Squid in a Kubernetes namespace (the
    /// `kubernetes-provider` crate).
    Kubernetes,
}

/// The rule text of [`ProviderType`].
pub const PROVIDER_TYPE_RULE: &str = "must be a known provider type (kvm2, kubernetes)";

impl ProviderType {
    /// Every type, in a stable order.
    pub const ALL: [ProviderType; 2] = [ProviderType::Kvm2, ProviderType::Kubernetes];

    /// The type's name in config files, IDs and metrics labels: `kvm2`,
    /// `kubernetes`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderType::Kvm2 => "kvm2",
            ProviderType::Kubernetes => "kubernetes",
        }
    }

    /// Parses a type name.
    ///
    /// # Errors
    /// [`ParseError`] with [`PROVIDER_TYPE_RULE`] for an unknown name.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        ProviderType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or(ParseError::new(PROVIDER_TYPE_RULE))
    }
}

impl FromStr for ProviderType {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        Self::parse(s)
    }
}

impl fmt::Display for ProviderType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_unknown() {
        for t in ProviderType::ALL {
            assert_eq!(ProviderType::parse(t.as_str()), Ok(t));
        }
        assert_eq!(
            ProviderType::parse("kvm").unwrap_err().rule(),
            PROVIDER_TYPE_RULE
        );
        assert!(ProviderType::parse("KVM2").is_err());
        assert!(ProviderType::parse("").is_err());
    }
}
