//! [`Reconnecting`] against the sandbox daemon, its link through a relay
//! the test cuts: a call after the cut waits for the redial and succeeds,
//! the subscription says `Gap` and then delivers the new link's events,
//! calls in flight when the link died fail as on a plain client, and
//! `close` ends everything.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support;
use libvirt_rpc::*;
use testkit::Descriptor;
use testkit::names::unique;
use testkit::relay::Relay;

/// A test's dials to the sandbox daemon's test driver, each through a
/// relay of its own the test can cut.
#[derive(Default)]
struct Dials {
    /// One relay per link made, oldest first.
    relays: Arc<Mutex<Vec<Relay>>>,
    /// While set, a dial fails as a missing socket does.
    down: Arc<AtomicBool>,
    /// Dials attempted.
    attempts: Arc<AtomicUsize>,
}

type Dialled = Pin<Box<dyn Future<Output = Result<Client>> + Send>>;

impl Dials {
    /// The dial for [`Reconnecting::connect`]: calls on its links time out
    /// after `call_timeout`.
    fn dial(
        &self,
        d: &Descriptor,
        call_timeout: Duration,
    ) -> impl Fn() -> Dialled + Send + Sync + 'static {
        let (relays, down, attempts) = (
            self.relays.clone(),
            self.down.clone(),
            self.attempts.clone(),
        );
        let (socket, uri) = (d.libvirt.socket.clone(), d.libvirt.test_uri.clone());
        move || {
            let (relays, socket, uri) = (relays.clone(), socket.clone(), uri.clone());
            let (down, attempts) = (down.clone(), attempts.clone());
            Box::pin(async move {
                attempts.fetch_add(1, Ordering::SeqCst);
                if down.load(Ordering::SeqCst) {
                    return Client::connect_unix(
                        "/nonexistent/libvirt-sock",
                        &uri,
                        OpenFlags::empty(),
                        Config::default(),
                    )
                    .await;
                }
                let (io, relay) = Relay::unix_pair(&socket).await;
                relays.lock().unwrap().push(relay);
                let config = Config::default().call_timeout(call_timeout);
                Client::connect(io, &uri, OpenFlags::empty(), config).await
            })
        }
    }
}

/// The next event about domain `name` (skipping others), within 10 s.
async fn next_about(sub: &mut Resubscribed, name: &str) -> Resumed<Event> {
    loop {
        let got = tokio::time::timeout(Duration::from_secs(10), sub.recv())
            .await
            .expect("an item within 10 s")
            .expect("the subscription open");
        match &got {
            Resumed::Event(Event::Lifecycle(ev)) if ev.dom.name != name => continue,
            _ => return got,
        }
    }
}

fn defined(name: &str, got: &Resumed<Event>) -> bool {
    matches!(got, Resumed::Event(Event::Lifecycle(ev))
        if ev.dom.name == name && ev.event == LifecycleEventKind::Defined)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnecting_client_redials_and_resubscribes_after_its_link_dies() {
    let d = Descriptor::require();
    let dials = Dials::default();
    let (dial, relays) = (
        dials.dial(&d, Duration::from_secs(10)),
        dials.relays.clone(),
    );
    let policy = ReconnectPolicy {
        initial: Duration::from_millis(50),
        max: Duration::from_secs(1),
    };
    let rc = Reconnecting::connect(dial, policy).await.unwrap();
    let mut sub = rc
        .subscribe(EventTarget::all(DomainEventId::Lifecycle))
        .await
        .unwrap();
    let other = support::test_driver().await;
    let (first, second) = (unique("lvrpc-rc-a"), unique("lvrpc-rc-b"));
    let flags = DomainDefineFlags::empty();
    let a = other
        .domain_define_xml_flags(&support::domain_xml(&first), flags)
        .await
        .unwrap();
    let got = next_about(&mut sub, &first).await;
    assert!(defined(&first, &got), "{got:?}");

    // The link dies. A call made from now on waits for the next link.
    let before = rc.client().await.unwrap();
    let cut = Instant::now();
    relays.lock().unwrap().last().unwrap().cut();
    let died = tokio::time::timeout(Duration::from_secs(5), before.closed()).await;
    assert!(died.is_ok(), "the old link did not die");
    assert!(
        before
            .connect_get_lib_version()
            .await
            .unwrap_err()
            .is_disconnected(),
        "a call on the dead link"
    );
    let version = rc
        .client()
        .await
        .unwrap()
        .connect_get_lib_version()
        .await
        .unwrap();
    let first_call = cut.elapsed();
    assert!(version > 0);
    assert_eq!(rc.generation(), 1);
    assert_eq!(relays.lock().unwrap().len(), 2, "one redial");

    // The subscription reports the gap, then the new link's events.
    let got = next_about(&mut sub, &second).await;
    assert_eq!(got, Resumed::Gap { generation: 1 });
    let b = other
        .domain_define_xml_flags(&support::domain_xml(&second), flags)
        .await
        .unwrap();
    let got = next_about(&mut sub, &second).await;
    let first_event = cut.elapsed();
    assert!(defined(&second, &got), "{got:?}");
    println!("reconnect: first call after {first_call:?}, first event after {first_event:?}");

    // Closed for good: the subscription ends, calls fail, no more dials.
    rc.close().await;
    let end = tokio::time::timeout(Duration::from_secs(2), sub.recv()).await;
    assert!(matches!(end, Ok(None)), "{end:?}");
    assert!(rc.client().await.unwrap_err().is_disconnected());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(relays.lock().unwrap().len(), 2, "dialled after close");

    for dom in [a, b] {
        other
            .domain_undefine_flags(&dom, DomainUndefineFlags::empty())
            .await
            .unwrap();
    }
}

/// While the daemon cannot be reached, dials back off (doubling, capped)
/// and a call fails after the call timeout with the link's last reason;
/// once it can, the next call succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_daemon_is_unreachable_calls_fail_after_their_timeout_and_dials_back_off() {
    let d = Descriptor::require();
    let dials = Dials::default();
    let dial = dials.dial(&d, Duration::from_secs(1));
    let (relays, down, attempts) = (
        dials.relays.clone(),
        dials.down.clone(),
        dials.attempts.clone(),
    );
    let policy = ReconnectPolicy {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(400),
    };
    let rc = Reconnecting::connect(dial, policy).await.unwrap();
    down.store(true, Ordering::SeqCst);
    let before = rc.client().await.unwrap();
    relays.lock().unwrap().last().unwrap().cut();
    let died = tokio::time::timeout(Duration::from_secs(5), before.closed()).await;
    assert!(died.is_ok(), "the old link did not die");
    let asked = Instant::now();
    let e = rc.client().await.unwrap_err();
    let waited = asked.elapsed();
    assert!(e.is_disconnected(), "{e:?}");
    assert!(
        waited >= Duration::from_millis(900),
        "gave up after {waited:?}"
    );
    assert!(!rc.is_connected());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // 50, 100, 200, 400, 400, ... ms apart: about 7 in 2.5 s, not hundreds.
    let n = attempts.load(Ordering::SeqCst);
    assert!((4..=12).contains(&n), "{n} dials");
    down.store(false, Ordering::SeqCst);
    let c = rc.client().await.unwrap();
    c.connect_get_lib_version().await.unwrap();
    assert_eq!(rc.generation(), 1);
    rc.close().await;
}
