//! libvirt's flag sets and small enums, as typed values.

use bitflags::bitflags;
use bytes::{BufMut, BytesMut};

use crate::proto::xdr::{Decode, Encode, Reader, XdrError};

macro_rules! wire_flags {
    ($($t:ty),*) => {$(
        impl Encode for $t {
            fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
                out.put_u32(self.bits());
                Ok(())
            }
        }
        impl Decode for $t {
            fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
                r.u32().map(Self::from_bits_retain)
            }
        }
    )*};
}

bitflags! {
    /// `virConnectFlags` for connect-open.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct OpenFlags: u32 {
        /// Read-only connection (`VIR_CONNECT_RO`).
        const READ_ONLY = 1;
        /// Do not resolve URI aliases (`VIR_CONNECT_NO_ALIASES`).
        const NO_ALIASES = 2;
    }
}

bitflags! {
    /// `virDomainXMLFlags` for domain XML dumps.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct DomainXmlFlags: u32 {
        /// Include security-sensitive information.
        const SECURE = 1;
        /// Dump the inactive (persistent) definition.
        const INACTIVE = 2;
        /// Update guest CPU requirements from the host.
        const UPDATE_CPU = 4;
        /// Dump XML suitable for migration.
        const MIGRATABLE = 8;
    }
}

bitflags! {
    /// `virDomainCreateFlags` for starting a domain.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct DomainCreateFlags: u32 {
        /// Start paused.
        const PAUSED = 1;
        /// Destroy the domain when the connection closes.
        const AUTODESTROY = 2;
        /// Avoid the file system cache when restoring.
        const BYPASS_CACHE = 4;
        /// Boot, discarding any managed save.
        const FORCE_BOOT = 8;
        /// Validate the XML against the schema.
        const VALIDATE = 16;
        /// Re-initialise NVRAM from its template.
        const RESET_NVRAM = 32;
    }
}

bitflags! {
    /// `virDomainDefineFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct DomainDefineFlags: u32 {
        /// Validate the XML against the schema.
        const VALIDATE = 1;
    }
}

bitflags! {
    /// `virDomainUndefineFlagsValues`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct DomainUndefineFlags: u32 {
        /// Also remove any managed save image.
        const MANAGED_SAVE = 1;
        /// Also remove snapshot metadata.
        const SNAPSHOTS_METADATA = 2;
        /// Also remove NVRAM.
        const NVRAM = 4;
        /// Keep NVRAM.
        const KEEP_NVRAM = 8;
        /// Also remove checkpoint metadata.
        const CHECKPOINTS_METADATA = 16;
        /// Also remove TPM state.
        const TPM = 32;
        /// Keep TPM state.
        const KEEP_TPM = 64;
    }
}

bitflags! {
    /// `virDomainDestroyFlagsValues`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct DomainDestroyFlags: u32 {
        /// Terminate gracefully (SIGTERM only).
        const GRACEFUL = 1;
        /// Remove the domain's logs.
        const REMOVE_LOGS = 2;
    }
}

bitflags! {
    /// `virDomainModificationImpact` (empty = current state).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct DomainModificationImpact: u32 {
        /// Affect the running domain.
        const LIVE = 1;
        /// Affect the persistent definition.
        const CONFIG = 2;
    }
}

bitflags! {
    /// `virConnectListAllDomainsFlags` (empty = all domains).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct ListDomainsFlags: u32 {
        /// Running or paused domains.
        const ACTIVE = 1;
        /// Shut-off domains.
        const INACTIVE = 2;
        /// Persistent domains.
        const PERSISTENT = 4;
        /// Transient domains.
        const TRANSIENT = 8;
        /// Running domains.
        const RUNNING = 16;
        /// Paused domains.
        const PAUSED = 32;
        /// Shut-off domains.
        const SHUTOFF = 64;
        /// Domains in other states.
        const OTHER = 128;
        /// Domains with a managed save image.
        const MANAGEDSAVE = 256;
        /// Domains without a managed save image.
        const NO_MANAGEDSAVE = 512;
        /// Autostarted domains.
        const AUTOSTART = 1024;
        /// Not autostarted domains.
        const NO_AUTOSTART = 2048;
        /// Domains with snapshots.
        const HAS_SNAPSHOT = 4096;
        /// Domains without snapshots.
        const NO_SNAPSHOT = 8192;
        /// Domains with checkpoints.
        const HAS_CHECKPOINT = 16384;
        /// Domains without checkpoints.
        const NO_CHECKPOINT = 32768;
    }
}

