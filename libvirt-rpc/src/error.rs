//! The crate's one error type.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::error_code::ErrorCode;
use crate::error_domain::{ErrorDomain, ErrorLevel};
use crate::proto::packet::FrameError;
use crate::proto::remote_error::WireError;
use crate::proto::xdr::XdrError;

/// Everything that can go wrong talking to libvirtd.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The daemon answered with an error.
    #[error(transparent)]
    Libvirt(#[from] LibvirtError),
    /// The connection is dead (IO error, EOF, keepalive timeout, close);
    /// every pending and later call fails with this.
    #[error("libvirt connection lost")]
    Disconnected(#[source] DisconnectReason),
    /// [`Client::connect_unix`](crate::Client::connect_unix) could not open
    /// the daemon's local socket: it does not exist, nothing listens on
    /// it, or this user may not open it. Not transient: retrying gets the
    /// same answer until the daemon is started or the path or permissions
    /// are fixed. The message names the path and what to check.
    #[error("cannot open libvirt's socket {}: {}", path.display(), problem.hint())]
    LocalSocket {
        /// The socket's path.
        path: std::path::PathBuf,
        /// Which of the three.
        problem: SocketProblem,
        /// The OS error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The call's deadline passed. The link stays up; the late reply, if any,
    /// is discarded.
    #[error("libvirt procedure {procedure} timed out after {after:?}")]
    Timeout {
        /// The procedure number.
        procedure: i32,
        /// The deadline that passed.
        after: Duration,
    },
    /// The daemon offers only authentication schemes this crate does not
    /// implement (SASL).
    #[error(
        "unsupported libvirt authentication: the daemon offers {offered:?}, only NONE (0) and polkit (2) are supported"
    )]
    UnsupportedAuth {
        /// Auth types the daemon offered (0 none, 1 SASL, 2 polkit; see
        /// [`crate::AuthType::from_i32`]).
        offered: Vec<i32>,
    },
    /// The daemon refused to authenticate this connection (polkit said no:
    /// the peer's user is not allowed `org.libvirt.unix.manage`). Not
    /// transient: retrying gets the same answer until the policy changes.
    #[error("libvirt {method:?} authentication refused")]
    AuthRefused {
        /// The scheme that was tried.
        method: crate::auth::AuthType,
        /// The daemon's answer (code [`ErrorCode::AuthFailed`] usually).
        #[source]
        reason: LibvirtError,
    },
    /// Arguments could not be encoded (a string or list over its limit).
    #[error("cannot encode arguments of libvirt procedure {procedure}")]
    Encode {
        /// The procedure number.
        procedure: i32,
        /// The codec's reason.
        #[source]
        source: XdrError,
    },
    /// A reply (or an event message, see
    /// [`crate::Subscription::last_malformed`]) could not be decoded as the
    /// expected type.
    #[error("cannot decode the reply or message of libvirt procedure {procedure}")]
    Decode {
        /// The procedure number.
        procedure: i32,
        /// The codec's reason.
        #[source]
        source: XdrError,
    },
    /// The daemon sent something this client did not expect for a call.
    #[error("libvirt protocol violation: {0}")]
    Protocol(String),
    /// An upload's source failed; the stream was aborted on the wire.
    #[error("upload source failed; stream aborted")]
    Source(#[source] io::Error),
    /// A download's destination failed; the stream was aborted on the wire.
    #[error("download destination failed; stream aborted")]
    Sink(#[source] io::Error),
    /// (Feature `tls`.) A TLS credential could not be loaded: the file
    /// cannot be read, holds no certificate or key, or the key does not
    /// belong to the certificate. Never quotes the key.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[error("cannot load the TLS {file}{}", path.as_ref().map(|p| format!(" from {}", p.display())).unwrap_or_default())]
    TlsCredentials {
        /// Which of the three.
        file: crate::tls::PkiFile,
        /// The file, when read from one.
        path: Option<std::path::PathBuf>,
        /// What is wrong with it.
        #[source]
        reason: Box<dyn std::error::Error + Send + Sync>,
    },
    /// (Feature `tls`.) The name to verify the daemon's certificate
    /// against is neither a DNS name nor an IP address.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[error("{name:?} is not a DNS name or IP address to verify a TLS certificate against")]
    TlsServerName {
        /// The name given.
        name: String,
    },
    /// (Feature `tls`.) The daemon's certificate is not trusted: not
    /// signed by the given CA, not valid for the name dialled (its
    /// subjectAltName), expired. Not transient.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[error("the libvirt daemon's TLS certificate is not trusted for {server_name:?}")]
    TlsServerCertificate {
        /// The name the certificate was checked against.
        server_name: String,
        /// rustls's verdict (an `io::Error` wrapping a `rustls::Error`).
        #[source]
        reason: Box<dyn std::error::Error + Send + Sync>,
    },
    /// (Feature `tls`.) The daemon refused this client after checking its
    /// certificate: it closed the connection or sent a certificate alert
    /// instead of its confirmation byte, or sent a byte other than 1. The
    /// usual causes: the client certificate is not signed by the daemon's
    /// CA, is expired or not meant for client use, or its DN is not in
    /// the daemon's `tls_allowed_dn_list`. Not transient.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[error("the libvirt daemon refused the TLS client{}", received.map(|b| format!(" (confirmation byte {b}, expected 1)")).unwrap_or_default())]
    TlsRefused {
        /// The byte received instead of 1, if one came.
        received: Option<u8>,
        /// The IO error that ended the wait (EOF, a TLS alert), if any.
        #[source]
        reason: Option<io::Error>,
    },
    /// (Feature `tls`.) The TLS handshake failed for another reason: no
    /// protocol version or cipher in common, a peer that does not speak
    /// TLS, the link lost. Transient only when the link failed under it.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[error("TLS handshake with {server_name:?} failed")]
    TlsHandshake {
        /// The name dialled.
        server_name: String,
        /// The failure.
        #[source]
        reason: io::Error,
    },
    /// (Feature `tls`.) A TLS step took longer than its bound (the call
    /// timeout): a peer that accepts TCP and never answers, a daemon that
    /// never sends its confirmation. Transient.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[error("TLS {stage} with the libvirt daemon took longer than {after:?}")]
    TlsTimeout {
        /// The step that did not finish.
        stage: crate::tls::TlsStage,
        /// The bound that passed.
        after: Duration,
    },
    /// (Feature `ssh`.) An SSH URI's login cannot be set up: no user (in
    /// the URI or `$USER`), no key (no `keyfile=`, no agent, no default
    /// key file), no known_hosts file to name. Not transient.
    #[cfg(feature = "ssh")]
    #[cfg_attr(docsrs, doc(cfg(feature = "ssh")))]
    #[error("cannot set up SSH to the libvirt host: {reason}")]
    SshSetup {
        /// What is missing.
        reason: String,
    },
    /// (Feature `ssh`.) The SSH dial failed: its stage, host and cause are
    /// in the source ([`ssh_socket::Error`]). Transient unless the SSH
    /// error is permanent (host key, authentication, key file).
    #[cfg(feature = "ssh")]
    #[cfg_attr(docsrs, doc(cfg(feature = "ssh")))]
    #[error("cannot reach the libvirt daemon over SSH")]
    Ssh(#[source] Box<ssh_socket::Error>),
    /// A URI could not be used: a local daemon's socket not found, or
    /// (from `"...".parse::<Uri>()?` in code returning this type) the URI
    /// malformed.
    #[error("unusable libvirt URI")]
    Uri(#[from] crate::uri::UriError),
    /// [`Client::connect_uri`](crate::Client::connect_uri) does not dial
    /// this transport (`ext`; TLS without the `tls` feature, SSH without
    /// the `ssh` feature).
    #[error("libvirt transport {} is not dialled by this crate: {reason}", transport.as_str())]
    UnsupportedTransport {
        /// The URI's transport.
        transport: crate::uri::Transport,
        /// Why, and what to do instead.
        reason: &'static str,
    },
    /// A URI parameter asks for something this crate does not do
    /// (`auth=sasl...`, `no_verify=1`, SSH's `command=`...).
    #[error("libvirt URI parameter {name}={value:?} is not supported: {reason}")]
    UnsupportedParameter {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: String,
        /// Why.
        reason: &'static str,
    },
    /// The declared stream length and the data disagree (source shorter or
    /// longer than `length`); the stream was aborted on the wire.
    #[error("upload source gave {got} bytes, {declared} were declared; stream aborted")]
    LengthMismatch {
        /// Bytes declared in the upload call.
        declared: u64,
        /// Bytes the source produced (capped at `declared + 1`).
        got: u64,
    },
}

impl Error {
    /// The libvirt error code, when the daemon answered with an error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Libvirt(e) => Some(e.code),
            _ => None,
        }
    }

    /// True when the daemon said an object does not exist: a domain, pool,
    /// volume, network or metadata — the object asked about *or* one it
    /// lives in (a volume lookup in a vanished pool is not-found too).
    /// Callers that must tell the two apart match [`Error::code`].
    pub fn is_not_found(&self) -> bool {
        matches!(
            self.code(),
            Some(
                ErrorCode::NoDomain
                    | ErrorCode::NoStoragePool
                    | ErrorCode::NoStorageVol
                    | ErrorCode::NoDomainMetadata
                    | ErrorCode::NoNetwork
            )
        )
    }

    /// True when the connection is dead; the caller should redial.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, Self::Disconnected(_))
    }

    /// True when the call's deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// True when retrying (on a fresh connection for [`Error::Disconnected`])
    /// may succeed: the link died or the deadline passed (with feature
    /// `tls`: a TLS step timed out, or the link failed during the
    /// handshake; with feature `ssh`: an SSH dial failed for a reason
    /// other than keys and authentication). The daemon's own
    /// errors, codec errors and source/sink failures are not transient.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Disconnected(_) | Self::Timeout { .. } => true,
            #[cfg(feature = "tls")]
            Self::TlsTimeout { .. } => true,
            #[cfg(feature = "tls")]
            Self::TlsHandshake { reason, .. } => !crate::tls::is_tls_level(reason),
            #[cfg(feature = "ssh")]
            Self::Ssh(e) => !e.is_permanent(),
            _ => false,
        }
    }
}

