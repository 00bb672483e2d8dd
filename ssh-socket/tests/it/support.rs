//! ssh-socket's own test helpers: configs for the sandbox's sshd and for an
//! sshd of the test's own ([`testkit::sshd::OwnSshd`]), unix socket servers
//! on the host to forward to, and a fast keepalive.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ssh_socket::{HostKeyPolicy, Keepalive, SshConfig};
use testkit::Descriptor;
use testkit::sshd::OwnSshd;
use tokio::io::AsyncReadExt;
use tokio::net::UnixListener;
use tokio::task::JoinHandle;

/// A config for the sandbox's sshd, forwarding to `remote_socket`.
pub fn sandbox_config(remote_socket: &Path) -> SshConfig {
    let d = Descriptor::require();
    SshConfig::new(
        d.ssh.host.clone(),
        d.ssh.user.clone(),
        d.ssh.key_path.clone(),
        HostKeyPolicy::KnownHosts(d.ssh.known_hosts_path.clone()),
        remote_socket.to_str().unwrap(),
    )
    .with_port(d.ssh.port)
    .with_connect_timeout(Duration::from_secs(10))
}

/// A config for `sshd`, forwarding to `remote_socket`.
pub fn own_config(sshd: &OwnSshd, remote_socket: &Path) -> SshConfig {
    SshConfig::new(
        "127.0.0.1",
        sshd.user.clone(),
        sshd.client_key.clone(),
        HostKeyPolicy::KnownHosts(sshd.known_hosts.clone()),
        remote_socket.to_str().unwrap(),
    )
    .with_port(sshd.port)
    .with_connect_timeout(Duration::from_secs(10))
}

/// A keepalive for tests: dead after 2 s of silence.
pub fn fast_keepalive() -> Keepalive {
    Keepalive::new(Duration::from_millis(500), 3)
}

/// A unix socket server on the host; aborted on drop.
pub struct UnixServer {
    /// Holds the socket.
    _dir: tempfile::TempDir,
    /// The socket's path.
    pub path: PathBuf,
    task: JoinHandle<()>,
}

impl Drop for UnixServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl UnixServer {
    /// Echoes every byte back.
    pub fn echo() -> Self {
        Self::serve(|mut s| async move {
            let (mut r, mut w) = s.split();
            let _ = tokio::io::copy(&mut r, &mut w).await;
        })
    }

    /// Reads and discards everything.
    pub fn sink() -> Self {
        Self::serve(|mut s| async move {
            let mut buf = vec![0u8; 256 * 1024];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        })
    }

    fn serve<F, Fut>(handler: F) -> Self
    where
        F: Fn(tokio::net::UnixStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("remote.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((s, _)) = listener.accept().await {
                conns.spawn(handler(s));
            }
        });
        Self {
            _dir: dir,
            path,
            task,
        }
    }
}
