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
    /// Exists but is not running because it was shut down or is shutting
    /// down (cleanly, by the guest or an administrator). The caller may
    /// delete and recreate it; kvm2's `create` for the same owner restarts
    /// it.
    Stopped,
    /// Exists but will not serve without intervention: crashed, refused to
    /// start, killed, paused (by a user or by an error such as an I/O error
    /// or a watchdog), suspended by the guest's power management. `reason`
    /// is a short human-readable cause with no secrets in it; the caller
    /// deletes and recreates.
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

/// Where an instance's address can come from.
///
/// Which sources can answer depends on how the instance's NIC is attached.
/// For kvm2, whose domains sit on a plain Linux bridge: the guest agent
/// (once it runs in the guest) and the host's ARP table (once the guest has
/// sent a packet) can; libvirt's DHCP leases cannot — libvirt knows leases
/// only for NICs on networks it manages itself (`<interface
/// type='network'>`), so for a bridged NIC the lease source always answers
/// with nothing. An empty lease answer is therefore no evidence that the
/// guest has no address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum AddressSource {
    /// The guest agent running inside the instance.
    GuestAgent,
    /// The host's neighbour (ARP) table.
    Arp,
    /// The DHCP leases of a network the hypervisor manages.
    Lease,
}

impl AddressSource {
    /// Every source, in the order kvm2 asks them.
    pub const ALL: [AddressSource; 3] = [
        AddressSource::GuestAgent,
        AddressSource::Arp,
        AddressSource::Lease,
    ];

    /// A short stable name: `guest-agent`, `arp`, `lease`.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressSource::GuestAgent => "guest-agent",
            AddressSource::Arp => "arp",
            AddressSource::Lease => "lease",
        }
    }

    fn bit(self) -> u8 {
        match self {
            AddressSource::GuestAgent => 1,
            AddressSource::Arp => 2,
            AddressSource::Lease => 4,
        }
    }
}

impl std::fmt::Display for AddressSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`AddressSource`]s: on an [`Instance`] from
/// [`get`](crate::Provider::get), the sources that *answered* (returned a
/// list, possibly empty) during that read; a source that failed is not in
/// it. Empty when no address was read (the instance is not running, or it
/// came from [`create`](crate::Provider::create)).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AddressSources(u8);

impl AddressSources {
    /// The empty set.
    pub const fn empty() -> Self {
        AddressSources(0)
    }

    /// Adds `source`.
    pub fn insert(&mut self, source: AddressSource) {
        self.0 |= source.bit();
    }

    /// This set with `source` added.
    #[must_use]
    pub fn with(mut self, source: AddressSource) -> Self {
        self.insert(source);
        self
    }

    /// True when `source` is in the set.
    pub fn contains(self, source: AddressSource) -> bool {
        self.0 & source.bit() != 0
    }

    /// True when no source is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The sources in the set, in [`AddressSource::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = AddressSource> {
        AddressSource::ALL
            .into_iter()
            .filter(move |s| self.contains(*s))
    }
}

impl FromIterator<AddressSource> for AddressSources {
    fn from_iter<I: IntoIterator<Item = AddressSource>>(iter: I) -> Self {
        iter.into_iter()
            .fold(AddressSources::empty(), AddressSources::with)
    }
}

impl std::fmt::Debug for AddressSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// One instance, as [`create`](crate::Provider::create) and
/// [`get`](crate::Provider::get) return it. Built with [`Instance::new`]
/// and the `with_*` setters (non-exhaustive: fields may be added).
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
    /// The TCP port the proxy in the instance serves on (kvm2: the entry's
    /// `proxy.port`, default 3128), when the provider knows it. Callers
    /// probe `ip:proxy_port` rather than read the provider's config.
    pub proxy_port: Option<u16>,
    /// The address sources that answered during the read that produced
    /// this instance (see [`AddressSources`]); empty when none was asked.
    pub address_sources: AddressSources,
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
            proxy_port: None,
            address_sources: AddressSources::empty(),
        }
    }

    /// This instance with its proxy port set.
    #[must_use]
    pub fn with_proxy_port(mut self, port: u16) -> Self {
        self.proxy_port = Some(port);
        self
    }

    /// This instance with the address sources that answered set.
    #[must_use]
    pub fn with_address_sources(mut self, sources: AddressSources) -> Self {
        self.address_sources = sources;
        self
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
        assert_eq!(i.proxy_port, None);
        assert!(i.address_sources.is_empty());
    }

    #[test]
    fn setters_fill_the_proxy_port_and_the_sources() {
        let id = ProviderId::parse("kvm2://prod/h7/ep-1").unwrap();
        let sources: AddressSources = [AddressSource::Lease, AddressSource::Arp]
            .into_iter()
            .collect();
        let i = Instance::new(id, InstanceState::Provisioning, None, None)
            .with_proxy_port(3128)
            .with_address_sources(sources);
        assert_eq!(i.proxy_port, Some(3128));
        assert!(i.address_sources.contains(AddressSource::Arp));
        assert!(i.address_sources.contains(AddressSource::Lease));
        assert!(!i.address_sources.contains(AddressSource::GuestAgent));
        assert_eq!(
            i.address_sources.iter().collect::<Vec<_>>(),
            [AddressSource::Arp, AddressSource::Lease]
        );
        assert_eq!(format!("{:?}", i.address_sources), "{Arp, Lease}");
        let names: Vec<_> = AddressSource::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ["guest-agent", "arp", "lease"]);
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
