//! Teardown never blocks: a writer stalled behind a peer that vanished
//! without RST (through a relay that freezes on command), in both stall
//! flavours — a full TCP send buffer (small socket buffers) and an
//! exhausted SSH window (default buffers) — wakes with an error within
//! 100 ms of `close()`/drop, and without any close the keepalive declares
//! the link dead within its documented bound. Each case runs 20 times.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::{UnixServer, fast_keepalive, sandbox_config};
use ssh_socket::{Closer, Error, SshSocket};
use testkit::relay::{Buffers, Relay, RelayOptions};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

const REPS: usize = 20;
/// The bound.
const BOUND: Duration = Duration::from_millis(100);
/// What every single repetition must meet even on a loaded CI box; the
/// median must meet [`BOUND`].
const HARD_BOUND: Duration = Duration::from_millis(500);
/// The documented end of every task of the connection after a close
/// (500 ms), plus slack for a loaded CI box.
const TEARDOWN_BOUND: Duration = Duration::from_millis(1000);

#[derive(Clone, Copy, Debug)]
enum Action {
    Close,
    Drop,
    /// No close: wait for the keepalive to declare the link dead.
    Nothing,
}

struct Outcome {
    /// How long `close()` or `drop` took to return.
    returned_in: Duration,
    /// From the action (or the freeze, for `Nothing`) to the writer's error.
    writer_woke_in: Duration,
    /// The same for a reader blocked in `read` (not measured for drop).
    reader_woke_in: Option<Duration>,
    /// From the action to the end of the teardown (session task gone).
    torn_down_in: Duration,
    error: String,
}

/// Starts a writer through a freezing relay, freezes the relay once data
/// flows, waits until the writer is stuck, then applies `action`.
async fn stalled_writer_case(buffers: Buffers, action: Action) -> Outcome {
    let d = testkit::Descriptor::require();
    let sink = UnixServer::sink();
    let relay = Relay::tcp_with(
        format!("127.0.0.1:{}", d.ssh.port),
        RelayOptions {
            buffers,
            ..RelayOptions::default()
        },
    )
    .await;
    let tcp = relay.connect(buffers).await;
    let mut config = sandbox_config(&sink.path);
    if matches!(action, Action::Nothing) {
        config = config.with_keepalive(fast_keepalive());
    }
    let socket = ssh_socket::dial_over(&config, tcp).await.expect("dial");
    let closer = socket.closer();
    // For close and keepalive, a reader blocked in `read` (the sink never
    // answers) must wake too; for drop, the writer owns the whole socket.
    let (reader, mut socket): (
        Option<JoinHandle<Instant>>,
        Box<dyn AsyncWrite + Unpin + Send>,
    ) = if matches!(action, Action::Drop) {
        (None, Box::new(socket))
    } else {
        let (mut r, w) = tokio::io::split(socket);
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            match r.read(&mut buf).await {
                Ok(n) => panic!("read returned {n} instead of an error"),
                Err(e) => {
                    assert!(SshSocket::error_of(&e).is_some(), "foreign error {e}");
                    Instant::now()
                }
            }
        });
        (Some(reader), Box::new(w))
    };

    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(Notify::new());
    let (done_tx, done_rx) = oneshot::channel::<(Instant, Option<Duration>, String)>();
    let w = written.clone();
    let s = stop.clone();
    let writer = tokio::spawn(async move {
        let buf = vec![0x5au8; 64 * 1024];
        loop {
            tokio::select! {
                r = socket.write_all(&buf) => match r {
                    Ok(()) => { w.fetch_add(buf.len() as u64, Ordering::Relaxed); }
                    Err(e) => {
                        let at = Instant::now();
                        let what = match SshSocket::error_of(&e) {
                            Some(inner) => format!("{:?}: {inner}", e.kind()),
                            None => format!("foreign error {e}"),
                        };
                        let _ = done_tx.send((at, None, what));
                        return;
                    }
                },
                () = s.notified() => {
                    let t = Instant::now();
                    drop(socket);
                    let dropped_in = t.elapsed();
                    let _ = done_tx.send((Instant::now(), Some(dropped_in), "dropped".into()));
                    return;
                }
            }
        }
    });

    // Let data flow, then freeze and wait until the writer is stuck.
    let t = Instant::now();
    let flowing = match buffers {
        Buffers::Small => 128 * 1024,
        Buffers::Default => 1024 * 1024,
    };
    while written.load(Ordering::Relaxed) < flowing {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no data flowed: {} bytes, {:?}",
            written.load(Ordering::Relaxed),
            closer.close_reason()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    relay.freeze();
    let mut last = written.load(Ordering::Relaxed);
    let mut still_since = Instant::now();
    let frozen_at = Instant::now();
    while still_since.elapsed() < Duration::from_millis(300) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = written.load(Ordering::Relaxed);
        if now != last {
            last = now;
            still_since = Instant::now();
        }
        assert!(
            frozen_at.elapsed() < Duration::from_secs(20),
            "writer never stalled"
        );
    }
    assert!(!closer.is_closed(), "link died before the action");

    let start = Instant::now();
    let returned_in = match action {
        Action::Close => {
            closer.close();
            start.elapsed()
        }
        Action::Drop => {
            stop.notify_one();
            Duration::ZERO // measured inside the task
        }
        Action::Nothing => Duration::ZERO,
    };
    let wait = match action {
        Action::Nothing => config.keepalive.dead_after() + Duration::from_secs(3),
        _ => Duration::from_secs(5),
    };
    let (woke_at, dropped_in, error) = tokio::time::timeout(wait, done_rx)
        .await
        .unwrap_or_else(|_| panic!("{action:?}: the stalled writer never woke"))
        .unwrap();
    let origin = if matches!(action, Action::Nothing) {
        frozen_at
    } else {
        start
    };
    let writer_woke_in = woke_at.saturating_duration_since(origin);
    let reader_woke_in = match reader {
        Some(reader) => {
            let at = tokio::time::timeout(wait, reader)
                .await
                .unwrap_or_else(|_| panic!("{action:?}: the blocked reader never woke"))
                .unwrap();
            Some(at.saturating_duration_since(origin))
        }
        None => None,
    };
    tokio::time::timeout(Duration::from_secs(2), closer.torn_down())
        .await
        .unwrap_or_else(|_| panic!("{action:?}: teardown did not finish"));
    let torn_down_in = start.elapsed();
    // The TCP connection itself is gone (reset or closed), not left to
    // the kernel's retransmits.
    tokio::time::timeout(Duration::from_secs(2), relay.client_gone())
        .await
        .unwrap_or_else(|_| panic!("{action:?}: the TCP connection was left open"));
    writer.await.unwrap();
    Outcome {
        returned_in: dropped_in.unwrap_or(returned_in),
        writer_woke_in,
        reader_woke_in,
        torn_down_in,
        error,
    }
}

