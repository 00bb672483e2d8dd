//! The crate's error type: why a dial failed (by stage), or why an
//! established socket stopped working.

use std::path::PathBuf;
use std::time::Duration;

/// A failure of the SSH implementation underneath, carried as the source
/// of [`Error::Handshake`], [`Error::AuthInterrupted`] and
/// [`Error::ChannelOpen`]. Opaque on purpose: the implementation's own
/// error type is not part of this crate's API, so upgrading it never
/// breaks a caller. Its `Display` says what happened.
#[derive(Debug)]
pub struct SshError(russh::Error);

impl std::fmt::Display for SshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for SshError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

impl From<russh::Error> for SshError {
    fn from(e: russh::Error) -> Self {
        SshError(e)
    }
}

/// The stage a dial had reached; named by [`Error::Timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stage {
    /// Reading the private key, known_hosts and client config files.
    Files,
    /// Resolving the host name and opening the TCP connection.
    TcpConnect,
    /// SSH version exchange, key exchange and host key verification.
    Handshake,
    /// Public-key authentication.
    Auth,
    /// Opening the `direct-streamlocal` channel to the remote socket.
    ChannelOpen,
    /// The dial had succeeded; the socket was in use.
    Established,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Files => "reading key files",
            Self::TcpConnect => "TCP connect",
            Self::Handshake => "SSH handshake",
            Self::Auth => "authentication",
            Self::ChannelOpen => "opening the forwarded channel",
            Self::Established => "use of the established socket",
        })
    }
}

