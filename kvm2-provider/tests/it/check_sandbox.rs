#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Host checks through the sandbox's real sshd to its real libvirtd: one
//! status per host, in config order, with the right reason, within the
//! caller's deadline, and no connection left open afterwards.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sandbox_hosts::*;
use kvm2_provider::__internals::hosts::HostTable;
use kvm2_provider::__internals::operations::HostChecker;
use provider_api::{CheckReason, Checker, TargetStatus};
use testkit::Descriptor;
use testkit::relay::Relay;
use testkit::silent::Silent;
use testkit::sshd::{known_hosts_with_port, new_key};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_host_gets_its_reason_within_the_deadline_and_nothing_stays_open() {
    let sandbox = Descriptor::require();
    let upstream = format!("{}:{}", sandbox.ssh.host, sandbox.ssh.port);
    let good = Relay::tcp(upstream.clone()).await;
    let badkey = Relay::tcp(upstream).await;
    let silent = Silent::start().await;
    let closed = testkit::free_port();

    // known_hosts: the real host key for `good`, another key for `badkey`.
    let dir = tempfile::tempdir().unwrap();
    let known_hosts = known_hosts_with_port(&sandbox, dir.path(), good.port());
    let other = new_key(dir.path(), "other_host_key");
    let other_pub = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let mut text = std::fs::read_to_string(&known_hosts).unwrap();
    text.push_str(&format!(
        "[127.0.0.1]:{} {}\n",
        badkey.port(),
        other_pub.trim()
    ));
    std::fs::write(&known_hosts, text).unwrap();

    let host = |name, port| Host::sandbox(&sandbox, name).at_loopback_port(port);
    let config = providers(&sandbox)
        .hosts([
            host("good", good.port()),
            host("closed", closed),
            host("silent", silent.port()),
            host("badkey", badkey.port()),
        ])
        .known_hosts(&known_hosts)
        .kvm2();
    let table = HostTable::new(&config, &options(&sandbox, &sandbox.libvirt.qemu_uri)).unwrap();
    let checker = HostChecker::new(Arc::new(table));
    let checker: &dyn Checker = &checker;

    // Longer than a loaded CI needs for a real dial, far shorter than the
    // 20 s dial budget: the silent host is cut off by the deadline.
    let deadline = Duration::from_secs(10);
    let started = Instant::now();
    let statuses = checker.check(deadline).await;
    let took = started.elapsed();
    assert!(
        took < deadline + Duration::from_secs(5),
        "check took {took:?} with a deadline of {deadline:?}"
    );

    let names: Vec<_> = statuses.iter().map(|s| s.target.as_str()).collect();
    assert_eq!(names, ["good", "closed", "silent", "badkey"]);
    let [good_s, closed_s, silent_s, badkey_s] = &statuses[..] else {
        unreachable!()
    };
    assert!(good_s.reachable, "{good_s:?}");
    assert_eq!(good_s.reason, CheckReason::Reachable);
    assert_eq!(
        good_s.version.as_deref(),
        Some(sandbox.libvirt.version.as_str())
    );
    assert!(good_s.latency.is_some_and(|l| l > Duration::ZERO));
    assert_eq!(closed_s.reason, CheckReason::ConnectFailed, "{closed_s:?}");
    assert_eq!(silent_s.reason, CheckReason::Timeout, "{silent_s:?}");
    assert_eq!(
        badkey_s.reason,
        CheckReason::HostKeyRejected,
        "{badkey_s:?}"
    );
    for s in [closed_s, silent_s, badkey_s] {
        assert!(
            !s.reachable && s.latency.is_none() && !s.message.is_empty(),
            "{s:?}"
        );
    }

    // Every connection the check opened is closed: the relays forward
    // nothing any more and the silent listener's peer hung up.
    assert!(good.drained().await, "good host's connection left open");
    assert!(badkey.drained().await, "badkey host's connection left open");
    assert!(silent.drained().await, "silent host's connection left open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_host_refuses_is_auth_failed() {
    let sandbox = Descriptor::require();
    let dir = tempfile::tempdir().unwrap();
    let stranger = new_key(dir.path(), "stranger");
    let config = providers(&sandbox).key_file(&stranger).kvm2();
    let table = HostTable::new(&config, &options(&sandbox, &sandbox.libvirt.qemu_uri)).unwrap();
    let status = only_status(table).await;
    assert_eq!(status.reason, CheckReason::AuthFailed, "{status:?}");
    assert!(!status.reachable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_fine_but_no_libvirt_socket_is_a_daemon_error() {
    let sandbox = Descriptor::require();
    let mut opts = options(&sandbox, &sandbox.libvirt.qemu_uri);
    opts.remote_socket = "/nonexistent/kvm2-itb/libvirt-sock".into();
    let table = HostTable::new(&sandbox_config(&sandbox), &opts).unwrap();
    let status = only_status(table).await;
    assert_eq!(status.reason, CheckReason::DaemonError, "{status:?}");
}

/// The checker's verdict on `table`'s one host (15 s deadline).
async fn only_status(table: HostTable) -> TargetStatus {
    let statuses = HostChecker::new(Arc::new(table))
        .check(Duration::from_secs(15))
        .await;
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    statuses.into_iter().next().unwrap()
}

/// A host reached only through a bastion (`hosts[i].jump`): the sandbox's
/// host2 (its sshd in a network namespace) through an sshd of the test's
/// own on 127.0.0.1, the entry's key accepted by both and both host keys
/// in the entry's known_hosts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_behind_a_bastion_is_reached_through_it() {
    let _turn = crate::placement_sandbox::HOST2.lock().await;
    let sandbox = Descriptor::require();
    let bastion = testkit::sshd::OwnSshd::start("");
    let entry_key = testkit::sshd::public_key(&sandbox.ssh.key_path);
    let mut authorized = std::fs::read_to_string(&bastion.authorized_keys).unwrap();
    authorized.push_str(&format!("{entry_key}\n"));
    std::fs::write(&bastion.authorized_keys, authorized).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let known_hosts = dir.path().join("known_hosts");
    let text = std::fs::read_to_string(&sandbox.ssh.known_hosts_path).unwrap()
        + &std::fs::read_to_string(&bastion.known_hosts).unwrap();
    std::fs::write(&known_hosts, text).unwrap();

    let host2 = Host::hypervisor(&sandbox, &sandbox.hosts[1]).with_jump(
        "127.0.0.1",
        bastion.port,
        &bastion.user,
    );
    let config = providers(&sandbox)
        .hosts([host2])
        .known_hosts(&known_hosts)
        .kvm2();
    assert_eq!(config.hosts[0].jump.len(), 1);
    let table = HostTable::new(&config, &options(&sandbox, &sandbox.libvirt.qemu_uri)).unwrap();
    let checker = HostChecker::new(Arc::new(table));
    let statuses = checker.check(Duration::from_secs(15)).await;
    assert!(statuses[0].reachable, "{statuses:?}");
    assert!(statuses[0].version.is_some(), "{statuses:?}");

    // The bastion gone: the host is unreachable, and the reason says so.
    drop(bastion);
    let statuses = checker.check(Duration::from_secs(15)).await;
    assert_eq!(
        statuses[0].reason,
        CheckReason::ConnectFailed,
        "{statuses:?}"
    );
}
