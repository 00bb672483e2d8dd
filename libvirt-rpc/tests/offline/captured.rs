//! Packets captured from libvirtd 11.3 (`testdata/packets/`, made by
//! `examples/capture_packets.rs`) decode into the types this crate declares
//! for them, with no byte left over: the layouts match the real daemon.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::BytesMut;
use libvirt_rpc::proto::packet::{self, MessageType, Packet, Status};
use libvirt_rpc::proto::remote_error::WireError;
use libvirt_rpc::proto::xdr::from_bytes;
use libvirt_rpc::*;

fn packets() -> Vec<(String, Packet)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/packets");
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = std::fs::read(e.path()).unwrap();
            let mut buf = BytesMut::from(&bytes[..]);
            let p = packet::decode_frame(&mut buf)
                .unwrap()
                .expect("one whole packet");
            assert!(buf.is_empty());
            (e.file_name().to_string_lossy().into_owned(), p)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn captured_packets_decode_exactly() {
    let all = packets();
    assert!(all.len() >= 30, "{}", all.len());
    for (name, p) in all {
        let b = &p.payload[..];
        let ok = match (p.header.kind, p.header.status, p.header.procedure) {
            (_, Status::Error, _) => from_bytes::<WireError>(b).map(|_| ()),
            (MessageType::Message, _, 318) => from_bytes::<(i32, LifecycleEvent)>(b).map(|_| ()),
            (MessageType::Message, _, _) => from_bytes::<()>(b),
            (MessageType::Stream, _, _) => Ok(()),
            (_, _, 1 | 2 | 9 | 12 | 83 | 94 | 208 | 209 | 231 | 234 | 264) => from_bytes::<()>(b),
            (_, _, 4 | 157) => from_bytes::<u64>(b).map(|_| ()),
            (_, _, 14 | 59 | 265) => from_bytes::<String>(b).map(|_| ()),
            (_, _, 23 | 196 | 350) => from_bytes::<Domain>(b).map(|_| ()),
            (_, _, 60 | 316) => from_bytes::<i32>(b).map(|_| ()),
            (_, _, 66) => from_bytes::<Vec<i32>>(b).map(|_| ()),
            (_, _, 84) => from_bytes::<StoragePool>(b).map(|_| ()),
            (_, _, 87) => from_bytes::<StoragePoolInfo>(b).map(|_| ()),
            (_, _, 93 | 95) => from_bytes::<StorageVol>(b).map(|_| ()),
            (_, _, 98) => from_bytes::<StorageVolInfo>(b).map(|_| ()),
            (_, _, 212) => from_bytes::<DomainStateInfo>(b).map(|_| ()),
            (_, _, 273) => from_bytes::<remote::ConnectListAllDomainsRet>(b).map(|_| ()),
            (_, _, 282) => from_bytes::<remote::StoragePoolListAllVolumesRet>(b).map(|_| ()),
            (_, _, 353) => from_bytes::<Vec<DomainInterface>>(b).map(|_| ()),
            other => panic!("{name}: no expectation for {other:?}"),
        };
        assert!(ok.is_ok(), "{name}: {ok:?}");
    }
}

#[test]
fn captured_error_carries_code_and_message() {
    let (_, p) = packets()
        .into_iter()
        .find(|(n, _)| n.contains("proc23-typeReply-statusError"))
        .unwrap();
    let e = LibvirtError::from(from_bytes::<WireError>(&p.payload).unwrap());
    assert_eq!(e.code, ErrorCode::NoDomain);
    assert!(!e.message.is_empty());
}

#[test]
fn download_ends_with_empty_continue_then_ok() {
    let all = packets();
    let stream: Vec<_> = all
        .iter()
        .filter(|(_, p)| p.header.kind == MessageType::Stream && p.header.procedure == 209)
        .map(|(_, p)| (p.header.status, p.payload.len()))
        .collect();
    assert_eq!(
        stream,
        vec![
            (Status::Continue, 4096),
            (Status::Continue, 0),
            (Status::Ok, 0)
        ]
    );
}
