//! Upload, download and duplex streams (`STORAGE_VOL_UPLOAD`,
//! `STORAGE_VOL_DOWNLOAD`, a domain's screenshot, console and channels, a
//! tunnelled migration's incoming side, and any other stream procedure).
//!
//! A stream is a call whose REPLY is followed by STREAM packets with the
//! same serial. Rules this module keeps:
//! - **Abort, never finish short.** When an upload's source fails, or yields
//!   fewer bytes than declared, the stream is aborted on the wire (STREAM /
//!   ERROR), the daemon's answer is consumed, and the call returns the
//!   source's error. A failed upload never looks like a finished one.
//! - **The daemon's error wins.** A STREAM / ERROR from the daemon ends the
//!   stream at once with that error; nothing more is sent for it.
//! - **Nothing left behind.** No task is spawned per stream: the stream runs
//!   in the caller's future. Dropping an [`Upload`], [`Download`] or [`Duplex`] (or the
//!   future using one) before it ended aborts it on the wire without
//!   waiting.
//! - **Bounded memory.** An upload holds one chunk being filled
//!   ([`crate::Config::stream_chunk`], 256 KiB by default) plus what it
//!   queued to the connection, which is bounded for all uploads of the
//!   connection together by [`crate::Config::stream_buffer`] (4 MiB by
//!   default): about 4.3 MiB per connection by default (measured: ~5 MiB
//!   of peak RSS growth for a 256 MiB upload). The socket's send buffer
//!   ([`crate::Config::unix_send_buffer`], set by
//!   [`Client::connect_unix`]) is kernel memory on top of that. A download holds at most
//!   [`crate::Config::stream_queue`] packets (each at most the daemon's
//!   256 KiB chunk), plus at most 16 that overtook the REPLY opening the
//!   stream (libvirtd's event loop can send data before its worker sends
//!   the reply; they are delivered first, in order); when that queue is full the connection stops reading
//!   the socket until the consumer takes a chunk. That is TCP-style flow
//!   control, lossless and bounded, but it delays replies to other calls on
//!   the same connection meanwhile: the task consuming a download must not
//!   wait on another call *of the same connection* between chunks (it would
//!   wait until that call's deadline), and big downloads are best given a
//!   connection of their own. Uploads never pause the reader. While
//!   paused, the connection keeps sending PINGs every half keepalive
//!   interval, so libvirtd's keepalive (which drops a client silent for its
//!   interval × count, 30 s by default) does not end the link; a transport
//!   with liveness checks of its own (SSH keepalive) may still give up on a
//!   stall longer than its dead time.
//!
//! ## What libvirtd 11.3 does when an upload overflows its declared length
//! Its fd stream fails with ENOSPC ("cannot write to stream: No space left
//! on device"), and instead of a STREAM / ERROR the daemon drops the client
//! connection (seen with 1 MiB packets, and with `virsh vol-upload`) or
//! stops answering it altogether (seen with 256 KiB packets); once it died
//! outright. The client surfaces [`Error::Disconnected`] — at once for a
//! drop, after the keepalive deadline for a silent daemon. Tests that
//! provoke this run against a daemon of their own.
//!
//! ## What libvirtd 11.3 does when the volume is deleted during an upload
//! For a `dir` pool, nothing the client can see: the delete succeeds and
//! the upload keeps writing into the unlinked file until it finishes "OK"
//! (pinned by `volume_deleted_mid_upload_is_not_reported_by_libvirtd`).
//! Callers that must know check the volume still exists afterwards.
//!
//! ## What libvirtd 11 answers to an upload finished short
//! Finishing an upload (empty STREAM / OK) before `length` bytes were sent
//! is **accepted**: the daemon answers STREAM / OK and the volume keeps the
//! bytes sent, with no error (pinned by the test
//! `upload_finished_short_is_accepted_by_libvirtd`). That is why
//! [`Client::storage_vol_upload`] aborts instead when its source ends early.
//!
//! ## What libvirtd 11.3 does with a tunnelled migration's empty cookie
//! It dies: `PREPARE_TUNNEL3` with `VIR_MIGRATE_TUNNELLED` and an empty
//! `cookie_in` makes its QEMU driver dereference NULL (`segfault at 0 ...
//! in libvirt_driver_qemu.so`, reproduced twice). libvirt's own daemons
//! always pass the cookie `MIGRATE_BEGIN3` returned on the source; pass
//! that one to [`Client::domain_migrate_prepare_tunnel3`] too. A cookie
//! that is not NUL-terminated gets `InternalError` ("Migration cookie was
//! not NULL terminated").

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc;

