//! One relay between a client and a server, for tests of links that fail:
//! it forwards, freezes (on command or after N bytes), or cuts.
//!
//! - **Frozen**: nothing more is read or sent in either direction, and both
//!   sockets stay open (no FIN, no RST), like a host that vanished: the
//!   senders' windows fill and their writes block. Bytes already read when
//!   the freeze came are held, never sent. A frozen TCP relay still notices
//!   the client closing or resetting its side ([`Relay::client_gone`])
//!   without reading its data.
//! - **Cut**: every forwarded connection is closed at once and later ones
//!   are refused (accepted and dropped).
//! - **Resumed** ([`Relay::resume`], after a freeze or a cut): new
//!   connections are forwarded again; every connection from before is
//!   closed (what a freeze held is never sent), like a link that comes
//!   back after its peers gave up on their old connections. Outages can
//!   be repeated on one relay, at one port.
//!
//! [`Relay::tcp`] listens on 127.0.0.1 and forwards each connection to a TCP
//! upstream; [`Relay::unix_pair`] forwards one socket pair's end to a unix
//! socket. Counters: connections accepted and active, bytes forwarded.
//! Dropping the relay aborts every task it started (closing its sockets).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UnixStream, tcp, unix};
use tokio::sync::{Notify, watch};
use tokio::task::{JoinHandle, JoinSet};

/// Socket buffer sizes for the relay's accepted sockets and
/// [`Relay::connect`]'s client socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Buffers {
    /// Kernel defaults.
    #[default]
    Default,
    /// 8 KiB each way (a sender's TCP send buffer fills first).
    Small,
}

/// How a relay behaves besides forwarding.
#[derive(Clone, Copy, Debug, Default)]
pub struct RelayOptions {
    /// Freeze by itself once this many bytes (both directions together)
    /// were forwarded; the chunk that crosses the limit is held.
    pub freeze_after: Option<u64>,
    /// Buffer sizes of the sockets the relay accepts.
    pub buffers: Buffers,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Forward,
    Frozen,
    Cut,
}

/// The mode, and how many times the relay was resumed: a connection
/// accepted in an earlier epoch is closed as if cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    mode: Mode,
    epoch: u64,
}

impl State {
    /// Whether a connection accepted in `epoch` must close now.
    fn cuts(&self, epoch: u64) -> bool {
        self.mode == Mode::Cut || self.epoch != epoch
    }
}

struct Shared {
    mode: watch::Sender<State>,
    freeze_after: Option<u64>,
    forwarded: AtomicU64,
    accepted: AtomicUsize,
    active: AtomicUsize,
    client_gone: Notify,
}

impl Shared {
    fn freeze(&self) {
        self.mode.send_if_modified(|s| {
            let forwarding = s.mode == Mode::Forward;
            if forwarding {
                s.mode = Mode::Frozen;
            }
            forwarding
        });
    }
}

/// A relay that forwards until frozen or cut; see the module docs.
pub struct Relay {
    port: Option<u16>,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        // Dropping the accept loop's JoinSet aborts every connection task.
        self.task.abort();
    }
}

impl Relay {
    fn shared(options: RelayOptions) -> Arc<Shared> {
        Arc::new(Shared {
            mode: watch::Sender::new(State {
                mode: Mode::Forward,
                epoch: 0,
            }),
            freeze_after: options.freeze_after,
            forwarded: AtomicU64::new(0),
            accepted: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            client_gone: Notify::new(),
        })
    }

    /// A relay on 127.0.0.1 forwarding every connection to `upstream`
    /// (`host:port`).
    pub async fn tcp(upstream: impl Into<String>) -> Relay {
        Self::tcp_with(upstream, RelayOptions::default()).await
    }

