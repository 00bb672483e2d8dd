//! SSH for tests: keys (`ssh-keygen`), known_hosts files, free ports, and
//! an sshd of the test's own (fresh host and client keys, in a temp dir,
//! killed on drop).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sandbox_kit::Descriptor;

/// Writes a key pair of `kind` (`ed25519`, `rsa`...) at `path` and
/// `path.pub`, replacing any.
pub fn keygen(path: &Path, kind: &str, passphrase: &str) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(path.with_extension("pub"));
    let mut args = vec![
        "-q",
        "-t",
        kind,
        "-N",
        passphrase,
        "-f",
        path.to_str().unwrap(),
    ];
    if kind == "rsa" {
        args.extend(["-b", "2048"]);
    }
    let out = Command::new("ssh-keygen").args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "ssh-keygen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh ed25519 key pair without passphrase at `dir/name`; returns the
/// private key's path.
pub fn new_key(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    keygen(&path, "ed25519", "");
    path
}

/// The public key (one line) of the private key at `path`.
pub fn public_key(path: &Path) -> String {
    std::fs::read_to_string(format!("{}.pub", path.display()))
        .unwrap()
        .trim()
        .to_owned()
}

/// A known_hosts file at `dir/known_hosts` holding the sandbox's entries
/// and its host key also at `[127.0.0.1]:port` (for a relay in front of
/// the sandbox's sshd).
pub fn known_hosts_with_port(sandbox: &Descriptor, dir: &Path, port: u16) -> PathBuf {
    let host_key = public_key(&sandbox.ssh.host_key_path);
    let path = dir.join("known_hosts");
    std::fs::write(
        &path,
        format!(
            "[127.0.0.1]:{port} {host_key}\n{}",
            std::fs::read_to_string(&sandbox.ssh.known_hosts_path).unwrap()
        ),
    )
    .unwrap();
    path
}

/// The user this test runs as.
pub fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// An sshd of the test's own on 127.0.0.1, in a temp dir, killed on drop.
pub struct OwnSshd {
    /// Its temp dir (keys, configuration, known_hosts).
    pub dir: tempfile::TempDir,
    /// The port it listens on.
    pub port: u16,
    /// The user to log in as (the one running the test).
    pub user: String,
    /// A client key it accepts.
    pub client_key: PathBuf,
    /// A known_hosts listing its host key under `[127.0.0.1]:port`.
    pub known_hosts: PathBuf,
    /// Its host public key (one line).
    pub host_pub: String,
    /// The authorized_keys file it reads (holds `client_key`'s public key).
    pub authorized_keys: PathBuf,
    child: Child,
}

impl Drop for OwnSshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What [`OwnSshd::start_certified`] signs with.
struct HostCert<'a> {
    ca: &'a Path,
    principals: &'a str,
    validity: &'a str,
}

impl OwnSshd {
    /// Starts an sshd with a fresh ed25519 host key and client key, local
    /// TCP and stream-local forwarding allowed, and `extra_config` lines
    /// (which may override `AllowStreamLocalForwarding`).
    pub fn start(extra_config: &str) -> Self {
        Self::start_with(extra_config, None)
    }

    /// The OpenSSH client config block naming this sshd `alias`: `extra`
    /// lines first (e.g. `ProxyJump ...`, `IdentityAgent ...`), then its
    /// address, port and user, and — unless `extra` names its own — its
    /// client key and known_hosts file.
    pub fn ssh_config_block(&self, alias: &str, extra: &[String]) -> String {
        let named = |keys: &[&str]| extra.iter().any(|l| keys.iter().any(|k| l.starts_with(k)));
        let mut lines = extra.to_vec();
        lines.push("HostName 127.0.0.1".to_owned());
        lines.push(format!("Port {}", self.port));
        lines.push(format!("User {}", self.user));
        if !named(&["IdentityFile", "IdentityAgent"]) {
            lines.push(format!("IdentityFile {}", self.client_key.display()));
        }
        if !named(&["UserKnownHostsFile"]) {
            lines.push(format!("UserKnownHostsFile {}", self.known_hosts.display()));
        }
        let mut block = format!("Host {alias}\n");
        for line in lines {
            block.push_str(&format!("  {line}\n"));
        }
        block
    }

    /// [`start`](Self::start), its host key certified by the CA key
    /// `ca` (a private key file) for `principals` (comma-separated) over
    /// `validity` (ssh-keygen's `-V`, e.g. `-5m:+1h`), served as sshd's
    /// `HostCertificate`.
    pub fn start_certified(
        extra_config: &str,
        ca: &Path,
        principals: &str,
        validity: &str,
    ) -> Self {
        Self::start_with(
            extra_config,
            Some(HostCert {
                ca,
                principals,
                validity,
            }),
        )
    }

    fn start_with(extra_config: &str, cert: Option<HostCert<'_>>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let host_key = dir.path().join("host_ed25519");
        keygen(&host_key, "ed25519", "");
        let certificate = match cert {
            Some(c) => {
                let out = Command::new("ssh-keygen")
                    .args(["-q", "-s"])
                    .arg(c.ca)
                    .args([
                        "-I",
                        "egress-test-host",
                        "-h",
                        "-n",
                        c.principals,
                        "-V",
                        c.validity,
                    ])
                    .arg(host_key.with_extension("pub"))
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "ssh-keygen -s failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                format!(
                    "HostCertificate {}\n",
                    dir.path().join("host_ed25519-cert.pub").display()
                )
            }
            None => String::new(),
        };
        let client_key = new_key(dir.path(), "client_ed25519");
        let authorized_keys = dir.path().join("authorized_keys");
        std::fs::write(&authorized_keys, format!("{}\n", public_key(&client_key))).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = crate::free_port();
        let cfg = dir.path().join("sshd_config");
        let extra = if extra_config.contains("AllowStreamLocalForwarding") {
            extra_config.to_owned()
        } else {
            format!("AllowStreamLocalForwarding local\n{extra_config}")
        };
        std::fs::write(
            &cfg,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {hk}\nPidFile {pid}\n\
                 AuthorizedKeysFile {ak}\nStrictModes no\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nAllowTcpForwarding local\n\
                 LogLevel ERROR\n{certificate}{extra}\n",
                hk = host_key.display(),
                pid = dir.path().join("sshd.pid").display(),
                ak = authorized_keys.display(),
            ),
        )
        .unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let host_pub = public_key(&host_key);
        let known_hosts = dir.path().join("known_hosts");
        std::fs::write(&known_hosts, format!("[127.0.0.1]:{port} {host_pub}\n")).unwrap();
        // Wait (up to 2 s) until it listens.
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Self {
            dir,
            port,
            user: whoami(),
            client_key,
            known_hosts,
            host_pub,
            authorized_keys,
            child,
        }
    }
}

/// OpenSSH's ssh-agent on a socket of its own; killed on drop.
pub struct Agent {
    _dir: tempfile::TempDir,
    /// The agent's socket (what `SSH_AUTH_SOCK` would name).
    pub socket: PathBuf,
    child: Child,
}

impl Agent {
    /// Starts an agent holding no key.
    pub fn start() -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("agent.sock");
        let child = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !socket.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "ssh-agent did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Agent {
            _dir: dir,
            socket,
            child,
        }
    }

    /// Adds the private key file `key` (`ssh-add`).
    pub fn add(&self, key: &Path) {
        let status = Command::new("ssh-add")
            .arg(key)
            .env("SSH_AUTH_SOCK", &self.socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "ssh-add {}", key.display());
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
