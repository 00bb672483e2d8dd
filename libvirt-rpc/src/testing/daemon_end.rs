//! [`DaemonEnd`]: the daemon's side of an in-memory link, packet by packet.

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use crate::error::{DisconnectReason, Error, Result};
use crate::proto::packet::{self, Header, MessageType, Packet, Status};
use crate::proto::remote_error::WireError;
use crate::proto::xdr::Encode;

/// The in-memory pipe's capacity in each direction unless a test picks
/// its own ([`DaemonEnd::pair_with_capacity`]).
pub const DEFAULT_PIPE_CAPACITY: usize = 1 << 20;

/// The daemon's end of an in-memory link to a [`crate::Client`]: reads the
/// client's packets and writes whatever a test wants the daemon to say,
/// including what a real libvirtd would never send on demand (early stream
/// data, floods, garbage).
///
/// [`super::Script`] builds a whole daemon on top of it; use `DaemonEnd`
/// directly for packet-level tests.
#[derive(Debug)]
pub struct DaemonEnd {
    io: DuplexStream,
    buf: BytesMut,
}

impl DaemonEnd {
    /// A link: hand the first half to [`crate::Client::new`] or
    /// [`crate::Client::connect`], play the daemon with the second.
    pub fn pair() -> (DuplexStream, DaemonEnd) {
        Self::pair_with_capacity(DEFAULT_PIPE_CAPACITY)
    }

    /// [`DaemonEnd::pair`] whose pipe holds at most `bytes` in each
    /// direction (writes beyond it wait for the reader, as on a socket).
    pub fn pair_with_capacity(bytes: usize) -> (DuplexStream, DaemonEnd) {
        let (client, daemon) = tokio::io::duplex(bytes.max(1));
        (client, Self::from_io(daemon))
    }

    /// Plays the daemon over `io`, e.g. after [`DaemonEnd::into_io`] and a
    /// `tokio::io::split` of it.
    pub fn from_io(io: DuplexStream) -> Self {
        Self {
            io,
            buf: BytesMut::new(),
        }
    }

    /// The underlying pipe; bytes already read but not yet returned as a
    /// packet are dropped.
    pub fn into_io(self) -> DuplexStream {
        self.io
    }

    /// The client's next packet (a call, stream data, a keepalive PING or
    /// PONG); `None` once the client closed the link.
    ///
    /// # Errors
    /// [`Error::Disconnected`] with [`DisconnectReason::Protocol`] when the
    /// bytes are not valid framing, [`DisconnectReason::Io`] when reading
    /// fails.
    ///
    /// # Cancel safety
    /// Cancel safe: bytes read so far stay buffered for the next call.
    pub async fn read(&mut self) -> Result<Option<Packet>> {
        loop {
            if let Some(p) = packet::decode_frame(&mut self.buf)
                .map_err(|e| Error::Disconnected(DisconnectReason::Protocol(e)))?
            {
                return Ok(Some(p));
            }
            let n = self
                .io
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| Error::Disconnected(DisconnectReason::Io(e.into())))?;
            if n == 0 {
                return Ok(None);
            }
        }
    }

    /// Answers `call` with REPLY / OK and `body`.
    ///
    /// # Errors
    /// [`Error::Encode`] when `body` cannot be encoded; as
    /// [`DaemonEnd::write_bytes`] otherwise.
    pub async fn reply<T: Encode + ?Sized>(&mut self, call: &Header, body: &T) -> Result<()> {
        self.send(&reply_header(call, Status::Ok), body).await
    }

    /// Answers `call` with REPLY / ERROR and `error` (what libvirtd sends
    /// when a call fails).
    ///
    /// # Errors
    /// As [`DaemonEnd::reply`].
    pub async fn reply_error(&mut self, call: &Header, error: &WireError) -> Result<()> {
        self.send(&reply_header(call, Status::Error), error).await
    }

    /// Sends one packet with an XDR payload (an event message, a stream
    /// packet carrying an error, ...).
    ///
    /// # Errors
    /// As [`DaemonEnd::reply`].
    pub async fn send<T: Encode + ?Sized>(&mut self, header: &Header, body: &T) -> Result<()> {
        let p = packet::encode_packet(header, body).map_err(|source| Error::Encode {
            procedure: header.procedure,
            source,
        })?;
        self.write_bytes(&p).await
    }

    /// Sends one packet whose payload is `data` as is (stream data).
    ///
    /// # Errors
    /// As [`DaemonEnd::reply`].
    pub async fn send_raw(&mut self, header: &Header, data: &[u8]) -> Result<()> {
        let p = packet::encode_raw(header, data).map_err(|source| Error::Encode {
            procedure: header.procedure,
            source,
        })?;
        self.write_bytes(&p).await
    }

    /// Writes `bytes` as they are: framing or not.
    ///
    /// # Errors
    /// [`Error::Disconnected`] with [`DisconnectReason::Io`] when the client
    /// end is gone.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped write may have sent part of `bytes`.
    pub async fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.io
            .write_all(bytes)
            .await
            .map_err(|e| Error::Disconnected(DisconnectReason::Io(e.into())))
    }
}

/// The header of the daemon's reply to `call`.
pub(crate) fn reply_header(call: &Header, status: Status) -> Header {
    Header {
        kind: MessageType::Reply,
        status,
        ..*call
    }
}