use crate::client::{Client, daemon_error, decode_reply};
use crate::connection::{Command, Control, abort_packet};
use crate::error::{Error, Result};
use crate::flags::StorageVolStreamFlags;
use crate::proc_num;
use crate::proto::packet::{self, HEADER_SIZE, Header, LEN_SIZE, MessageType, Packet, Status};
use crate::proto::types::StorageVol;
use crate::proto::xdr::{Decode, Encode};

/// The sending half of an open upload stream.
#[derive(Debug)]
pub struct Upload {
    inner: StreamCore,
}

/// The receiving half of an open download stream.
#[derive(Debug)]
pub struct Download {
    inner: StreamCore,
}

/// An open stream that carries data both ways: a domain's console
/// ([`Client::domain_open_console`]) or channel
/// ([`Client::domain_open_channel`]). The daemon's data waits in the
/// connection's bounded queue until [`Duplex::chunk`] takes it, so sending
/// never loses what the guest wrote meanwhile.
#[derive(Debug)]
pub struct Duplex {
    inner: StreamCore,
}

#[derive(Debug)]
struct StreamCore {
    client: Client,
    procedure: i32,
    serial: u32,
    rx: mpsc::Receiver<Packet>,
    /// Data that arrived before the call's REPLY (at most [`EARLY_MAX`]
    /// packets), delivered first.
    early: VecDeque<Packet>,
    /// The daemon's side ended (terminal packet seen) or we aborted.
    done: bool,
    /// The daemon's data ended (empty STREAM / CONTINUE, finish confirmed).
    eof: bool,
    sent: u64,
    received: u64,
}

/// Download packets accepted ahead of the REPLY that opens the stream.
/// libvirtd starts sending a download's data from its event loop as soon as
/// the stream is registered, while a worker thread sends the REPLY: under
/// load the first data packet can overtake the reply (seen with 11.3).
/// libvirt's own client queues such packets on the stream; so do we, up to
/// this many (256 KiB each at most), then fail the open as a protocol
/// error.
const EARLY_MAX: usize = 16;

impl Drop for StreamCore {
    fn drop(&mut self) {
        if !self.done {
            self.client.control(Control::AbortStream(self.serial));
        }
    }
}

impl StreamCore {
    /// Calls `procedure` and, when the daemon's REPLY opened the stream,
    /// returns the stream with the reply's body.
    async fn open<A: Encode + ?Sized, R: Decode>(
        client: &Client,
        procedure: i32,
        args: &A,
    ) -> Result<(Self, R)> {
        let serial = client.next_serial();
        let h = Header::remote(procedure, MessageType::Call, serial, Status::Ok);
        let packet = packet::encode_packet(&h, args)
            .map_err(|source| Error::Encode { procedure, source })?;
        let (tx, rx) = mpsc::channel(client.config().stream_queue);
        let mut core = Self {
            client: client.clone(),
            procedure,
            serial,
            rx,
            early: VecDeque::new(),
            done: true, // nothing to abort until the call is on its way
            eof: false,
            sent: 0,
            received: 0,
        };
        client
            .submit(Command::OpenStream {
                serial,
                procedure,
                packet,
                packets: tx,
            })
            .await?;
        // From here on, dropping `core` (this future cancelled, a deadline,
        // an error below) aborts the stream; the connection holds the abort
        // until the daemon's REPLY has opened it.
        core.done = false;
        let after = client.call_timeout();
        let deadline = tokio::time::Instant::now() + after;
        let reply = loop {
            match tokio::time::timeout_at(deadline, core.rx.recv()).await {
                // The daemon may still open the stream: the drop aborts it
                // if it does.
                Err(_) => return Err(Error::Timeout { procedure, after }),
                Ok(None) => {
                    core.done = true;
                    return Err(client.disconnected());
                }
                Ok(Some(p))
                    if p.header.kind == MessageType::Stream
                        && p.header.status == Status::Continue =>
                {
                    if core.early.len() >= EARLY_MAX {
                        // The drop aborts it.
                        return Err(Error::Protocol(format!(
                            "stream {procedure}: more than {EARLY_MAX} data packets before the reply"
                        )));
                    }
                    core.early.push_back(p);
                }
                Ok(Some(p)) => break p,
            }
        };
        match (reply.header.kind, reply.header.status) {
            (MessageType::Reply, Status::Ok) => {
                let ret = decode_reply::<R>(procedure, &reply)?;
                Ok((core, ret))
            }
            (_, Status::Error) => {
                // Not opened: nothing to abort.
                core.done = true;
                Err(daemon_error(procedure, &reply))
            }
            (kind, status) => Err(Error::Protocol(format!(
                "stream {procedure}: unexpected {kind:?}/{status:?} before the reply"
            ))),
        }
    }

