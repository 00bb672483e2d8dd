//! [`ClusterIdentity`]: the tag that scopes every instance to the cluster
//! whose operator made it.
//!
//! The reconciler adds `egress-cluster=<identity>` to every Create; the GC
//! lists by that tag and, on top, checks it on every listed instance, so two
//! clusters sharing a provider entry never sweep each other's instances.

use provider_api::{Identifier, Tag, TagValue, Tags};

use crate::error::Error;

/// The tag key carrying the cluster identity.
pub const CLUSTER_TAG_KEY: &str = "egress-cluster";

/// This cluster's identity (e.g. the UID of its `kube-system` namespace): a
/// non-empty provider tag value.
///
/// ```
/// use fleet::ClusterIdentity;
/// let c = ClusterIdentity::parse("0b5e7c1e-4a0f-4b7e-9d1a-2f3c4d5e6f70").unwrap();
/// assert_eq!(c.tag().key.as_str(), "egress-cluster");
/// assert!(ClusterIdentity::parse("").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterIdentity {
    key: Identifier,
    value: TagValue,
}

impl ClusterIdentity {
    /// Parses an identity.
    ///
    /// # Errors
    /// [`Error::InvalidClusterIdentity`] when `s` is empty or not a
    /// [`TagValue`].
    pub fn parse(s: &str) -> Result<Self, Error> {
        if s.is_empty() {
            return Err(Error::InvalidClusterIdentity {
                rule: "must not be empty",
            });
        }
        let value =
            TagValue::parse(s).map_err(|e| Error::InvalidClusterIdentity { rule: e.rule() })?;
        // The key is a constant identifier (a test checks it); parsing it
        // here keeps this total without a panic path.
        let key = Identifier::parse(CLUSTER_TAG_KEY)
            .map_err(|e| Error::InvalidClusterIdentity { rule: e.rule() })?;
        Ok(ClusterIdentity { key, value })
    }

    /// The identity text.
    pub fn as_str(&self) -> &str {
        self.value.as_str()
    }

    /// The tag Create stores and the GC lists by.
    pub fn tag(&self) -> Tag {
        Tag::new(self.key.clone(), self.value.clone())
    }

    /// Whether `tags` carry this identity.
    pub fn marks(&self, tags: &Tags) -> bool {
        tags.get(&self.key) == Some(&self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_an_identifier() {
        assert!(Identifier::parse(CLUSTER_TAG_KEY).is_ok());
        let c = ClusterIdentity::parse("c").unwrap();
        assert_eq!(c.tag().key.as_str(), CLUSTER_TAG_KEY);
        assert_eq!(c.as_str(), "c");
    }

    #[test]
    fn marks_only_its_own_tag() {
        let a = ClusterIdentity::parse("cluster-a").unwrap();
        let b = ClusterIdentity::parse("cluster-b").unwrap();
        let mut tags = Tags::new();
        assert!(!a.marks(&tags));
        tags.insert(a.tag().key, a.tag().value);
        assert!(a.marks(&tags));
        assert!(!b.marks(&tags));
    }

    #[test]
    fn refuses_bad_identities() {
        for bad in ["", "a b", "a/b", "-a", &"x".repeat(65)] {
            assert!(
                matches!(
                    ClusterIdentity::parse(bad),
                    Err(Error::InvalidClusterIdentity { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