    /// [`tcp`](Self::tcp) with `options`.
    pub async fn tcp_with(upstream: impl Into<String>, options: RelayOptions) -> Relay {
        let upstream = upstream.into();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Self::shared(options);
        let s = shared.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                s.accepted.fetch_add(1, Ordering::SeqCst);
                let state = *s.mode.borrow();
                if state.mode == Mode::Cut {
                    continue; // dropped: the dial fails
                }
                if options.buffers == Buffers::Small {
                    let sock = socket2::SockRef::from(&client);
                    sock.set_recv_buffer_size(8 * 1024).unwrap();
                    sock.set_send_buffer_size(8 * 1024).unwrap();
                }
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                connections.spawn(forward(
                    (Reader::Tcp(cr), cw),
                    (Reader::Tcp(sr), sw),
                    s.clone(),
                    state.epoch,
                ));
            }
        });
        Relay {
            port: Some(port),
            shared,
            task,
        }
    }

    /// A relay between the returned socket (the client's end of a pair)
    /// and the unix socket at `socket`.
    pub async fn unix_pair(socket: &Path) -> (UnixStream, Relay) {
        let (client_end, relay_end) = UnixStream::pair().unwrap();
        let server = UnixStream::connect(socket).await.unwrap();
        let shared = Self::shared(RelayOptions::default());
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let (cr, cw) = relay_end.into_split();
        let (sr, sw) = server.into_split();
        let task = tokio::spawn(forward(
            (Reader::Unix(cr), cw),
            (Reader::Unix(sr), sw),
            shared.clone(),
            0,
        ));
        let relay = Relay {
            port: None,
            shared,
            task,
        };
        (client_end, relay)
    }

    /// The port a [`tcp`](Self::tcp) relay listens on (127.0.0.1).
    ///
    /// # Panics
    /// For a [`unix_pair`](Self::unix_pair) relay.
    pub fn port(&self) -> u16 {
        self.port.expect("a TCP relay")
    }

    /// Stops forwarding: nothing more is read or sent, sockets stay open.
    pub fn freeze(&self) {
        self.shared.freeze();
    }

    /// Whether the relay is frozen (by [`freeze`](Self::freeze) or by
    /// [`RelayOptions::freeze_after`]).
    pub fn is_frozen(&self) -> bool {
        self.shared.mode.borrow().mode == Mode::Frozen
    }

    /// Closes every forwarded connection and refuses new ones. Not async:
    /// callable from a tracing hook.
    pub fn cut(&self) {
        self.shared.mode.send_modify(|s| s.mode = Mode::Cut);
    }

    /// Forwards again after a freeze or a cut: connections accepted from
    /// now on are forwarded; every earlier one is closed (bytes a freeze
    /// held are never sent). A [`unix_pair`](Self::unix_pair) relay, whose
    /// one connection is from before, stays closed.
    pub fn resume(&self) {
        self.shared.mode.send_modify(|s| {
            s.mode = Mode::Forward;
            s.epoch += 1;
        });
    }

    /// Bytes forwarded so far, both directions together.
    pub fn forwarded(&self) -> u64 {
        self.shared.forwarded.load(Ordering::SeqCst)
    }

    /// Connections accepted so far (also those refused after a cut).
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections being forwarded (or held frozen) right now.
    pub fn active(&self) -> usize {
        self.shared.active.load(Ordering::SeqCst)
    }

    /// Waits (up to 10 s) until no connection is active; false when some
    /// still is.
    pub async fn drained(&self) -> bool {
        crate::wait::zero(&self.shared.active).await
    }

    /// Waits until a client closed or reset its side (also while frozen:
    /// the relay notices EOF or RST without reading data). Returns at once
    /// when that already happened since the last call.
    pub async fn client_gone(&self) {
        self.shared.client_gone.notified().await;
    }

    /// A client socket connected to this TCP relay, with `buffers`.
    pub async fn connect(&self, buffers: Buffers) -> TcpStream {
        let socket = TcpSocket::new_v4().unwrap();
        if buffers == Buffers::Small {
            socket.set_send_buffer_size(8 * 1024).unwrap();
            socket.set_recv_buffer_size(8 * 1024).unwrap();
        }
        socket
            .connect(([127, 0, 0, 1], self.port()).into())
            .await
            .unwrap()
    }
}

/// The read half of a relayed socket.
enum Reader {
    Tcp(tcp::OwnedReadHalf),
    Unix(unix::OwnedReadHalf),
}

