//! [`ClusterIdentity`]: the tag that scopes every instance to the cluster
//! whose operator made it.
//!
//! The reconciler adds `egress-cluster=<identity>` and
//! `egress-namespace=<the Proxy's namespace>` to every Create; the GC lists
//! by the cluster tag and, on top, checks it on every listed instance, so two
//! clusters sharing a provider entry never sweep each other's instances. An
//! operator limited to one namespace (`--namespace`) sees only that
//! namespace's Proxies, so its identity is scoped to it
//! ([`ClusterIdentity::scoped_to`]): it marks only instances tagged with
//! that namespace, and two such operators sharing an entry never collect
//! each other's instances.

use provider_api::{Identifier, Tag, TagValue, Tags};

use crate::error::Error;

/// The tag key carrying the cluster identity.
pub const CLUSTER_TAG_KEY: &str = "egress-cluster";
/// The tag key carrying the namespace of the Proxy an instance was made for.
pub const NAMESPACE_TAG_KEY: &str = "egress-namespace";

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
    /// The namespace tag an instance must carry too (a namespace-scoped
    /// operator).
    scope: Option<Tag>,
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
        Ok(ClusterIdentity {
            key,
            value,
            scope: None,
        })
    }

    /// This identity, limited to instances made for Proxies of `namespace`
    /// (what an operator run with `--namespace` sees).
    ///
    /// # Errors
    /// [`Error::InvalidClusterIdentity`] when `namespace` is not a
    /// [`TagValue`] (a namespace name always is).
    pub fn scoped_to(mut self, namespace: &str) -> Result<Self, Error> {
        self.scope = Some(namespace_tag(namespace)?);
        Ok(self)
    }

    /// The identity text.
    pub fn as_str(&self) -> &str {
        self.value.as_str()
    }

    /// The tag Create stores and the GC lists by.
    pub fn tag(&self) -> Tag {
        Tag::new(self.key.clone(), self.value.clone())
    }

    /// Whether `tags` carry this identity (and, when scoped, its namespace).
    pub fn marks(&self, tags: &Tags) -> bool {
        tags.get(&self.key) == Some(&self.value)
            && self
                .scope
                .as_ref()
                .is_none_or(|ns| tags.get(&ns.key) == Some(&ns.value))
    }
}

/// The tag naming `namespace`, which Create stores beside the cluster's.
///
/// # Errors
/// [`Error::InvalidClusterIdentity`] when `namespace` is not a [`TagValue`].
pub fn namespace_tag(namespace: &str) -> Result<Tag, Error> {
    let value =
        TagValue::parse(namespace).map_err(|e| Error::InvalidClusterIdentity { rule: e.rule() })?;
    let key = Identifier::parse(NAMESPACE_TAG_KEY)
        .map_err(|e| Error::InvalidClusterIdentity { rule: e.rule() })?;
    Ok(Tag::new(key, value))
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
    fn a_scoped_identity_marks_only_its_namespaces_instances() {
        let a = ClusterIdentity::parse("c").unwrap();
        let team_a = a.clone().scoped_to("team-a").unwrap();
        let team_b = a.clone().scoped_to("team-b").unwrap();
        let made_for = |ns: Option<&str>| {
            let mut tags = Tags::new();
            tags.insert(a.tag().key, a.tag().value);
            if let Some(ns) = ns {
                let t = namespace_tag(ns).unwrap();
                tags.insert(t.key, t.value);
            }
            tags
        };
        assert!(team_a.marks(&made_for(Some("team-a"))));
        assert!(!team_a.marks(&made_for(Some("team-b"))));
        assert!(team_b.marks(&made_for(Some("team-b"))));
        // Made before the namespace tag: only an unscoped operator (which
        // sees every namespace's Proxies) may judge it.
        assert!(!team_a.marks(&made_for(None)));
        assert!(a.marks(&made_for(None)));
        assert!(a.marks(&made_for(Some("team-a"))));
        assert_eq!(
            namespace_tag("team-a").unwrap().key.as_str(),
            NAMESPACE_TAG_KEY
        );
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
