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

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::client::{Client, daemon_error, decode_reply};
use crate::connection::{Command, Control, abort_packet};
use crate::error::{Error, Result};
use crate::proto::packet::{self, Header, MessageType, Packet, Status};
use crate::proto::xdr::{Decode, Encode};

mod download;
mod duplex;
mod upload;

pub use download::{Download, DownloadReader};
pub use duplex::Duplex;
pub use upload::{Upload, UploadWriter};

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
