//! What a provider reports about instances: [`Instance`], [`InstanceState`],
//! [`ListedInstance`].

use std::net::IpAddr;
use std::time::SystemTime;

use crate::ident::{Identifier, OwnerUid};
use crate::provider_id::ProviderId;
use crate::request::Tags;

/// The lifecycle state of an instance, as the provider observes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstanceState {
    /// Created and starting, or running without a usable address yet. The
    /// caller waits (polls `get`) and keeps any address it already has; it
    /// does not recreate.
    Provisioning,
    /// Running, with an address in [`Instance::ip`].
    Running,
    /// Exists but is not running (shut off, paused, suspended). The caller
    /// may delete and recreate it.
    Stopped,
    /// Exists but failed (crashed, refused to start). `reason` is a short
    /// human-readable cause with no secrets in it; the caller deletes and
    /// recreates.
    Failed {
        /// Why, in a few words.
        reason: String,
    },
    /// The provider could read the instance but not map its state.
    Unknown,
}

impl InstanceState {
    /// A short stable name: `provisioning`, `running`, `stopped`, `failed`,
    /// `unknown`.
    pub fn as_str(&self) -> &'static str {
        match self {
            InstanceState::Provisioning => "provisioning",
            InstanceState::Running => "running",
            InstanceState::Stopped => "stopped",
            InstanceState::Failed { .. } => "failed",
            InstanceState::Unknown => "unknown",
        }
    }
}

/// One instance, as [`create`](crate::Provider::create) and
/// [`get`](crate::Provider::get) return it. Built with [`Instance::new`]
/// (non-exhaustive: fields may be added).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Instance {
    /// Where it lives.
    pub id: ProviderId,
    /// Its state.
    pub state: InstanceState,
    /// Its address, when known. `Running` implies `Some`; `Provisioning`
    /// may carry `None` ("no address yet"), never a guess.
    pub ip: Option<IpAddr>,
    /// The host (target) it runs on (the same as `id.host()`).
    pub host: Identifier,
    /// When it was created, if the provider recorded it.
    pub created_at: Option<SystemTime>,
}

impl Instance {
    /// An instance at `id`; its [`host`](Self::host) is `id.host()`.
    /// `Running` should come with its address (`ip: Some`).
    pub fn new(
        id: ProviderId,
        state: InstanceState,
        ip: Option<IpAddr>,
        created_at: Option<SystemTime>,
    ) -> Self {
        let host = id.host().clone();
        Instance {
            id,
            state,
            ip,
            host,
            created_at,
        }
    }
}

/// One instance as [`list_by_tag`](crate::Provider::list_by_tag) returns it:
/// what the provider's listing shows without per-instance state or address
/// reads. Built with [`ListedInstance::new`] (non-exhaustive).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedInstance {
    /// Where it lives.
    pub id: ProviderId,
    /// The owner UID from its ownership mark.
    pub owner_uid: OwnerUid,
    /// Its tags (including the queried one).
    pub tags: Tags,
    /// When it was created, if recorded.
    pub created_at: Option<SystemTime>,
}

impl ListedInstance {
    /// A listed instance.
    pub fn new(
        id: ProviderId,
        owner_uid: OwnerUid,
        tags: Tags,
        created_at: Option<SystemTime>,
    ) -> Self {
        ListedInstance {
            id,
            owner_uid,
            tags,
            created_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_lives_on_its_ids_host() {
        let id = ProviderId::parse("kvm2://prod/h7/ep-1").unwrap();
        let i = Instance::new(id.clone(), InstanceState::Provisioning, None, None);
        assert_eq!(i.host.as_str(), "h7");
        assert_eq!(i.id, id);
    }

    #[test]
    fn state_names_are_stable() {
        let names: Vec<_> = [
            InstanceState::Provisioning,
            InstanceState::Running,
            InstanceState::Stopped,
            InstanceState::Failed { reason: "x".into() },
            InstanceState::Unknown,
        ]
        .iter()
        .map(InstanceState::as_str)
        .collect();
        assert_eq!(
            names,
            ["provisioning", "running", "stopped", "failed", "unknown"]
        );
    }
}
