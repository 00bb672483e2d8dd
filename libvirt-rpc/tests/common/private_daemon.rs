//! A libvirtd of the test's own: same binary as the sandbox's, but in a
//! private mount namespace (tmpfs over libvirt's state directories) with
//! only the storage driver loaded, serving `storage:///system` (with a `dir`
//! pool) and `test:///default`. Tests that kill the daemon, or that provoke
//! daemon-side stream failures, use it so the shared sandbox daemon is never
//! at risk. Dropping it SIGKILLs the daemon (by its pid) and removes the
//! directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use libvirt_rpc::{Client, Config, OpenFlags};

pub struct PrivateDaemon {
    dir: tempfile::TempDir,
    pid: Option<i32>,
    child: Option<std::process::Child>,
}

pub const STORAGE_URI: &str = "storage:///system";
pub const POOL: &str = "lvrpc-private";

impl PrivateDaemon {
    pub fn start() -> Self {
        Self::start_with("")
    }

    /// Starts a daemon whose `libvirtd.conf` also holds `extra` lines.
    pub fn start_with(extra: &str) -> Self {
        Self::start_inner(extra, "")
    }

    /// Starts a daemon that also listens for plain TCP on 127.0.0.1:`port`
    /// (`--listen`, `listen_tcp`, no TLS, auth none).
    pub fn start_tcp(port: u16) -> Self {
        let conf = format!(
            "listen_tls = 0\nlisten_tcp = 1\nlisten_addr = \"127.0.0.1\"\n\
             tcp_port = \"{port}\"\nauth_tcp = \"none\"\n"
        );
        Self::start_inner(&conf, "--listen")
    }

    fn start_inner(extra: &str, args: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("lvrpc-daemon-")
            .tempdir()
            .expect("temp dir");
        let p = dir.path();
        std::fs::create_dir_all(p.join("drivers")).unwrap();
        std::fs::create_dir_all(p.join("run")).unwrap();
        std::fs::create_dir_all(p.join("pool")).unwrap();
        std::os::unix::fs::symlink(
            "/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_storage.so",
            p.join("drivers/libvirt_driver_storage.so"),
        )
        .unwrap();
        std::fs::write(
            p.join("libvirtd.conf"),
            format!(
                "unix_sock_dir = \"{run}\"\nauth_unix_ro = \"none\"\nauth_unix_rw = \"none\"\n\
                 max_client_requests = 64\nlog_outputs = \"3:file:{log}\"\n{extra}",
                run = p.join("run").display(),
                log = p.join("libvirtd.log").display()
            ),
        )
        .unwrap();
        let script = format!(
            "set -e\n\
             for d in /run/libvirt /etc/libvirt /var/lib/libvirt /var/cache/libvirt; do \
               mkdir -p $d; mount -t tmpfs tmpfs $d; done\n\
             export LIBVIRT_DRIVER_DIR={drivers}\n\
             exec /usr/sbin/libvirtd -f {conf} -p {pid} {args}\n",
            drivers = p.join("drivers").display(),
            conf = p.join("libvirtd.conf").display(),
            pid = p.join("libvirtd.pid").display(),
        );
        std::fs::write(p.join("start.sh"), script).unwrap();
        // `unshare` and `sh` exec, so the child *is* libvirtd (no -d).
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh"])
            .arg(p.join("start.sh"))
            .stdout(std::fs::File::create(p.join("out.log")).unwrap())
            .stderr(std::fs::File::create(p.join("err.log")).unwrap())
            .spawn()
            .expect("spawn unshare libvirtd");
        let mut d = Self {
            dir,
            pid: None,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let pid = std::fs::read_to_string(d.dir.path().join("libvirtd.pid"))
                .ok()
                .and_then(|s| s.trim().parse().ok());
            if let Some(pid) = pid {
                d.pid = Some(pid);
                if d.socket().exists() {
                    return d;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("private libvirtd did not start: {}", d.log());
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("run/libvirt-sock")
    }

    pub fn pool_dir(&self) -> PathBuf {
        self.dir.path().join("pool")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn pid(&self) -> i32 {
        self.pid.expect("daemon pid")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("libvirtd.log")).unwrap_or_default()
    }

    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the daemon.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    pub async fn connect(&self, uri: &str, config: Config) -> Client {
        let mut last = None;
        for _ in 0..100 {
            match tokio::net::UnixStream::connect(self.socket()).await {
                Ok(s) => {
                    return tokio::time::timeout(
                        Duration::from_secs(30),
                        Client::connect(s, uri, OpenFlags::empty(), config),
                    )
                    .await
                    .expect("handshake within 30 s")
                    .expect("handshake");
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("cannot connect to the private daemon: {last:?}");
    }

    /// Connects to `storage:///system` and makes sure the `dir` pool exists.
    pub async fn storage(&self) -> Client {
        let c = self.connect(STORAGE_URI, Config::default()).await;
        if c.storage_pool_lookup_by_name(POOL).await.is_err() {
            let xml = format!(
                "<pool type='dir'><name>{POOL}</name><target><path>{}</path></target></pool>",
                self.pool_dir().display()
            );
            // REMOTE_PROC_STORAGE_POOL_CREATE_XML = 76: {xml, flags} -> pool
            let _: libvirt_rpc::StoragePool = c
                .call(76, &(xml.as_str(), 0u32))
                .await
                .expect("create private pool");
        }
        c
    }

    /// SIGKILLs the daemon.
    pub fn kill(&mut self) {
        self.pid = None;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateDaemon {
    fn drop(&mut self) {
        self.kill();
    }
}