    fn header(&self, status: Status) -> Header {
        Header::remote(self.procedure, MessageType::Stream, self.serial, status)
    }

    /// Turns a packet that arrived mid-stream into the error it means.
    fn unexpected(&mut self, p: Option<Packet>) -> Error {
        match p {
            None => {
                self.done = true;
                self.client.disconnected()
            }
            Some(p) if p.header.status == Status::Error => {
                self.done = true;
                daemon_error(self.procedure, &p)
            }
            Some(p) => Error::Protocol(format!(
                "stream {}: unexpected {:?}/{:?}",
                self.procedure, p.header.kind, p.header.status
            )),
        }
    }

    /// Sends STREAM / OK and waits for the daemon's confirmation.
    async fn finish(&mut self) -> Result<()> {
        let p =
            packet::encode_raw(&self.header(Status::Ok), &[]).map_err(|source| Error::Encode {
                procedure: self.procedure,
                source,
            })?;
        self.client.submit(Command::Send(p, None)).await?;
        let after = self.client.call_timeout();
        loop {
            let next = tokio::time::timeout(after, self.rx.recv())
                .await
                .map_err(|_| Error::Timeout {
                    procedure: self.procedure,
                    after,
                })?;
            match next {
                Some(p)
                    if p.header.kind == MessageType::Stream && p.header.status == Status::Ok =>
                {
                    self.done = true;
                    return Ok(());
                }
                // Late data of a download after EOF cannot happen; skip it.
                Some(p) if p.header.status == Status::Continue => continue,
                other => return Err(self.unexpected(other)),
            }
        }
    }

    /// Sends STREAM / ERROR and consumes the daemon's answer (bounded by
    /// [`crate::Config::abort_timeout`]).
    async fn abort(&mut self, why: &str) {
        if self.done {
            return;
        }
        self.done = true;
        let Ok(p) = abort_packet(self.procedure, self.serial, why) else {
            return;
        };
        if self.client.submit(Command::Send(p, None)).await.is_err() {
            return;
        }
        let bound = self.client.config().abort_timeout;
        let _ = tokio::time::timeout(bound, async {
            while let Some(p) = self.rx.recv().await {
                if p.header.status != Status::Continue {
                    break;
                }
            }
        })
        .await;
    }
}

/// Whether a packet from the daemon may arrive while we send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Incoming {
    /// Only the daemon's verdict (an upload): anything that arrived ends
    /// the stream at once.
    Verdict,
    /// Data too (a duplex stream): it stays queued for the reader.
    Data,
}

impl StreamCore {
    /// Sends `data` as stream packets of at most
    /// [`crate::Config::stream_chunk`] bytes.
    async fn send(&mut self, data: &[u8], incoming: Incoming) -> Result<()> {
        let chunk = self.client.config().stream_chunk;
        for part in data.chunks(chunk) {
            let p = packet::encode_raw(&self.header(Status::Continue), part).map_err(|source| {
                Error::Encode {
                    procedure: self.procedure,
                    source,
                }
            })?;
            self.send_packet(p, part.len(), incoming).await?;
        }
        Ok(())
    }