/// Why [`dial`](crate::dial) failed, or why an established
/// [`SshSocket`](crate::SshSocket) stopped working.
///
/// Dial errors name the stage that failed and say whether retrying can
/// help; [`Error::is_permanent`] answers the same question in code.
/// Permanent errors need a change of configuration or of the remote host
/// (a new key in the Secret, a fixed known_hosts entry): a caller must stop
/// retrying them and surface them to a human.
///
/// No variant carries private key material: key errors name the file only.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The private key file could not be read (missing, unreadable, larger
    /// than 1 MiB, not text).
    ///
    /// Permanent: the file must be fixed (a rotated Secret is picked up by
    /// the next dial, since the key is read on every dial).
    #[error("cannot read private key file {path}")]
    KeyFileUnreadable {
        /// The key file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The private key file is encrypted and no passphrase was configured
    /// (or the passphrase is wrong).
    ///
    /// Permanent.
    #[error("private key file {path} is encrypted and no (or a wrong) passphrase was given")]
    KeyEncrypted {
        /// The key file.
        path: PathBuf,
    },
    /// The private key file is not a private key this crate can use
    /// (ed25519, ecdsa and RSA keys in OpenSSH, PKCS#1, PKCS#8 or SEC1
    /// form are supported).
    ///
    /// Permanent.
    #[error("private key file {path} is not a usable private key: {reason}")]
    KeyInvalid {
        /// The key file.
        path: PathBuf,
        /// What the parser said (never any key material).
        reason: String,
    },
    /// The ssh-agent could not be used: its socket refused or is missing,
    /// it holds no keys, or it failed to sign.
    ///
    /// Permanent: start the agent or add a key (`ssh-add`).
    #[error("ssh-agent at {path}: {reason}")]
    AgentUnavailable {
        /// The agent's socket.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// An OpenSSH client config ([`UserConfig`](crate::UserConfig)) could
    /// not be read or used: the file is unreadable, a line does not parse,
    /// a value is invalid (`Port`, a `%` token), or it asks for what this
    /// crate does not do (`ProxyCommand`).
    ///
    /// Permanent: the config must be fixed.
    #[error("ssh config{}{}: {reason}", if path.as_os_str().is_empty() { String::new() } else { format!(" {}", path.display()) }, if *line > 0 { format!(" line {line}") } else { String::new() })]
    UserConfig {
        /// The file (empty when the problem is not in one).
        path: PathBuf,
        /// The 1-based line, 0 for the file as a whole.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The known_hosts file exists but could not be read (unreadable,
    /// larger than 16 MiB, not UTF-8 text).
    ///
    /// Permanent. (A *missing* known_hosts file is not this error: every
    /// host key is then unknown, see [`Error::HostKeyUnknown`].)
    #[error("cannot read known_hosts file {path}")]
    KnownHostsUnreadable {
        /// The known_hosts file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The host name did not resolve to any address.
    ///
    /// Transient: DNS may recover.
    #[error("cannot resolve {host}:{port}")]
    Resolve {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// The TCP connection could not be opened (refused, unreachable).
    ///
    /// Transient: the host may come back.
    #[error("TCP connect to {host}:{port} failed")]
    TcpConnect {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The last connect error.
        #[source]
        source: std::io::Error,
    },
    /// The SSH handshake failed (protocol error, no common algorithm, the
    /// connection dropped during key exchange).
    ///
    /// Transient: usually a network or server-side problem.
    #[error("SSH handshake with {host}:{port} failed")]
    Handshake {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The SSH implementation's error.
        #[source]
        source: SshError,
    },
    /// The server's host key is not in the known_hosts file (or the file
    /// does not exist).
    ///
    /// Permanent: add the key to known_hosts.
    #[error(
        "host key of {host_entry} is unknown: {fingerprint} ({algorithm}) is not in {known_hosts}{note}"
    )]
    HostKeyUnknown {
        /// The name looked up: `host`, or `[host]:port` for other ports.
        host_entry: String,
        /// The server key's algorithm.
        algorithm: String,
        /// The server key's SHA-256 fingerprint.
        fingerprint: String,
        /// The known_hosts file consulted.
        known_hosts: PathBuf,
        /// Extra context (for example that the file does not exist).
        note: String,
    },
    /// The known_hosts file lists a different key of the same type for
    /// this host: possibly a man-in-the-middle, or a reinstalled host.
    ///
    /// Permanent: a human must check and update known_hosts.
    #[error(
        "HOST KEY CHANGED for {host_entry}: server offers {fingerprint} ({algorithm}), \
         {known_hosts} line {line} lists another key"
    )]
    HostKeyChanged {
        /// The name looked up.
        host_entry: String,
        /// The server key's algorithm.
        algorithm: String,
        /// The server key's SHA-256 fingerprint.
        fingerprint: String,
        /// The known_hosts file.
        known_hosts: PathBuf,
        /// The 1-based line of the conflicting entry.
        line: usize,
    },
    /// The server's host key is marked `@revoked` in known_hosts.
    ///
    /// Permanent.
    #[error("host key {fingerprint} of {host_entry} is revoked ({known_hosts} line {line})")]
    HostKeyRevoked {
        /// The name looked up.
        host_entry: String,
        /// The server key's SHA-256 fingerprint.
        fingerprint: String,
        /// The known_hosts file.
        known_hosts: PathBuf,
        /// The 1-based line of the `@revoked` entry.
        line: usize,
    },
    /// The only known_hosts entries for this host are `@cert-authority`
    /// lines, and the server presented a plain key, no certificate.
    ///
    /// Permanent: give the host a certificate (sshd's `HostCertificate`)
    /// or list its own key in known_hosts.
    #[error(
        "host {host_entry} is trusted only through @cert-authority ({known_hosts} line {line}) \
         but presented no certificate: give it one (sshd's HostCertificate) or list its own key"
    )]
    HostKeyNotCertified {
        /// The name looked up.
        host_entry: String,
        /// The known_hosts file.
        known_hosts: PathBuf,
        /// The 1-based line of the `@cert-authority` entry.
        line: usize,
    },
    /// The server presented a host certificate that known_hosts does not
    /// let through: not signed by an authority an `@cert-authority` line
    /// lists for the host, its authority or key `@revoked`, outside its
    /// validity window, or not naming the host among its principals.
    ///
    /// Permanent: reissue the certificate or fix known_hosts.
    #[error("host {host_entry}'s certificate is refused ({known_hosts}): {reason}")]
    HostCertificateRejected {
        /// The name looked up.
        host_entry: String,
        /// The known_hosts file.
        known_hosts: PathBuf,
        /// Why.
        reason: String,
    },
    /// The server rejected the user or the key.
    ///
    /// Permanent: the key is not in the user's authorized_keys (or the
    /// user does not exist). Retrying cannot help and may trip the server's
    /// intrusion detection.
    #[error("SSH server {host}:{port} rejected public key authentication for user {user:?}")]
    AuthRejected {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The user.
        user: String,
    },
    /// The connection broke during authentication (not a rejection).
    ///
    /// Transient.
    #[error("connection to {host}:{port} broke during authentication")]
    AuthInterrupted {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The SSH implementation's error.
        #[source]
        source: SshError,
    },
    /// The server refused to open the `direct-streamlocal` channel: the
    /// remote socket does not exist or refuses connections, or the server
    /// forbids stream-local forwarding (OpenSSH gives the same answer for
    /// all three).
    ///
    /// Transient: the remote daemon may be restarting; if it persists,
    /// check the socket path and sshd's `AllowStreamLocalForwarding`.
    #[error("SSH server {host}:{port} refused to forward {socket}: {reason}")]
    ChannelOpenRefused {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The remote socket path.
        socket: String,
        /// The server's reason.
        reason: String,
    },
    /// A jump host refused to open the TCP connection onwards (its
    /// `direct-tcpip` channel): sshd forbids TCP forwarding
    /// (`AllowTcpForwarding`, `PermitOpen`) — `prohibited` — or could not
    /// connect to the next hop.
    ///
    /// Permanent when prohibited (the bastion's configuration must
    /// change), transient otherwise (the next hop may come back).
    #[error("jump host {host}:{port} refused to connect to {to}: {reason}")]
    JumpRefused {
        /// The jump host's name.
        host: String,
        /// Its port.
        port: u16,
        /// The next hop, `host:port`.
        to: String,
        /// Whether the bastion forbids it (administratively prohibited).
        prohibited: bool,
        /// The server's reason.
        reason: String,
    },
    /// The session failed after authentication, while opening the channel.
    ///
    /// Transient.
    #[error("SSH session to {host}:{port} failed while opening the channel")]
    ChannelOpen {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The SSH implementation's error.
        #[source]
        source: SshError,
    },
    /// The dial did not finish within the configured connect timeout.
    ///
    /// Transient.
    #[error("dial of {host}:{port} timed out after {timeout:?} during {stage}")]
    Timeout {
        /// The host name.
        host: String,
        /// The port.
        port: u16,
        /// The configured timeout.
        timeout: Duration,
        /// The stage the dial was in.
        stage: Stage,
    },
    /// The socket was closed locally ([`SshSocket::close`](crate::SshSocket::close),
    /// a [`Closer`](crate::Closer), or drop). Carried inside the
    /// `io::Error` that reads and writes return afterwards.
    ///
    /// Not permanent: dial again if a connection is still wanted.
    #[error("SSH socket closed locally")]
    Closed,
    /// Nothing was received from the server for `silent_for` despite
    /// keepalives: the peer or the path to it is frozen.
    ///
    /// Transient: dial again.
    #[error("SSH link declared dead: nothing received for {silent_for:?}")]
    PeerSilent {
        /// How long the server had been silent.
        silent_for: Duration,
    },
    /// The SSH session ended (the server disconnected, the TCP connection
    /// broke, or russh gave up on keepalives).
    ///
    /// Transient: dial again.
    #[error("SSH session ended: {detail}")]
    SessionEnded {
        /// What ended it, as far as is known.
        detail: String,
    },
}

