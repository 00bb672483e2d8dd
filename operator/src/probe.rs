//! The CONNECT probe's IO: the socket and the clock around `fleet::Probe`,
//! which holds the protocol and the verdicts.
//!
//! ```text
//!  probe / probe_over          fleet::Probe (sans IO)
//!   connect ─────────────────▶ connected() → request bytes
//!   write_all(request) ──────▶ sent()
//!   read ... ────────────────▶ received(bytes, elapsed) → outcome | read more
//!   error / end / deadline ──▶ failed(e) / closed() / timed_out()
//! ```
//!
//! One deadline, taken from the probe, bounds the connect, the write and
//! every read together, so a proxy that accepts and then trickles bytes
//! forever still ends in a timeout. The connection is dropped (closed
//! without waiting on the network) as soon as the verdict is known.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use fleet::{Probe, ProbeOutcome, ProbeTarget};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

/// Probes the proxy at `proxy` with `CONNECT target` over a TCP connection
/// from this process's network namespace, within `timeout` in all (at most
/// [`fleet::MAX_PROBE_TIMEOUT`]).
///
/// Never fails as a whole: every failure is an
/// [`Unhealthy`](ProbeOutcome::Unhealthy) outcome with its kind.
///
/// # Cancel safety
/// Cancel safe: dropping the future drops the socket (closed without
/// waiting); nothing outlives it.
pub async fn probe(proxy: SocketAddr, target: &ProbeTarget, timeout: Duration) -> ProbeOutcome {
    probe_over(TcpStream::connect(proxy), proxy, target, timeout).await
}

/// [`probe`] over a connection `connect` opens to `proxy` (for example one
/// opened from inside another network namespace); `connect` runs under the
/// probe's deadline like the rest.
///
/// # Cancel safety
/// As [`probe`], provided `connect` is cancel safe.
pub async fn probe_over<C, S>(
    connect: C,
    proxy: SocketAddr,
    target: &ProbeTarget,
    timeout: Duration,
) -> ProbeOutcome
where
    C: Future<Output = io::Result<S>>,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut probe = Probe::new(proxy, target, timeout);
    let started = Instant::now();
    let deadline = started + probe.timeout();

    let mut stream = match timeout_at(deadline, connect).await {
        Err(_) => return probe.timed_out(),
        Ok(Err(e)) => return probe.failed(&e),
        Ok(Ok(s)) => s,
    };
    let request = probe.connected();
    match timeout_at(deadline, stream.write_all(&request)).await {
        Err(_) => return probe.timed_out(),
        Ok(Err(e)) => return probe.failed(&e),
        Ok(Ok(())) => probe.sent(),
    }
    let mut buf = [0u8; 256];
    loop {
        let n = match timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return probe.timed_out(),
            Ok(Err(e)) => return probe.failed(&e),
            Ok(Ok(0)) => return probe.closed(),
            Ok(Ok(n)) => n,
        };
        // tokio's `read` reports what it put into a `ReadBuf` over `buf`,
        // which cannot hold more than `buf`: `n <= buf.len()` always.
        let chunk = buf.get(..n).unwrap_or(&buf[..]);
        if let Some(outcome) = probe.received(chunk, started.elapsed()) {
            return outcome;
        }
    }
}

#[cfg(test)]
mod tests;
