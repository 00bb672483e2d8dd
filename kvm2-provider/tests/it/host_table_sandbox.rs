#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The host table through the sandbox's real sshd to its real libvirtd:
//! no dial on construction, one shared connection, redial after death,
//! dedicated connections apart from the shared one, and the error classes
//! of SSH failures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sandbox_hosts::{Host, providers, sandbox_config};
use kvm2_provider::__internals::hosts::HostTable;
use kvm2_provider::HostOptions;
use provider_api::{ErrorClass, Identifier};
use testkit::Descriptor;
use testkit::sshd::{new_key, public_key};

fn options(sandbox: &Descriptor) -> HostOptions {
    HostOptions {
        remote_socket: sandbox.remote_socket.display().to_string(),
        dial_budget: Duration::from_secs(15),
        ..HostOptions::default()
    }
}

fn host(name: &str) -> Identifier {
    Identifier::parse(name).unwrap()
}

#[tokio::test]
async fn shared_connection_is_reused_and_redialled_after_death() {
    let sandbox = Descriptor::require();
    let table = HostTable::new(&sandbox_config(&sandbox), &options(&sandbox)).unwrap();
    let h1 = host("host1");

    // Concurrent callers on a cold host share one connection.
    let (a, b, c) = tokio::join!(table.shared(&h1), table.shared(&h1), table.shared(&h1));
    let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
    assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&b, &c));
    let version = a.client().connect_get_lib_version().await.unwrap();
    assert!(version >= 9_000_000, "libvirt {version}");

    // Kill it: the next caller gets a new, working one.
    a.close().await;
    assert!(a.is_dead());
    let d = table.shared(&h1).await.unwrap();
    assert!(!Arc::ptr_eq(&a, &d));
    d.client().connect_get_lib_version().await.unwrap();
}

#[tokio::test]
async fn dedicated_connections_leave_the_shared_one_alone() {
    let sandbox = Descriptor::require();
    let table = HostTable::new(&sandbox_config(&sandbox), &options(&sandbox)).unwrap();
    let h1 = host("host1");
    let shared = table.shared(&h1).await.unwrap();
    let own = table.dedicated(&h1).await.unwrap();
    own.client().connect_get_lib_version().await.unwrap();
    own.close().await;
    assert!(own.is_dead());
    assert!(!shared.is_dead());
    shared.client().connect_get_lib_version().await.unwrap();
    assert!(Arc::ptr_eq(&shared, &table.shared(&h1).await.unwrap()));
}

#[tokio::test]
async fn construction_dials_nothing_and_unknown_hosts_are_permanent() {
    let sandbox = Descriptor::require();
    // host2 points at a port nothing listens on; building the table must
    // not notice.
    let host2 = Host {
        bridge: "br0".into(),
        pool: "default".into(),
        ..Host::sandbox(&sandbox, "host2").at_loopback_port(1)
    };
    let cfg = providers(&sandbox)
        .hosts([Host::sandbox(&sandbox, "host1"), host2])
        .kvm2();
    let started = Instant::now();
    let table = HostTable::new(&cfg, &options(&sandbox)).unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        table.hosts().map(Identifier::as_str).collect::<Vec<_>>(),
        ["host1", "host2"]
    );

    let err = table.shared(&host("nope")).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent);

    // Refused TCP: transient, and the failed dial is not cached.
    let err = table.shared(&host("host2")).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err}");
    assert!(err.to_string().contains("host2"), "{err}");
    let err = table.dedicated(&host("host2")).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err}");
}

#[tokio::test]
async fn ssh_auth_and_host_key_failures_are_permanent() {
    let sandbox = Descriptor::require();
    let dir = tempfile::tempdir().unwrap();

    // A key the server does not know.
    let stranger = new_key(dir.path(), "stranger");
    let cfg = providers(&sandbox).key_file(&stranger).kvm2();
    let table = HostTable::new(&cfg, &options(&sandbox)).unwrap();
    let err = table.shared(&host("host1")).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err}");

    // A known_hosts file that pins another key for the sandbox's address.
    let other = new_key(dir.path(), "other_host_key");
    let public = public_key(&other);
    let known_hosts = dir.path().join("known_hosts");
    std::fs::write(
        &known_hosts,
        format!("[{}]:{} {}", sandbox.ssh.host, sandbox.ssh.port, public),
    )
    .unwrap();
    let cfg = providers(&sandbox).known_hosts(&known_hosts).kvm2();
    let table = HostTable::new(&cfg, &options(&sandbox)).unwrap();
    let err = table.shared(&host("host1")).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err}");

    // Credentials are read on every dial: fixing the known_hosts file in
    // place makes the same table work without a restart.
    std::fs::copy(&sandbox.ssh.known_hosts_path, &known_hosts).unwrap();
    let conn = table.shared(&host("host1")).await.unwrap();
    conn.client().connect_get_lib_version().await.unwrap();
}
