//! The CONNECT probe's IO: the socket and the clock around `fleet::Probe`,
//! which holds the protocol and the verdicts.
//!
//! ```text
//!  run(connect, probe)         fleet::Probe (sans IO)
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

use fleet::{Probe, ProbeOutcome};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{Instant, timeout_at};

/// Runs `probe` (built by the caller, with basic auth where the proxy
/// wants it) over the connection `connect` opens — a TCP connection from
/// this process's network namespace, or one opened inside another — within
/// the probe's deadline in all (at most [`fleet::MAX_PROBE_TIMEOUT`]),
/// `connect` included.
///
/// Never fails as a whole: every failure is an
/// [`Unhealthy`](ProbeOutcome::Unhealthy) outcome with its kind.
///
/// # Cancel safety
/// Cancel safe, provided `connect` is: dropping the future drops the socket
/// (closed without waiting); nothing outlives it.
pub async fn run<C, S>(connect: C, mut probe: Probe) -> ProbeOutcome
where
    C: Future<Output = io::Result<S>>,
    S: AsyncRead + AsyncWrite + Unpin,
{
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
