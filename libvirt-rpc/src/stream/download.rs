//! Downloads: [`Download`], [`DownloadReader`] (an `AsyncRead` over
//! one), and the client calls that open one.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::StreamCore;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::flags::StorageVolStreamFlags;
use crate::proc_num;
use crate::proto::types::StorageVol;
use crate::proto::xdr::{Decode, Encode};

/// The receiving half of an open download stream.
#[derive(Debug)]
pub struct Download {
    inner: StreamCore,
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
