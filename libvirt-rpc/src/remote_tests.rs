//! Tests of the generated protocol code (`src/generated/`): every
//! generated type round-trips, list maxima hold both ways, argument tuples
//! encode like the `.x` argument structs, and the procedure table names
//! every number once.

use proptest::prelude::*;

use crate::flags::{DomainModificationImpact, MetadataType};
use crate::proto::limits::{REMOTE_AUTH_TYPE_LIST_MAX, REMOTE_DOMAIN_LIST_MAX};
use crate::proto::xdr::{Decode, Encode, Reader, XdrError, from_bytes, to_bytes};
use crate::remote::{
    AuthListRet, ConnectListAllDomainsRet, ConnectListAllStoragePoolsRet, Domain,
    DomainInterfaceAddressesRet, StoragePoolListAllVolumesRet,
};

/// Decodes a `T` from the front of `wire`; when that works, the value
/// encodes, decodes back to itself, and encodes to the same bytes again.
/// Returns whether `wire` held a `T`.
fn round_trips<T: Decode + Encode + PartialEq + std::fmt::Debug>(wire: &[u8]) -> bool {
    let mut r = Reader::new(wire);
    let Ok(v) = T::decode(&mut r) else {
        return false;
    };
    let once = to_bytes(&v).expect("a decoded value encodes");
    let back: T = from_bytes(&once).expect("an encoded value decodes");
    assert_eq!(back, v, "{}", std::any::type_name::<T>());
    assert_eq!(
        to_bytes(&back).unwrap(),
        once,
        "{}",
        std::any::type_name::<T>()
    );
    true
}

/// The generated types whose value decoded from `wire` (and round-tripped).
fn decoded_from(wire: &[u8]) -> Vec<&'static str> {
    let mut names = Vec::new();
    macro_rules! each {
        ($($t:ty),*) => {
            $(if round_trips::<$t>(wire) {
                names.push(std::any::type_name::<$t>());
            })*
        };
    }
    crate::__for_each_remote_type!(each);
    names
}

fn all_types() -> Vec<&'static str> {
    let mut names = Vec::new();
    macro_rules! each {
        ($($t:ty),*) => {
            $(names.push(std::any::type_name::<$t>());)*
        };
    }
    crate::__for_each_remote_type!(each);
    names
}

/// Every generated type has a value of all zeros (empty lists and
/// strings, absent options, zero numbers), except the unions without a
/// case 0: each of those round-trips from there.
#[test]
fn every_generated_type_round_trips_from_its_zero_value() {
    let all = all_types();
    assert!(all.len() > 700, "{} types", all.len());
    let decoded = decoded_from(&[0; 8192]);
    let missing: Vec<_> = all.iter().filter(|t| !decoded.contains(t)).collect();
    assert!(missing.is_empty(), "no zero value: {missing:?}");
}

proptest! {
    /// Words that are mostly small numbers make short lists, short strings
    /// and valid discriminants, so values with content decode; each that
    /// does round-trips.
    #[test]
    fn generated_types_round_trip(words in proptest::collection::vec(
        prop_oneof![8 => 0u32..4, 1 => 0x3030_3030u32..0x3030_3034, 1 => any::<u32>()], 0..48)) {
        let wire: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        decoded_from(&wire);
    }
}

/// A count word one over the field's maximum, with nothing behind it:
/// refused for the maximum (before any element is read or allocated).
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
    refuses_count_over::<ConnectListAllDomainsRet>(&[], 16_384);
    refuses_count_over::<ConnectListAllStoragePoolsRet>(&[], 16_384);
    refuses_count_over::<StoragePoolListAllVolumesRet>(&[], 16_384);
    refuses_count_over::<AuthListRet>(&[], 20);
    refuses_count_over::<DomainInterfaceAddressesRet>(&[], 2_048);
    // One interface named "", no MAC, then its address count.
    refuses_count_over::<DomainInterfaceAddressesRet>(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0], 2_048);
}

#[test]
fn encoding_refuses_lists_over_their_maxima() {
    let d = Domain {
        name: String::new(),
        uuid: [0; 16],
        id: -1,
    };
    let over = ConnectListAllDomainsRet {
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
    let types = AuthListRet {
        types: vec![0; REMOTE_AUTH_TYPE_LIST_MAX + 1],
    };
    assert_eq!(
        to_bytes(&types).unwrap_err(),
        XdrError::TooLong { len: 21, max: 20 }
    );
}

#[test]
fn bounded_arguments_are_refused_before_sending() {
    use crate::proto::xdr::Bounded;
    let keys = vec![String::new(); 3];
    assert_eq!(
        to_bytes(&(Bounded(&keys[..], 2),)).unwrap_err(),
        XdrError::TooLong { len: 3, max: 2 }
    );
    assert!(to_bytes(&(Bounded(&keys[..], 3),)).is_ok());
}

#[test]
fn argument_tuples_encode_like_the_args_structs() {
    // remote_domain_get_metadata_args: dom, int type, remote_string uri, unsigned flags
    let d = Domain {
        name: "a".into(),
        uuid: [0; 16],
        id: -1,
    };
    let tuple = to_bytes(&(
        &d,
        MetadataType::Element,
        Some("u"),
        DomainModificationImpact::CONFIG,
    ))
    .unwrap();
    let args = crate::remote::DomainGetMetadataArgs {
        dom: d,
        kind: 2,
        uri: Some("u".into()),
        flags: 2,
    };
    assert_eq!(tuple, to_bytes(&args).unwrap());
}

#[test]
fn every_procedure_has_one_distinct_name() {
    use crate::proc_num;
    let mut names = std::collections::HashSet::new();
    for &n in proc_num::ALL {
        let name = proc_num::name(n).unwrap_or_else(|| panic!("{n} has no name"));
        assert!(names.insert(name), "{name} named twice");
    }
    assert!(proc_num::ALL.len() > 450, "{}", proc_num::ALL.len());
    assert_eq!(
        proc_num::name(proc_num::DOMAIN_GET_STATE),
        Some("domain_get_state")
    );
    assert_eq!(
        proc_num::name(proc_num::STORAGE_VOL_UPLOAD),
        Some("storage_vol_upload")
    );
    assert_eq!(proc_num::name(-1), None);
    assert_eq!(
        proc_num::qemu::name(proc_num::qemu::DOMAIN_MONITOR_COMMAND),
        Some("domain_monitor_command")
    );
}