/// Why a local socket could not be opened ([`Error::LocalSocket`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketProblem {
    /// No such file.
    Missing,
    /// The file exists; nothing listens on it (the daemon stopped).
    Refused,
    /// This user may not open it.
    Denied,
}

impl SocketProblem {
    /// The problem an IO error of a unix-socket connect names, if it is one
    /// of the three (others are a lost link, as before).
    pub fn of(e: &io::Error) -> Option<Self> {
        match e.kind() {
            io::ErrorKind::NotFound => Some(Self::Missing),
            io::ErrorKind::ConnectionRefused => Some(Self::Refused),
            io::ErrorKind::PermissionDenied => Some(Self::Denied),
            _ => None,
        }
    }

    /// What it means and what to check.
    pub fn hint(self) -> &'static str {
        match self {
            Self::Missing => {
                "no such socket: is libvirtd (or virtqemud) running, and is this the path it \
                 listens on (its unix_sock_dir; `socket=` in a URI)?"
            }
            Self::Refused => {
                "nothing listens on it: the daemon stopped or crashed; start it (e.g. \
                 `systemctl start libvirtd`)"
            }
            Self::Denied => {
                "permission denied: this user may not open it (the daemon's unix_sock_group \
                 and unix_sock_rw_perms)"
            }
        }
    }
}

