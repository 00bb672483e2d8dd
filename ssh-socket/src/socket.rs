//! The forwarded socket: `AsyncRead + AsyncWrite` over a `direct-streamlocal`
//! channel, whose reads and writes give up the moment the link dies.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use russh::ChannelMsg;
use russh::client::Msg;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::error::Error;
use crate::link::{Closer, Link, Reason};

/// Chunks the pump may hold for a reader that is not reading: 256 packets
/// of at most 32 KiB (8 MiB). Beyond that the pump waits (back-pressure).
const PUMP_CAPACITY: usize = 256;

/// One item from the pump.
#[derive(Debug)]
enum Chunk {
    Data(Bytes),
    Eof,
}

type Writer = Pin<Box<dyn AsyncWrite + Send + Sync>>;

/// A connected socket to the remote unix socket, over SSH.
///
/// Reads and writes are those of the remote socket's byte stream. The
/// channel's incoming side is drained continuously by a task of its own
/// (up to 8 MiB are buffered for a reader that does not read), so russh's
/// session task, and with it keepalives and window updates, never stalls
/// behind an application that is busy writing.
///
/// # Teardown
/// [`close`](Self::close), a [`Closer`] and `Drop` never block and never
/// wait on the network. Every blocked reader and writer wakes at once with
/// an `io::Error` whose inner error is a [`crate::Error`]
/// ([`Error::Closed`], [`Error::PeerSilent`] or [`Error::SessionEnded`];
/// see [`error_of`](Self::error_of)). In the background, a polite SSH
/// disconnect is tried for at most 250 ms and the server's FIN awaited for
/// at most 250 ms more, else the TCP connection is reset; no task of the
/// connection outlives that.
///
/// # Buffering
/// Incoming data is buffered up to 8 MiB for a reader that is not reading.
/// Beyond that the pump waits, which stalls russh's session (SSH gives no
/// per-channel back-pressure here: russh re-grants window at once). A
/// reader that stays away while the server keeps sending for longer than
/// [`Keepalive::dead_after`](crate::Keepalive::dead_after) gets the link
/// declared dead. libvirt-rpc reads continuously except while a stream
/// download's consumer is behind (its queue full): a download consumer that
/// stalls longer than `dead_after` (15 s by default) while the daemon keeps
/// sending loses the link this way.
///
/// # Liveness
/// If nothing is received from the server for
/// [`Keepalive::dead_after`](crate::Keepalive::dead_after) (15 s by
/// default) despite keepalives, the link is declared dead and torn down the
/// same way.
///
/// Dropping the socket needs no runtime context.
pub struct SshSocket {
    link: Arc<Link>,
    incoming: mpsc::Receiver<Chunk>,
    pending: Bytes,
    eof: bool,
    writer: Writer,
    write_wake: Pin<Box<WaitForCancellationFutureOwned>>,
    shutdown_sent: bool,
}

impl std::fmt::Debug for SshSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshSocket")
            .field("closed", &self.link.is_dead())
            .field("eof", &self.eof)
            .finish_non_exhaustive()
    }
}

impl SshSocket {
    /// Wraps an open channel; spawns the pump that drains its incoming side.
    pub(crate) fn new(channel: russh::Channel<Msg>, link: Arc<Link>) -> Self {
        let (read_half, write_half) = channel.split();
        let writer: Writer = Box::pin(write_half.make_writer());
        let (tx, incoming) = mpsc::channel(PUMP_CAPACITY);
        // Owned by the link: it returns when the channel ends or the link
        // dies, whichever comes first.
        tokio::spawn(pump(read_half, tx, Arc::clone(&link)));
        let write_wake = Box::pin(link.dead_token().clone().cancelled_owned());
        Self {
            link,
            incoming,
            pending: Bytes::new(),
            eof: false,
            writer,
            write_wake,
            shutdown_sent: false,
        }
    }

    /// Closes the socket at once; see [`Closer::close`].
    pub fn close(&self) {
        self.link.fail(Reason::Closed);
    }

    /// A handle that can close this socket from another task and observe
    /// its end.
    pub fn closer(&self) -> Closer {
        Closer {
            link: Arc::clone(&self.link),
        }
    }

    /// Whether the socket is unusable (closed, or the link died).
    pub fn is_closed(&self) -> bool {
        self.link.is_dead()
    }

    /// The [`crate::Error`] inside an `io::Error` returned by this socket,
    /// if there is one.
    pub fn error_of(error: &io::Error) -> Option<&Error> {
        error.get_ref().and_then(|e| e.downcast_ref::<Error>())
    }
}

impl Drop for SshSocket {
    fn drop(&mut self) {
        self.link.fail(Reason::Closed);
    }
}

impl AsyncRead for SshSocket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if matches!(self.link.reason(), Some(Reason::Closed)) {
            return Poll::Ready(Err(self.link.io_error()));
        }
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(buf.remaining());
                let chunk = self.pending.split_to(n);
                buf.put_slice(&chunk);
                return Poll::Ready(Ok(()));
            }
            if self.eof {
                return Poll::Ready(Ok(()));
            }
            match ready!(self.incoming.poll_recv(cx)) {
                Some(Chunk::Data(data)) => self.pending = data,
                Some(Chunk::Eof) => self.eof = true,
                // The pump ended without an EOF: the link died.
                None => return Poll::Ready(Err(self.link.io_error())),
            }
        }
    }
}

impl AsyncWrite for SshSocket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.write_wake.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(self.link.io_error()));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        // russh's writer parks on window credit with nothing to wake it if
        // the session dies; `write_wake` (registered above) wakes us instead.
        match ready!(self.writer.as_mut().poll_write(cx, buf)) {
            Ok(n) => Poll::Ready(Ok(n)),
            // russh's own error means the session is gone: report it as ours.
            Err(_) => {
                self.link.fail(Reason::SessionEnded);
                Poll::Ready(Err(self.link.io_error()))
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.write_wake.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(self.link.io_error()));
        }
        Poll::Ready(Ok(()))
    }

    /// Sends EOF on the channel (the remote socket sees a half-close).
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.write_wake.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(self.link.io_error()));
        }
        if self.shutdown_sent {
            return Poll::Ready(Ok(()));
        }
        if ready!(self.writer.as_mut().poll_shutdown(cx)).is_err() {
            self.link.fail(Reason::SessionEnded);
            return Poll::Ready(Err(self.link.io_error()));
        }
        self.shutdown_sent = true;
        Poll::Ready(Ok(()))
    }
}

/// Drains the channel's incoming messages into the socket's buffer.
async fn pump(mut channel: russh::ChannelReadHalf, tx: mpsc::Sender<Chunk>, link: Arc<Link>) {
    let dead = link.dead_token().clone();
    loop {
        let message = tokio::select! {
            biased;
            () = dead.cancelled() => return,
            message = channel.wait() => message,
        };
        let chunk = match message {
            Some(ChannelMsg::Data { data }) => Chunk::Data(data),
            Some(ChannelMsg::Eof | ChannelMsg::Close) => {
                // The remote socket closed (its side). Readers see EOF.
                let _ = tokio::select! {
                    biased;
                    () = dead.cancelled() => return,
                    sent = tx.send(Chunk::Eof) => sent,
                };
                return;
            }
            Some(_) => continue,
            None => {
                // The session dropped the channel: the link is gone.
                link.fail(Reason::SessionEnded);
                return;
            }
        };
        let sent = tokio::select! {
            biased;
            () = dead.cancelled() => return,
            sent = tx.send(chunk) => sent,
        };
        if sent.is_err() {
            // The socket was dropped.
            return;
        }
    }
}
