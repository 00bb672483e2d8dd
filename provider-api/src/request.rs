//! [`CreateRequest`] and what it carries: [`Placement`], [`Tags`], [`Tag`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::ident::{Identifier, ObjectName, OwnerUid, TagValue};
use crate::instance_name::name_from_uid;
use crate::secret::SecretString;

/// Free-form labels a provider stores with an instance and returns from
/// [`Provider::list_by_tag`](crate::Provider::list_by_tag). Keys are
/// [`Identifier`]s, values [`TagValue`]s, so neither can inject into the
/// provider's metadata.
pub type Tags = BTreeMap<Identifier, TagValue>;

/// The tag key of the ownership mark (see [`Tag::managed`]).
pub const MANAGED_BY_KEY: &str = "managed-by";
/// The tag value of the ownership mark (see [`Tag::managed`]).
pub const MANAGED_BY_VALUE: &str = "egress-proxies";

/// One tag, as a [`list_by_tag`](crate::Provider::list_by_tag) query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tag {
    /// The key.
    pub key: Identifier,
    /// The value.
    pub value: TagValue,
}

impl Tag {
    /// A tag from its parts.
    pub fn new(key: Identifier, value: TagValue) -> Self {
        Tag { key, value }
    }

    /// The ownership mark, `managed-by=egress-proxies`: every instance the
    /// operator creates carries it (providers add it on create whatever the
    /// request's tags say), and the garbage collector lists by it.
    pub fn managed() -> Self {
        Tag {
            key: Identifier::new_trusted(MANAGED_BY_KEY.to_owned()),
            value: TagValue::new_trusted(MANAGED_BY_VALUE.to_owned()),
        }
    }
}

/// Where the caller would like the instance to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// Anywhere the provider likes (its own spreading policy).
    #[default]
    Any,
    /// On this host (target) if it is usable, elsewhere otherwise.
    Prefer(Identifier),
    /// On this host only; if it is unusable the create fails
    /// ([`Transient`](crate::ErrorClass::Transient) when the host is
    /// unreachable, [`Permanent`](crate::ErrorClass::Permanent) when the
    /// provider has no such host).
    Require(Identifier),
}

/// Everything a provider needs to create one instance.
///
/// `Debug` is safe to log: [`user_data`](Self::user_data) prints as
/// `[redacted]`. Build with [`new`](Self::new) and set fields (the struct is
/// `#[non_exhaustive]` so fields can be added without breaking callers).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CreateRequest {
    /// The UID of the owning Kubernetes object: the ownership mark. The
    /// instance name is [`name_from_uid`] of it.
    pub owner_uid: OwnerUid,
    /// The owning proxy's name.
    pub proxy_name: ObjectName,
    /// The owning proxy's namespace.
    pub proxy_namespace: Identifier,
    /// The machine type (a key of the provider's machine types); `None`
    /// means the provider's configured default.
    pub machine_type: Option<Identifier>,
    /// The image key (a key of the provider's images); `None` means the
    /// provider's configured default.
    pub image: Option<Identifier>,
    /// Where to run.
    pub placement: Placement,
    /// Hosts to try only after every other (where the caller lost an
    /// earlier instance of this owner: a host cut off). Ignored under
    /// [`Placement::Require`]; a `Prefer` naming one of them prefers
    /// nothing.
    pub avoid: std::collections::BTreeSet<Identifier>,
    /// Cloud-init user data, if any. Never logged, never in an error.
    pub user_data: Option<SecretString>,
    /// Extra tags stored with the instance (the ownership mark is added by
    /// the provider regardless).
    pub tags: Tags,
    /// When the caller stops waiting. A provider honours it end to end
    /// (dialling, waiting for a shared image download, defining, starting)
    /// and answers [`Transient`](crate::ErrorClass::Transient) when it
    /// passes, after undoing what the call made (its clean-up budget may
    /// run past the deadline). Work shared with other callers (an image
    /// download) is not cancelled by one caller's deadline. `None`: the
    /// provider's documented default budget.
    pub deadline: Option<Instant>,
}

impl CreateRequest {
    /// A request with defaults for everything but the owner: default machine
    /// type and image, [`Placement::Any`], no user data, no extra tags, no
    /// deadline (the provider's default budget).
    pub fn new(owner_uid: OwnerUid, proxy_name: ObjectName, proxy_namespace: Identifier) -> Self {
        CreateRequest {
            owner_uid,
            proxy_name,
            proxy_namespace,
            machine_type: None,
            image: None,
            placement: Placement::Any,
            avoid: std::collections::BTreeSet::new(),
            user_data: None,
            tags: Tags::new(),
            deadline: None,
        }
    }

    /// This request with a deadline `within` from now.
    #[must_use]
    pub fn with_timeout(mut self, within: Duration) -> Self {
        self.deadline = Instant::now().checked_add(within);
        self
    }

    /// The instance name this request produces: [`name_from_uid`] of the
    /// owner UID.
    pub fn instance_name(&self) -> Identifier {
        name_from_uid(&self.owner_uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_user_data() {
        let mut req = CreateRequest::new(
            OwnerUid::parse("uid-1").unwrap(),
            ObjectName::parse("proxy-a").unwrap(),
            Identifier::parse("default").unwrap(),
        );
        req.user_data = Some(SecretString::new("#cloud-config\npassword: hunter2"));
        let d = format!("{req:?} {req:#?}");
        assert!(!d.contains("hunter2"), "{d}");
        assert!(d.contains("[redacted]"));
        assert_eq!(req.instance_name(), name_from_uid(&req.owner_uid));
        assert!(req.deadline.is_none());
        let req = req.with_timeout(Duration::from_secs(60));
        assert!(req.deadline.is_some_and(|d| d > Instant::now()));
    }

    #[test]
    fn managed_tag_is_valid() {
        let t = Tag::managed();
        assert_eq!(t.key.as_str(), MANAGED_BY_KEY);
        assert_eq!(t.value.as_str(), MANAGED_BY_VALUE);
        assert!(Identifier::parse(MANAGED_BY_KEY).is_ok());
        assert!(TagValue::parse(MANAGED_BY_VALUE).is_ok());
    }
}
