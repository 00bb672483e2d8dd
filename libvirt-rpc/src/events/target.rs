//! What a subscription registers for: an event id of one object family
//! ([`EventId`]) and, optionally, the one object whose events it wants
//! ([`EventTarget`]).

use bytes::BytesMut;

use crate::domain_state::DomainEventId;
use crate::flags::wire_enum;
use crate::proto::types::{Domain, Network, NodeDevice, Secret, StoragePool};
use crate::proto::xdr::{Decode, Encode, Reader, XdrError};

use super::numbers;

wire_enum! {
    /// `virStoragePoolEventID`.
    StoragePoolEventId: i32 {
        /// `VIR_STORAGE_POOL_EVENT_ID_LIFECYCLE`: defined, started, ...
        Lifecycle = 0,
        /// `VIR_STORAGE_POOL_EVENT_ID_REFRESH`: the pool was refreshed.
        Refresh = 1,
    }
}

wire_enum! {
    /// `virNetworkEventID`.
    NetworkEventId: i32 {
        /// `VIR_NETWORK_EVENT_ID_LIFECYCLE`: defined, started, ...
        Lifecycle = 0,
        /// `VIR_NETWORK_EVENT_ID_METADATA_CHANGE`: title, description or a
        /// metadata element changed.
        MetadataChange = 1,
    }
}

wire_enum! {
    /// `virNodeDeviceEventID`.
    NodeDeviceEventId: i32 {
        /// `VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE`: created, deleted, ...
        Lifecycle = 0,
        /// `VIR_NODE_DEVICE_EVENT_ID_UPDATE`: the device's definition
        /// changed.
        Update = 1,
    }
}

wire_enum! {
    /// `virSecretEventID`.
    SecretEventId: i32 {
        /// `VIR_SECRET_EVENT_ID_LIFECYCLE`: defined or undefined.
        Lifecycle = 0,
        /// `VIR_SECRET_EVENT_ID_VALUE_CHANGED`: the secret's value changed.
        ValueChanged = 1,
    }
}

/// An event id of one object family: what a subscription registers for.
/// Every family's id converts into it (`DomainEventId::Reboot.into()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventId {
    /// A domain event.
    Domain(DomainEventId),
    /// A storage pool event.
    StoragePool(StoragePoolEventId),
    /// A network event.
    Network(NetworkEventId),
    /// A host device event.
    NodeDevice(NodeDeviceEventId),
    /// A secret event.
    Secret(SecretEventId),
}

impl EventId {
    /// True when this crate knows the id's message layout (every kind
    /// libvirt 11 emits). Events of other ids (a newer daemon's) arrive as
    /// [`super::Event::Unknown`] or raw.
    pub fn is_known(self) -> bool {
        match self {
            Self::Domain(id) => !matches!(id, DomainEventId::Unknown(_)),
            Self::StoragePool(id) => !matches!(id, StoragePoolEventId::Unknown(_)),
            Self::Network(id) => !matches!(id, NetworkEventId::Unknown(_)),
            Self::NodeDevice(id) => !matches!(id, NodeDeviceEventId::Unknown(_)),
            Self::Secret(id) => !matches!(id, SecretEventId::Unknown(_)),
        }
    }

    pub(crate) fn family(self) -> Family {
        match self {
            Self::Domain(_) => Family::Domain,
            Self::StoragePool(_) => Family::StoragePool,
            Self::Network(_) => Family::Network,
            Self::NodeDevice(_) => Family::NodeDevice,
            Self::Secret(_) => Family::Secret,
        }
    }

    pub(crate) fn wire(self) -> i32 {
        match self {
            Self::Domain(id) => id.to_wire(),
            Self::StoragePool(id) => id.to_wire(),
            Self::Network(id) => id.to_wire(),
            Self::NodeDevice(id) => id.to_wire(),
            Self::Secret(id) => id.to_wire(),
        }
    }
}

impl From<DomainEventId> for EventId {
    fn from(id: DomainEventId) -> Self {
        Self::Domain(id)
    }
}
impl From<StoragePoolEventId> for EventId {
    fn from(id: StoragePoolEventId) -> Self {
        Self::StoragePool(id)
    }
}
impl From<NetworkEventId> for EventId {
    fn from(id: NetworkEventId) -> Self {
        Self::Network(id)
    }
}
impl From<NodeDeviceEventId> for EventId {
    fn from(id: NodeDeviceEventId) -> Self {
        Self::NodeDevice(id)
    }
}
impl From<SecretEventId> for EventId {
    fn from(id: SecretEventId) -> Self {
        Self::Secret(id)
    }
}

/// The object families, each with its own registration calls. libvirtd
/// numbers callbacks per driver (the domain driver and the storage driver
/// may both hand out callback id 1), so the connection routes an event by
/// family and callback id together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Family {
    Domain,
    StoragePool,
    Network,
    NodeDevice,
    Secret,
}

