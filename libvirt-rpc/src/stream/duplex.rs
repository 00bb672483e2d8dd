//! Duplex streams: [`Duplex`] (a console or channel), and the client
//! call that opens one.

use bytes::Bytes;

use super::{Incoming, StreamCore};
use crate::client::Client;
use crate::error::Result;
use crate::proto::xdr::Encode;

/// An open stream that carries data both ways: a domain's console
/// ([`Client::domain_open_console`]) or channel
/// ([`Client::domain_open_channel`]). The daemon's data waits in the
/// connection's bounded queue until [`Duplex::chunk`] takes it, so sending
/// never loses what the guest wrote meanwhile.
#[derive(Debug)]
pub struct Duplex {
    inner: StreamCore,
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
    /// [`Error::Disconnected`](crate::Error::Disconnected).
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
    /// The daemon's error ([`Error::Libvirt`](crate::Error::Libvirt)), [`Error::Disconnected`](crate::Error::Disconnected),
    /// [`Error::Timeout`](crate::Error::Timeout) when nothing arrives within the call deadline: a
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
    /// The daemon's error ([`Error::Libvirt`](crate::Error::Libvirt)), [`Error::Disconnected`](crate::Error::Disconnected),
    /// [`Error::Timeout`](crate::Error::Timeout).
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

impl Client {
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
}