impl Error {
    /// Whether retrying the same dial cannot help: auth, host key and key
    /// file errors. The caller must stop retrying and report these.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            Self::KeyFileUnreadable { .. }
                | Self::KeyEncrypted { .. }
                | Self::KeyInvalid { .. }
                | Self::AgentUnavailable { .. }
                | Self::KnownHostsUnreadable { .. }
                | Self::UserConfig { .. }
                | Self::HostKeyUnknown { .. }
                | Self::HostKeyChanged { .. }
                | Self::HostKeyRevoked { .. }
                | Self::HostKeyNotCertified { .. }
                | Self::HostCertificateRejected { .. }
                | Self::AuthRejected { .. }
                | Self::JumpRefused {
                    prohibited: true,
                    ..
                }
        )
    }

    /// Whether the server's host key failed verification.
    pub fn is_host_key(&self) -> bool {
        matches!(
            self,
            Self::HostKeyUnknown { .. }
                | Self::HostKeyChanged { .. }
                | Self::HostKeyRevoked { .. }
                | Self::HostKeyNotCertified { .. }
                | Self::HostCertificateRejected { .. }
        )
    }

    /// Whether the server rejected the credentials.
    pub fn is_auth(&self) -> bool {
        matches!(self, Self::AuthRejected { .. })
    }

    /// Whether this error ended an established socket (closed locally,
    /// peer silent, session ended) rather than a dial.
    pub fn is_closed(&self) -> bool {
        matches!(
            self,
            Self::Closed | Self::PeerSilent { .. } | Self::SessionEnded { .. }
        )
    }

    /// Whether the dial ran out of time.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// The stage that failed.
    pub fn stage(&self) -> Stage {
        match self {
            Self::KeyFileUnreadable { .. }
            | Self::KeyEncrypted { .. }
            | Self::KeyInvalid { .. }
            | Self::KnownHostsUnreadable { .. }
            | Self::UserConfig { .. } => Stage::Files,
            Self::AgentUnavailable { .. } => Stage::Auth,
            Self::Resolve { .. } | Self::TcpConnect { .. } => Stage::TcpConnect,
            Self::Handshake { .. }
            | Self::HostKeyUnknown { .. }
            | Self::HostKeyChanged { .. }
            | Self::HostKeyRevoked { .. }
            | Self::HostKeyNotCertified { .. }
            | Self::HostCertificateRejected { .. } => Stage::Handshake,
            Self::AuthRejected { .. } | Self::AuthInterrupted { .. } => Stage::Auth,
            Self::ChannelOpenRefused { .. }
            | Self::ChannelOpen { .. }
            | Self::JumpRefused { .. } => Stage::ChannelOpen,
            Self::Timeout { stage, .. } => *stage,
            Self::Closed | Self::PeerSilent { .. } | Self::SessionEnded { .. } => {
                Stage::Established
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_and_host_key_errors_are_permanent_network_ones_are_not() {
        let auth = Error::AuthRejected {
            host: "h".into(),
            port: 22,
            user: "u".into(),
        };
        assert!(auth.is_permanent() && auth.is_auth());
        let changed = Error::HostKeyChanged {
            host_entry: "h".into(),
            algorithm: "ssh-ed25519".into(),
            fingerprint: "SHA256:x".into(),
            known_hosts: "/k".into(),
            line: 3,
        };
        assert!(changed.is_permanent() && changed.is_host_key());
        let timeout = Error::Timeout {
            host: "h".into(),
            port: 22,
            timeout: Duration::from_secs(1),
            stage: Stage::Auth,
        };
        assert!(!timeout.is_permanent() && timeout.is_timeout());
        assert_eq!(timeout.stage(), Stage::Auth);
        let refused = Error::ChannelOpenRefused {
            host: "h".into(),
            port: 22,
            socket: "/s".into(),
            reason: "connect failed".into(),
        };
        assert!(!refused.is_permanent());
        assert_eq!(refused.stage(), Stage::ChannelOpen);
    }

    /// Display is this layer only: the source's text is left to whoever
    /// prints the chain, so a printed chain never says a thing twice.
    #[test]
    fn display_does_not_repeat_the_source() {
        let io = || std::io::Error::other("connection refused by peer");
        let errors = [
            Error::KeyFileUnreadable {
                path: "/k".into(),
                source: io(),
            },
            Error::KnownHostsUnreadable {
                path: "/kh".into(),
                source: io(),
            },
            Error::Resolve {
                host: "h".into(),
                port: 22,
                source: io(),
            },
            Error::TcpConnect {
                host: "h".into(),
                port: 22,
                source: io(),
            },
            Error::Handshake {
                host: "h".into(),
                port: 22,
                source: russh::Error::Disconnect.into(),
            },
            Error::AuthInterrupted {
                host: "h".into(),
                port: 22,
                source: russh::Error::Disconnect.into(),
            },
            Error::ChannelOpen {
                host: "h".into(),
                port: 22,
                source: russh::Error::Disconnect.into(),
            },
        ];
        for e in errors {
            let source = std::error::Error::source(&e).map(ToString::to_string);
            let source = source.unwrap_or_default();
            assert!(!source.is_empty(), "{e:?} has a source");
            assert!(!e.to_string().contains(&source), "{e} repeats {source}");
        }
    }
}
