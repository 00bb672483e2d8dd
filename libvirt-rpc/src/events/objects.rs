//! The payloads of storage pool, network, host device and secret events,
//! each laid out as its `remote_*_event_*_msg` in libvirt's
//! `remote_protocol.x` (without the leading callback id).

use bytes::BytesMut;

use crate::flags::{MetadataType, wire_enum};
use crate::proto::types::{Network, NodeDevice, Secret, StoragePool};
use crate::proto::xdr::{Decode, Encode, Reader, XdrError};
use crate::xdr_struct;

wire_enum! {
    /// `virStoragePoolEventLifecycleType`.
    StoragePoolLifecycleKind: i32 {
        /// Defined.
        Defined = 0,
        /// Undefined.
        Undefined = 1,
        /// Started.
        Started = 2,
        /// Stopped.
        Stopped = 3,
        /// Built (`virStoragePoolBuild`).
        Created = 4,
        /// Deleted from the host (`virStoragePoolDelete`).
        Deleted = 5,
    }
}

xdr_struct! {
    /// [`super::StoragePoolEventId::Lifecycle`].
    pub struct StoragePoolLifecycleEvent {
        /// The pool.
        pub pool: StoragePool,
        /// What happened.
        pub event: StoragePoolLifecycleKind,
        /// Reserved detail code (0).
        pub detail: i32,
    }
}

xdr_struct! {
    /// [`super::StoragePoolEventId::Refresh`]: the pool was rescanned.
    pub struct StoragePoolRefreshEvent {
        /// The pool.
        pub pool: StoragePool,
    }
}

wire_enum! {
    /// `virNetworkEventLifecycleType`.
    NetworkLifecycleKind: i32 {
        /// Defined.
        Defined = 0,
        /// Undefined.
        Undefined = 1,
        /// Started.
        Started = 2,
        /// Stopped.
        Stopped = 3,
    }
}

xdr_struct! {
    /// [`super::NetworkEventId::Lifecycle`].
    pub struct NetworkLifecycleEvent {
        /// The network.
        pub net: Network,
        /// What happened.
        pub event: NetworkLifecycleKind,
        /// Reserved detail code (0).
        pub detail: i32,
    }
}

xdr_struct! {
    /// [`super::NetworkEventId::MetadataChange`].
    pub struct NetworkMetadataChangeEvent {
        /// The network.
        pub net: Network,
        /// What changed.
        pub kind: MetadataType,
        /// For [`MetadataType::Element`], the element's namespace URI.
        pub nsuri: Option<String>,
    }
}

wire_enum! {
    /// `virNodeDeviceEventLifecycleType`.
    NodeDeviceLifecycleKind: i32 {
        /// The device appeared (or a mediated device was started).
        Created = 0,
        /// The device went away (or was stopped).
        Deleted = 1,
        /// A persistent definition was made.
        Defined = 2,
        /// The persistent definition was removed.
        Undefined = 3,
    }
}

xdr_struct! {
    /// [`super::NodeDeviceEventId::Lifecycle`].
    pub struct NodeDeviceLifecycleEvent {
        /// The device.
        pub dev: NodeDevice,
        /// What happened.
        pub event: NodeDeviceLifecycleKind,
        /// Reserved detail code (0).
        pub detail: i32,
    }
}

xdr_struct! {
    /// [`super::NodeDeviceEventId::Update`]: the device's definition changed.
    pub struct NodeDeviceUpdateEvent {
        /// The device.
        pub dev: NodeDevice,
    }
}

wire_enum! {
    /// `virSecretEventLifecycleType`.
    SecretLifecycleKind: i32 {
        /// Defined.
        Defined = 0,
        /// Undefined.
        Undefined = 1,
    }
}

xdr_struct! {
    /// [`super::SecretEventId::Lifecycle`].
    pub struct SecretLifecycleEvent {
        /// The secret.
        pub secret: Secret,
        /// What happened.
        pub event: SecretLifecycleKind,
        /// Reserved detail code (0).
        pub detail: i32,
    }
}

xdr_struct! {
    /// [`super::SecretEventId::ValueChanged`]: the secret's value changed.
    pub struct SecretValueChangedEvent {
        /// The secret.
        pub secret: Secret,
    }
}
