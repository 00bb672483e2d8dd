//! A libvirtd of the test's own: the sandbox's binary in a private mount
//! namespace (tmpfs over libvirt's state directories) with only the
//! storage driver loaded, serving `storage:///system` and `test:///default`
//! on a socket in a temp dir; variants listen on TCP or TLS, or
//! authenticate with polkit through a D-Bus and polkitd of their own. Tests
//! that kill the daemon, freeze it or provoke daemon-side failures use it
//! so the shared sandbox daemon is never at risk. Dropping it SIGKILLs the
//! daemon (and its helpers) and removes the directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::Join;
use tokio::process::{Child as TokioChild, ChildStdin, ChildStdout};

/// A running private libvirtd; see the module docs.
pub struct PrivateLibvirtd {
    dir: tempfile::TempDir,
    pid: Option<i32>,
    child: Option<std::process::Child>,
    relays: std::sync::Mutex<Vec<TokioChild>>,
}

/// The URI of the storage driver it serves.
pub const STORAGE_URI: &str = "storage:///system";
/// The name tests give the `dir` pool they define in it.
pub const POOL: &str = "lvrpc-private";

impl PrivateLibvirtd {
    /// Starts a daemon with the default configuration.
    pub fn start() -> Self {
        Self::start_with("")
    }

    /// Starts a daemon whose `libvirtd.conf` also holds `extra` lines.
    pub fn start_with(extra: &str) -> Self {
        Self::launch(extra, "", "")
    }

    /// Starts a daemon whose unix sockets authenticate with polkit
    /// (`auth_unix_rw = "polkit"`, as stock distribution hosts do), with
    /// a D-Bus system bus and a polkitd of its own in the daemon's mount
    /// namespace, judging by `rules` (polkit JavaScript, installed as the
    /// only file in `/etc/polkit-1/rules.d`). libvirtd lets root in without
    /// asking polkit, so clients must connect as another user (see
    /// [`socket_as`](Self::socket_as)). Dropping it kills all three.
    pub fn start_polkit(rules: &str) -> Self {
        let conf = "auth_unix_ro = \"polkit\"\nauth_unix_rw = \"polkit\"\n";
        let prelude = format!(
            "for d in /run/dbus /etc/polkit-1/rules.d; do mkdir -p $d; mount -t tmpfs tmpfs $d; done\n\
             cat > /etc/polkit-1/rules.d/10-test.rules <<'RULES'\n{rules}\nRULES\n\
             dbus-daemon --system --fork --print-pid > $DIR/dbus.pid\n\
             /usr/lib/polkit-1/polkitd --no-debug > $DIR/polkitd.log 2>&1 &\n\
             echo $! > $DIR/polkitd.pid\n"
        );
        Self::launch(conf, "", &prelude)
    }

    /// Starts a daemon that also listens for plain TCP on 127.0.0.1:`port`
    /// (`--listen`, `listen_tcp`, no TLS, auth none).
    pub fn start_tcp(port: u16) -> Self {
        let conf = format!(
            "listen_tls = 0\nlisten_tcp = 1\nlisten_addr = \"127.0.0.1\"\n\
             tcp_port = \"{port}\"\nauth_tcp = \"none\"\n"
        );
        Self::launch(&conf, "--listen", "")
    }

    /// Starts a daemon that also listens for TLS on 127.0.0.1:`port` with
    /// the PEM files `ca.pem`, `server-cert.pem` and `server-key.pem` of
    /// `pki` (`--listen`, `listen_tls`, auth none, client certificates
    /// verified against the CA and, when `allowed_dn` is given, the
    /// `tls_allowed_dn_list`).
    pub fn start_tls(port: u16, pki: &Path, allowed_dn: Option<&str>) -> Self {
        let mut conf = format!(
            "listen_tls = 1\nlisten_tcp = 0\nlisten_addr = \"127.0.0.1\"\n\
             tls_port = \"{port}\"\nauth_tls = \"none\"\n\
             ca_file = \"{pki}/ca.pem\"\ncert_file = \"{pki}/server-cert.pem\"\n\
             key_file = \"{pki}/server-key.pem\"\ncrl_file = \"\"\n",
            pki = pki.display()
        );
        if let Some(dn) = allowed_dn {
            conf.push_str(&format!("tls_allowed_dn_list = [\"{dn}\"]\n"));
        }
        Self::launch(&conf, "--listen", "")
    }

