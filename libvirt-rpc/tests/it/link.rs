//! Multiplexing, deadlines, cancellation and link death against the
//! sandbox daemon (through a relay for the frozen and cut links).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::time::{Duration, Instant};
use testkit::Descriptor;
use testkit::names::unique;
use testkit::tasks::alive_tasks;

use libvirt_rpc::{Client, Config, DisconnectReason, Error, ErrorCode, OpenFlags};
use testkit::relay::Relay;

async fn via_relay(config: Config) -> (Client, Relay) {
    let d = Descriptor::require();
    let (io, relay) = Relay::unix_pair(&d.libvirt.socket).await;
    let c = Client::connect(io, &d.libvirt.test_uri, OpenFlags::empty(), config)
        .await
        .unwrap();
    (c, relay)
}

/// Each lookup of a missing pool fails with a message naming it: a
/// mismatched reply would name another pool.
async fn lookup_answers_itself(c: &Client, name: &str) {
    let e = c.storage_pool_lookup_by_name(name).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NoStoragePool), "{e:?}");
    assert!(e.to_string().contains(name), "{name}: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_calls_get_their_own_answers() {
    let c = support::test_driver().await;
    let prefix = unique("lvrpc-missing");
    let calls: Vec<_> = (0..1000)
        .map(|i| {
            let c = c.clone();
            let name = format!("{prefix}-{i}");
            tokio::spawn(async move { lookup_answers_itself(&c, &name).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
    c.close().await;
}

/// A frozen (SIGSTOPped) daemon of the test's own holds the calls; their
/// deadlines pass; once thawed it answers them late, and those late replies
/// must never reach later calls.
#[tokio::test]
async fn call_deadline_abandons_only_that_call() {
    let d = testkit::libvirtd::PrivateLibvirtd::start();
    let c = support::connect(&d, "test:///default", Config::default()).await;
    let hasty = c.with_call_timeout(Duration::from_millis(100));
    let prefix = unique("lvrpc-late");
    d.signal("-STOP");
    let calls: Vec<_> = (0..20)
        .map(|i| {
            let hasty = hasty.clone();
            let name = format!("{prefix}-{i}");
            tokio::spawn(async move { hasty.storage_pool_lookup_by_name(&name).await })
        })
        .collect();
    for call in calls {
        let r = call.await.unwrap();
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    }
    d.signal("-CONT");
    for i in 0..50 {
        lookup_answers_itself(&c, &format!("{prefix}-after-{i}")).await;
    }
    assert!(!c.is_closed());
    c.close().await;
}

#[tokio::test]
async fn dropped_call_future_keeps_the_link() {
    let c = support::test_driver().await;
    let prefix = unique("lvrpc-dropped");
    for i in 0..20 {
        let name = format!("{prefix}-{i}");
        let fut = c.domain_lookup_by_name(&name);
        // Poll once, then drop mid-flight.
        let _ = tokio::time::timeout(Duration::from_micros(1), fut).await;
    }
    for i in 0..20 {
        lookup_answers_itself(&c, &format!("{prefix}-x-{i}")).await;
    }
    c.close().await;
}

#[tokio::test]
async fn frozen_link_is_declared_dead_by_keepalive_and_pending_calls_fail() {
    // A realistic interval: the required bound is interval × count + 1 s.
    let interval = Duration::from_secs(1);
    let count = 3;
    let (c, relay) = via_relay(Config::default().keepalive(interval, count)).await;
    c.connect_get_lib_version().await.unwrap();
    relay.freeze();
    let t0 = Instant::now();
    let pending = {
        let c = c.clone();
        tokio::spawn(async move { c.connect_get_lib_version().await })
    };
    let reason = tokio::time::timeout(Duration::from_secs(10), c.closed())
        .await
        .expect("link declared dead");
    let took = t0.elapsed();
    assert!(
        matches!(reason, DisconnectReason::KeepaliveTimeout { .. }),
        "{reason:?}"
    );
    let bound = interval * count + Duration::from_secs(1);
    assert!(took <= bound, "dead after {took:?}, bound {bound:?}");
    // Not before the PINGs had their chance: the last packet arrived just
    // before the freeze, and timers never fire early.
    let floor = interval * count - Duration::from_millis(500);
    assert!(took >= floor, "dead after {took:?}, before {floor:?}");
    let r = tokio::time::timeout(Duration::from_secs(1), pending)
        .await
        .expect("pending call ended")
        .unwrap();
    assert!(
        matches!(
            r,
            Err(Error::Disconnected(
                DisconnectReason::KeepaliveTimeout { .. }
            ))
        ),
        "{r:?}"
    );
    // Later calls fail at once too.
    assert!(
        c.connect_get_lib_version()
            .await
            .unwrap_err()
            .is_disconnected()
    );
}

#[tokio::test]
async fn close_fails_pending_calls_promptly() {
    let (c, relay) = via_relay(Config::default()).await;
    relay.freeze();
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.connect_get_lib_version().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    c.close().await;
    for call in calls {
        let r = tokio::time::timeout(Duration::from_secs(1), call)
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(r, Err(Error::Disconnected(DisconnectReason::Closed))),
            "{r:?}"
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn cut_link_fails_pending_calls_with_eof() {
    let (c, relay) = via_relay(Config::default()).await;
    relay.freeze();
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.connect_get_lib_version().await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    relay.cut();
    let r = tokio::time::timeout(Duration::from_secs(1), call)
        .await
        .unwrap()
        .unwrap();
    assert!(r.unwrap_err().is_disconnected());
    let reason = tokio::time::timeout(Duration::from_secs(1), c.closed())
        .await
        .unwrap();
    assert!(
        matches!(reason, DisconnectReason::Eof | DisconnectReason::Io(_)),
        "{reason:?}"
    );
}

#[tokio::test]
async fn dropping_every_handle_ends_the_connection_task() {
    let before = alive_tasks();
    let c = support::test_driver().await;
    assert_eq!(alive_tasks(), before + 1);
    drop(c);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(alive_tasks(), before);
}
