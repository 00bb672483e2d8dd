//! An upload source that stops when its fill's lease fence closes: the
//! read after the fence fails errors, so libvirt-rpc aborts the volume
//! stream on the wire and no further byte of a fenced fill reaches the
//! host ([`fill_lease`](super::fill_lease) says why that makes a stale
//! lease provably abandoned).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, ReadBuf};

use super::fill_lease::Fence;

/// `inner`, checked against `fence` before every read.
#[derive(Debug)]
pub(crate) struct FencedRead<R> {
    inner: R,
    fence: Arc<Fence>,
}

impl<R> FencedRead<R> {
    pub(crate) fn new(inner: R, fence: Arc<Fence>) -> Self {
        Self { inner, fence }
    }

    pub(crate) fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for FencedRead<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Err(fenced) = self.fence.check(Instant::now()) {
            return Poll::Ready(Err(io::Error::other(crate::Error::FillFenced(fenced))));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn reads_pass_until_the_fence_closes_then_fail_with_the_reason() {
        let fence = Arc::new(Fence::new(Instant::now(), Duration::from_secs(60)));
        let mut r = FencedRead::new(&b"abcdef"[..], fence.clone());
        let mut two = [0u8; 2];
        r.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"ab");
        fence.lose();
        let err = r.read_exact(&mut two).await.unwrap_err();
        let inner = err.get_ref().and_then(|e| e.downcast_ref::<crate::Error>());
        assert!(
            matches!(inner, Some(crate::Error::FillFenced(_))),
            "{err:?}"
        );
        assert_eq!(r.into_inner(), b"cdef");
    }

    #[tokio::test]
    async fn a_silent_fence_fails_the_next_read() {
        let start = Instant::now() - Duration::from_secs(61);
        let fence = Arc::new(Fence::new(start, Duration::from_secs(60)));
        let mut r = FencedRead::new(&b"abc"[..], fence);
        let mut one = [0u8; 1];
        let err = r.read_exact(&mut one).await.unwrap_err();
        let printed = provider_api::error::chain(&err);
        assert!(printed.contains("no fill heartbeat"), "{printed}");
    }
}