    fn launch(extra: &str, args: &str, prelude: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("lvrpc-daemon-")
            .tempdir()
            .expect("temp dir");
        let p = dir.path();
        std::fs::create_dir_all(p.join("drivers")).unwrap();
        std::fs::create_dir_all(p.join("run")).unwrap();
        std::fs::create_dir_all(p.join("pool")).unwrap();
        // Reachable by the unprivileged clients of the polkit tests.
        for d in [p.to_path_buf(), p.join("run")] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::os::unix::fs::symlink(
            "/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_storage.so",
            p.join("drivers/libvirt_driver_storage.so"),
        )
        .unwrap();
        std::fs::write(
            p.join("libvirtd.conf"),
            format!(
                // `extra` first: libvirtd takes a key's first value.
                "{extra}unix_sock_dir = \"{run}\"\nauth_unix_ro = \"none\"\nauth_unix_rw = \"none\"\n\
                 max_client_requests = 64\nlog_outputs = \"3:file:{log}\"\n",
                run = p.join("run").display(),
                log = p.join("libvirtd.log").display()
            ),
        )
        .unwrap();
        let script = format!(
            "set -e\n\
             DIR={dir}\n\
             for d in /run/libvirt /etc/libvirt /var/lib/libvirt /var/cache/libvirt; do \
               mkdir -p $d; mount -t tmpfs tmpfs $d; done\n\
             {prelude}\
             export LIBVIRT_DRIVER_DIR={drivers}\n\
             exec /usr/sbin/libvirtd -f {conf} -p {pid} {args}\n",
            dir = p.display(),
            drivers = p.join("drivers").display(),
            conf = p.join("libvirtd.conf").display(),
            pid = p.join("libvirtd.pid").display(),
        );
        std::fs::write(p.join("start.sh"), script).unwrap();
        let mut d = Self {
            dir,
            pid: None,
            child: None,
            relays: std::sync::Mutex::new(Vec::new()),
        };
        d.spawn();
        d
    }

    /// Runs `start.sh` and waits (20 s at most) for the pid file and the
    /// socket.
    fn spawn(&mut self) {
        let p = self.dir.path();
        // `unshare` and `sh` exec, so the child *is* libvirtd (no -d).
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh"])
            .arg(p.join("start.sh"))
            .stdout(std::fs::File::create(p.join("out.log")).unwrap())
            .stderr(std::fs::File::create(p.join("err.log")).unwrap())
            .spawn()
            .expect("spawn unshare libvirtd");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let pid = std::fs::read_to_string(self.dir.path().join("libvirtd.pid"))
                .ok()
                .and_then(|s| s.trim().parse().ok());
            if let Some(pid) = pid {
                self.pid = Some(pid);
                if self.socket().exists() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("private libvirtd did not start: {}", self.log());
    }

    /// Kills the daemon and starts it again in the same directory, with
    /// the same configuration and socket: what a host's libvirtd restart
    /// does to its clients (their links die; a redial reaches the new
    /// daemon at the same path). Not for polkit daemons.
    pub fn restart(&mut self) {
        self.kill();
        for stale in ["libvirtd.pid", "run/libvirt-sock", "run/libvirt-sock-ro"] {
            let _ = std::fs::remove_file(self.dir.path().join(stale));
        }
        self.spawn();
    }

    /// Its read-write unix socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("run/libvirt-sock")
    }

    /// A directory for a `dir` pool.
    pub fn pool_dir(&self) -> PathBuf {
        self.dir.path().join("pool")
    }

    /// Its temp dir (configuration, logs, pid file, socket).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The daemon's pid.
    ///
    /// # Panics
    /// After [`kill`](Self::kill).
    pub fn pid(&self) -> i32 {
        self.pid.expect("daemon pid")
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("libvirtd.log")).unwrap_or_default()
    }

    /// Whether the daemon still runs.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Sends `sig` (as `kill` takes it: `-STOP` freezes, `-CONT` thaws).
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// A connection to its socket made as user `uid` (not root, whom
    /// libvirtd lets in without asking polkit): through `nc -U` run by
    /// `setpriv`, so the daemon's peer is that process. The `nc` lives as
    /// long as the daemon (or the runtime that spawned it).
    pub fn socket_as(&self, uid: u32) -> Join<ChildStdout, ChildStdin> {
        let mut relay = tokio::process::Command::new("setpriv")
            .args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".to_owned(),
                "nc".to_owned(),
                "-U".to_owned(),
            ])
            .arg(self.socket())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn setpriv nc");
        let io = tokio::io::join(relay.stdout.take().unwrap(), relay.stdin.take().unwrap());
        self.relays.lock().unwrap().push(relay);
        io
    }

    /// SIGKILLs the daemon (and the D-Bus and polkitd of a polkit daemon).
    pub fn kill(&mut self) {
        for helper in ["dbus.pid", "polkitd.pid"] {
            if let Some(pid) = std::fs::read_to_string(self.dir.path().join(helper))
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        for mut relay in self.relays.lock().unwrap().drain(..) {
            let _ = relay.start_kill();
        }
        self.pid = None;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateLibvirtd {
    fn drop(&mut self) {
        self.kill();
    }
}
