//! Captures the packets the sandbox daemon sends during a typical session
//! (handshake, lookups, errors, XML, events, a volume download, keepalive)
//! into `libvirt-rpc/testdata/packets/` as seeds for the fuzzer.
//!
//! `KVM2_SANDBOX=... cargo run -p libvirt-rpc-probes --bin capture_packets`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use libvirt_rpc::proto::packet;
use libvirt_rpc::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

#[tokio::main]
async fn main() {
    let d = testkit::Descriptor::require();
    let out_dir = libvirt_rpc_probes::packets_dir();
    std::fs::create_dir_all(&out_dir).unwrap();
    let seen = Arc::new(Mutex::new(Vec::<u8>::new()));

    let session = |uri: String| {
        let seen = seen.clone();
        let socket = d.libvirt.socket.clone();
        async move {
            let (client_end, relay_end) = UnixStream::pair().unwrap();
            let daemon = UnixStream::connect(&socket).await.unwrap();
            let (mut cr, mut cw) = relay_end.into_split();
            let (mut dr, mut dw) = daemon.into_split();
            let up = tokio::spawn(async move {
                let _ = tokio::io::copy(&mut cr, &mut dw).await;
            });
            let down = tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n) = dr.read(&mut buf).await {
                    if n == 0 || cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    seen.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
            let config = Config::default().keepalive(std::time::Duration::from_millis(300), 5);
            let c = Client::connect(client_end, &uri, OpenFlags::empty(), config)
                .await
                .unwrap();
            (c, up, down)
        }
    };

    // test:///default: domains, errors, metadata, events, interfaces.
    let (c, up, down) = session(d.libvirt.test_uri.clone()).await;
    let _ = c.connect_get_version().await;
    let _ = c.connect_get_hostname().await;
    let doms = c
        .connect_list_all_domains(ListDomainsFlags::empty())
        .await
        .unwrap();
    let _ = c.domain_lookup_by_name("no-such-domain-fuzz-seed").await;
    let mut sub = c.subscribe_lifecycle(None).await.unwrap();
    let name = format!("lvrpc-capture-{}", std::process::id());
    let xml = format!(
        "<domain type='test'><name>{name}</name><memory unit='KiB'>65536</memory>\
         <os><type arch='x86_64'>hvm</type></os><devices><interface type='network'>\
         <source network='default'/></interface></devices></domain>"
    );
    let dom = c
        .domain_define_xml_flags(&xml, DomainDefineFlags::empty())
        .await
        .unwrap();
    c.domain_create(&dom).await.unwrap();
    let dom = c.domain_lookup_by_name(&name).await.unwrap();
    let _ = c.domain_get_state(&dom, NoFlags::empty()).await;
    let _ = c.domain_get_xml_desc(&dom, DomainXmlFlags::empty()).await;
    let _ = c
        .domain_interface_addresses(&dom, InterfaceAddressesSource::Lease, NoFlags::empty())
        .await;
    let _ = c
        .domain_get_metadata(
            &dom,
            MetadataType::Element,
            Some("urn:x"),
            DomainModificationImpact::empty(),
        )
        .await;
    c.domain_destroy(&dom).await.unwrap();
    c.domain_undefine_flags(&dom, DomainUndefineFlags::empty())
        .await
        .unwrap();
    for _ in 0..4 {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), sub.recv()).await;
    }
    let pool = c.storage_pool_lookup_by_name("default-pool").await.unwrap();
    let _ = c.storage_pool_get_info(&pool).await;
    let _ = c
        .storage_pool_list_all_volumes(&pool, NoFlags::empty())
        .await;
    let _ = c.call::<_, ()>(99_999, &()).await;
    // Idle long enough for keepalive traffic.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    drop(sub);
    c.close().await;
    up.abort();
    down.abort();
    let _ = doms;

    // qemu:///system: a small volume download (STREAM packets).
    let (c, up, down) = session(d.libvirt.qemu_uri.clone()).await;
    let pool = c.storage_pool_lookup_by_name(&d.pool.name).await.unwrap();
    let vname = format!("lvrpc-capture-{}.img", std::process::id());
    let vol = c
        .storage_vol_create_xml(
            &pool,
            &format!("<volume><name>{vname}</name><capacity unit='bytes'>4096</capacity><target><format type='raw'/></target></volume>"),
            StorageVolCreateFlags::empty(),
        )
        .await
        .unwrap();
    c.storage_vol_upload(
        &vol,
        0,
        4096,
        StorageVolStreamFlags::empty(),
        &[0x5a; 4096][..],
    )
    .await
    .unwrap();
    let mut sink = Vec::new();
    c.storage_vol_download(&vol, 0, 0, StorageVolStreamFlags::empty(), &mut sink)
        .await
        .unwrap();
    let _ = c.storage_vol_get_info(&vol).await;
    c.storage_vol_delete(&vol, StorageVolDeleteFlags::empty())
        .await
        .unwrap();
    c.close().await;
    up.abort();
    down.abort();

    let mut buf = BytesMut::from(&seen.lock().unwrap()[..]);
    let mut n = 0;
    let mut start = buf.len();
    let total = start;
    while let Ok(Some(p)) = packet::decode_frame(&mut buf) {
        let len = start - buf.len();
        let begin = total - start;
        let frame = &seen.lock().unwrap()[begin..begin + len];
        let name = format!(
            "{n:03}-prog{:x}-proc{}-type{:?}-status{:?}.bin",
            p.header.program, p.header.procedure, p.header.kind, p.header.status
        );
        std::fs::write(out_dir.join(name), frame).unwrap();
        n += 1;
        start = buf.len();
    }
    println!("captured {n} packets into {}", out_dir.display());
}
