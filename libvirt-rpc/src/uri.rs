//! libvirt connection URIs (`qemu:///system`, `qemu+ssh://user@host/system`,
//! `test:///default`, ...): parsing, the name the daemon is asked to open,
//! and where a local daemon's unix socket is.
//!
//! Everything here is a pure function of the URI string, except
//! [`Uri::daemon_socket`], which looks at the process's user, its
//! environment and the file system.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::flags::OpenFlags;
use crate::host::{Host, RealHost};

/// Where system daemons put their sockets. libvirt uses `/var/run` rather
/// than `/run` on purpose: every host with `/run` links `/var/run` to it.
const SYSTEM_SOCKET_DIR: &str = "/var/run/libvirt";

/// The system daemon's read-write socket (`libvirtd`'s, and the socket a
/// `qemu:///system` client uses on a host without modular daemons): what a
/// tunnel to "libvirt on that host" reaches unless told otherwise.
pub const SYSTEM_SOCKET: &str = "/var/run/libvirt/libvirt-sock";

/// Parameters the client consumes; they are not part of the name the
/// daemon is asked to open (libvirt's remote driver strips the same).
const CLIENT_PARAMS: &[&str] = &[
    "name",
    "command",
    "socket",
    "auth",
    "sshauth",
    "netcat",
    "keyfile",
    "pkipath",
    "known_hosts",
    "known_hosts_verify",
    "tls_priority",
    "mode",
    "proxy",
    "no_sanity",
    "no_verify",
    "no_tty",
    "authfile",
];

/// How the connection reaches the daemon (the part of the scheme after
/// `+`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Transport {
    /// A local unix socket (`+unix`, or no transport and no host).
    Unix,
    /// TCP with TLS (`+tls`, or no transport and a host); port 16514.
    Tls,
    /// Plain TCP (`+tcp`); port 16509.
    Tcp,
    /// SSH, the remote daemon's unix socket forwarded (`+ssh`); port 22.
    Ssh,
    /// SSH through libssh (`+libssh`); port 22.
    Libssh,
    /// SSH through libssh2 (`+libssh2`); port 22.
    Libssh2,
    /// An external command's standard input and output (`+ext`).
    Ext,
}

impl Transport {
    /// The transport's name in a URI scheme.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unix => "unix",
            Self::Tls => "tls",
            Self::Tcp => "tcp",
            Self::Ssh => "ssh",
            Self::Libssh => "libssh",
            Self::Libssh2 => "libssh2",
            Self::Ext => "ext",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        let all = [
            Self::Unix,
            Self::Tls,
            Self::Tcp,
            Self::Ssh,
            Self::Libssh,
            Self::Libssh2,
            Self::Ext,
        ];
        all.into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(name))
    }

    /// The port used when the URI names none (`None` for transports
    /// without one).
    pub fn default_port(self) -> Option<u16> {
        match self {
            Self::Tls => Some(16514),
            Self::Tcp => Some(16509),
            Self::Ssh | Self::Libssh | Self::Libssh2 => Some(22),
            Self::Unix | Self::Ext => None,
        }
    }

    /// True for the transports that reach a unix socket on the daemon's
    /// host (locally, or forwarded over SSH).
    fn uses_unix_socket(self) -> bool {
        matches!(self, Self::Unix | Self::Ssh | Self::Libssh | Self::Libssh2)
    }
}

/// Which of a host's daemon sockets a connection uses (the `mode`
/// parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SocketMode {
    /// The driver's own daemon if its socket exists, else the monolithic
    /// one (the default).
    Auto,
    /// The monolithic `libvirtd`'s socket, `libvirt-sock` (on modular
    /// hosts `virtproxyd` answers there).
    Legacy,
    /// The driver's own daemon (`virtqemud-sock` for `qemu`).
    Direct,
}