impl Reader {
    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Reader::Tcp(r) => r.read(buf).await,
            Reader::Unix(r) => r.read(buf).await,
        }
    }

    /// Returns once the peer closed or reset its side, reading nothing (a
    /// unix peer's close is not watched: never returns).
    async fn closed(&mut self) {
        let Reader::Tcp(r) = self else {
            return std::future::pending().await;
        };
        let mut peek = [0u8; 1];
        loop {
            // A reset with unread data pending only shows in SO_ERROR.
            let reset = socket2::SockRef::from(r.as_ref())
                .take_error()
                .map_or(true, |e| e.is_some());
            let peeked = if reset {
                Ok(0)
            } else {
                tokio::select! {
                    r = r.peek(&mut peek) => r,
                    () = tokio::time::sleep(Duration::from_millis(5)) => Ok(1),
                }
            };
            match peeked {
                Ok(0) | Err(_) => return,
                Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }
}

/// Forwards one connection, accepted in `epoch`, both ways until both
/// directions end, a cut or a resume.
async fn forward<W1, W2>(
    client: (Reader, W1),
    server: (Reader, W2),
    shared: Arc<Shared>,
    epoch: u64,
) where
    W1: AsyncWrite + Unpin,
    W2: AsyncWrite + Unpin,
{
    shared.active.fetch_add(1, Ordering::SeqCst);
    let (cr, cw) = client;
    let (sr, sw) = server;
    tokio::join!(
        pump(cr, sw, &shared, true, epoch),
        pump(sr, cw, &shared, false, epoch)
    );
    shared.active.fetch_sub(1, Ordering::SeqCst);
}

/// Copies `from` to `to` while forwarding; frozen, holds both open and
/// reads nothing; cut (or resumed: a later epoch), returns (dropping, so
/// closing, both halves).
async fn pump(
    mut from: Reader,
    mut to: impl AsyncWrite + Unpin,
    shared: &Shared,
    client: bool,
    epoch: u64,
) {
    let gone = || {
        if client {
            shared.client_gone.notify_one();
        }
    };
    let mut mode = shared.mode.subscribe();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let current = *mode.borrow_and_update();
        if current.cuts(epoch) {
            return;
        }
        if current.mode == Mode::Frozen {
            tokio::select! {
                () = from.closed() => gone(),
                _ = mode.wait_for(|s| s.cuts(epoch)) => return,
            }
            // Keep the sockets open (no FIN, no RST) until cut.
            let _ = mode.wait_for(|s| s.cuts(epoch)).await;
            return;
        }
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => {
                    gone();
                    return;
                }
                Ok(n) => n,
            },
            // Frozen or cut while waiting: stop reading at once.
            _ = mode.changed() => continue,
        };
        if let Some(limit) = shared.freeze_after
            && shared.forwarded.load(Ordering::SeqCst) + n as u64 > limit
        {
            shared.freeze();
        }
        if *mode.borrow() != current {
            continue; // the chunk read is held, never sent
        }
        tokio::select! {
            r = to.write_all(&buf[..n]) => if r.is_err() { return },
            _ = mode.wait_for(|s| s.cuts(epoch)) => return,
        }
        shared.forwarded.fetch_add(n as u64, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server; returns its address.
    async fn echo() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn round_trip(s: &mut TcpStream, data: &[u8]) -> Result<Vec<u8>, &'static str> {
        s.write_all(data).await.unwrap();
        let mut back = vec![0u8; data.len()];
        match tokio::time::timeout(Duration::from_millis(300), s.read_exact(&mut back)).await {
            Ok(Ok(_)) => Ok(back),
            Ok(Err(_)) => Err("closed"),
            Err(_) => Err("silent"),
        }
    }

    #[tokio::test]
    async fn forwards_and_counts() {
        let relay = Relay::tcp(echo().await).await;
        let mut s = relay.connect(Buffers::Default).await;
        assert_eq!(round_trip(&mut s, b"hello").await.unwrap(), b"hello");
        assert_eq!(relay.forwarded(), 10);
        assert_eq!((relay.accepted(), relay.active()), (1, 1));
        drop(s);
        assert!(relay.drained().await);
    }

    #[tokio::test]
    async fn frozen_reads_nothing_keeps_the_socket_open_and_sees_the_client_go() {
        let relay = Relay::tcp(echo().await).await;
        let mut s = relay.connect(Buffers::Small).await;
        assert!(round_trip(&mut s, b"x").await.is_ok());
        relay.freeze();
        assert!(relay.is_frozen());
        assert_eq!(round_trip(&mut s, b"y").await, Err("silent"));
        // Nothing read: the client's writes stall once the buffers fill.
        let chunk = vec![0u8; 64 * 1024];
        let stalled = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                s.write_all(&chunk).await.unwrap();
            }
        })
        .await;
        assert!(stalled.is_err(), "the writes never stalled");
        assert_eq!(relay.forwarded(), 2);
        // A reset (the relay holds unread data, so only SO_ERROR shows it).
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(s);
        tokio::time::timeout(Duration::from_secs(2), relay.client_gone())
            .await
            .expect("the client's close was not noticed while frozen");
        assert_eq!(relay.active(), 1, "frozen: the relay holds its sockets");
    }

    #[tokio::test]
    async fn freezes_by_itself_after_the_limit() {
        let options = RelayOptions {
            freeze_after: Some(4),
            ..RelayOptions::default()
        };
        let relay = Relay::tcp_with(echo().await, options).await;
        let mut s = relay.connect(Buffers::Default).await;
        assert!(round_trip(&mut s, b"ab").await.is_ok());
        assert!(!relay.is_frozen());
        assert_eq!(round_trip(&mut s, b"cd").await, Err("silent"));
        assert!(relay.is_frozen());
        assert_eq!(relay.forwarded(), 4, "the crossing chunk is held");
    }

    #[tokio::test]
    async fn cut_closes_every_connection_and_refuses_new_ones() {
        let relay = Relay::tcp(echo().await).await;
        let mut s = relay.connect(Buffers::Default).await;
        assert!(round_trip(&mut s, b"x").await.is_ok());
        relay.freeze();
        relay.cut();
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await;
        assert!(matches!(read, Ok(Ok(0) | Err(_))), "{read:?}");
        assert!(relay.drained().await);
        let mut again = relay.connect(Buffers::Default).await;
        assert_eq!(round_trip(&mut again, b"z").await, Err("closed"));
        assert_eq!(relay.accepted(), 2);
    }

    #[tokio::test]
    async fn resume_forwards_new_connections_and_closes_the_old_ones() {
        let relay = Relay::tcp(echo().await).await;
        let mut held = relay.connect(Buffers::Default).await;
        assert!(round_trip(&mut held, b"x").await.is_ok());
        relay.freeze();
        assert_eq!(round_trip(&mut held, b"y").await, Err("silent"));
        relay.resume();
        assert!(!relay.is_frozen());
        // The held connection is closed; what it held is never sent.
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(2), held.read(&mut buf)).await;
        assert!(matches!(read, Ok(Ok(0) | Err(_))), "{read:?}");
        let mut fresh = relay.connect(Buffers::Default).await;
        assert_eq!(round_trip(&mut fresh, b"z").await.unwrap(), b"z");
        // Again after a cut, on the same port.
        relay.cut();
        assert_eq!(round_trip(&mut fresh, b"c").await, Err("closed"));
        relay.resume();
        let mut again = relay.connect(Buffers::Default).await;
        assert_eq!(round_trip(&mut again, b"w").await.unwrap(), b"w");
        assert_eq!(relay.forwarded(), 6);
    }

    #[tokio::test]
    async fn unix_pair_forwards_freezes_and_cuts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("echo.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let (mut s, relay) = Relay::unix_pair(&path).await;
        let mut back = [0u8; 2];
        s.write_all(b"hi").await.unwrap();
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"hi");
        relay.freeze();
        s.write_all(b"yo").await.unwrap();
        let silent = tokio::time::timeout(Duration::from_millis(300), s.read(&mut back)).await;
        assert!(silent.is_err(), "frozen, yet answered: {silent:?}");
        relay.cut();
        let read = tokio::time::timeout(Duration::from_secs(2), s.read(&mut back)).await;
        assert!(matches!(read, Ok(Ok(0) | Err(_))), "{read:?}");
    }
}
