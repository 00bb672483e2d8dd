//! Uploads: [`Upload`], and the client calls that open one.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::{Incoming, StreamCore};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::flags::StorageVolStreamFlags;
use crate::proc_num;
use crate::proto::packet::{HEADER_SIZE, LEN_SIZE, Status};
use crate::proto::types::StorageVol;
use crate::proto::xdr::{Decode, Encode};

/// The sending half of an open upload stream.
#[derive(Debug)]
pub struct Upload {
    inner: StreamCore,
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

    /// Turns the upload into an [`AsyncWrite`](tokio::io::AsyncWrite): each
    /// write is sent as stream packets (the next write waits for it), a
    /// flush waits for what was written, and `shutdown` finishes the
    /// stream and waits for the daemon's verdict. Errors surface as
    /// [`std::io::Error`]s wrapping [`Error`]; dropping the writer before
    /// `shutdown` completed aborts the stream (a short upload never looks
    /// complete, invariant 3).
    pub fn into_writer(self) -> UploadWriter {
        UploadWriter {
            state: WriterState::Idle(Box::new(self)),
        }
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

type Sending = Pin<Box<dyn Future<Output = (Box<Upload>, Result<()>)> + Send>>;
type Finishing = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

/// An [`AsyncWrite`](tokio::io::AsyncWrite) over an [`Upload`] (see
/// [`Upload::into_writer`]).
pub struct UploadWriter {
    state: WriterState,
}

enum WriterState {
    Idle(Box<Upload>),
    Sending(Sending),
    Finishing(Finishing),
    Done,
    Failed(std::io::ErrorKind, String),
}

impl std::fmt::Debug for UploadWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadWriter").finish_non_exhaustive()
    }
}

impl UploadWriter {
    /// Drives a send in flight to its end; `Ready(Ok(upload))` when idle.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<Box<Upload>>> {
        loop {
            match std::mem::replace(&mut self.state, WriterState::Done) {
                WriterState::Idle(up) => return Poll::Ready(Ok(up)),
                WriterState::Sending(mut fut) => match fut.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.state = WriterState::Sending(fut);
                        return Poll::Pending;
                    }
                    Poll::Ready((up, Ok(()))) => self.state = WriterState::Idle(up),
                    Poll::Ready((up, Err(e))) => {
                        // The daemon failed the stream, or the link died:
                        // end it on the wire too, and remember why.
                        drop(up);
                        self.state = WriterState::Failed(std::io::ErrorKind::Other, e.to_string());
                        return Poll::Ready(Err(std::io::Error::other(e)));
                    }
                },
                WriterState::Failed(kind, why) => {
                    self.state = WriterState::Failed(kind, why.clone());
                    return Poll::Ready(Err(std::io::Error::new(kind, why)));
                }
                other => {
                    self.state = other;
                    return Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::BrokenPipe,
                        "the upload was finished",
                    )));
                }
            }
        }
    }
}

impl tokio::io::AsyncWrite for UploadWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut up = match self.poll_idle(cx) {
            Poll::Ready(Ok(up)) => up,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        let data = buf.to_vec();
        self.state = WriterState::Sending(Box::pin(async move {
            let r = up.send(&data).await;
            (up, r)
        }));
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.poll_idle(cx) {
            Poll::Ready(Ok(up)) => {
                self.state = WriterState::Idle(up);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        loop {
            match std::mem::replace(&mut self.state, WriterState::Done) {
                WriterState::Finishing(mut fut) => {
                    return match fut.as_mut().poll(cx) {
                        Poll::Pending => {
                            self.state = WriterState::Finishing(fut);
                            Poll::Pending
                        }
                        Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
                        Poll::Ready(Err(e)) => {
                            self.state =
                                WriterState::Failed(std::io::ErrorKind::Other, e.to_string());
                            Poll::Ready(Err(std::io::Error::other(e)))
                        }
                    };
                }
                WriterState::Done => return Poll::Ready(Ok(())),
                other => {
                    self.state = other;
                    let up = match self.poll_idle(cx) {
                        Poll::Ready(Ok(up)) => up,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => return Poll::Pending,
                    };
                    self.state = WriterState::Finishing(Box::pin(async move { up.finish().await }));
                }
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
}