/// Why a URI could not be parsed, or its socket not resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UriError {
    /// The text has no `scheme:` prefix, or the scheme has characters a
    /// scheme may not have.
    #[error("not a libvirt URI (expected driver[+transport]://...): {uri:?}")]
    BadScheme {
        /// The text given.
        uri: String,
    },
    /// The scheme's part after `+` is not a transport libvirt knows.
    #[error(
        "unknown libvirt transport {transport:?} (expected unix, tls, tcp, ssh, libssh, libssh2 or ext)"
    )]
    UnknownTransport {
        /// The transport named.
        transport: String,
    },
    /// A `+unix` URI names a host.
    #[error("a unix socket URI cannot name a host ({host:?})")]
    UnixWithHost {
        /// The host named.
        host: String,
    },
    /// The port is not a number from 0 to 65535.
    #[error("invalid port {port:?} in libvirt URI")]
    BadPort {
        /// The port as written.
        port: String,
    },
    /// An IPv6 host's `[` has no matching `]`.
    #[error("unterminated [IPv6] host in libvirt URI")]
    BadHost,
    /// A character a URI may not hold unescaped (space, control
    /// character).
    #[error("character {ch:?} at byte {at} must be percent-escaped in a libvirt URI")]
    BadCharacter {
        /// The character.
        ch: char,
        /// Its byte offset in the URI.
        at: usize,
    },
    /// A `%` not followed by two hex digits, or escapes that do not decode
    /// to UTF-8.
    #[error("invalid percent-escape in libvirt URI component {component:?}")]
    BadEscape {
        /// The component as written.
        component: String,
    },
    /// The `mode` parameter is not `auto`, `legacy` or `direct`.
    #[error("unknown socket mode {mode:?} (expected auto, legacy or direct)")]
    UnknownMode {
        /// The mode named.
        mode: String,
    },
    /// The URI's transport does not reach a unix socket (TCP, TLS, ext),
    /// so it has no socket path.
    #[error("a {} URI reaches no unix socket", transport.as_str())]
    NoSocketForTransport {
        /// The URI's transport.
        transport: Transport,
    },
    /// `mode=direct` over SSH: the driver's own socket cannot be chosen
    /// from here (libvirt refuses it too).
    #[error("mode=direct needs a local unix socket URI, not {}", transport.as_str())]
    DirectModeNotLocal {
        /// The URI's transport.
        transport: Transport,
    },
    /// A per-user (session) daemon over SSH without a `socket` parameter:
    /// its path depends on the remote user's environment.
    #[error("a session daemon over SSH needs the socket=... parameter")]
    RemoteSessionNeedsSocket,
    /// The per-user daemon's directory is unknown: neither
    /// `XDG_RUNTIME_DIR`, `XDG_CACHE_HOME` nor `HOME` is set.
    #[error("cannot find the per-user libvirt runtime directory (XDG_RUNTIME_DIR and HOME unset)")]
    NoRuntimeDir,
    /// Neither the driver's daemon socket nor the monolithic daemon's
    /// exists (this crate does not start daemons).
    #[error(
        "no libvirt daemon socket: neither {} nor {} exists",
        direct.display(),
        legacy.display()
    )]
    NoDaemonSocket {
        /// The driver's own daemon's socket.
        direct: PathBuf,
        /// The monolithic daemon's socket.
        legacy: PathBuf,
    },
}

/// A parsed libvirt connection URI.
///
/// The rules, libvirt's remote driver's (libvirt 11):
/// - The scheme is `driver[+transport]`. The transport is one of `unix`,
///   `tls`, `tcp`, `ssh`, `libssh`, `libssh2`, `ext` (any case); without
///   one, a URI naming a host means TLS and one without means a local unix
///   socket. `unix` with a host is an error.
/// - Query parameters are `name=value` pairs separated by `&` or `;`, names
///   compared without regard to case, the last occurrence winning.
///   Parameters the client itself uses (`socket`, `keyfile`, `mode`,
///   `name`, ...) are not passed on to the daemon; the rest are.
/// - A local daemon's socket: a `socket` parameter wins. Otherwise the
///   per-user daemon serves `/session` URIs (and `test+transport` ones)
///   for a process that is not root, at `$XDG_RUNTIME_DIR/libvirt/`;
///   everything else goes to the system daemon at `/var/run/libvirt/`
///   (`-sock-ro` for read-only connections). On a host with modular
///   daemons each driver has its own (`virtqemud-sock`); a monolithic
///   `libvirtd` (and `virtproxyd` on modular hosts) listens on
///   `libvirt-sock`. `mode=direct` picks the former, `mode=legacy` the
///   latter, and the default (`auto`) the first of the two that exists.
///   Unlike libvirt, this crate never starts a daemon: when neither socket
///   exists, resolution fails naming both.
///
/// ```
/// use libvirt_rpc::{Transport, Uri};
///
/// let uri: Uri = "qemu+ssh://root@host.example:2222/system?keyfile=/k/id_ed25519".parse()?;
/// assert_eq!(uri.driver(), "qemu");
/// assert_eq!(uri.transport(), Transport::Ssh);
/// assert_eq!((uri.user(), uri.host(), uri.port()), (Some("root"), Some("host.example"), Some(2222)));
/// assert_eq!(uri.keyfile(), Some(std::path::Path::new("/k/id_ed25519")));
/// // What the daemon on the far side is asked to open.
/// assert_eq!(uri.name(), "qemu:///system");
/// # Ok::<(), libvirt_rpc::UriError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uri {
    driver: String,
    transport: Transport,
    /// Whether the scheme named the transport (`test+unix` vs `test`).
    explicit_transport: bool,
    user: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    path: String,
    params: Vec<(String, String)>,
}