    async fn send_packet(&mut self, p: Bytes, len: usize, incoming: Incoming) -> Result<()> {
        if incoming == Incoming::Verdict {
            if let Some(early) = self.early.pop_front() {
                return Err(self.unexpected(Some(early)));
            }
            // A daemon error that already arrived ends the stream now.
            match self.rx.try_recv() {
                Ok(p) => return Err(self.unexpected(Some(p))),
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    return Err(self.unexpected(None));
                }
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
        }
        let permit = self.client.stream_budget(p.len()).await?;
        self.client.submit(Command::Send(p, Some(permit))).await?;
        self.sent += len as u64;
        Ok(())
    }

    /// The daemon's next chunk of data, `None` at its end (after the
    /// finish handshake).
    async fn chunk(&mut self, why: &str) -> Result<Option<Bytes>> {
        if self.eof {
            return Ok(None);
        }
        let p = match self.early.pop_front() {
            Some(p) => Some(p),
            None => {
                let after = self.client.call_timeout();
                let procedure = self.procedure;
                tokio::time::timeout(after, self.rx.recv())
                    .await
                    .map_err(|_| Error::Timeout { procedure, after })?
            }
        };
        match p {
            Some(p)
                if p.header.kind == MessageType::Stream && p.header.status == Status::Continue =>
            {
                if p.payload.is_empty() {
                    self.finish().await?;
                    self.eof = true;
                    return Ok(None);
                }
                self.received += p.payload.len() as u64;
                Ok(Some(p.payload))
            }
            other => {
                let e = self.unexpected(other);
                self.abort(why).await;
                Err(e)
            }
        }
    }
}

impl Upload {
    /// Bytes sent so far.
    pub fn sent(&self) -> u64 {
        self.inner.sent
    }

    /// Sends `data` as stream packets of at most
    /// [`crate::Config::stream_chunk`] bytes.
    ///
    /// # Errors
    /// The daemon's error if it failed the stream ([`Error::Libvirt`]),
    /// [`Error::Disconnected`].
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping the future may leave part of `data` sent.
    /// Dropping the [`Upload`] then aborts the stream.
    pub async fn send(&mut self, data: &[u8]) -> Result<()> {
        self.inner.send(data, Incoming::Verdict).await
    }

    /// Finishes the stream (STREAM / OK) and waits for the daemon to confirm.
    /// Note that libvirtd accepts a finish before the declared length (see
    /// the module docs).
    ///
    /// # Errors
    /// The daemon's error ([`Error::Libvirt`]), [`Error::Disconnected`],
    /// [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// If dropped before the daemon confirmed, the stream is aborted.
    pub async fn finish(mut self) -> Result<()> {
        self.inner.finish().await
    }

    /// Aborts the stream on the wire (STREAM / ERROR carrying `why`) and
    /// consumes the daemon's answer (bounded by
    /// [`crate::Config::abort_timeout`]).
    ///
    /// # Errors
    /// None: an abort is best effort and always ends the stream locally.
    ///
    /// # Cancel safety
    /// If dropped, the abort is still sent (by the drop).
    pub async fn abort(mut self, why: &str) {
        self.inner.abort(why).await;
    }

