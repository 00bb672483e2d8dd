//! The CONNECT probe: ask a proxy to open a tunnel to a target and judge
//! the answer.
//!
//! ```text
//!  prober ── TCP ──▶ proxy ip:port
//!         ── "CONNECT target:443 HTTP/1.1\r\nHost: target:443\r\n\r\n" ──▶
//!         ◀── "HTTP/1.1 200 Connection established\r\n..." ── healthy
//!         ◀── "HTTP/1.1 403 Forbidden ..."                  ── denied (ACL)
//!         ◀── other status / not HTTP / close / silence      ── unhealthy
//! ```
//!
//! Only the status line is read (Squid 5 answers `HTTP/1.1`, older ones
//! `HTTP/1.0`; the code alone decides). The whole probe — connect, write,
//! read — runs under one deadline, so a proxy that accepts and then trickles
//! bytes forever still ends in a timeout. The connection is dropped (closed
//! without waiting on the network) as soon as the verdict is known.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use crate::error::{Error, quoted};
use crate::reason::Reason;

/// Longest status line read before the answer is judged not HTTP.
pub const MAX_STATUS_LINE: usize = 1024;

/// The longest probe: larger timeouts are cut to this.
pub const MAX_PROBE_TIMEOUT: Duration = Duration::from_secs(300);

/// The `host:port` a CONNECT asks for: a DNS name or an IP address (IPv6 in
/// brackets) and a non-zero port. Parsing refuses anything that could
/// smuggle bytes into the request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTarget {
    host: Host,
    port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Name(String),
    Ip(IpAddr),
}

impl ProbeTarget {
    /// Parses `host:port` (`example.com:443`, `192.0.2.1:443`,
    /// `[2001:db8::1]:443`).
    ///
    /// # Errors
    /// [`Error::InvalidProbeTarget`] when there is no port, the port is not
    /// 1 to 65535, or the host is neither an IP address nor a DNS name
    /// (labels of 1 to 63 letters, digits and `-`, at most 253 characters).
    pub fn parse(s: &str) -> Result<ProbeTarget, Error> {
        let bad = || Error::InvalidProbeTarget { text: quoted(s) };
        let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = match port.parse() {
            Ok(p) if p != 0 && port.bytes().all(|b| b.is_ascii_digit()) => p,
            _ => return Err(bad()),
        };
        let host = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            match inner.parse::<IpAddr>() {
                Ok(ip @ IpAddr::V6(_)) => Host::Ip(ip),
                _ => return Err(bad()),
            }
        } else if let Ok(ip @ IpAddr::V4(_)) = host.parse::<IpAddr>() {
            Host::Ip(ip)
        } else if is_dns_name(host) {
            Host::Name(host.to_ascii_lowercase())
        } else {
            return Err(bad());
        };
        Ok(ProbeTarget { host, port })
    }
}

fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

impl fmt::Display for ProbeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Name(n) => write!(f, "{n}:{}", self.port),
            Host::Ip(ip) => write!(f, "{}", SocketAddr::new(*ip, self.port)),
        }
    }
}

/// What one probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The proxy answered `200`: it can reach the target.
    Healthy {
        /// From the start of the connect to the status line.
        latency: Duration,
    },
    /// Anything else.
    Unhealthy(ProbeFailure),
}

impl ProbeOutcome {
    /// Whether the probe passed.
    pub fn is_healthy(&self) -> bool {
        matches!(self, ProbeOutcome::Healthy { .. })
    }
}

/// Why a probe failed: a kind and a short detail (no secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeFailure {
    /// The kind.
    pub kind: FailureKind,
    /// What happened, for the condition message.
    pub detail: String,
}

/// The kinds of probe failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// `403`: the proxy's ACL refused the CONNECT.
    Denied,
    /// Another status code (`503`: target unreachable, `407`, ...).
    Status(u16),
    /// The deadline passed (while connecting, writing or waiting).
    Timeout,
    /// The port refused the connection.
    Refused,
    /// The proxy could not be reached otherwise (no route, reset).
    Unreachable,
    /// The answer is not an HTTP status line.
    BadResponse,
    /// The proxy closed the connection without a status line.
    Closed,
}

impl FailureKind {
    /// The `Healthy` condition reason for this kind.
    pub fn reason(self) -> Reason {
        match self {
            FailureKind::Denied => Reason::ProbeDenied,
            FailureKind::Status(_) => Reason::ProbeRejected,
            FailureKind::Timeout => Reason::ProbeTimeout,
            FailureKind::Refused | FailureKind::Unreachable => Reason::ProbeUnreachable,
            FailureKind::BadResponse | FailureKind::Closed => Reason::ProbeBadResponse,
        }
    }
}

fn fail(kind: FailureKind, detail: String) -> ProbeOutcome {
    ProbeOutcome::Unhealthy(ProbeFailure { kind, detail })
}