impl Family {
    /// The call that registers a callback of this family.
    pub(crate) fn register_procedure(self) -> i32 {
        match self {
            Self::Domain => numbers::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY,
            Self::StoragePool => numbers::CONNECT_STORAGE_POOL_EVENT_REGISTER_ANY,
            Self::Network => numbers::CONNECT_NETWORK_EVENT_REGISTER_ANY,
            Self::NodeDevice => numbers::CONNECT_NODE_DEVICE_EVENT_REGISTER_ANY,
            Self::Secret => numbers::CONNECT_SECRET_EVENT_REGISTER_ANY,
        }
    }

    /// The call that removes a callback of this family.
    pub(crate) fn deregister_procedure(self) -> i32 {
        match self {
            Self::Domain => numbers::CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY,
            Self::StoragePool => numbers::CONNECT_STORAGE_POOL_EVENT_DEREGISTER_ANY,
            Self::Network => numbers::CONNECT_NETWORK_EVENT_DEREGISTER_ANY,
            Self::NodeDevice => numbers::CONNECT_NODE_DEVICE_EVENT_DEREGISTER_ANY,
            Self::Secret => numbers::CONNECT_SECRET_EVENT_DEREGISTER_ANY,
        }
    }
}

/// The one object a subscription filters on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Object {
    Domain(Domain),
    StoragePool(StoragePool),
    Network(Network),
    NodeDevice(NodeDevice),
    Secret(Secret),
}

impl Encode for Object {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        match self {
            Self::Domain(o) => o.encode(out),
            Self::StoragePool(o) => o.encode(out),
            Self::Network(o) => o.encode(out),
            Self::NodeDevice(o) => o.encode(out),
            Self::Secret(o) => o.encode(out),
        }
    }
}

/// What to subscribe to: an event id, for every object of its family or
/// for one object. The constructors only pair an id with an object of its
/// own family.
///
/// ```
/// use libvirt_rpc::events::{EventTarget, StoragePoolEventId};
/// use libvirt_rpc::{Domain, DomainEventId};
///
/// // Reboots of every domain:
/// let all = EventTarget::all(DomainEventId::Reboot);
/// // Device unplugs of one domain:
/// # let dom = Domain { name: "web".into(), uuid: [0; 16], id: -1 };
/// let one = EventTarget::domain(DomainEventId::DeviceRemoved, &dom);
/// // Refreshes of every pool:
/// let pools = EventTarget::all(StoragePoolEventId::Refresh);
/// # let _ = (all, one, pools);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTarget {
    id: EventId,
    object: Option<Object>,
}

impl EventTarget {
    /// Events `id` of every object of its family.
    pub fn all(id: impl Into<EventId>) -> Self {
        Self {
            id: id.into(),
            object: None,
        }
    }

    /// Events `id` of domain `dom` only.
    pub fn domain(id: DomainEventId, dom: &Domain) -> Self {
        Self {
            id: id.into(),
            object: Some(Object::Domain(dom.clone())),
        }
    }

    /// Events `id` of storage pool `pool` only.
    pub fn storage_pool(id: StoragePoolEventId, pool: &StoragePool) -> Self {
        Self {
            id: id.into(),
            object: Some(Object::StoragePool(pool.clone())),
        }
    }

    /// Events `id` of network `net` only.
    pub fn network(id: NetworkEventId, net: &Network) -> Self {
        Self {
            id: id.into(),
            object: Some(Object::Network(net.clone())),
        }
    }

    /// Events `id` of host device `dev` only.
    pub fn node_device(id: NodeDeviceEventId, dev: &NodeDevice) -> Self {
        Self {
            id: id.into(),
            object: Some(Object::NodeDevice(dev.clone())),
        }
    }

    /// Events `id` of secret `secret` only.
    pub fn secret(id: SecretEventId, secret: &Secret) -> Self {
        Self {
            id: id.into(),
            object: Some(Object::Secret(secret.clone())),
        }
    }

    /// The event id.
    pub fn id(&self) -> EventId {
        self.id
    }

    /// The registration call's arguments (`remote_connect_*_event_*register_any_args`:
    /// the event id, then the optional object).
    pub(crate) fn register_args(&self) -> (i32, Option<&Object>) {
        (self.id.wire(), self.object.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::xdr::to_bytes;

    #[test]
    fn register_args_are_the_id_then_the_optional_object() {
        let all = to_bytes(&EventTarget::all(DomainEventId::Reboot).register_args()).unwrap();
        assert_eq!(&all[..], &[0, 0, 0, 1, 0, 0, 0, 0]);
        let dev = NodeDevice { name: "ab".into() };
        let one = EventTarget::node_device(NodeDeviceEventId::Update, &dev);
        let b = to_bytes(&one.register_args()).unwrap();
        assert_eq!(
            &b[..],
            &[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, b'a', b'b', 0, 0]
        );
    }

    #[test]
    fn every_family_has_its_own_calls() {
        let families = [
            Family::Domain,
            Family::StoragePool,
            Family::Network,
            Family::NodeDevice,
            Family::Secret,
        ];
        let mut seen = std::collections::HashSet::new();
        for f in families {
            assert!(seen.insert(f.register_procedure()));
            assert!(seen.insert(f.deregister_procedure()));
        }
    }
}