fn check(name: &str, outcomes: &[Outcome], bound: Duration, hard: Duration) {
    let mut woke: Vec<_> = outcomes.iter().map(|o| o.writer_woke_in).collect();
    woke.sort();
    let mut returned: Vec<_> = outcomes.iter().map(|o| o.returned_in).collect();
    returned.sort();
    let torn = outcomes.iter().map(|o| o.torn_down_in).max().unwrap();
    let mut reader: Vec<_> = outcomes.iter().filter_map(|o| o.reader_woke_in).collect();
    reader.sort();
    if let (Some(median), Some(max)) = (reader.get(reader.len() / 2), reader.last()) {
        println!("{name}: reader woke median {median:?} max {max:?}");
        assert!(*median < bound, "{name}: median reader wake {reader:?}");
        assert!(*max < hard, "{name}: reader woke in {max:?}");
    }
    println!(
        "{name}: returned median {:?} max {:?}; writer woke median {:?} max {:?}; \
         torn down max {:?}; error: {}",
        returned[returned.len() / 2],
        returned[returned.len() - 1],
        woke[woke.len() / 2],
        woke[woke.len() - 1],
        torn,
        outcomes[0].error,
    );
    for o in outcomes {
        assert!(
            o.returned_in < HARD_BOUND,
            "{name}: returned in {:?}",
            o.returned_in
        );
        assert!(
            o.writer_woke_in < hard,
            "{name}: writer woke in {:?}",
            o.writer_woke_in
        );
    }
    assert!(
        returned[returned.len() / 2] < BOUND,
        "{name}: median return"
    );
    assert!(
        woke[woke.len() / 2] < bound,
        "{name}: median wake {:?}",
        woke
    );
}

