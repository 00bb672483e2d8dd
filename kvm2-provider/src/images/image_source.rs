//! Streaming download of a base image over HTTP(S), hashed as it goes.
//!
//! [`ImageSource::open`] sends the request and returns a [`Download`]: a
//! [`Stream`] of body chunks that the uploader forwards into a libvirt volume
//! stream as they arrive (nothing is buffered whole, nothing touches the
//! local disk). The download enforces, by itself:
//!
//! - **http and https only**: the URL is an [`HttpUrl`] (checked when the
//!   config was parsed), every redirect target is checked again, and an
//!   https → http downgrade is refused;
//! - **a redirect limit**;
//! - **a size cap**: a declared `Content-Length` over the cap fails before
//!   the body is read; otherwise the chunk that would cross the cap is not
//!   yielded and the stream ends with [`Error::ImageTooLarge`];
//! - **a source deadline** over the whole transfer (request and body), and a
//!   stall timeout between reads;
//! - **sha256 verification**: after the last chunk, the digest of everything
//!   yielded is compared with the expected one.
//!
//! A `Content-Length` is not required. Every failure is delivered as the
//! stream's *last item, an `Err`*, never as a clean end: a consumer that
//! finishes the volume upload only on a clean end (`None`) and aborts it on
//! an `Err` can never publish a short or corrupt image (invariant 3). After a clean
//! end, [`Download::verified`] returns the digest.
//!
//! No task is spawned; dropping a [`Download`] closes its connection.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use futures::stream::BoxStream;
use provider_api::config::values::{HttpUrl, Sha256Digest};
use sha2::{Digest, Sha256};
use tokio::time::{Instant, Sleep};

use crate::Error;

/// Bounds on one download.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLimits {
    /// Largest image accepted, in bytes.
    pub max_bytes: u64,
    /// Most redirects followed.
    pub max_redirects: usize,
    /// The whole transfer (connect, request, every body byte) must finish
    /// within this.
    pub deadline: Duration,
    /// Longest wait for a TCP connection.
    pub connect_timeout: Duration,
    /// Longest gap between two reads of the body.
    pub stall_timeout: Duration,
}

impl Default for SourceLimits {
    /// 20 GiB, 5 redirects, 30 minutes, 10 s to connect, 60 s stall.
    fn default() -> Self {
        Self {
            max_bytes: 20 << 30,
            max_redirects: 5,
            deadline: Duration::from_secs(30 * 60),
            connect_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(60),
        }
    }
}

/// An HTTP client for image downloads. Cheap to clone; share one per
/// provider. Proxies from the standard environment variables
/// (`HTTPS_PROXY`, `NO_PROXY`, ...) are honoured.
#[derive(Debug, Clone)]
pub struct ImageSource {
    client: reqwest::Client,
    limits: SourceLimits,
}

