//! What to dial: host, credentials, host key policy, remote socket, timers.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The default [`SshConfig::connect_timeout`]: 10 s for the whole dial.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything [`dial`](crate::dial) needs.
///
/// The private key and known_hosts files are read from disk on **every**
/// dial, so replacing them (a rotated Kubernetes Secret) takes effect on the
/// next dial without a restart.
///
/// `Debug` never prints the passphrase.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SshConfig {
    /// Host name or address of the SSH server.
    pub host: String,
    /// TCP port of the SSH server (default 22).
    pub port: u16,
    /// User to log in as.
    pub user: String,
    /// Where the private key comes from: a file (OpenSSH, PKCS#1, PKCS#8
    /// or SEC1 PEM; ed25519, ecdsa or RSA; RSA signs with
    /// rsa-sha2-512/256), key text in memory, or an ssh-agent.
    pub key: KeySource,
    /// Passphrase for an encrypted key (file or memory).
    pub key_passphrase: Option<Passphrase>,
    /// How the server's host key is checked.
    pub host_keys: HostKeyPolicy,
    /// Path of the unix socket to reach on the server (for libvirt's system
    /// daemon `/var/run/libvirt/libvirt-sock`, which `libvirt-rpc` names
    /// `SYSTEM_SOCKET`: this crate knows no protocol's socket).
    pub remote_socket: String,
    /// Bound on the whole dial: TCP connect, handshake, auth and channel
    /// open (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub connect_timeout: Duration,
    /// Liveness checking of the established link.
    pub keepalive: Keepalive,
    /// Jump hosts (bastions) the dial passes through, in order: the first
    /// is reached over TCP, each next one — and at last `host` — through a
    /// `direct-tcpip` channel of the one before (OpenSSH's `ProxyJump`).
    /// Empty: `host` is reached directly.
    pub jumps: Vec<JumpHost>,
}

/// A jump host (bastion): an SSH server the dial logs in to only to have
/// it open a TCP connection onwards. Its key and known_hosts files are
/// read on every dial, like the target's.
///
/// `Debug` never prints the passphrase.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JumpHost {
    /// Host name or address of the bastion's SSH server (as the hop before
    /// it, or this machine for the first, resolves it).
    pub host: String,
    /// Its TCP port (default 22).
    pub port: u16,
    /// User to log in as.
    pub user: String,
    /// Where its private key comes from.
    pub key: KeySource,
    /// Passphrase for an encrypted key.
    pub key_passphrase: Option<Passphrase>,
    /// How the bastion's host key is checked.
    pub host_keys: HostKeyPolicy,
}

impl JumpHost {
    /// A jump host on port 22.
    pub fn new(
        host: impl Into<String>,
        user: impl Into<String>,
        key_path: impl Into<PathBuf>,
        host_keys: HostKeyPolicy,
    ) -> Self {
        Self {
            host: host.into(),
            port: 22,
            user: user.into(),
            key: KeySource::File(key_path.into()),
            key_passphrase: None,
            host_keys,
        }
    }

    /// Sets [`JumpHost::port`].
    #[must_use]
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Sets [`JumpHost::key`].
    #[must_use]
    pub fn with_key(mut self, key: KeySource) -> Self {
        self.key = key;
        self
    }

    /// Sets [`JumpHost::key_passphrase`].
    #[must_use]
    pub fn with_key_passphrase(mut self, passphrase: Passphrase) -> Self {
        self.key_passphrase = Some(passphrase);
        self
    }

    /// The hop as a config of its own (for the dial's stages: its host,
    /// credentials and host keys, the target's timers).
    pub(crate) fn as_hop(&self, target: &SshConfig) -> SshConfig {
        SshConfig {
            host: self.host.clone(),
            port: self.port,
            user: self.user.clone(),
            key: self.key.clone(),
            key_passphrase: self.key_passphrase.clone(),
            host_keys: self.host_keys.clone(),
            remote_socket: String::new(),
            connect_timeout: target.connect_timeout,
            keepalive: target.keepalive,
            jumps: Vec::new(),
        }
    }
}

