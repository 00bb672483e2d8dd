//! The TCP side: connecting, a kill switch that works however stuck russh
//! is, a stream that acknowledges at once ([`QuickAck`]), and a stream
//! wrapper that records when bytes last arrived.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::error::Error;

/// Resolves `host:port` and connects to the first address that answers.
pub(crate) async fn connect(host: &str, port: u16) -> Result<TcpStream, Error> {
    let addrs: Vec<_> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|source| Error::Resolve {
            host: host.to_owned(),
            port,
            source,
        })?
        .collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no addresses");
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                // Interactive RPC traffic: do not let Nagle delay requests.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = e,
        }
    }
    Err(Error::TcpConnect {
        host: host.to_owned(),
        port,
        source: last,
    })
}

/// A duplicate of the connection's socket that can end it from outside,
/// whatever russh's session task is blocked on: `shutdown(2)` wakes a
/// reader and a writer stuck on the socket at once.
///
/// Dropping a switch that was neither [`kill`](Self::kill)ed nor
/// [`release`](Self::release)d kills the connection.
#[derive(Debug)]
pub(crate) struct KillSwitch {
    socket: Option<socket2::Socket>,
}

impl KillSwitch {
    pub(crate) fn new(stream: &TcpStream) -> io::Result<Self> {
        let socket = socket2::SockRef::from(stream).try_clone()?;
        Ok(Self {
            socket: Some(socket),
        })
    }

    /// Resets the connection: unsent data is discarded (SO_LINGER 0, so no
    /// kernel retransmits to a vanished peer), both directions are shut.
    pub(crate) fn kill(&mut self) {
        if let Some(socket) = self.socket.take() {
            let _ = socket.set_linger(Some(Duration::ZERO));
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }

    /// After a polite disconnect ended the session: sends FIN and waits up
    /// to `budget` for the server's FIN, so the connection ends cleanly on
    /// both sides. If the server does not close in time (a vanished peer
    /// that never got the disconnect), the connection is reset instead, so
    /// the kernel does not retransmit to it for minutes.
    pub(crate) async fn close_gracefully(&mut self, budget: Duration) {
        let Some(socket) = self.socket.take() else {
            return;
        };
        let graceful = async {
            socket.set_nonblocking(true)?;
            let std_stream: std::net::TcpStream = socket.try_clone()?.into();
            let mut stream = TcpStream::from_std(std_stream)?;
            stream.shutdown().await?;
            let mut sink = [0u8; 4096];
            while stream.read(&mut sink).await? > 0 {}
            Ok::<(), io::Error>(())
        };
        let clean = matches!(tokio::time::timeout(budget, graceful).await, Ok(Ok(())));
        if !clean {
            self.socket = Some(socket);
            self.kill();
        }
    }
}

impl Drop for KillSwitch {
    fn drop(&mut self) {
        self.kill();
    }
}

/// When bytes last arrived from the server.
#[derive(Debug)]
pub(crate) struct LastReceive {
    origin: Instant,
    millis: AtomicU64,
}

impl LastReceive {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            origin: Instant::now(),
            millis: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let now = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.millis.store(now, Ordering::Relaxed);
    }

    /// Time since bytes last arrived (or since creation).
    pub(crate) fn silence(&self) -> Duration {
        let last = Duration::from_millis(self.millis.load(Ordering::Relaxed));
        self.origin.elapsed().saturating_sub(last)
    }
}

/// The TCP connection, acknowledging every read at once.
///
/// Linux delays an ACK (by up to 40 ms) when it has nothing to send back.
/// sshd does not disable Nagle on a session without a terminal, so a small
/// packet it sends while an earlier one is unacknowledged — a window
/// adjustment, the credit an upload waits for — sits in its socket until
/// our delayed ACK arrives. Through a jump host every window of the
/// target's channel came back that way (the bastion relays the target's
/// adjustments as small packets): 0.40× OpenSSH's `ProxyJump` throughput,
/// the machine idle, before; 2.0× with the ACK sent at once (ssh-socket's
/// bench). `TCP_QUICKACK` is not sticky, so it is re-armed after every
/// read (one `setsockopt`, on Linux only); a build without it, alternated
/// with this one, spent more CPU per GiB, not less (the README's figures).
pub(crate) struct QuickAck(TcpStream);

impl QuickAck {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Self(stream)
    }

    fn rearm(&self) {
        #[cfg(target_os = "linux")]
        {
            // Best effort: without it, ACKs are only later.
            let _ = socket2::SockRef::from(&self.0).set_tcp_quickack(true);
        }
    }
}

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.0).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) {
            self.rearm();
        }
        result
    }
}

impl AsyncWrite for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// What an SSH session runs over: the TCP connection, or a `direct-tcpip`
/// channel of a jump host's session.
pub(crate) trait Transport: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Transport for T {}

/// The stream handed to russh, recording every successful read.
pub(crate) struct Watched {
    stream: Box<dyn Transport>,
    last_receive: Arc<LastReceive>,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched").finish_non_exhaustive()
    }
}

impl Watched {
    pub(crate) fn new(stream: impl Transport + 'static, last_receive: Arc<LastReceive>) -> Self {
        Self {
            stream: Box::new(stream),
            last_receive,
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.last_receive.touch();
        }
        result
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