bitflags! {
    /// `virConnectListAllStoragePoolsFlags` (empty = all pools).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct ListStoragePoolsFlags: u32 {
        /// Inactive pools.
        const INACTIVE = 1;
        /// Active pools.
        const ACTIVE = 2;
        /// Persistent pools.
        const PERSISTENT = 4;
        /// Transient pools.
        const TRANSIENT = 8;
        /// Pools started with the host.
        const AUTOSTART = 16;
        /// Pools not started with the host.
        const NO_AUTOSTART = 32;
        /// `dir` pools.
        const DIR = 64;
    }
}

bitflags! {
    /// `virStorageVolCreateFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StorageVolCreateFlags: u32 {
        /// Preallocate metadata only.
        const PREALLOC_METADATA = 1;
        /// Use a reflink copy where possible.
        const REFLINK = 2;
        /// Validate the XML against the schema.
        const VALIDATE = 4;
    }
}

bitflags! {
    /// `virStorageVolInfoFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StorageVolInfoFlags: u32 {
        /// Report the volume's physical size on the host (a file's
        /// length) as `allocation`, whatever format it holds.
        const GET_PHYSICAL = 1;
    }
}

bitflags! {
    /// `virStorageVolDeleteFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StorageVolDeleteFlags: u32 {
        /// Clear all data to zeros first.
        const ZEROED = 1;
        /// Also delete snapshots.
        const WITH_SNAPSHOTS = 2;
    }
}

bitflags! {
    /// `virStorageVolUploadFlags` / `virStorageVolDownloadFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StorageVolStreamFlags: u32 {
        /// Use a sparse stream (holes travel as STREAM_HOLE; not supported
        /// by this crate's stream helpers, which send and expect data only).
        const SPARSE_STREAM = 1;
    }
}

bitflags! {
    /// Flags of calls whose flags are reserved (must be empty).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct NoFlags: u32 {}
}

wire_flags!(
    OpenFlags,
    DomainXmlFlags,
    DomainCreateFlags,
    DomainDefineFlags,
    DomainUndefineFlags,
    DomainDestroyFlags,
    DomainModificationImpact,
    ListDomainsFlags,
    ListStoragePoolsFlags,
    StorageVolCreateFlags,
    StorageVolInfoFlags,
    StorageVolDeleteFlags,
    StorageVolStreamFlags,
    NoFlags
);

macro_rules! wire_enum {
    ($(#[$m:meta])* $name:ident : $repr:ty { $($(#[$vm:meta])* $v:ident = $n:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vm])* $v,)*
            /// A value this crate does not know.
            Unknown($repr),
        }
        impl $name {
            /// The wire value.
            pub fn to_wire(self) -> $repr {
                match self { $(Self::$v => $n,)* Self::Unknown(n) => n }
            }
            /// Maps a wire value.
            pub fn from_wire(n: $repr) -> Self {
                match n { $($n => Self::$v,)* other => Self::Unknown(other) }
            }
        }
        impl Encode for $name {
            fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
                self.to_wire().encode(out)
            }
        }
        impl Decode for $name {
            fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
                <$repr>::decode(r).map(Self::from_wire)
            }
        }
    };
}
pub(crate) use wire_enum;

wire_enum! {
    /// `virDomainMetadataType`.
    MetadataType: i32 {
        /// The `<description>` element.
        Description = 0,
        /// The `<title>` element.
        Title = 1,
        /// A custom element under `<metadata>`, selected by namespace URI.
        Element = 2,
    }
}

wire_enum! {
    /// `virDomainInterfaceAddressesSource`.
    InterfaceAddressesSource: u32 {
        /// DHCP leases of libvirt-managed networks.
        Lease = 0,
        /// The guest agent.
        Agent = 1,
        /// The host's ARP table.
        Arp = 2,
    }
}

wire_enum! {
    /// `virDomainEventType`: what a lifecycle event reports.
    LifecycleEventKind: i32 {
        /// Defined.
        Defined = 0,
        /// Undefined.
        Undefined = 1,
        /// Started.
        Started = 2,
        /// Suspended.
        Suspended = 3,
        /// Resumed.
        Resumed = 4,
        /// Stopped.
        Stopped = 5,
        /// Shut down.
        Shutdown = 6,
        /// Suspended by guest power management.
        PmSuspended = 7,
        /// Crashed.
        Crashed = 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::xdr::{from_bytes, to_bytes};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn flags_round_trip(bits: u32) {
            let f = ListDomainsFlags::from_bits_retain(bits);
            prop_assert_eq!(from_bytes::<ListDomainsFlags>(&to_bytes(&f).unwrap()).unwrap(), f);
        }
        #[test]
        fn enums_round_trip(n: i32) {
            let s = MetadataType::from_wire(n);
            prop_assert_eq!(s.to_wire(), n);
            prop_assert_eq!(from_bytes::<MetadataType>(&to_bytes(&s).unwrap()).unwrap(), s);
        }
    }
}
