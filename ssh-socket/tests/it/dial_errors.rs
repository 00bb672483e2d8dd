//! Every dial failure gives its own typed error, within 2 s (a wrong key
//! passphrase: within the KDF's CPU time), without a retry (one TCP
//! connection, counted by a proxy in front of sshd).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{UnixServer, own_config, sandbox_config};
use ssh_socket::{Error, HostKeyPolicy, SshConfig, Stage};
use testkit::captured::capture;
use testkit::relay::Relay;
use testkit::sshd::{OwnSshd, keygen, public_key};

const BOUND: Duration = Duration::from_secs(2);
/// A wrong passphrase is found out by running the key's bcrypt KDF: CPU
/// work (1.8 s in an unoptimized test build on the 2-core CI machine, more
/// while QEMU guests share it), not a wait on the network. Zero connections
/// is what shows it failed before connecting.
const KDF_BOUND: Duration = Duration::from_secs(10);

/// The sandbox config, through a counting proxy; the known_hosts entry is
/// rewritten for the proxy's port.
struct Fixture {
    proxy: Relay,
    dir: tempfile::TempDir,
    server: UnixServer,
    /// The sandbox sshd's host public key (`type base64`).
    host_key: String,
}

impl Fixture {
    async fn new() -> Self {
        let d = testkit::Descriptor::require();
        let proxy = Relay::tcp(format!("127.0.0.1:{}", d.ssh.port)).await;
        let host_key = public_key(&d.ssh.host_key_path);
        let host_key = host_key
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        Self {
            proxy,
            dir: tempfile::tempdir().unwrap(),
            server: UnixServer::echo(),
            host_key,
        }
    }

    fn entry(&self) -> String {
        format!("[127.0.0.1]:{}", self.proxy.port())
    }