/// An error reported by libvirtd.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "libvirt error {code:?} (code {}, from {:?}): {message}",
    code.to_i32(),
    self.error_domain()
)]
pub struct LibvirtError {
    /// `virErrorNumber`.
    pub code: ErrorCode,
    /// `virErrorDomain` as sent: the subsystem that raised it. Read it as
    /// an [`ErrorDomain`] with [`LibvirtError::error_domain`].
    pub domain: i32,
    /// The daemon's message.
    pub message: String,
    /// `virErrorLevel` as sent (1 warning, 2 error). Read it as an
    /// [`ErrorLevel`] with [`LibvirtError::error_level`].
    pub level: i32,
}

impl LibvirtError {
    /// The subsystem that raised the error.
    pub fn error_domain(&self) -> ErrorDomain {
        ErrorDomain::from_i32(self.domain)
    }

    /// How serious the daemon says the error is.
    pub fn error_level(&self) -> ErrorLevel {
        ErrorLevel::from_i32(self.level)
    }
}

impl From<WireError> for LibvirtError {
    fn from(e: WireError) -> Self {
        Self {
            code: ErrorCode::from_i32(e.code),
            domain: e.domain,
            message: e.message.unwrap_or_default(),
            level: e.level,
        }
    }
}

/// Why a connection died.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// [`crate::Client::close`] was called or every handle was dropped.
    Closed,
    /// The daemon closed the connection.
    Eof,
    /// Reading or writing failed.
    Io(Arc<io::Error>),
    /// No packet arrived for `interval × count`, while `count` PINGs went
    /// out.
    KeepaliveTimeout {
        /// The keepalive interval.
        interval: Duration,
        /// PINGs sent before the verdict.
        count: u32,
    },
    /// The byte stream broke the framing rules.
    Protocol(FrameError),
}

impl fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("connection closed by the client"),
            Self::Eof => f.write_str("daemon closed the connection"),
            Self::Io(e) => write!(f, "IO error: {e}"),
            Self::KeepaliveTimeout { interval, count } => write!(
                f,
                "keepalive timeout: nothing received for {:?} ({count} pings unanswered at {interval:?} interval)",
                interval.saturating_mul(*count)
            ),
            Self::Protocol(e) => write!(f, "framing error: {e}"),
        }
    }
}

impl std::error::Error for DisconnectReason {}

/// Shorthand for this crate's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libvirt_error_carries_code_and_predicates() {
        let lv = LibvirtError::from(WireError::new(42, 10, "no domain 'x'"));
        assert_eq!(lv.error_domain(), ErrorDomain::Qemu);
        assert_eq!(lv.error_level(), ErrorLevel::Error);
        assert!(lv.to_string().contains("from Qemu"), "{lv}");
        let e: Error = lv.into();
        assert_eq!(e.code(), Some(ErrorCode::NoDomain));
        assert!(e.is_not_found());
        assert!(!e.is_disconnected());
        assert!(e.to_string().contains("no domain 'x'"), "{e}");
        let d = Error::Disconnected(DisconnectReason::Eof);
        assert!(d.is_disconnected());
        assert!(d.is_transient());
        assert!(!e.is_transient());
        assert!(std::error::Error::source(&d).is_some());
    }

    /// Display is this layer only (the reason is the source).
    #[test]
    fn disconnected_does_not_repeat_its_reason() {
        let e = Error::Disconnected(DisconnectReason::Eof);
        let reason = DisconnectReason::Eof.to_string();
        assert!(!e.to_string().contains(&reason), "{e}");
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some(reason.as_str()));
    }
}