impl Uri {
    /// Parses a URI.
    ///
    /// # Errors
    /// A [`UriError`] naming what is malformed; never panics.
    pub fn parse(text: &str) -> Result<Self, UriError> {
        if let Some((at, ch)) = text
            .char_indices()
            .find(|&(_, c)| c.is_control() || c.is_whitespace())
        {
            return Err(UriError::BadCharacter { ch, at });
        }
        let bad_scheme = || UriError::BadScheme {
            uri: text.to_owned(),
        };
        let (scheme, rest) = text.split_once(':').ok_or_else(bad_scheme)?;
        let scheme_ok = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !scheme_ok {
            return Err(bad_scheme());
        }
        let (driver, transport) = match scheme.split_once('+') {
            Some((driver, transport)) => (driver, Some(transport)),
            None => (scheme, None),
        };
        if driver.is_empty() {
            return Err(bad_scheme());
        }

        // Drop the fragment; split off the query.
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let (rest, query) = match rest.split_once('?') {
            Some((before, query)) => (before, Some(query)),
            None => (rest, None),
        };
        let (authority, path) = match rest.strip_prefix("//") {
            Some(after) => match after.find('/') {
                Some(slash) => (Some(&after[..slash]), &after[slash..]),
                None => (Some(after), ""),
            },
            None => (None, rest),
        };

        let (user, host, port) = match authority {
            Some(a) => parse_authority(a)?,
            None => (None, None, None),
        };
        let transport = match transport {
            Some(t) => Transport::from_name(t).ok_or_else(|| UriError::UnknownTransport {
                transport: t.to_owned(),
            })?,
            None if host.is_some() => Transport::Tls,
            None => Transport::Unix,
        };
        if let (Transport::Unix, Some(host)) = (transport, &host) {
            return Err(UriError::UnixWithHost { host: host.clone() });
        }
        let params = match query {
            Some(q) => parse_query(q)?,
            None => Vec::new(),
        };
        let uri = Self {
            driver: driver.to_owned(),
            transport,
            explicit_transport: scheme.contains('+'),
            user,
            host,
            port,
            path: decode(path)?,
            params,
        };
        // An unknown mode is an error of the URI, not of a later lookup.
        uri.mode()?;
        Ok(uri)
    }

    /// The driver: the scheme before `+` (`qemu`, `test`, `lxc`, ...).
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// How the daemon is reached.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The user before `@`, if any (for SSH, the remote login).
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The host, if any, without an IPv6 address's brackets. Remote
    /// transports without one mean `localhost`.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The port the URI names, if any; see [`Transport::default_port`].
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The port to dial: the URI's, else the transport's default.
    pub fn port_or_default(&self) -> Option<u16> {
        self.port.or(self.transport.default_port())
    }

    /// The path (`/system`, `/session`, `/default`; may be empty).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// True for a per-user (session) daemon's URI.
    pub fn is_session(&self) -> bool {
        self.path == "/session"
    }