impl ImageSource {
    /// A client enforcing `limits`.
    ///
    /// # Errors
    /// [`Error::Source`] if the TLS backend cannot be initialised.
    pub fn new(limits: SourceLimits) -> Result<Self, Error> {
        let max_redirects = limits.max_redirects;
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            let downgrade = attempt
                .previous()
                .last()
                .is_some_and(|prev| prev.scheme() == "https" && attempt.url().scheme() == "http");
            if attempt.previous().len() > max_redirects {
                attempt.error(RedirectRefused("too many redirects"))
            } else if !matches!(attempt.url().scheme(), "http" | "https") {
                attempt.error(RedirectRefused("redirect to a scheme other than http(s)"))
            } else if downgrade {
                attempt.error(RedirectRefused("redirect from https to http"))
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .redirect(policy)
            .connect_timeout(limits.connect_timeout)
            .read_timeout(limits.stall_timeout)
            .user_agent(concat!("kvm2-provider/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(Error::Source)?;
        Ok(Self { client, limits })
    }

    /// The limits this source enforces.
    pub fn limits(&self) -> SourceLimits {
        self.limits
    }

    /// Requests `url` and returns its body as a [`Download`] that checks it
    /// against `expected`.
    ///
    /// # Errors
    /// [`Error::Source`] when connecting fails or a redirect is refused; [`Error::HttpStatus`] for a non-2xx answer;
    /// [`Error::ImageTooLarge`] when the declared length exceeds the cap;
    /// [`Error::SourceDeadline`] when the answer's headers do not arrive in
    /// time.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the request and its connection;
    /// nothing is left running.
    pub async fn open(&self, url: &HttpUrl, expected: Sha256Digest) -> Result<Download, Error> {
        let deadline = Instant::now() + self.limits.deadline;
        let response =
            tokio::time::timeout_at(deadline, self.client.get(url.as_url().clone()).send())
                .await
                .map_err(|_| Error::SourceDeadline(self.limits.deadline))?
                .map_err(Error::Source)?;
        let status = response.status();
        if !status.is_success() {
            return Err(Error::HttpStatus {
                status: status.as_u16(),
            });
        }
        let declared = response.content_length();
        if declared.is_some_and(|n| n > self.limits.max_bytes) {
            return Err(Error::ImageTooLarge {
                limit: self.limits.max_bytes,
            });
        }
        Ok(Download {
            body: Box::pin(response.bytes_stream()),
            hasher: Sha256::new(),
            received: 0,
            declared,
            expected,
            limits: self.limits,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            state: State::Streaming,
        })
    }
}

/// A refused redirect, as the source of a [`reqwest::Error`].
#[derive(Debug)]
struct RedirectRefused(&'static str);

impl fmt::Display for RedirectRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for RedirectRefused {}

enum State {
    Streaming,
    Verified(Sha256Digest),
    Failed,
}

/// An image body in flight: a stream of chunks, checked as they pass.
///
/// Ends with `None` only when every byte arrived, within the cap and the
/// deadline, and hashed to the expected digest. Any failure is yielded as a
/// final `Err` item (then `None`).
pub struct Download {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    hasher: Sha256,
    received: u64,
    declared: Option<u64>,
    expected: Sha256Digest,
    limits: SourceLimits,
    deadline: Pin<Box<Sleep>>,
    state: State,
}

impl fmt::Debug for Download {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Download")
            .field("received", &self.received)
            .field("declared", &self.declared)
            .field("expected", &self.expected)
            .finish_non_exhaustive()
    }
}

impl Download {
    /// The `Content-Length` the server declared, if any.
    pub fn declared_len(&self) -> Option<u64> {
        self.declared
    }

    /// Bytes yielded so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The verified digest, once the stream has ended cleanly.
    pub fn verified(&self) -> Option<Sha256Digest> {
        match self.state {
            State::Verified(d) => Some(d),
            State::Streaming | State::Failed => None,
        }
    }

    /// The body as an [`AsyncRead`](tokio::io::AsyncRead). A failure
    /// surfaces as an [`std::io::Error`] whose
    /// [`get_ref`](std::io::Error::get_ref) is this crate's [`Error`];
    /// `into_inner` gives the [`Download`] back for [`verified`](Self::verified).
    pub fn into_async_read(self) -> tokio_util::io::StreamReader<IoChunks, Bytes> {
        tokio_util::io::StreamReader::new(IoChunks(self))
    }

    fn fail(&mut self, error: Error) -> Poll<Option<Result<Bytes, Error>>> {
        self.state = State::Failed;
        Poll::Ready(Some(Err(error)))
    }

    fn finish(&mut self) -> Poll<Option<Result<Bytes, Error>>> {
        if let Some(declared) = self.declared
            && declared != self.received
        {
            // hyper reports a short body itself; belt and braces.
            return self.fail(Error::LengthMismatch {
                declared,
                received: self.received,
            });
        }
        let actual = Sha256Digest::from_bytes(self.hasher.clone().finalize().into());
        if actual != self.expected {
            return self.fail(Error::DigestMismatch {
                expected: self.expected.to_string(),
                actual: actual.to_string(),
            });
        }
        self.state = State::Verified(actual);
        Poll::Ready(None)
    }
}

impl Stream for Download {
    type Item = Result<Bytes, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if !matches!(this.state, State::Streaming) {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return this.fail(Error::SourceDeadline(this.limits.deadline));
        }
        match this.body.as_mut().poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Err(e))) => this.fail(Error::Source(e)),
            Poll::Ready(None) => this.finish(),
            Poll::Ready(Some(Ok(chunk))) => {
                let len = chunk.len() as u64;
                match this.received.checked_add(len) {
                    Some(total) if total <= this.limits.max_bytes => {
                        this.received = total;
                        this.hasher.update(&chunk);
                        Poll::Ready(Some(Ok(chunk)))
                    }
                    _ => {
                        let limit = this.limits.max_bytes;
                        this.fail(Error::ImageTooLarge { limit })
                    }
                }
            }
        }
    }
}

/// [`Download`] with errors as [`std::io::Error`], for
/// [`Download::into_async_read`].
#[derive(Debug)]
pub struct IoChunks(Download);

impl IoChunks {
    /// The download, e.g. for [`Download::verified`] after reading to the end.
    pub fn into_inner(self) -> Download {
        self.0
    }
}

impl Stream for IoChunks {
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.0)
            .poll_next(cx)
            .map(|item| item.map(|r| r.map_err(std::io::Error::other)))
    }
}
