//! libvirt's flag sets and small enums, as typed values: the flag sets of
//! every typed procedure are generated (`generated/flags.rs`, from the API
//! description); the connection's own flags, the stream flags and the small
//! enums are kept here.

use bitflags::bitflags;
use bytes::BytesMut;

use crate::proto::xdr::{Decode, Encode, Reader, XdrError};

pub use crate::generated::flags::*;

/// `virConnectListAllDomainsFlags` by its shorter name.
pub type ListDomainsFlags = ConnectListAllDomainsFlags;
/// `virConnectListAllStoragePoolsFlags` by its shorter name.
pub type ListStoragePoolsFlags = ConnectListAllStoragePoolsFlags;

/// `Encode`/`Decode` for bitflags types: the bits as one `unsigned int`,
/// unknown bits kept.
macro_rules! wire_flags {
    ($($t:ty),*) => {$(
        impl $crate::proto::xdr::Encode for $t {
            fn encode(
                &self,
                out: &mut ::bytes::BytesMut,
            ) -> ::core::result::Result<(), $crate::proto::xdr::XdrError> {
                ::bytes::BufMut::put_u32(out, self.bits());
                Ok(())
            }
        }
        impl $crate::proto::xdr::Decode for $t {
            fn decode(
                r: &mut $crate::proto::xdr::Reader<'_>,
            ) -> ::core::result::Result<Self, $crate::proto::xdr::XdrError> {
                r.u32().map(Self::from_bits_retain)
            }
        }
    )*};
}
pub(crate) use wire_flags;

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

wire_flags!(OpenFlags, StorageVolStreamFlags, NoFlags);

/// `VIR_TYPED_PARAM_STRING_OKAY`: the caller takes string-valued typed
/// parameters. libvirtd serializes a typed-parameter getter's reply with the
/// caller's flags and leaves strings out without this bit.
pub(crate) const TYPED_PARAM_STRING_OKAY: u32 = 1 << 2;

/// A call's flags as they go on the wire with
/// [`TYPED_PARAM_STRING_OKAY`] added, as libvirt's C library adds it to
/// the getters whose replies may hold strings (the generator finds which in
/// libvirt's client sources). Every libvirtd since 0.9.7 supports the bit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StringOkay(pub u32);

impl Encode for StringOkay {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        (self.0 | TYPED_PARAM_STRING_OKAY).encode(out)
    }
}

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
