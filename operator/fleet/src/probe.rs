//! The CONNECT probe, sans IO: the request to send, and the verdict on
//! what the proxy answers.
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
//! `HTTP/1.0`; the code alone decides). [`Probe`] is the protocol as a
//! state machine: it owns no socket and reads no clock. The operator's
//! driver opens the connection, writes what [`Probe::connected`] returns,
//! feeds [`Probe::received`] what it reads with the time elapsed since the
//! connect began, and runs the whole probe — connect, write, read — under
//! one deadline of [`Probe::timeout`], so a proxy that accepts and then
//! trickles bytes forever still ends in a timeout; each way the IO can end
//! (an error, the end of the stream, the deadline) has a method that turns
//! it into the [`ProbeOutcome`].

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

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

/// One CONNECT probe of one proxy, as a state machine the IO driver feeds.
///
/// The driver's calls, in order: [`new`](Self::new), then once the
/// connection is open [`connected`](Self::connected) (write the bytes it
/// returns), [`sent`](Self::sent) once they are written, then
/// [`received`](Self::received) for each read until it returns an outcome.
/// Any step may end the probe instead: [`failed`](Self::failed) with the IO
/// error, [`closed`](Self::closed) when a read finds the end of the stream,
/// [`timed_out`](Self::timed_out) when the deadline passes. Each outcome
/// says which step it ended in.
///
/// ```
/// use std::time::Duration;
/// use fleet::{Probe, ProbeTarget};
///
/// let target = ProbeTarget::parse("example.com:443").unwrap();
/// let mut probe = Probe::new("10.0.0.7:3128".parse().unwrap(), &target, Duration::from_secs(5));
/// let request = probe.connected();
/// assert!(request.starts_with(b"CONNECT example.com:443 HTTP/1.1\r\n"));
/// probe.sent();
/// assert_eq!(probe.received(b"HTTP/1.1 200 Conn", Duration::from_millis(3)), None);
/// let outcome = probe.received(b"ection established\r\n\r\n", Duration::from_millis(4));
/// assert!(outcome.is_some_and(|o| o.is_healthy()));
/// ```
#[derive(Debug, Clone)]
pub struct Probe {
    proxy: SocketAddr,
    target: ProbeTarget,
    timeout: Duration,
    stage: Stage,
    /// The status line so far (at most [`MAX_STATUS_LINE`] + 1 bytes).
    line: Vec<u8>,
    /// `Proxy-Authorization`'s value, for a proxy that wants basic auth.
    authorization: Option<Authorization>,
}

/// A `Proxy-Authorization: Basic ...` value; its `Debug` shows nothing of
/// it (it is the password, barely encoded).
#[derive(Clone)]
struct Authorization(String);

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authorization(<redacted>)")
    }
}

/// Where a probe is: what its next IO is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Connecting,
    Sending,
    Awaiting,
}

impl Probe {
    /// A probe of the proxy at `proxy` with `CONNECT target`, to end within
    /// `timeout` in all (cut to [`MAX_PROBE_TIMEOUT`]).
    pub fn new(proxy: SocketAddr, target: &ProbeTarget, timeout: Duration) -> Probe {
        Probe {
            proxy,
            target: target.clone(),
            timeout: timeout.min(MAX_PROBE_TIMEOUT),
            stage: Stage::Connecting,
            line: Vec::new(),
            authorization: None,
        }
    }

    /// This probe, authenticating as `user` with `password` (basic auth,
    /// for proxies with `proxy.credentials_file`).
    #[must_use]
    pub fn with_basic_auth(mut self, user: &str, password: &str) -> Probe {
        let token = base64(format!("{user}:{password}").as_bytes());
        self.authorization = Some(Authorization(format!("Basic {token}")));
        self
    }

    /// The proxy probed.
    pub fn proxy(&self) -> SocketAddr {
        self.proxy
    }

    /// The deadline of the whole probe, from the start of the connect: the
    /// driver calls [`timed_out`](Self::timed_out) when it passes.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The connection is open: the request to write, all of it.
    pub fn connected(&mut self) -> Vec<u8> {
        self.stage = Stage::Sending;
        let target = &self.target;
        let auth = match &self.authorization {
            Some(a) => format!("Proxy-Authorization: {}\r\n", a.0),
            None => String::new(),
        };
        format!(
            "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{auth}User-Agent: egress-proxies-probe\r\n\r\n"
        )
        .into_bytes()
    }

    /// The request is written: what is read next is the answer.
    pub fn sent(&mut self) {
        self.stage = Stage::Awaiting;
    }

    /// `bytes` were read, `elapsed` after the connect began (the latency of
    /// a healthy verdict). The outcome once the status line is complete or
    /// cannot be one; `None` to read more.
    pub fn received(&mut self, bytes: &[u8], elapsed: Duration) -> Option<ProbeOutcome> {
        let (part, complete) = match bytes.iter().position(|b| *b == b'\n') {
            Some(end) => (bytes.get(..end).unwrap_or_default(), true),
            None => (bytes, false),
        };
        let room = (MAX_STATUS_LINE + 1).saturating_sub(self.line.len());
        self.line
            .extend_from_slice(part.get(..room).unwrap_or(part));
        if self.line.len() > MAX_STATUS_LINE {
            return Some(fail(
                FailureKind::BadResponse,
                format!(
                    "no status line within {MAX_STATUS_LINE} bytes: {}",
                    printable(&self.line)
                ),
            ));
        }
        complete.then(|| self.verdict(elapsed))
    }

    /// A read found the end of the stream.
    pub fn closed(&self) -> ProbeOutcome {
        if self.line.is_empty() {
            fail(
                FailureKind::Closed,
                "the proxy closed the connection without answering".to_owned(),
            )
        } else {
            fail(
                FailureKind::BadResponse,
                format!("the answer ended mid-line: {}", printable(&self.line)),
            )
        }
    }

    /// The current step (connect, write or read) failed with `error`.
    pub fn failed(&self, error: &io::Error) -> ProbeOutcome {
        let proxy = self.proxy;
        match self.stage {
            Stage::Connecting if error.kind() == io::ErrorKind::ConnectionRefused => {
                fail(FailureKind::Refused, format!("connect to {proxy}: refused"))
            }
            Stage::Connecting => fail(
                FailureKind::Unreachable,
                format!("connect to {proxy}: {error}"),
            ),
            Stage::Sending => fail(
                FailureKind::Unreachable,
                format!("send CONNECT to {proxy}: {error}"),
            ),
            Stage::Awaiting => fail(FailureKind::Unreachable, format!("read answer: {error}")),
        }
    }

    /// The deadline passed during the current step.
    pub fn timed_out(&self) -> ProbeOutcome {
        let step = match self.stage {
            Stage::Connecting => "connect",
            Stage::Sending => "send CONNECT",
            Stage::Awaiting => "await answer",
        };
        fail(
            FailureKind::Timeout,
            format!(
                "{step}: no verdict from {} within {} ms",
                self.proxy,
                self.timeout.as_millis()
            ),
        )
    }

    /// The verdict on the complete status line.
    fn verdict(&self, latency: Duration) -> ProbeOutcome {
        let (proxy, target) = (self.proxy, &self.target);
        match parse_status_line(&self.line) {
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
                    printable(&self.line)
                ),
            ),
        }
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

/// Standard base64 with padding (RFC 4648), for the basic-auth header.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                let index = usize::try_from((n >> shift) & 63).unwrap_or(0);
                out.push(char::from(ALPHABET.get(index).copied().unwrap_or(b'=')));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