impl SshConfig {
    /// A config reaching `remote_socket` on `host`, with the defaults: port
    /// 22, a 10 s connect timeout and [`Keepalive::default`].
    pub fn new(
        host: impl Into<String>,
        user: impl Into<String>,
        key_path: impl Into<PathBuf>,
        host_keys: HostKeyPolicy,
        remote_socket: impl Into<String>,
    ) -> Self {
        Self {
            host: host.into(),
            port: 22,
            user: user.into(),
            key: KeySource::File(key_path.into()),
            key_passphrase: None,
            host_keys,
            remote_socket: remote_socket.into(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            keepalive: Keepalive::default(),
            jumps: Vec::new(),
        }
    }

    /// Appends a jump host to [`SshConfig::jumps`] (dialled after those
    /// already listed).
    #[must_use]
    pub fn with_jump(mut self, jump: JumpHost) -> Self {
        self.jumps.push(jump);
        self
    }

    /// Sets [`SshConfig::port`].
    #[must_use]
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Sets [`SshConfig::remote_socket`].
    #[must_use]
    pub fn with_remote_socket(mut self, path: impl Into<String>) -> Self {
        self.remote_socket = path.into();
        self
    }

    /// Sets [`SshConfig::connect_timeout`].
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`SshConfig::keepalive`].
    #[must_use]
    pub fn with_keepalive(mut self, keepalive: Keepalive) -> Self {
        self.keepalive = keepalive;
        self
    }

    /// Sets [`SshConfig::key_passphrase`].
    #[must_use]
    pub fn with_key_passphrase(mut self, passphrase: Passphrase) -> Self {
        self.key_passphrase = Some(passphrase);
        self
    }

    /// Sets [`SshConfig::key`] (the constructor's path is a
    /// [`KeySource::File`]).
    #[must_use]
    pub fn with_key(mut self, key: KeySource) -> Self {
        self.key = key;
        self
    }
}

/// Where a dial's private key comes from.
///
/// `Debug` never shows key text.
#[derive(Clone)]
#[non_exhaustive]
pub enum KeySource {
    /// A key file, read on every dial.
    File(PathBuf),
    /// Key text held by the caller (e.g. fetched from a secret store): the
    /// same formats as a file. Errors about it name `(key in memory)`.
    Memory(KeyText),
    /// An ssh-agent listening on this unix socket (e.g. `$SSH_AUTH_SOCK`):
    /// each identity it holds is offered in turn; the private keys never
    /// leave the agent.
    Agent(PathBuf),
    /// Key files tried in turn, as OpenSSH tries its `IdentityFile`s (or
    /// its defaults): files that do not exist are skipped, and the dial
    /// fails with [`Error::KeyFileUnreadable`](crate::Error::KeyFileUnreadable)
    /// for the first when none exists; any other read or parse failure
    /// fails the dial. Each is read on every dial.
    Files(Vec<PathBuf>),
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Memory(_) => f.write_str("Memory(<redacted>)"),
            Self::Agent(path) => f.debug_tuple("Agent").field(path).finish(),
            Self::Files(paths) => f.debug_tuple("Files").field(paths).finish(),
        }
    }
}

impl KeySource {
    /// The agent named by `$SSH_AUTH_SOCK`, if set.
    pub fn agent_from_env() -> Option<Self> {
        std::env::var_os("SSH_AUTH_SOCK").map(|p| Self::Agent(PathBuf::from(p)))
    }
}

/// Private key text. `Debug` never shows it, and there is no `Display`.
#[derive(Clone)]
pub struct KeyText(String);

impl KeyText {
    /// Wraps key text.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for KeyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyText(<redacted>)")
    }
}