/// Probes the proxy at `proxy` with `CONNECT target`, within `timeout` in
/// all (at most [`MAX_PROBE_TIMEOUT`]).
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
pub async fn probe_over<C>(
    connect: C,
    proxy: SocketAddr,
    target: &ProbeTarget,
    timeout: Duration,
) -> ProbeOutcome
where
    C: std::future::Future<Output = std::io::Result<TcpStream>>,
{
    let timeout = timeout.min(MAX_PROBE_TIMEOUT);
    let started = Instant::now();
    let deadline = started + timeout;
    let late = || format!("no verdict from {proxy} within {} ms", timeout.as_millis());

    let mut stream = match timeout_at(deadline, connect).await {
        Err(_) => return fail(FailureKind::Timeout, format!("connect: {}", late())),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return fail(FailureKind::Refused, format!("connect to {proxy}: refused"));
        }
        Ok(Err(e)) => {
            return fail(FailureKind::Unreachable, format!("connect to {proxy}: {e}"));
        }
        Ok(Ok(s)) => s,
    };
    let request = format!(
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nUser-Agent: egress-proxies-probe\r\n\r\n"
    );
    match timeout_at(deadline, stream.write_all(request.as_bytes())).await {
        Err(_) => return fail(FailureKind::Timeout, format!("send CONNECT: {}", late())),
        Ok(Err(e)) => {
            return fail(
                FailureKind::Unreachable,
                format!("send CONNECT to {proxy}: {e}"),
            );
        }
        Ok(Ok(())) => {}
    }
    let line = match timeout_at(deadline, read_status_line(&mut stream)).await {
        Err(_) => return fail(FailureKind::Timeout, format!("await answer: {}", late())),
        Ok(Err(failure)) => return ProbeOutcome::Unhealthy(failure),
        Ok(Ok(line)) => line,
    };
    let latency = started.elapsed();
    match parse_status_line(&line) {
        Some(200) => ProbeOutcome::Healthy { latency },
        Some(403) => fail(
            FailureKind::Denied,
            format!("{proxy} denied CONNECT {target} (403)"),
        ),
        Some(code) => fail(
            FailureKind::Status(code),
            format!("{proxy} answered CONNECT {target} with {code}"),
        ),
        None => fail(
            FailureKind::BadResponse,
            format!(
                "{proxy} answered something that is not HTTP: {}",
                printable(&line)
            ),
        ),
    }
}

/// Reads up to the first `\n` (at most [`MAX_STATUS_LINE`] bytes).
async fn read_status_line(stream: &mut TcpStream) -> Result<Vec<u8>, ProbeFailure> {
    let mut line = Vec::with_capacity(128);
    let mut buf = [0u8; 256];
    loop {
        let n = stream.read(&mut buf).await.map_err(|e| ProbeFailure {
            kind: FailureKind::Unreachable,
            detail: format!("read answer: {e}"),
        })?;
        let Some(chunk) = buf.get(..n) else {
            return Err(bad_read());
        };
        if n == 0 {
            return Err(if line.is_empty() {
                ProbeFailure {
                    kind: FailureKind::Closed,
                    detail: "the proxy closed the connection without answering".to_owned(),
                }
            } else {
                ProbeFailure {
                    kind: FailureKind::BadResponse,
                    detail: format!("the answer ended mid-line: {}", printable(&line)),
                }
            });
        }
        if let Some(end) = chunk.iter().position(|b| *b == b'\n') {
            line.extend_from_slice(chunk.get(..end).unwrap_or_default());
            return Ok(line);
        }
        line.extend_from_slice(chunk);
        if line.len() > MAX_STATUS_LINE {
            return Err(ProbeFailure {
                kind: FailureKind::BadResponse,
                detail: format!(
                    "no status line within {MAX_STATUS_LINE} bytes: {}",
                    printable(&line)
                ),
            });
        }
    }
}

fn bad_read() -> ProbeFailure {
    ProbeFailure {
        kind: FailureKind::BadResponse,
        detail: "read returned more than its buffer".to_owned(),
    }
}

/// The status code of an HTTP/1.x status line (`HTTP/1.1 200 Connection
/// established`, with or without `\r` and reason), or `None`.
pub fn parse_status_line(line: &[u8]) -> Option<u16> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let rest = line
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| line.strip_prefix(b"HTTP/1.0 "))?;
    let (code, tail) = rest.split_at_checked(3)?;
    if !code.iter().all(u8::is_ascii_digit) || !(tail.is_empty() || tail.starts_with(b" ")) {
        return None;
    }
    let code = code
        .iter()
        .fold(0u16, |acc, d| acc * 10 + u16::from(d - b'0'));
    (100..=599).contains(&code).then_some(code)
}

/// The first 64 bytes as printable ASCII, others as `.`.
fn printable(bytes: &[u8]) -> String {
    let shown: String = bytes
        .iter()
        .take(64)
        .map(|b| {
            if b.is_ascii_graphic() || *b == b' ' {
                char::from(*b)
            } else {
                '.'
            }
        })
        .collect();
    format!("{shown:?}")
}

#[cfg(test)]
mod tests;
