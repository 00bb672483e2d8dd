//! Diagnostic: times a 256 MiB upload from memory into the sandbox pool,
//! several rounds, printing MiB/s (for comparing against `virsh`).
//!
//! `KVM2_SANDBOX=... cargo run --release -p libvirt-rpc-probes --bin upload_probe`
//! (`CHUNK` and `BUDGET` set `Config::stream_chunk` and `stream_buffer`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use libvirt_rpc::*;
use std::time::Instant;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let d = testkit::Descriptor::require();
    let mut config = Config::default();
    if let Some(ch) = std::env::var("CHUNK").ok().and_then(|v| v.parse().ok()) {
        config = config.stream_chunk(ch);
    }
    if let Some(b) = std::env::var("BUDGET").ok().and_then(|v| v.parse().ok()) {
        config = config.stream_buffer(b);
    }
    let c = Client::connect_unix(
        &d.libvirt.socket,
        &d.libvirt.qemu_uri,
        OpenFlags::empty(),
        config,
    )
    .await
    .unwrap();
    let pool = c.storage_pool_lookup_by_name(&d.pool.name).await.unwrap();
    let size = 256u64 << 20;
    let data = vec![7u8; size as usize];
    for round in 0..4 {
        let name = format!("lvrpc-probe-{}-{round}", std::process::id());
        let xml = format!(
            "<volume><name>{name}</name><capacity unit='bytes'>{size}</capacity><allocation unit='bytes'>0</allocation><target><format type='raw'/></target></volume>"
        );
        let vol = c
            .storage_vol_create_xml(&pool, &xml, StorageVolCreateFlags::empty())
            .await
            .unwrap();
        let t = Instant::now();
        if std::env::var_os("MANUAL").is_some() {
            let mut up = c
                .storage_vol_upload_stream(&vol, 0, size, StorageVolStreamFlags::empty())
                .await
                .unwrap();
            up.send(&data).await.unwrap();
            up.finish().await.unwrap();
        } else {
            c.storage_vol_upload(&vol, 0, size, StorageVolStreamFlags::empty(), &data[..])
                .await
                .unwrap();
        }
        let el = t.elapsed();
        println!(
            "round {round}: {:.0} MiB/s",
            size as f64 / 1048576.0 / el.as_secs_f64()
        );
        c.storage_vol_delete(&vol, StorageVolDeleteFlags::empty())
            .await
            .unwrap();
    }
}