    /// Sends everything `source` yields, then finishes; aborts instead when
    /// the source fails or its byte count differs from `expected` (when
    /// given). Returns the bytes sent.
    async fn pump<R: AsyncRead + Unpin>(
        mut self,
        mut source: R,
        expected: Option<u64>,
    ) -> Result<u64> {
        let chunk = self.inner.client.config().stream_chunk;
        let head = LEN_SIZE + HEADER_SIZE;
        loop {
            // With a declared length, read at most one byte past it: enough
            // to know the source is too long without sending any of it
            // (libvirtd answers an overflow by dropping the connection).
            let cap = match expected {
                Some(declared) => {
                    let left = declared.saturating_sub(self.sent()).saturating_add(1);
                    usize::try_from(left).unwrap_or(usize::MAX).min(chunk)
                }
                None => chunk,
            };
            let mut buf = BytesMut::with_capacity(head + cap);
            buf.put_bytes(0, head);
            let mut eof = false;
            while buf.len() < head + cap {
                let room = (head + cap - buf.len()) as u64;
                let mut limited = (&mut source).take(room);
                let read = tokio::select! {
                    biased;
                    p = self.inner.rx.recv() => {
                        let e = self.inner.unexpected(p);
                        self.inner.abort("unexpected packet during upload").await;
                        return Err(e);
                    }
                    r = limited.read_buf(&mut buf) => r,
                };
                match read {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        self.inner.abort("upload source failed").await;
                        return Err(Error::Source(e));
                    }
                }
            }
            let data_len = buf.len() - head;
            if let Some(declared) = expected.filter(|&d| self.sent() + data_len as u64 > d) {
                self.inner
                    .abort("upload source is longer than the declared length")
                    .await;
                return Err(Error::LengthMismatch {
                    declared,
                    got: self.sent() + data_len as u64,
                });
            }
            if data_len > 0 {
                let total = buf.len() as u32;
                buf[..LEN_SIZE].copy_from_slice(&total.to_be_bytes());
                buf[LEN_SIZE..head]
                    .copy_from_slice(&self.inner.header(Status::Continue).to_bytes());
                self.inner
                    .send_packet(buf.freeze(), data_len, Incoming::Verdict)
                    .await?;
            }
            if eof {
                break;
            }
        }
        if let Some(declared) = expected.filter(|&d| self.sent() != d) {
            self.inner
                .abort("upload source length differs from the declared length")
                .await;
            return Err(Error::LengthMismatch {
                declared,
                got: self.sent(),
            });
        }
        let sent = self.sent();
        self.finish().await?;
        Ok(sent)
    }
}

impl Download {
    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.inner.received
    }

    /// The next chunk of data, or `None` at the end of the stream (after the
    /// finish handshake with the daemon completed).
    ///
    /// # Errors
    /// The daemon's error ([`Error::Libvirt`]), [`Error::Disconnected`],
    /// [`Error::Timeout`] when no packet arrives within the call deadline.
    ///
    /// # Cancel safety
    /// Cancel safe while waiting for data (no chunk is lost); dropping the
    /// [`Download`] aborts the stream.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>> {
        self.inner.chunk("unexpected packet during download").await
    }

    /// Aborts the stream on the wire and consumes the daemon's answer.
    ///
    /// # Errors
    /// None: an abort is best effort and always ends the stream locally.
    ///
    /// # Cancel safety
    /// If dropped, the abort is still sent (by the drop).
    pub async fn abort(mut self, why: &str) {
        self.inner.abort(why).await;
    }
}

impl Duplex {
    /// Bytes sent so far.
    pub fn sent(&self) -> u64 {
        self.inner.sent
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.inner.received
    }

    /// Sends `data` (for a console: keystrokes) as stream packets of at
    /// most [`crate::Config::stream_chunk`] bytes. Data the daemon sent
    /// meanwhile stays queued for [`Duplex::chunk`]; so does its error,
    /// which the next `chunk` returns.
    ///
    /// # Errors
    /// [`Error::Disconnected`].
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping the future may leave part of `data` sent.
    /// Dropping the [`Duplex`] then aborts the stream.
    pub async fn send(&mut self, data: &[u8]) -> Result<()> {
        self.inner.send(data, Incoming::Data).await
    }

    /// The next chunk the daemon sent, or `None` when its side ended (the
    /// finish handshake completed).
    ///
    /// # Errors
    /// The daemon's error ([`Error::Libvirt`]), [`Error::Disconnected`],
    /// [`Error::Timeout`] when nothing arrives within the call deadline: a
    /// quiet console is not broken, so the stream stays open and `chunk`
    /// may be called again.
    ///
    /// # Cancel safety
    /// Cancel safe while waiting for data (no chunk is lost); dropping the
    /// [`Duplex`] aborts the stream.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>> {
        self.inner
            .chunk("unexpected packet on a duplex stream")
            .await
    }

    /// Finishes our side (STREAM / OK) and waits for the daemon to confirm;
    /// data it sends meanwhile is dropped.
    ///
    /// # Errors
    /// The daemon's error ([`Error::Libvirt`]), [`Error::Disconnected`],
    /// [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// If dropped before the daemon confirmed, the stream is aborted.
    pub async fn finish(mut self) -> Result<()> {
        if self.inner.eof {
            return Ok(());
        }
        self.inner.finish().await
    }

    /// Aborts the stream on the wire and consumes the daemon's answer.
    ///
    /// # Errors
    /// None: an abort is best effort and always ends the stream locally.
    ///
    /// # Cancel safety
    /// If dropped, the abort is still sent (by the drop).
    pub async fn abort(mut self, why: &str) {
        self.inner.abort(why).await;
    }
}

