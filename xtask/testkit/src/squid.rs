//! A real Squid (Debian's, installed by `cargo xtask setup`) on one address
//! of this machine, for tests of proxies the operator does not make: one
//! that serves every CONNECT, or one that denies every request (403).

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the Squid lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Every request, CONNECT to any port included.
    AllowAll,
    /// Nothing: every request is answered 403.
    DenyAll,
}

/// A running Squid; stopped (killed) when dropped.
pub struct Squid {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Squid {
    /// Starts Squid on `ip` (a free port) with `policy`, in the foreground
    /// (`-N`), its logs and pid in a directory of its own; returns once it
    /// accepts connections (within 30 s, or panics naming its log).
    pub fn start(ip: IpAddr, policy: Policy) -> Squid {
        let port = crate::free_port();
        let dir = tempfile::tempdir().unwrap();
        // Squid drops to the `proxy` user: its files must be writable.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let path = |name: &str| -> PathBuf { dir.path().join(name) };
        let access = match policy {
            Policy::AllowAll => "http_access allow all",
            Policy::DenyAll => "http_access deny all",
        };
        let addr = SocketAddr::new(ip, port);
        let config = format!(
            "http_port {addr}\n{access}\ncache deny all\ncache_mem 8 MB\n\
             pid_filename {}\ncache_log {}\naccess_log none\ncoredump_dir {}\n\
             shutdown_lifetime 0 seconds\n",
            path("squid.pid").display(),
            path("cache.log").display(),
            dir.path().display(),
        );
        std::fs::write(path("squid.conf"), config).unwrap();
        // Its own process group: dropping it ends every helper it forked.
        let child = std::os::unix::process::CommandExt::process_group(
            &mut Command::new("/usr/sbin/squid"),
            0,
        )
        .args(["-N", "-f"])
        .arg(path("squid.conf"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(path("stderr.log")).unwrap())
        .spawn()
        .expect("squid starts (cargo xtask setup installs it)");
        let squid = Squid {
            child,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "squid on {addr} not listening within 30 s: {}",
                squid.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        squid
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its cache log and stderr, for a failure message.
    pub fn log(&self) -> String {
        let read =
            |name: &str| std::fs::read_to_string(self._dir.path().join(name)).unwrap_or_default();
        format!("{}{}", read("cache.log"), read("stderr.log"))
    }
}

impl Drop for Squid {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
