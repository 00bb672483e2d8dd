//! Typed procedures: one declarative entry per procedure.
//!
//! Each entry names the method, its typed parameters (encoded in order as
//! the procedure's `_args` struct), the `_ret` type, and the procedure
//! number, checked against libvirt's `src/remote/remote_protocol.x`.
//! Optional `args` replaces the argument tuple (for fixed fields such as
//! `need_results`) and `map` turns the `_ret` struct into what the method
//! returns. Procedures not listed here are reachable through
//! [`Client::call`] with caller-supplied types.
//!
//! Every list in these replies carries its `.x` maximum
//! ([`crate::proto::limits`]: `REMOTE_DOMAIN_LIST_MAX` for
//! [`DomainList`], `REMOTE_DOMAIN_IP_ADDR_MAX` for an interface's
//! addresses, ...), and every string `REMOTE_STRING_MAX`: a reply claiming
//! more is [`crate::proto::xdr::XdrError::TooLong`] before anything is
//! allocated for it, and so is an argument the daemon would refuse.

use crate::client::Client;
use crate::domain_state::{DomainState, DrvFeature, StateReason};
use crate::error::Result;
use crate::flags::{
    DomainCreateFlags, DomainDefineFlags, DomainDestroyFlags, DomainModificationImpact,
    DomainUndefineFlags, DomainXmlFlags, InterfaceAddressesSource, ListDomainsFlags,
    ListStoragePoolsFlags, MetadataType, NoFlags, OpenFlags, StorageVolCreateFlags,
    StorageVolDeleteFlags, StorageVolInfoFlags,
};
use crate::proto::limits::{
    REMOTE_AUTH_TYPE_LIST_MAX, REMOTE_DOMAIN_INTERFACE_MAX, REMOTE_DOMAIN_IP_ADDR_MAX,
    REMOTE_DOMAIN_LIST_MAX, REMOTE_STORAGE_POOL_LIST_MAX, REMOTE_STORAGE_VOL_LIST_MAX,
};
use crate::proto::types::{Domain, StoragePool, StorageVol, Uuid};
use crate::xdr_struct;