impl Download {
    /// Turns the download into an [`AsyncRead`]. Errors surface as
    /// [`std::io::Error`]s wrapping [`Error`]; dropping the reader before
    /// the end aborts the stream.
    pub fn into_reader(self) -> DownloadReader {
        DownloadReader {
            state: ReaderState::Idle(Box::new(self), Bytes::new()),
        }
    }
}

type NextChunk = Pin<Box<dyn Future<Output = (Box<Download>, Result<Option<Bytes>>)> + Send>>;

/// An [`AsyncRead`] over a [`Download`] (see [`Download::into_reader`]).
pub struct DownloadReader {
    state: ReaderState,
}

enum ReaderState {
    Idle(Box<Download>, Bytes),
    Busy(NextChunk),
    Done,
}

impl std::fmt::Debug for DownloadReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DownloadReader").finish_non_exhaustive()
    }
}

impl AsyncRead for DownloadReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            match std::mem::replace(&mut self.state, ReaderState::Done) {
                ReaderState::Idle(down, mut buf) if !buf.is_empty() => {
                    let n = buf.len().min(out.remaining());
                    out.put_slice(&buf[..n]);
                    buf.advance(n);
                    self.state = ReaderState::Idle(down, buf);
                    return Poll::Ready(Ok(()));
                }
                ReaderState::Idle(mut down, _) => {
                    self.state = ReaderState::Busy(Box::pin(async move {
                        let r = down.chunk().await;
                        (down, r)
                    }));
                }
                ReaderState::Busy(mut fut) => match fut.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.state = ReaderState::Busy(fut);
                        return Poll::Pending;
                    }
                    Poll::Ready((down, Ok(Some(b)))) => self.state = ReaderState::Idle(down, b),
                    Poll::Ready((_, Ok(None))) => return Poll::Ready(Ok(())),
                    Poll::Ready((_, Err(e))) => return Poll::Ready(Err(std::io::Error::other(e))),
                },
                ReaderState::Done => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl Client {
    /// Opens an upload stream for any stream procedure with caller-supplied
    /// arguments.
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// If dropped after the daemon opened the stream, the stream is aborted.
    pub async fn open_upload<A: Encode + ?Sized>(
        &self,
        procedure: i32,
        args: &A,
    ) -> Result<Upload> {
        Ok(self.open_upload_with::<A, ()>(procedure, args).await?.1)
    }

    /// Opens an upload stream whose opening REPLY carries a body of type
    /// `R` (a migration cookie, for example), returned beside it.
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// If dropped after the daemon opened the stream, the stream is aborted.
    pub async fn open_upload_with<A: Encode + ?Sized, R: Decode>(
        &self,
        procedure: i32,
        args: &A,
    ) -> Result<(R, Upload)> {
        let (inner, ret) = StreamCore::open(self, procedure, args).await?;
        Ok((ret, Upload { inner }))
    }

    /// Opens a download stream for any stream procedure with
    /// caller-supplied arguments.
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// If dropped after the daemon opened the stream, the stream is aborted.
    pub async fn open_download<A: Encode + ?Sized>(
        &self,
        procedure: i32,
        args: &A,
    ) -> Result<Download> {
        Ok(self.open_download_with::<A, ()>(procedure, args).await?.1)
    }

    /// Opens a download stream whose opening REPLY carries a body of type
    /// `R` (a screenshot's MIME type, for example), returned beside it.
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// If dropped after the daemon opened the stream, the stream is aborted.
    pub async fn open_download_with<A: Encode + ?Sized, R: Decode>(
        &self,
        procedure: i32,
        args: &A,
    ) -> Result<(R, Download)> {
        let (inner, ret) = StreamCore::open(self, procedure, args).await?;
        Ok((ret, Download { inner }))
    }

    /// Opens a stream that carries data both ways (a console or channel)
    /// for any stream procedure with caller-supplied arguments.
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// If dropped after the daemon opened the stream, the stream is aborted.
    pub async fn open_duplex<A: Encode + ?Sized>(
        &self,
        procedure: i32,
        args: &A,
    ) -> Result<Duplex> {
        let (inner, ()) = StreamCore::open(self, procedure, args).await?;
        Ok(Duplex { inner })
    }

    /// Opens an upload into `vol` at `offset` of `length` bytes (0 = to the
    /// end of the volume) for sending by hand. Procedure
    /// `REMOTE_PROC_STORAGE_VOL_UPLOAD`.
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// As [`Client::open_upload`].
    pub async fn storage_vol_upload_stream(
        &self,
        vol: &StorageVol,
        offset: u64,
        length: u64,
        flags: StorageVolStreamFlags,
    ) -> Result<Upload> {
        self.open_upload(proc_num::STORAGE_VOL_UPLOAD, &(vol, offset, length, flags))
            .await
    }

    /// Uploads everything `source` yields into `vol` at `offset`. With
    /// `length > 0` the source must yield exactly `length` bytes; when it
    /// yields fewer, or fails, the stream is aborted and the volume must be
    /// treated as garbage. Returns the bytes sent.
    ///
    /// # Errors
    /// [`Error::Source`] when the source fails, [`Error::LengthMismatch`]
    /// when it ends early, [`Error::Libvirt`] when the daemon fails the
    /// stream (volume deleted, length exceeded, ...), [`Error::Disconnected`].
    ///
    /// # Cancel safety
    /// Dropping the future aborts the stream on the wire.
    pub async fn storage_vol_upload<R: AsyncRead + Unpin>(
        &self,
        vol: &StorageVol,
        offset: u64,
        length: u64,
        flags: StorageVolStreamFlags,
        source: R,
    ) -> Result<u64> {
        let up = self
            .storage_vol_upload_stream(vol, offset, length, flags)
            .await?;
        up.pump(source, (length > 0).then_some(length)).await
    }

    /// Opens a download of `length` bytes (0 = to the end) of `vol` from
    /// `offset`. Procedure `REMOTE_PROC_STORAGE_VOL_DOWNLOAD`.
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// As [`Client::open_download`].
    pub async fn storage_vol_download_stream(
        &self,
        vol: &StorageVol,
        offset: u64,
        length: u64,
        flags: StorageVolStreamFlags,
    ) -> Result<Download> {
        self.open_download(
            proc_num::STORAGE_VOL_DOWNLOAD,
            &(vol, offset, length, flags),
        )
        .await
    }

    /// Downloads `vol` (from `offset`, `length` bytes, 0 = to the end) into
    /// `sink`. Returns the bytes written.
    ///
    /// # Errors
    /// [`Error::Sink`] when writing fails (the stream is aborted),
    /// [`Error::Libvirt`] when the daemon fails the stream,
    /// [`Error::Disconnected`], [`Error::Timeout`].
    ///
    /// # Cancel safety
    /// Dropping the future aborts the stream on the wire.
    pub async fn storage_vol_download<W: AsyncWrite + Unpin>(
        &self,
        vol: &StorageVol,
        offset: u64,
        length: u64,
        flags: StorageVolStreamFlags,
        mut sink: W,
    ) -> Result<u64> {
        let mut down = self
            .storage_vol_download_stream(vol, offset, length, flags)
            .await?;
        while let Some(data) = down.chunk().await? {
            if let Err(e) = sink.write_all(&data).await {
                down.abort("download destination failed").await;
                return Err(Error::Sink(e));
            }
        }
        sink.flush().await.map_err(Error::Sink)?;
        Ok(down.received())
    }
}
