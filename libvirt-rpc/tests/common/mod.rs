//! Helpers shared by the integration tests (all against the sandbox).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod private_daemon;
pub mod relay;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use libvirt_rpc::{Client, Config, OpenFlags};
use xtask::Descriptor;

pub fn sandbox() -> Descriptor {
    Descriptor::require()
}

pub async fn connect_uri(uri: &str, config: Config) -> Client {
    let d = sandbox();
    // `connect_unix`, as callers on the daemon's host do (it also raises the
    // socket's send buffer, so the stream tests cover that path).
    tokio::time::timeout(
        Duration::from_secs(30),
        Client::connect_unix(&d.libvirt.socket, uri, OpenFlags::empty(), config),
    )
    .await
    .expect("handshake within 30 s")
    .expect("handshake")
}

pub async fn test_driver() -> Client {
    connect_uri(&sandbox().libvirt.test_uri, Config::default()).await
}

pub async fn qemu() -> Client {
    connect_uri(&sandbox().libvirt.qemu_uri, Config::default()).await
}

/// A name unique to this test process and call.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "lvrpc-{prefix}-{}-{}-{nanos:x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn domain_xml(name: &str) -> String {
    format!(
        "<domain type='test'><name>{name}</name><memory unit='KiB'>65536</memory>\
         <os><type arch='x86_64'>hvm</type></os></domain>"
    )
}

pub fn volume_xml(name: &str, bytes: u64) -> String {
    format!(
        "<volume><name>{name}</name><capacity unit='bytes'>{bytes}</capacity>\
         <target><format type='raw'/></target></volume>"
    )
}

/// Alive tokio tasks in the current runtime.
pub fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}