macro_rules! procedures {
    ($(
        $(#[$m:meta])*
        fn $name:ident ( $($p:ident : $pty:ty),* ) -> $ret:ty = $num_name:ident ($num:literal)
            $(, args $args:expr)? $(, map $map:expr => $out:ty)? ;
    )*) => {
        /// Procedure numbers of the remote program (`REMOTE_PROC_*`).
        pub mod proc_num {
            $(
                #[doc = concat!("`REMOTE_PROC_", stringify!($num_name), "`")]
                pub const $num_name: i32 = $num;
            )*
            /// `REMOTE_PROC_STORAGE_VOL_UPLOAD` (a stream; see [`crate::Client::storage_vol_upload`]).
            pub const STORAGE_VOL_UPLOAD: i32 = 208;
            /// `REMOTE_PROC_STORAGE_VOL_DOWNLOAD` (a stream; see [`crate::Client::storage_vol_download`]).
            pub const STORAGE_VOL_DOWNLOAD: i32 = 209;
            // Event registration calls and event messages (see
            // `crate::events`).
            pub use crate::events::numbers::*;
            /// `REMOTE_PROC_NODE_GET_INFO` (no typed method: call it through
            /// [`crate::Client::call`] with the caller's `_ret` type).
            pub const NODE_GET_INFO: i32 = 6;
            /// `REMOTE_PROC_NODE_GET_FREE_MEMORY` (no typed method; the reply is a `u64`).
            pub const NODE_GET_FREE_MEMORY: i32 = 102;

            /// The procedure's name for logs and spans: the [`crate::Client`]
            /// method's name (`"domain_get_state"`), `None` for a number this
            /// table does not list.
            pub fn name(procedure: i32) -> Option<&'static str> {
                Some(match procedure {
                    $($num_name => stringify!($name),)*
                    STORAGE_VOL_UPLOAD => "storage_vol_upload",
                    STORAGE_VOL_DOWNLOAD => "storage_vol_download",
                    NODE_GET_INFO => "node_get_info",
                    NODE_GET_FREE_MEMORY => "node_get_free_memory",
                    _ => return crate::events::numbers::name(procedure),
                })
            }

            /// Every listed procedure number (for tests of the table).
            #[cfg(test)]
            pub(crate) const ALL: &[i32] = &[
                $($num_name,)*
                STORAGE_VOL_UPLOAD, STORAGE_VOL_DOWNLOAD, NODE_GET_INFO, NODE_GET_FREE_MEMORY,
            ];
        }

        impl Client {
            $(
                procedures!(@method [$(#[$m])*] $name ($($p : $pty),*) -> $ret = $num_name
                    [$($args)?] [$($map => $out)?]);
            )*
        }
    };

    // Without `map`, the method returns the `_ret` type as is.
    (@method [$(#[$m:meta])*] $name:ident ($($p:ident : $pty:ty),*) -> $ret:ty = $num_name:ident
        [$($args:expr)?] []) => {
        procedures!(@method [$(#[$m])*] $name ($($p : $pty),*) -> $ret = $num_name
            [$($args)?] [|r| r => $ret]);
    };

    (@method [$(#[$m:meta])*] $name:ident ($($p:ident : $pty:ty),*) -> $ret:ty = $num_name:ident
        [$($args:expr)?] [$map:expr => $out:ty]) => {
        $(#[$m])*
        #[doc = concat!("\n\nProcedure `REMOTE_PROC_", stringify!($num_name), "`.")]
        #[doc = "\n# Errors\n[`crate::Error::Libvirt`] with the daemon's error code when it fails the call; \
                 [`crate::Error::Disconnected`] when the link dies; [`crate::Error::Timeout`] after the \
                 handle's call deadline."]
        #[doc = "\n# Cancel safety\nDropping the future abandons the call (the reply is discarded); \
                 the daemon may still carry it out. The connection stays up."]
        pub async fn $name(&self $(, $p: $pty)*) -> Result<$out> {
            let args = procedures!(@args ($($p),*) [$($args)?]);
            let ret: $ret = self.call(proc_num::$num_name, &args).await?;
            let map: fn($ret) -> $out = $map;
            Ok(map(ret))
        }
    };

    (@args ($($p:ident),*) []) => { ($($p,)*) };
    (@args ($($p:ident),*) [$args:expr]) => { $args };
}

procedures! {
    /// Opens the hypervisor connection `name` (`qemu:///system`,
    /// `test:///default`, ...) on the daemon. [`Client::connect`] does this.
    fn connect_open(name: Option<&str>, flags: OpenFlags) -> () = CONNECT_OPEN(1);
    /// Closes the hypervisor connection on the daemon (the link stays up).
    fn connect_close() -> () = CONNECT_CLOSE(2);
    /// The hypervisor's version (`major * 1,000,000 + minor * 1,000 + micro`).
    fn connect_get_version() -> u64 = CONNECT_GET_VERSION(4);
    /// The host's capabilities XML (CPU, NUMA, guest types).
    fn connect_get_capabilities() -> String = CONNECT_GET_CAPABILITIES(7);
    /// Starts a defined domain.
    fn domain_create(dom: &Domain) -> () = DOMAIN_CREATE(9);
    /// Forcefully stops a running domain.
    fn domain_destroy(dom: &Domain) -> () = DOMAIN_DESTROY(12);
    /// The domain's state, memory, vCPU count and CPU time.
    fn domain_get_info(dom: &Domain) -> DomainInfo = DOMAIN_GET_INFO(16);
    /// The domain's XML description.
    fn domain_get_xml_desc(dom: &Domain, flags: DomainXmlFlags) -> String = DOMAIN_GET_XML_DESC(14);
    /// Looks a domain up by UUID ([`crate::ErrorCode::NoDomain`] when absent).
    fn domain_lookup_by_uuid(uuid: &Uuid) -> Domain = DOMAIN_LOOKUP_BY_UUID(24);
    /// Resumes a paused domain.
    fn domain_resume(dom: &Domain) -> () = DOMAIN_RESUME(28);
    /// Asks the guest to shut down (ACPI power button or agent); returns
    /// before the guest has stopped.
    fn domain_shutdown(dom: &Domain) -> () = DOMAIN_SHUTDOWN(33);
    /// Pauses a running domain (its vCPUs stop; it keeps its memory).
    fn domain_suspend(dom: &Domain) -> () = DOMAIN_SUSPEND(34);
    /// Looks a domain up by name ([`crate::ErrorCode::NoDomain`] when absent).
    fn domain_lookup_by_name(name: &str) -> Domain = DOMAIN_LOOKUP_BY_NAME(23);
    /// The daemon host's hostname.
    fn connect_get_hostname() -> String = CONNECT_GET_HOSTNAME(59);
    /// Whether the daemon supports a `VIR_DRV_FEATURE_*` feature.
    fn connect_supports_feature(feature: DrvFeature) -> i32 = CONNECT_SUPPORTS_FEATURE(60),
        map |r| r != 0 => bool;
    /// Authentication types the daemon offers (0 none, 1 SASL, 2 polkit).
    fn auth_list() -> AuthList = AUTH_LIST(66), map |r| r.types => Vec<i32>;
    /// Asks the daemon to authorize this connection with polkit (it checks
    /// the peer's uid and pid against `org.libvirt.unix.manage` or
    /// `.monitor`); [`Client::connect`] calls it when the daemon offers
    /// only polkit. Returns the daemon's `complete` flag.
    fn auth_polkit() -> i32 = AUTH_POLKIT(70);
    /// Rescans a storage pool for volumes.
    fn storage_pool_refresh(pool: &StoragePool, flags: NoFlags) -> () = STORAGE_POOL_REFRESH(83);
    /// Looks a storage pool up by name.
    fn storage_pool_lookup_by_name(name: &str) -> StoragePool = STORAGE_POOL_LOOKUP_BY_NAME(84);
    /// A storage pool's state and sizes.
    fn storage_pool_get_info(pool: &StoragePool) -> StoragePoolInfo = STORAGE_POOL_GET_INFO(87);
    /// A storage pool's XML description.
    fn storage_pool_get_xml_desc(pool: &StoragePool, flags: NoFlags) -> String
        = STORAGE_POOL_GET_XML_DESC(88);
    /// Creates a volume from its XML description.
    fn storage_vol_create_xml(pool: &StoragePool, xml: &str, flags: StorageVolCreateFlags) -> StorageVol
        = STORAGE_VOL_CREATE_XML(93);
    /// Deletes a volume.
    fn storage_vol_delete(vol: &StorageVol, flags: StorageVolDeleteFlags) -> () = STORAGE_VOL_DELETE(94);
    /// Looks a volume up by name within a pool.
    fn storage_vol_lookup_by_name(pool: &StoragePool, name: &str) -> StorageVol
        = STORAGE_VOL_LOOKUP_BY_NAME(95);
    /// Looks a volume up by its key (for file volumes, the path).
    fn storage_vol_lookup_by_key(key: &str) -> StorageVol = STORAGE_VOL_LOOKUP_BY_KEY(96);
    /// Looks a volume up by its path on the host.
    fn storage_vol_lookup_by_path(path: &str) -> StorageVol = STORAGE_VOL_LOOKUP_BY_PATH(97);
    /// A volume's type and sizes.
    fn storage_vol_get_info(vol: &StorageVol) -> StorageVolInfo = STORAGE_VOL_GET_INFO(98);
    /// A volume's XML description.
    fn storage_vol_get_xml_desc(vol: &StorageVol, flags: NoFlags) -> String
        = STORAGE_VOL_GET_XML_DESC(99);
    /// The volume's path on the host (for a `dir` pool, the file's path).
    fn storage_vol_get_path(vol: &StorageVol) -> String = STORAGE_VOL_GET_PATH(100);
    /// Creates a volume from its XML description, filled with a copy of
    /// `clone_from` (the daemon copies on the host, converting formats as the
    /// XML asks; the new volume's name appears only once the copy is done).
    fn storage_vol_create_xml_from(pool: &StoragePool, xml: &str, clone_from: &StorageVol,
                                   flags: StorageVolCreateFlags) -> StorageVol
        = STORAGE_VOL_CREATE_XML_FROM(125);
    /// The daemon's libvirt version (`major * 1,000,000 + minor * 1,000 + micro`).
    fn connect_get_lib_version() -> u64 = CONNECT_GET_LIB_VERSION(157);
    /// Starts a defined domain; returns the domain with its new id.
    fn domain_create_with_flags(dom: &Domain, flags: DomainCreateFlags) -> Domain
        = DOMAIN_CREATE_WITH_FLAGS(196);
    /// The domain's state and the reason for it.
    fn domain_get_state(dom: &Domain, flags: NoFlags) -> DomainStateInfo = DOMAIN_GET_STATE(212);
    /// Removes a domain's persistent definition.
    fn domain_undefine_flags(dom: &Domain, flags: DomainUndefineFlags) -> () = DOMAIN_UNDEFINE_FLAGS(231);
    /// Stops a running domain.
    fn domain_destroy_flags(dom: &Domain, flags: DomainDestroyFlags) -> () = DOMAIN_DESTROY_FLAGS(234);
    /// Sets (or with `metadata = None`, removes) domain metadata; for
    /// [`MetadataType::Element`], `key` is the XML prefix and `uri` the
    /// namespace.
    fn domain_set_metadata(dom: &Domain, kind: MetadataType, metadata: Option<&str>, key: Option<&str>,
                           uri: Option<&str>, flags: DomainModificationImpact) -> () = DOMAIN_SET_METADATA(264);
    /// Reads domain metadata ([`crate::ErrorCode::NoDomainMetadata`] when absent).
    fn domain_get_metadata(dom: &Domain, kind: MetadataType, uri: Option<&str>,
                           flags: DomainModificationImpact) -> String = DOMAIN_GET_METADATA(265);
    /// Lists domains matching `flags` (empty = all).
    fn connect_list_all_domains(flags: ListDomainsFlags) -> DomainList = CONNECT_LIST_ALL_DOMAINS(273),
        args (1i32, flags), map |r| r.domains => Vec<Domain>;
    /// Lists storage pools matching `flags` (empty = all).
    fn connect_list_all_storage_pools(flags: ListStoragePoolsFlags) -> PoolList
        = CONNECT_LIST_ALL_STORAGE_POOLS(281),
        args (1i32, flags), map |r| r.pools => Vec<StoragePool>;
    /// Lists the volumes of a pool.
    fn storage_pool_list_all_volumes(pool: &StoragePool) -> VolumeList = STORAGE_POOL_LIST_ALL_VOLUMES(282),
        args (pool, 1i32, NoFlags::empty()), map |r| r.vols => Vec<StorageVol>;
    /// Defines (creates or updates) a persistent domain from XML.
    fn domain_define_xml_flags(xml: &str, flags: DomainDefineFlags) -> Domain = DOMAIN_DEFINE_XML_FLAGS(350);
    /// A volume's type and sizes; with [`StorageVolInfoFlags::GET_PHYSICAL`],
    /// `allocation` is the volume's physical size on the host.
    fn storage_vol_get_info_flags(vol: &StorageVol, flags: StorageVolInfoFlags) -> StorageVolInfo
        = STORAGE_VOL_GET_INFO_FLAGS(378);
    /// The domain's interfaces and their IP addresses, from `source`.
    fn domain_interface_addresses(dom: &Domain, source: InterfaceAddressesSource, flags: NoFlags)
        -> InterfaceList = DOMAIN_INTERFACE_ADDRESSES(353), map |r| r.ifaces => Vec<DomainInterface>;
}

xdr_struct! {
    /// `remote_storage_pool_get_info_ret`.
    pub struct StoragePoolInfo {
        /// `virStoragePoolState` (0 inactive, 1 building, 2 running, 3
        /// degraded, 4 inaccessible).
        pub state: u32,
        /// Logical size in bytes.
        pub capacity: u64,
        /// Bytes allocated.
        pub allocation: u64,
        /// Bytes free.
        pub available: u64,
    }
}

xdr_struct! {
    /// `remote_storage_vol_get_info_ret`.
    pub struct StorageVolInfo {
        /// `virStorageVolType` (0 file, 1 block, 2 dir, 3 network, 4
        /// netdir, 5 ploop).
        pub kind: i32,
        /// Logical size in bytes.
        pub capacity: u64,
        /// Bytes allocated.
        pub allocation: u64,
    }
}

xdr_struct! {
    /// `remote_domain_get_state_ret`.
    pub struct DomainStateInfo {
        /// The state.
        pub state: DomainState,
        /// A state-specific reason code; [`DomainStateInfo::state_reason`]
        /// reads it.
        pub reason: i32,
    }
}

impl DomainStateInfo {
    /// The state with its reason, typed.
    pub fn state_reason(&self) -> StateReason {
        StateReason::from_wire(self.state, self.reason)
    }
}

xdr_struct! {
    /// `remote_connect_list_all_domains_ret`.
    pub struct DomainList {
        /// The domains.
        pub domains<REMOTE_DOMAIN_LIST_MAX>: Vec<Domain>,
        /// Their count.
        pub ret: u32,
    }
}

xdr_struct! {
    /// `remote_domain_get_info_ret` (XDR's `unsigned char` and `unsigned
    /// short` travel as 4-byte integers).
    pub struct DomainInfo {
        /// The state.
        pub state: DomainState,
        /// Maximum memory in KiB.
        pub max_mem: u64,
        /// Current memory in KiB.
        pub memory: u64,
        /// Number of virtual CPUs.
        pub nr_virt_cpu: u32,
        /// CPU time used, in nanoseconds.
        pub cpu_time: u64,
    }
}

xdr_struct! {
    /// `remote_connect_list_all_storage_pools_ret`.
    pub struct PoolList {
        /// The pools.
        pub pools<REMOTE_STORAGE_POOL_LIST_MAX>: Vec<StoragePool>,
        /// Their count.
        pub ret: u32,
    }
}

xdr_struct! {
    /// `remote_storage_pool_list_all_volumes_ret`.
    pub struct VolumeList {
        /// The volumes.
        pub vols<REMOTE_STORAGE_VOL_LIST_MAX>: Vec<StorageVol>,
        /// Their count.
        pub ret: u32,
    }
}

xdr_struct! {
    /// `remote_domain_ip_addr`.
    pub struct DomainIpAddr {
        /// `virIPAddrType` (0 IPv4, 1 IPv6).
        pub kind: i32,
        /// The address as text.
        pub addr: String,
        /// Prefix length.
        pub prefix: u32,
    }
}

xdr_struct! {
    /// `remote_domain_interface`.
    pub struct DomainInterface {
        /// Interface name.
        pub name: String,
        /// MAC address.
        pub hwaddr: Option<String>,
        /// Its addresses.
        pub addrs<REMOTE_DOMAIN_IP_ADDR_MAX>: Vec<DomainIpAddr>,
    }
}

xdr_struct! {
    /// `remote_domain_interface_addresses_ret`.
    pub struct InterfaceList {
        /// The interfaces.
        pub ifaces<REMOTE_DOMAIN_INTERFACE_MAX>: Vec<DomainInterface>,
    }
}

xdr_struct! {
    /// `remote_auth_list_ret`.
    pub struct AuthList {
        /// `remote_auth_type` values (0 none, 1 SASL, 2 polkit).
        pub types<REMOTE_AUTH_TYPE_LIST_MAX>: Vec<i32>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::xdr::{Decode, XdrError, from_bytes, to_bytes};
    use proptest::prelude::*;

    fn dom() -> impl Strategy<Value = Domain> {
        (".{0,12}", any::<[u8; 16]>(), any::<i32>()).prop_map(|(name, uuid, id)| Domain {
            name,
            uuid,
            id,
        })
    }

    proptest! {
        #[test]
        fn pool_info_round_trips(state: u32, capacity: u64, allocation: u64, available: u64) {
            let v = StoragePoolInfo { state, capacity, allocation, available };
            prop_assert_eq!(from_bytes::<StoragePoolInfo>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
        #[test]
        fn vol_info_round_trips(kind: i32, capacity: u64, allocation: u64) {
            let v = StorageVolInfo { kind, capacity, allocation };
            prop_assert_eq!(from_bytes::<StorageVolInfo>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
        #[test]
        fn state_round_trips(state: i32, reason: i32) {
            let v = DomainStateInfo { state: DomainState::from_wire(state), reason };
            prop_assert_eq!(from_bytes::<DomainStateInfo>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
        #[test]
        fn domain_list_round_trips(domains in proptest::collection::vec(dom(), 0..4), ret: u32) {
            let v = DomainList { domains, ret };
            prop_assert_eq!(from_bytes::<DomainList>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
        #[test]
        fn volume_list_round_trips(names in proptest::collection::vec(".{0,8}", 0..4), ret: u32) {
            let vols = names.into_iter().map(|n| StorageVol { pool: "p".into(), key: format!("/k/{n}"), name: n }).collect();
            let v = VolumeList { vols, ret };
            prop_assert_eq!(from_bytes::<VolumeList>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
        #[test]
        fn domain_info_round_trips(state: i32, max_mem: u64, memory: u64, nr_virt_cpu: u32, cpu_time: u64) {
            let v = DomainInfo { state: DomainState::from_wire(state), max_mem, memory, nr_virt_cpu, cpu_time };
            prop_assert_eq!(from_bytes::<DomainInfo>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
        #[test]
        fn pool_list_round_trips(names in proptest::collection::vec(".{0,8}", 0..4), ret: u32) {
            let pools = names.into_iter().map(|name| StoragePool { name, uuid: [7; 16] }).collect();
            let v = PoolList { pools, ret };
            prop_assert_eq!(from_bytes::<PoolList>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
        #[test]
        fn interfaces_round_trip(name in ".{0,8}", hwaddr: Option<String>, kind: i32, addr in ".{0,15}", prefix: u32) {
            let v = InterfaceList { ifaces: vec![DomainInterface { name, hwaddr, addrs: vec![DomainIpAddr { kind, addr, prefix }] }] };
            prop_assert_eq!(from_bytes::<InterfaceList>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
        #[test]
        fn auth_lists_round_trip(types in proptest::collection::vec(0i32..3, 0..=20)) {
            let v = AuthList { types };
            prop_assert_eq!(from_bytes::<AuthList>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
    }

    /// A count word one over the field's maximum, with nothing behind it:
    /// refused for the maximum (before any element is read or allocated),
    /// not for the missing bytes.
    fn refuses_count_over<T: Decode + std::fmt::Debug>(prefix: &[u8], max: usize) {
        let mut wire = prefix.to_vec();
        wire.extend_from_slice(&(max as u32 + 1).to_be_bytes());
        assert_eq!(
            from_bytes::<T>(&wire).unwrap_err(),
            XdrError::TooLong { len: max + 1, max },
            "{}",
            std::any::type_name::<T>()
        );
    }

    #[test]
    fn reply_lists_are_held_to_their_protocol_maxima() {
        refuses_count_over::<DomainList>(&[], 16_384);
        refuses_count_over::<PoolList>(&[], 4_096);
        refuses_count_over::<VolumeList>(&[], 16_384);
        refuses_count_over::<AuthList>(&[], 20);
        refuses_count_over::<InterfaceList>(&[], 2_048);
        // One interface named "", no MAC, then its address count.
        refuses_count_over::<InterfaceList>(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0], 2_048);
    }

    #[test]
    fn encoding_refuses_lists_over_their_maxima() {
        let d = Domain {
            name: String::new(),
            uuid: [0; 16],
            id: -1,
        };
        let over = DomainList {
            domains: vec![d; REMOTE_DOMAIN_LIST_MAX + 1],
            ret: 0,
        };
        assert_eq!(
            to_bytes(&over).unwrap_err(),
            XdrError::TooLong {
                len: 16_385,
                max: 16_384
            }
        );
        let types = AuthList { types: vec![0; 21] };
        assert_eq!(
            to_bytes(&types).unwrap_err(),
            XdrError::TooLong { len: 21, max: 20 }
        );
    }

    #[test]
    fn every_procedure_has_one_distinct_name() {
        let mut names = std::collections::HashSet::new();
        let mut numbers = std::collections::HashSet::new();
        for &n in proc_num::ALL.iter().chain(crate::events::numbers::ALL) {
            let name = proc_num::name(n).unwrap_or_else(|| panic!("{n} has no name"));
            assert!(names.insert(name), "{name} named twice");
            assert!(numbers.insert(n), "{n} listed twice");
        }
        assert_eq!(
            proc_num::name(proc_num::DOMAIN_GET_STATE),
            Some("domain_get_state")
        );
        assert_eq!(proc_num::name(-1), None);
    }

    #[test]
    fn argument_tuples_encode_like_the_args_structs() {
        // remote_domain_get_metadata_args: dom, int type, remote_string uri, unsigned flags
        let d = Domain {
            name: "a".into(),
            uuid: [0; 16],
            id: -1,
        };
        let b = to_bytes(&(
            &d,
            MetadataType::Element,
            Some("u"),
            DomainModificationImpact::CONFIG,
        ))
        .unwrap();
        let mut want = to_bytes(&d).unwrap().to_vec();
        want.extend_from_slice(&[
            0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, b'u', 0, 0, 0, 0, 0, 0, 2,
        ]);
        assert_eq!(&b[..], &want[..]);
    }
}