async fn run(name: &str, buffers: Buffers, action: Action) {
    let mut results = Vec::new();
    match action {
        // Timing-sensitive: one at a time.
        Action::Close | Action::Drop => {
            for _ in 0..REPS {
                results.push(stalled_writer_case(buffers, action).await);
            }
        }
        // Each waits seconds for the keepalive: five at a time.
        Action::Nothing => {
            for _ in 0..REPS / 5 {
                let mut batch = tokio::task::JoinSet::new();
                for _ in 0..5 {
                    batch.spawn(stalled_writer_case(buffers, action));
                }
                results.extend(batch.join_all().await);
            }
        }
    }
    let mut outcomes = Vec::new();
    for o in results {
        match action {
            Action::Close | Action::Drop => {
                assert!(
                    o.error.contains("closed locally") || o.error == "dropped",
                    "{}",
                    o.error
                )
            }
            Action::Nothing => assert!(
                o.error.contains("declared dead") || o.error.contains("session ended"),
                "{}",
                o.error
            ),
        }
        outcomes.push(o);
    }
    match action {
        Action::Nothing => {
            let dead_after = fast_keepalive().dead_after();
            // Silence counts from the last byte received, which is at or
            // before the freeze: the bound is dead_after plus slack.
            check(
                name,
                &outcomes,
                dead_after + Duration::from_millis(500),
                dead_after + Duration::from_secs(2),
            );
        }
        _ => {
            check(name, &outcomes, BOUND, HARD_BOUND);
            // No task outlives the documented teardown: a polite disconnect
            // of at most 250 ms plus at most 250 ms for the server's FIN
            // (else a reset), with CI slack on top.
            for o in &outcomes {
                assert!(
                    o.torn_down_in < TEARDOWN_BOUND,
                    "{name}: torn down in {:?}",
                    o.torn_down_in
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_wakes_writer_stalled_on_full_tcp_send_buffer() {
    run("close/tcp-stall", Buffers::Small, Action::Close).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_wakes_writer_stalled_on_exhausted_ssh_window() {
    run("close/window-stall", Buffers::Default, Action::Close).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_tears_down_a_link_stalled_on_full_tcp_send_buffer() {
    run("drop/tcp-stall", Buffers::Small, Action::Drop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_tears_down_a_link_stalled_on_exhausted_ssh_window() {
    run("drop/window-stall", Buffers::Default, Action::Drop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_declares_tcp_stalled_link_dead() {
    run("keepalive/tcp-stall", Buffers::Small, Action::Nothing).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_declares_window_stalled_link_dead() {
    run("keepalive/window-stall", Buffers::Default, Action::Nothing).await;
}

#[allow(dead_code)]
fn _assert_types(_: &Closer, _: &Error) {}

/// A reader that never reads lets incoming data pile up until russh's
/// session task blocks (it cannot process keepalives or its own timers
/// then). The supervisor's watchdog, which counts bytes actually received
/// on the TCP connection, still ends the link within the keepalive bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_ends_a_session_wedged_by_a_reader_that_never_reads() {
    let server = UnixServer::echo();
    let config = sandbox_config(&server.path).with_keepalive(fast_keepalive());
    let mut socket = ssh_socket::dial(&config).await.unwrap();
    let closer = socket.closer();
    let writer = tokio::spawn(async move {
        let buf = vec![0x11u8; 64 * 1024];
        while socket.write_all(&buf).await.is_ok() {}
    });
    let reason = tokio::time::timeout(
        config.keepalive.dead_after() + Duration::from_secs(20),
        closer.closed(),
    )
    .await
    .expect("the wedged link was never declared dead");
    assert!(matches!(reason, Error::PeerSilent { .. }), "{reason:?}");
    tokio::time::timeout(Duration::from_secs(1), writer)
        .await
        .expect("writer woke")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(2), closer.torn_down())
        .await
        .expect("teardown");
}

/// The other side of the keepalive bound: a healthy link that carries no
/// data for several times `dead_after` is kept alive by the keepalive
/// answers and is *not* declared dead (no false positive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_link_is_kept_alive_by_keepalive_answers() {
    let server = UnixServer::echo();
    // Generous tolerance (a reply may take 1.5 s) for a loaded CI box.
    let keepalive = ssh_socket::Keepalive::new(Duration::from_millis(300), 5);
    let config = sandbox_config(&server.path).with_keepalive(keepalive);
    let mut socket = ssh_socket::dial(&config).await.unwrap();
    let closer = socket.closer();
    // Longer than `dead_after`: eight keepalive rounds with no data.
    let idle = keepalive.dead_after() + Duration::from_millis(600);
    let ended = tokio::time::timeout(idle, closer.closed()).await;
    assert!(ended.is_err(), "idle link declared dead: {ended:?}");
    socket.write_all(b"still here").await.unwrap();
    let mut buf = [0u8; 10];
    tokio::time::timeout(Duration::from_secs(5), socket.read_exact(&mut buf))
        .await
        .expect("echo after idling")
        .unwrap();
    assert_eq!(&buf, b"still here");
}