    /// The value of query parameter `name` (case-insensitive; the last
    /// occurrence wins), percent-decoded.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every query parameter, in order, percent-decoded.
    pub fn params(&self) -> impl Iterator<Item = (&str, &str)> {
        self.params.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// The `socket` parameter: the daemon's socket path, overriding the
    /// usual one.
    pub fn socket(&self) -> Option<&Path> {
        self.param("socket").map(Path::new)
    }

    /// The `keyfile` parameter: the SSH private key to use.
    pub fn keyfile(&self) -> Option<&Path> {
        self.param("keyfile").map(Path::new)
    }

    /// The `mode` parameter ([`SocketMode::Auto`] when absent).
    ///
    /// # Errors
    /// [`UriError::UnknownMode`] (never for a URI [`Uri::parse`] accepted).
    pub fn mode(&self) -> Result<SocketMode, UriError> {
        match self.param("mode") {
            None => Ok(SocketMode::Auto),
            Some(m) if m.eq_ignore_ascii_case("auto") => Ok(SocketMode::Auto),
            Some(m) if m.eq_ignore_ascii_case("legacy") => Ok(SocketMode::Legacy),
            Some(m) if m.eq_ignore_ascii_case("direct") => Ok(SocketMode::Direct),
            Some(m) => Err(UriError::UnknownMode { mode: m.to_owned() }),
        }
    }

    /// The URI the daemon is asked to open ([`crate::Client::connect`]'s
    /// `uri`): the `name` parameter if given, `""` (let the daemon choose)
    /// for the `remote` driver, otherwise this URI without transport, user,
    /// host, port and the parameters the client consumes
    /// (`qemu+ssh://h/system?keyfile=k` → `qemu:///system`).
    pub fn name(&self) -> String {
        if let Some(name) = self.param("name") {
            return name.to_owned();
        }
        if self.driver == "remote" {
            return String::new();
        }
        let mut out = format!("{}://{}", self.driver, encode(&self.path, PATH_SAFE));
        let mut sep = '?';
        for (n, v) in &self.params {
            if CLIENT_PARAMS.iter().any(|c| c.eq_ignore_ascii_case(n)) {
                continue;
            }
            out.push(sep);
            out.push_str(&encode(n, QUERY_SAFE));
            out.push('=');
            out.push_str(&encode(v, QUERY_SAFE));
            sep = '&';
        }
        out
    }

    /// The daemon's unix socket on this host, for a local (`unix`) URI,
    /// following libvirt's rules (see [`Uri`]): the
    /// `socket` parameter; else the per-user or system directory, the
    /// driver's own daemon or the monolithic one, `-sock-ro` when `flags`
    /// has [`OpenFlags::READ_ONLY`].
    ///
    /// Looks at the process's effective user (`/proc/self`), `XDG_RUNTIME_DIR`
    /// (then `XDG_CACHE_HOME`, `HOME`) and which sockets exist.
    ///
    /// # Errors
    /// [`UriError::NoSocketForTransport`] for a remote URI (see
    /// [`Uri::remote_socket`] for SSH), [`UriError::NoRuntimeDir`],
    /// [`UriError::NoDaemonSocket`].
    pub fn daemon_socket(&self, flags: OpenFlags) -> Result<PathBuf, UriError> {
        if self.transport != Transport::Unix {
            return Err(UriError::NoSocketForTransport {
                transport: self.transport,
            });
        }
        self.resolve_local(flags, &RealHost)
    }

    /// The daemon's unix socket on the far side of an SSH URI (what
    /// `ssh-socket` forwards): the `socket` parameter, else the monolithic
    /// daemon's (which modular hosts also serve, through `virtproxyd`).
    ///
    /// # Errors
    /// [`UriError::NoSocketForTransport`] for a TCP, TLS or ext URI,
    /// [`UriError::DirectModeNotLocal`] for `mode=direct`,
    /// [`UriError::RemoteSessionNeedsSocket`] for a session URI without a
    /// `socket` parameter.
    pub fn remote_socket(&self, flags: OpenFlags) -> Result<PathBuf, UriError> {
        if !self.transport.uses_unix_socket() {
            return Err(UriError::NoSocketForTransport {
                transport: self.transport,
            });
        }
        if let Some(socket) = self.socket() {
            return Ok(socket.to_owned());
        }
        if self.mode()? == SocketMode::Direct {
            return Err(UriError::DirectModeNotLocal {
                transport: self.transport,
            });
        }
        if self.is_session() {
            return Err(UriError::RemoteSessionNeedsSocket);
        }
        Ok(system_socket("libvirt", flags))
    }

    fn resolve_local(&self, flags: OpenFlags, host: &dyn Host) -> Result<PathBuf, UriError> {
        if let Some(socket) = self.socket() {
            return Ok(socket.to_owned());
        }
        let per_user = (self.is_session() || (self.driver == "test" && self.explicit_transport))
            && !host.is_root();
        // `remote:///` names no driver: its "own" daemon is virtproxyd, on
        // the monolithic daemon's socket.
        let direct_prefix = match self.driver.as_str() {
            "remote" => "libvirt".to_owned(),
            driver => format!("virt{driver}d"),
        };
        let (direct, legacy) = if per_user {
            let dir = host.runtime_dir().ok_or(UriError::NoRuntimeDir)?;
            (
                dir.join(format!("{direct_prefix}-sock")),
                dir.join("libvirt-sock"),
            )
        } else {
            (
                system_socket(&direct_prefix, flags),
                system_socket("libvirt", flags),
            )
        };
        match self.mode()? {
            SocketMode::Direct => Ok(direct),
            SocketMode::Legacy => Ok(legacy),
            SocketMode::Auto if host.exists(&direct) => Ok(direct),
            SocketMode::Auto if host.exists(&legacy) => Ok(legacy),
            SocketMode::Auto => Err(UriError::NoDaemonSocket { direct, legacy }),
        }
    }
}

impl FromStr for Uri {
    type Err = UriError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// The URI in full, percent-escaped where needed; parsing it gives back an
/// equal [`Uri`].
impl fmt::Display for Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.driver)?;
        if self.explicit_transport {
            write!(f, "+{}", self.transport.as_str())?;
        }
        let authority = self.user.is_some() || self.host.is_some() || self.port.is_some();
        if !authority && !self.path.is_empty() && !self.path.starts_with('/') {
            // `qemu:relative`: written after `//`, the path would be a host.
            f.write_str(":")?;
        } else {
            f.write_str("://")?;
        }
        if let Some(user) = &self.user {
            write!(f, "{}@", encode(user, USER_SAFE))?;
        }
        if let Some(host) = &self.host {
            if host.contains(':') {
                write!(f, "[{}]", encode(host, V6_SAFE))?;
            } else {
                f.write_str(&encode(host, HOST_SAFE))?;
            }
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        f.write_str(&encode(&self.path, PATH_SAFE))?;
        let mut sep = '?';
        for (n, v) in &self.params {
            write!(
                f,
                "{sep}{}={}",
                encode(n, QUERY_SAFE),
                encode(v, QUERY_SAFE)
            )?;
            sep = '&';
        }
        Ok(())
    }
}