/// How the server's host key is verified.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostKeyPolicy {
    /// Check against an OpenSSH known_hosts file: plain and hashed (`|1|`)
    /// entries, `[host]:port` for ports other than 22, wildcards and
    /// negations; `@revoked` keys are refused; `@cert-authority` lines
    /// trust the host certificates their authority signed (a host named by
    /// one is asked for its certificate; a certificate is checked as
    /// OpenSSH does, else
    /// [`Error::HostCertificateRejected`](crate::Error::HostCertificateRejected));
    /// a host trusted only through them that presents a plain key is
    /// refused with
    /// [`Error::HostKeyNotCertified`](crate::Error::HostKeyNotCertified).
    KnownHosts(PathBuf),
    /// Accept any host key. Insecure: a warning is logged on every dial.
    InsecureIgnoreHostKey,
}

impl HostKeyPolicy {
    /// The explicit opt-out of host key verification.
    pub fn insecure_ignore_host_key() -> Self {
        Self::InsecureIgnoreHostKey
    }
}

/// Liveness checking of an established link.
///
/// Always on. Every [`interval`](Keepalive::interval) without traffic from
/// the server, a keepalive request is sent (OpenSSH answers it). A link
/// from which nothing at all has been received for
/// [`dead_after`](Keepalive::dead_after) = `interval × (max_missed + 1)` is
/// declared dead: the socket is torn down and every reader and writer gets
/// an error. This holds whatever the link is stuck on (a frozen peer, a full
/// TCP send buffer, an exhausted SSH window).
///
/// Defaults: 5 s interval, 2 missed keepalives: a frozen peer is detected
/// within 15 s (plus up to one second of scheduling slack).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Keepalive {
    /// Silence after which a keepalive request is sent.
    pub interval: Duration,
    /// Unanswered keepalives tolerated before the link is declared dead.
    pub max_missed: u32,
}

impl Default for Keepalive {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(5),
            max_missed: 2,
        }
    }
}

impl Keepalive {
    /// Keepalive with the given interval and tolerance. An interval below
    /// 100 ms (zero included) is raised to 100 ms.
    pub fn new(interval: Duration, max_missed: u32) -> Self {
        Self {
            interval: interval.max(Duration::from_millis(100)),
            max_missed,
        }
    }

    /// The interval in force: [`interval`](Self::interval) clamped to
    /// [100 ms, 1 day].
    pub fn effective_interval(&self) -> Duration {
        self.interval
            .clamp(Duration::from_millis(100), Duration::from_secs(24 * 3600))
    }

    /// Silence after which the link is declared dead:
    /// `interval × (max_missed + 1)` (with the interval clamped as in
    /// [`effective_interval`](Self::effective_interval), at most 1,000 days).
    pub fn dead_after(&self) -> Duration {
        self.effective_interval()
            .saturating_mul(self.max_missed.saturating_add(1))
            .min(Duration::from_secs(1000 * 24 * 3600))
    }
}

/// A key passphrase. `Debug` never shows it, and there is no `Display`.
#[derive(Clone)]
pub struct Passphrase(String);

impl Passphrase {
    /// Wraps a passphrase.
    pub fn new(passphrase: impl Into<String>) -> Self {
        Self(passphrase.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Passphrase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Passphrase(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_keepalive_settings_do_not_overflow() {
        let k = Keepalive {
            interval: Duration::MAX,
            max_missed: u32::MAX,
        };
        assert_eq!(k.effective_interval(), Duration::from_secs(24 * 3600));
        assert_eq!(k.dead_after(), Duration::from_secs(1000 * 24 * 3600));
    }

    #[test]
    fn default_keepalive_detects_a_frozen_peer_within_20s() {
        let k = Keepalive::default();
        assert_eq!(k.dead_after(), Duration::from_secs(15));
        assert!(k.dead_after() <= Duration::from_secs(20));
    }

    #[test]
    fn passphrase_is_redacted_in_debug() {
        let c = SshConfig::new(
            "h",
            "u",
            "/k",
            HostKeyPolicy::insecure_ignore_host_key(),
            "/s",
        )
        .with_key_passphrase(Passphrase::new("hunter2"));
        let text = format!("{c:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert_eq!(c.remote_socket, "/s");
    }
}