    /// A known_hosts file with these contents.
    fn known_hosts(&self, text: &str) -> std::path::PathBuf {
        let path = self
            .dir
            .path()
            .join(format!("known_hosts-{}", rand_suffix()));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn trusting(&self) -> String {
        format!("{} {}\n", self.entry(), self.host_key)
    }

    fn config(&self, known_hosts: &Path) -> SshConfig {
        let mut c = sandbox_config(&self.server.path).with_port(self.proxy.port());
        c.host = "127.0.0.1".into();
        c.host_keys = HostKeyPolicy::KnownHosts(known_hosts.to_owned());
        c
    }

    /// Dials, expecting failure within the bound and exactly one connection.
    async fn fail(&self, config: &SshConfig, connections: usize) -> Error {
        self.fail_within(config, connections, BOUND).await
    }

    /// [`Fixture::fail`] with a bound of its own.
    async fn fail_within(&self, config: &SshConfig, connections: usize, bound: Duration) -> Error {
        let t = Instant::now();
        let e = match ssh_socket::dial(config).await {
            Ok(_) => panic!("dial unexpectedly succeeded"),
            Err(e) => e,
        };
        let took = t.elapsed();
        assert!(took < bound, "{e} took {took:?}");
        // Give a (wrong) retry the chance to show up.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(self.proxy.accepted(), connections, "retried: {e}");
        println!("{took:?}: {e}");
        e
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

#[tokio::test]
async fn trusted_plain_entry_dials() {
    let f = Fixture::new().await;
    let kh = f.known_hosts(&f.trusting());
    let socket = ssh_socket::dial(&f.config(&kh)).await.unwrap();
    assert!(!socket.is_closed());
}

#[tokio::test]
async fn unknown_host_key_is_permanent() {
    let f = Fixture::new().await;
    let kh = f.known_hosts("# nothing here\n");
    let e = f.fail(&f.config(&kh), 1).await;
    assert!(matches!(e, Error::HostKeyUnknown { .. }), "{e:?}");
    assert!(e.is_permanent() && e.is_host_key());
    assert_eq!(e.stage(), Stage::Handshake);
    // Listed only under the default port: still unknown for this port.
    let kh = f.known_hosts(&format!("127.0.0.1 {}\n", f.host_key));
    let e = f.fail(&f.config(&kh), 2).await;
    assert!(matches!(e, Error::HostKeyUnknown { .. }), "{e:?}");
}

#[tokio::test]
async fn missing_known_hosts_file_means_unknown_host_key() {
    let f = Fixture::new().await;
    let e = f.fail(&f.config(&f.dir.path().join("absent")), 1).await;
    match &e {
        Error::HostKeyUnknown { note, .. } => assert!(note.contains("does not exist"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn changed_host_key_is_its_own_permanent_error() {
    let f = Fixture::new().await;
    let other = f.dir.path().join("other_host_key");
    keygen(&other, "ed25519", "");
    let other = public_key(&other);
    let other: Vec<_> = other.split_whitespace().take(2).collect();
    let kh = f.known_hosts(&format!("# line 1\n{} {}\n", f.entry(), other.join(" ")));
    let e = f.fail(&f.config(&kh), 1).await;
    match &e {
        Error::HostKeyChanged { line, .. } => assert_eq!(*line, 2),
        other => panic!("{other:?}"),
    }
    assert!(e.is_permanent());
}

#[tokio::test]
async fn hashed_known_hosts_entry_is_honoured() {
    let f = Fixture::new().await;
    let kh = f.known_hosts(&f.trusting());
    let st = std::process::Command::new("ssh-keygen")
        .arg("-q")
        .arg("-H")
        .arg("-f")
        .arg(&kh)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&kh).unwrap();
    assert!(text.starts_with("|1|"), "not hashed: {text}");
    assert!(!text.contains("127.0.0.1"));
    let socket = ssh_socket::dial(&f.config(&kh)).await.unwrap();
    assert!(!socket.is_closed());
}

#[tokio::test]
async fn revoked_host_key_is_refused() {
    let f = Fixture::new().await;
    let kh = f.known_hosts(&format!("{}@revoked * {}\n", f.trusting(), f.host_key));
    let e = f.fail(&f.config(&kh), 1).await;
    match &e {
        Error::HostKeyRevoked { line, .. } => assert_eq!(*line, 2),
        other => panic!("{other:?}"),
    }
    assert!(e.is_permanent());
}

#[tokio::test]
async fn cert_authority_only_and_no_certificate_is_refused_with_a_clear_message() {
    let f = Fixture::new().await;
    let kh = f.known_hosts(&format!("@cert-authority * {}\n", f.host_key));
    let e = f.fail(&f.config(&kh), 1).await;
    assert!(
        matches!(e, Error::HostKeyNotCertified { line: 1, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("presented no certificate"), "{e}");
}

#[tokio::test]
async fn wrong_user_is_rejected_permanently() {
    let f = Fixture::new().await;
    let kh = f.known_hosts(&f.trusting());
    let mut c = f.config(&kh);
    c.user = "no-such-user-kvm2".into();
    let e = f.fail(&c, 1).await;
    assert!(matches!(e, Error::AuthRejected { .. }), "{e:?}");
    assert!(e.is_permanent() && e.is_auth());
}

#[tokio::test]
async fn key_not_in_authorized_keys_is_rejected_permanently() {
    let f = Fixture::new().await;
    let kh = f.known_hosts(&f.trusting());
    let key = f.dir.path().join("stranger");
    keygen(&key, "ed25519", "");
    let mut c = f.config(&kh);
    c.key = ssh_socket::KeySource::File(key);
    let e = f.fail(&c, 1).await;
    assert!(matches!(e, Error::AuthRejected { .. }), "{e:?}");
    assert_eq!(e.stage(), Stage::Auth);
}

#[tokio::test]
async fn encrypted_key_without_passphrase_fails_before_connecting() {
    let f = Fixture::new().await;
    let kh = f.known_hosts(&f.trusting());
    let key = f.dir.path().join("encrypted");
    keygen(&key, "ed25519", "correct horse");
    let mut c = f.config(&kh);
    c.key = ssh_socket::KeySource::File(key.clone());
    let e = f.fail(&c, 0).await;
    assert!(matches!(e, Error::KeyEncrypted { .. }), "{e:?}");
    assert!(e.is_permanent());
    // A wrong passphrase is the same error.
    let c = c.with_key_passphrase(ssh_socket::Passphrase::new("Tr0ub4dor"));
    let e = f.fail_within(&c, 0, KDF_BOUND).await;
    assert!(matches!(e, Error::KeyEncrypted { .. }), "{e:?}");
    assert!(!format!("{e} {e:?} {c:?}").contains("Tr0ub4dor"));
}

#[tokio::test]
async fn missing_key_file_fails_before_connecting() {
    let f = Fixture::new().await;
    let kh = f.known_hosts(&f.trusting());
    let mut c = f.config(&kh);
    c.key = ssh_socket::KeySource::File(f.dir.path().join("no-such-key"));
    let e = f.fail(&c, 0).await;
    assert!(matches!(e, Error::KeyFileUnreadable { .. }), "{e:?}");
    assert!(e.is_permanent());
    assert_eq!(e.stage(), Stage::Files);
}

#[tokio::test]
async fn missing_remote_socket_is_a_transient_channel_refusal() {
    let f = Fixture::new().await;
    let kh = f.known_hosts(&f.trusting());
    let c = f
        .config(&kh)
        .with_remote_socket(f.dir.path().join("no.sock").to_str().unwrap());
    let e = f.fail(&c, 1).await;
    assert!(matches!(e, Error::ChannelOpenRefused { .. }), "{e:?}");
    assert!(!e.is_permanent());
    assert_eq!(e.stage(), Stage::ChannelOpen);
}

#[tokio::test]
async fn refused_tcp_connection_is_transient() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = SshConfig::new(
        "127.0.0.1",
        "root",
        "/nonexistent-is-read-first",
        HostKeyPolicy::insecure_ignore_host_key(),
        libvirt_rpc::SYSTEM_SOCKET,
    );
    // The key is read before connecting: use a real one.
    let d = testkit::Descriptor::require();
    let mut c = c.with_port(port);
    c.key = ssh_socket::KeySource::File(d.ssh.key_path.clone());
    let t = Instant::now();
    let e = ssh_socket::dial(&c).await.unwrap_err();
    assert!(t.elapsed() < BOUND);
    assert!(matches!(e, Error::TcpConnect { .. }), "{e:?}");
    assert!(!e.is_permanent());
}

#[tokio::test]
async fn silent_server_times_out_in_the_handshake_stage() {
    // Accepts TCP, never speaks SSH.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let d = testkit::Descriptor::require();
    let c = SshConfig::new(
        "127.0.0.1",
        "root",
        d.ssh.key_path.clone(),
        HostKeyPolicy::KnownHosts(d.ssh.known_hosts_path.clone()),
        libvirt_rpc::SYSTEM_SOCKET,
    )
    .with_port(port)
    .with_connect_timeout(Duration::from_millis(500));
    let t = Instant::now();
    let e = ssh_socket::dial(&c).await.unwrap_err();
    let took = t.elapsed();
    hold.abort();
    assert!(took < BOUND, "{took:?}");
    assert!(
        matches!(
            e,
            Error::Timeout {
                stage: Stage::Handshake,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!e.is_permanent() && e.is_timeout());
}

#[tokio::test] // current-thread runtime: the dial logs on this thread
async fn insecure_ignore_host_key_accepts_an_unknown_host_and_warns_every_dial() {
    let (captured, _guard) = capture(tracing::Level::WARN);

    let f = Fixture::new().await;
    let mut c = f.config(&f.dir.path().join("absent"));
    c.host_keys = HostKeyPolicy::insecure_ignore_host_key();
    for _ in 0..2 {
        let socket = ssh_socket::dial(&c).await.unwrap();
        assert!(!socket.is_closed());
    }
    let logs = captured.text();
    assert_eq!(
        logs.matches("host key verification is DISABLED").count(),
        2,
        "{logs}"
    );
}

// --- An sshd of the test's own: forwarding policy, key types, rotation. ---

#[tokio::test]
async fn forwarding_disabled_is_a_channel_refusal() {
    let sshd = OwnSshd::start("AllowStreamLocalForwarding no");
    let server = UnixServer::echo();
    let t = Instant::now();
    let e = ssh_socket::dial(&own_config(&sshd, &server.path))
        .await
        .unwrap_err();
    assert!(t.elapsed() < BOUND);
    assert!(matches!(e, Error::ChannelOpenRefused { .. }), "{e:?}");
}

async fn echo_once(config: &SshConfig) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = ssh_socket::dial(config).await.unwrap();
    socket.write_all(b"hello").await.unwrap();
    let mut buf = [0u8; 5];
    socket.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"hello");
}

#[tokio::test]
async fn ecdsa_rsa_and_encrypted_keys_authenticate() {
    let sshd = OwnSshd::start("");
    let server = UnixServer::echo();
    let mut authorized = String::new();
    let mut keys = Vec::new();
    for (kind, pass) in [("ecdsa", ""), ("rsa", ""), ("ed25519", "s3cret pass")] {
        let path = sshd.dir.path().join(format!("client_{kind}"));
        keygen(&path, kind, pass);
        authorized.push_str(&format!("{}\n", public_key(&path)));
        keys.push((path, pass));
    }
    std::fs::write(&sshd.authorized_keys, authorized).unwrap();
    for (path, pass) in keys {
        let mut c = own_config(&sshd, &server.path);
        c.key = ssh_socket::KeySource::File(path);
        if !pass.is_empty() {
            c = c.with_key_passphrase(ssh_socket::Passphrase::new(pass));
        }
        echo_once(&c).await;
    }
}

#[tokio::test]
async fn rotated_key_file_is_used_by_the_next_dial() {
    let sshd = OwnSshd::start("");
    let server = UnixServer::echo();
    let config = own_config(&sshd, &server.path);
    echo_once(&config).await;

    // Rotate: a new key in the same file; only the new key is authorized.
    keygen(&sshd.client_key, "ed25519", "");
    std::fs::write(
        &sshd.authorized_keys,
        format!("{}\n", public_key(&sshd.client_key)),
    )
    .unwrap();
    echo_once(&config).await;

    // And the old key really is gone: a key not authorized fails.
    let stale = sshd.dir.path().join("stale");
    keygen(&stale, "ed25519", "");
    let mut c = config.clone();
    c.key = ssh_socket::KeySource::File(stale);
    let e = ssh_socket::dial(&c).await.unwrap_err();
    assert!(matches!(e, Error::AuthRejected { .. }), "{e:?}");
}
