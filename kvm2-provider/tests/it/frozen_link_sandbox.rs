#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A frozen link at the connection layer (invariant 1): one host's link freezes in the
//! middle of a bulk upload (a relay that stops forwarding, sockets left
//! open, no FIN, no RST). The other host keeps working meanwhile, closing
//! the frozen connection returns at once, and the stuck upload ends with an
//! error instead of hanging.

use std::time::{Duration, Instant};

use kvm2_provider::__internals::hosts::HostTable;
use kvm2_provider::HostOptions;
use libvirt_rpc::StorageVolStreamFlags;
use provider_api::Identifier;
use testkit::Descriptor;
use testkit::providers_yaml::Host;
use testkit::relay::Relay;
use testkit::sshd::known_hosts_with_port;
use tokio::io::AsyncReadExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_host_does_not_stall_the_other_and_closes_at_once() {
    let sandbox = Descriptor::require();
    let relay = Relay::tcp(format!("{}:{}", sandbox.ssh.host, sandbox.ssh.port)).await;

    // host1 goes through the relay; its known_hosts entry names the relay's
    // port with the sandbox's host key. host2 is the sandbox directly.
    let dir = tempfile::tempdir().unwrap();
    let known_hosts = known_hosts_with_port(&sandbox, dir.path(), relay.port());
    let config = crate::sandbox_hosts::providers(&sandbox)
        .hosts([
            Host::sandbox(&sandbox, "host1").at_loopback_port(relay.port()),
            Host::sandbox(&sandbox, "host2"),
        ])
        .known_hosts(&known_hosts)
        .kvm2();
    let options = HostOptions {
        remote_socket: sandbox.remote_socket.display().to_string(),
        ..HostOptions::default()
    };
    let table = HostTable::new(&config, &options).unwrap();
    let (h1, h2) = (
        Identifier::parse("host1").unwrap(),
        Identifier::parse("host2").unwrap(),
    );

    // A target volume, made over host2, removed by virsh at the end.
    let other = table.shared(&h2).await.unwrap();
    let target = crate::sandbox_hosts::temp_volume(&other, &sandbox, "frozen").await;
    let vol = target.vol.clone();

    // A bulk upload on host1's dedicated connection (as the image cache
    // does), from a source far larger than what passes before the freeze.
    let frozen_conn = table.dedicated(&h1).await.unwrap();
    let client = frozen_conn.client().clone();
    let upload_vol = vol.clone();
    let upload = tokio::spawn(async move {
        let source = tokio::io::repeat(0).take(4 << 30);
        client
            .storage_vol_upload(&upload_vol, 0, 0, StorageVolStreamFlags::empty(), source)
            .await
    });
    // Freeze once the upload is really flowing.
    let flowing = Instant::now();
    while relay.forwarded() < (8 << 20) {
        assert!(
            flowing.elapsed() < Duration::from_secs(30),
            "upload never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    relay.freeze();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !upload.is_finished(),
        "the upload should be stuck, not done"
    );

    // Meanwhile host2 answers, on its shared connection and a new one.
    let started = Instant::now();
    other.client().connect_get_lib_version().await.unwrap();
    let fresh = table.dedicated(&h2).await.unwrap();
    fresh.client().connect_get_lib_version().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), fresh.close())
        .await
        .expect("closing a healthy connection hung");
    assert!(started.elapsed() < Duration::from_secs(10));

    // Closing the frozen connection returns at once...
    // (A close that waits on the network would hang here: bound it so a
    // regression fails instead of hanging the suite.)
    let closing = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), frozen_conn.close())
        .await
        .expect("close waited on the frozen link");
    assert!(
        closing.elapsed() < Duration::from_secs(2),
        "close took {:?}",
        closing.elapsed()
    );
    assert!(frozen_conn.is_dead());
    // ...and the stuck upload ends with an error soon after.
    let outcome = tokio::time::timeout(Duration::from_secs(5), upload)
        .await
        .expect("the upload still hangs after close")
        .unwrap();
    let err = outcome.expect_err("a frozen upload cannot succeed");
    assert!(
        err.is_disconnected() || matches!(err, libvirt_rpc::Error::Source(_)),
        "{err:?}"
    );
}
