//! Shared helpers for the integration tests: the sandbox's sshd, unix
//! socket servers on the host, sshd instances of a test's own, and a TCP
//! relay that freezes on command.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ssh_socket::{HostKeyPolicy, Keepalive, SshConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UnixListener};
use tokio::task::JoinHandle;

/// A config for the sandbox's sshd, forwarding to `remote_socket`.
pub fn sandbox_config(remote_socket: &Path) -> SshConfig {
    let d = xtask::Descriptor::require();
    SshConfig::new(
        d.ssh.host.clone(),
        d.ssh.user.clone(),
        d.ssh.key_path.clone(),
        HostKeyPolicy::KnownHosts(d.ssh.known_hosts_path.clone()),
    )
    .with_port(d.ssh.port)
    .with_remote_socket(remote_socket.to_str().unwrap())
    .with_connect_timeout(Duration::from_secs(10))
}

/// A unix socket server on the host; aborted on drop.
pub struct UnixServer {
    pub dir: tempfile::TempDir,
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
        Self { dir, path, task }
    }
}

/// An sshd of the test's own, in a temp dir, killed on drop.
pub struct OwnSshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub user: String,
    /// Client key accepted by this sshd.
    pub client_key: PathBuf,
    /// A known_hosts listing this sshd's host key under `[127.0.0.1]:port`.
    pub known_hosts: PathBuf,
    pub host_pub: String,
    pub authorized_keys: PathBuf,
    child: Child,
}

impl Drop for OwnSshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
    let st = Command::new("ssh-keygen").args(&args).status().unwrap();
    assert!(st.success(), "ssh-keygen failed");
}

pub fn public_key(path: &Path) -> String {
    std::fs::read_to_string(format!("{}.pub", path.display()))
        .unwrap()
        .trim()
        .to_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl OwnSshd {
    /// Starts an sshd with a fresh ed25519 host key and client key.
    pub fn start(extra_config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let host_key = dir.path().join("host_ed25519");
        keygen(&host_key, "ed25519", "");
        let client_key = dir.path().join("client_ed25519");
        keygen(&client_key, "ed25519", "");
        let authorized_keys = dir.path().join("authorized_keys");
        std::fs::write(&authorized_keys, format!("{}\n", public_key(&client_key))).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = free_port();
        let cfg = dir.path().join("sshd_config");
        std::fs::write(
            &cfg,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {hk}\nPidFile {pid}\n\
                 AuthorizedKeysFile {ak}\nStrictModes no\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nAllowTcpForwarding local\n\
                 LogLevel ERROR\n{extra}\n",
                hk = host_key.display(),
                pid = dir.path().join("sshd.pid").display(),
                ak = authorized_keys.display(),
                extra = if extra_config.contains("AllowStreamLocalForwarding") {
                    extra_config.to_owned()
                } else {
                    format!("AllowStreamLocalForwarding local\n{extra_config}")
                },
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
        // Wait until it listens.
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let user = whoami();
        Self {
            dir,
            port,
            user,
            client_key,
            known_hosts,
            host_pub,
            authorized_keys,
            child,
        }
    }

    pub fn config(&self, remote_socket: &Path) -> SshConfig {
        SshConfig::new(
            "127.0.0.1",
            self.user.clone(),
            self.client_key.clone(),
            HostKeyPolicy::KnownHosts(self.known_hosts.clone()),
        )
        .with_port(self.port)
        .with_remote_socket(remote_socket.to_str().unwrap())
        .with_connect_timeout(Duration::from_secs(10))
    }
}

fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A TCP relay between the client and an sshd that can freeze on command:
/// once frozen it stops reading and writing in both directions but keeps
/// the sockets open (no FIN, no RST), like a host that vanished.
pub struct Relay {
    pub port: u16,
    frozen: Arc<AtomicBool>,
    /// Set when the client side of the relayed connection was closed.
    client_gone: Arc<tokio::sync::Notify>,
    task: JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Buffer sizes for the relay's and the client's sockets.
#[derive(Clone, Copy)]
pub enum Buffers {
    /// Kernel defaults (the SSH window runs out first).
    Default,
    /// 8 KiB (the TCP send buffer fills first).
    Small,
}

impl Relay {
    pub async fn start(upstream_port: u16, buffers: Buffers) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let client_gone = Arc::new(tokio::sync::Notify::new());
        let f = frozen.clone();
        let gone = client_gone.clone();
        let task = tokio::spawn(async move {
            let (client, _) = listener.accept().await.unwrap();
            if let Buffers::Small = buffers {
                let s = socket2::SockRef::from(&client);
                s.set_recv_buffer_size(8 * 1024).unwrap();
                s.set_send_buffer_size(8 * 1024).unwrap();
            }
            let server = TcpStream::connect(("127.0.0.1", upstream_port))
                .await
                .unwrap();
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let up = tokio::spawn(pipe(cr, sw, f.clone(), Some(gone)));
            let down = tokio::spawn(pipe(sr, cw, f, None));
            let _ = tokio::join!(up, down);
        });
        Self {
            port,
            frozen,
            client_gone,
            task,
        }
    }

    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Waits until the client closed or reset its side (even when frozen:
    /// the relay still notices EOF/RST, it just stops moving data).
    pub async fn client_gone(&self) {
        self.client_gone.notified().await;
    }

    /// A client socket (with small buffers for [`Buffers::Small`]),
    /// connected to the relay.
    pub async fn connect_client(&self, buffers: Buffers) -> TcpStream {
        let socket = TcpSocket::new_v4().unwrap();
        if let Buffers::Small = buffers {
            socket.set_send_buffer_size(8 * 1024).unwrap();
            socket.set_recv_buffer_size(8 * 1024).unwrap();
        }
        socket
            .connect(([127, 0, 0, 1], self.port).into())
            .await
            .unwrap()
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
    gone: Option<Arc<tokio::sync::Notify>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if frozen.load(Ordering::SeqCst) {
            // Frozen: move nothing, but notice the client going away
            // (readable with EOF or an error) without consuming data.
            loop {
                let mut peek = [0u8; 1];
                // A reset with unread data pending only shows in SO_ERROR.
                let reset = socket2::SockRef::from(from.as_ref())
                    .take_error()
                    .map_or(true, |e| e.is_some());
                let peeked = if reset {
                    Ok(0)
                } else {
                    tokio::select! {
                        r = from.peek(&mut peek) => r,
                        () = tokio::time::sleep(Duration::from_millis(5)) => Ok(1),
                    }
                };
                match peeked {
                    Ok(0) | Err(_) => {
                        if let Some(g) = &gone {
                            g.notify_one();
                        }
                        // Keep the sockets open (no FIN/RST from us).
                        std::future::pending::<()>().await;
                    }
                    Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
        }
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => {
                    if let Some(g) = &gone {
                        g.notify_one();
                    }
                    return;
                }
                Ok(n) => n,
            },
            () = tokio::time::sleep(Duration::from_millis(5)) => continue,
        };
        if frozen.load(Ordering::SeqCst) {
            // Data already read is held, never sent; the loop's top waits.
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A keepalive for tests: dead after 2 s of silence.
pub fn fast_keepalive() -> Keepalive {
    Keepalive::new(Duration::from_millis(500), 3)
}

/// A transparent TCP forwarder to an sshd that counts the connections it
/// accepted (to prove a failed dial did not retry).
pub struct CountingProxy {
    pub port: u16,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CountingProxy {
    pub async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                conns.spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream_port)).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Self {
            port,
            accepted,
            task,
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}