fn system_socket(prefix: &str, flags: OpenFlags) -> PathBuf {
    let suffix = if flags.contains(OpenFlags::READ_ONLY) {
        "sock-ro"
    } else {
        "sock"
    };
    Path::new(SYSTEM_SOCKET_DIR).join(format!("{prefix}-{suffix}"))
}

type Authority = (Option<String>, Option<String>, Option<u16>);

fn parse_authority(a: &str) -> Result<Authority, UriError> {
    let (user, hostport) = match a.rsplit_once('@') {
        Some((user, hostport)) => (Some(decode(user)?), hostport),
        None => (None, a),
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or(UriError::BadHost)?;
        match after {
            "" => (decode(host)?, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (decode(host)?, Some(port)),
                None => return Err(UriError::BadHost),
            },
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((host, port)) => (decode(host)?, Some(port)),
            None => (decode(hostport)?, None),
        }
    };
    let port = match port {
        None | Some("") => None,
        // Digits only: `u16::from_str` would also take a leading `+`.
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|_| p.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| UriError::BadPort { port: p.to_owned() })?,
        ),
    };
    // libvirt treats an empty host (`qemu:///system`) as none.
    let host = Some(host).filter(|h| !h.is_empty());
    Ok((user, host, port))
}

fn parse_query(q: &str) -> Result<Vec<(String, String)>, UriError> {
    q.split(['&', ';'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            Ok((decode(name)?, decode(value)?))
        })
        .collect()
}

/// Percent-decodes a component.
fn decode(component: &str) -> Result<String, UriError> {
    let bad = || UriError::BadEscape {
        component: component.to_owned(),
    };
    let bytes = component.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// Characters left unescaped, beyond ASCII letters and digits, in each
/// component (RFC 3986's unreserved and sub-delims that mean nothing
/// there to this parser).
const USER_SAFE: &str = "-._~!$'()*+,=:";
const HOST_SAFE: &str = "-._~";
const V6_SAFE: &str = "-._~:";
const PATH_SAFE: &str = "-._~!$'()*+,=:@/";
const QUERY_SAFE: &str = "-._~!$'()*+,:@/";

/// Percent-encodes every byte of `s` that is not alphanumeric or in `safe`.
fn encode(s: &str, safe: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || safe.as_bytes().contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
