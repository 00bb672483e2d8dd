//! `cargo xtask sandbox up | down | status`: the real services tests run against.
//!
//! `up` starts, as root, in a fresh run directory under [`BASE`]:
//! virtlogd (unless one already serves libvirt's virtlogd socket), libvirtd
//! (the monolithic daemon, so one socket serves both `qemu:///system` and
//! `test:///default`), a transient `dir` pool, sshd on 127.0.0.1 at a free
//! port with fresh keys, and the Kubernetes control plane ([`control_plane`]:
//! etcd + kube-apiserver with TLS and RBAC). It waits until each answers,
//! then writes the [`Descriptor`]. `down` stops only the processes `up`
//! recorded, after removing the domains, volumes and pools created since
//! `up`, and deletes etcd's data.
//!
//! The guests' network comes first ([`crate::sandbox::guest_net`]): a network
//! namespace with the guests' bridge, dnsmasq and an upstream HTTPS server.
//! libvirtd runs inside it, so the taps it makes for domains' NICs land on
//! that bridge, while its socket stays in the run directory where sshd (on
//! the host's loopback) forwards to it. `down` stops what is left inside
//! the namespace (QEMU) and deletes it with its bridge and taps.

use std::io::Read;
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use sandbox_kit::{Descriptor, HypervisorHost, LibvirtService, PoolInfo, SshService};
use serde::{Deserialize, Serialize};

use crate::util::{
    READY_BUDGET, alive, cmd, free_port, output, read, stop, wait_pid_file, wait_until_within,
};

pub mod control_plane;
pub mod guest_net;
pub mod hosts;
pub mod image_server;
pub mod leaks;
pub mod local_range;
mod session;

pub use session::Session;

/// Where run directories live. One sandbox runs per machine at a time: its
/// libvirtd is the machine's root QEMU driver.
pub const BASE: &str = "/tmp/kvm2-sandbox";
/// Symlink to the current run directory.
const CURRENT: &str = "/tmp/kvm2-sandbox/current";
/// Where libvirt's QEMU driver looks for virtlogd when running as root.
const VIRTLOGD_SOCK: &str = "/run/libvirt/virtlogd-sock";
const POOL_NAME: &str = "kvm2-sandbox";

/// What `up` started, so `down` touches nothing else.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Processes started by `up`: (name as in /proc/PID/comm, pid).
    pub(crate) processes: Vec<(String, u32)>,
    /// Domains on `qemu:///system` that existed before `up` (never touched).
    domains_before: Vec<String>,
    /// Pools on `qemu:///system` that existed before `up` (never touched).
    pools_before: Vec<String>,
    /// Directories outside the run directory that `down` removes (etcd's
    /// data; what the node's kubelet made under /var).
    #[serde(default)]
    pub(crate) scratch: Vec<PathBuf>,
    /// Kernel settings to put back at `down` (`/proc/sys` path, value before).
    #[serde(default)]
    pub(crate) sysctls: Vec<(PathBuf, String)>,
    /// Hypervisor hosts 2..=N.
    #[serde(default)]
    pub(crate) hosts: Vec<hosts::HostRecord>,
}

impl Record {
    /// Every recorded process that runs, the hosts' daemons included.
    fn running(&self) -> impl Iterator<Item = (String, u32)> + '_ {
        self.processes
            .iter()
            .filter(|(name, pid)| alive(*pid, name))
            .cloned()
            .chain(self.hosts.iter().flat_map(hosts::HostRecord::running))
    }
}

/// The descriptor path of the running sandbox, if one is up.
pub fn current() -> Option<PathBuf> {
    let dir = std::fs::read_link(CURRENT).ok()?;
    let record = load_record(&dir).ok()?;
    let hosts_up = record
        .hosts
        .iter()
        .all(|h| h.running().len() == h.pid_files.len());
    (record.processes.iter().all(|(name, pid)| alive(*pid, name))
        && hosts_up
        && guest_net::present()
        && local_range::present())
    .then(|| dir.join("sandbox.json"))
}

/// Pids of the processes the current sandbox started.
pub fn recorded_pids() -> Vec<u32> {
    std::fs::read_link(CURRENT)
        .ok()
        .and_then(|dir| load_record(&dir).ok())
        .map(|r| r.running().map(|(_, pid)| pid).collect())
        .unwrap_or_default()
}

/// Starts the sandbox with `hosts` hypervisor hosts (or reports the one
/// already up) and returns the descriptor path.
pub fn up(hosts: usize) -> Result<PathBuf> {
    if !(1..=hosts::MAX_HOSTS).contains(&hosts) {
        bail!("--hosts takes 1..={}, not {hosts}", hosts::MAX_HOSTS);
    }
    if let Some(path) = current() {
        eprintln!("sandbox: already up ({})", path.display());
        return Ok(path);
    }
    if std::fs::read_link(CURRENT).is_ok() {
        eprintln!("sandbox: a previous sandbox is half-dead; stopping what is left of it");
        down()?;
    }
    let uid = read(cmd("id", ["-u"]))?;
    if uid.trim() != "0" {
        bail!(
            "the sandbox runs libvirtd and sshd as root: run it as root (uid is {})",
            uid.trim()
        );
    }
    let started = Instant::now();
    remove_old_runs();
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let dir = PathBuf::from(BASE).join(format!("run-{stamp}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let _ = std::fs::remove_file(CURRENT);
    std::os::unix::fs::symlink(&dir, CURRENT).context("cannot link the current sandbox")?;

    let mut record = Record::default();
    let result = start_all(&dir, hosts, &mut record);
    // The record is written whatever happened, so `down` can stop what did start.
    save_record(&dir, &record)?;
    let descriptor = match result {
        Ok(d) => d,
        Err(e) => {
            eprintln!("sandbox: start failed, stopping what started: {e:#}");
            let _ = down();
            return Err(e);
        }
    };
    let path = dir.join("sandbox.json");
    std::fs::write(&path, serde_json::to_string_pretty(&descriptor)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!(
        "sandbox: up in {:.1?}: libvirtd {}, {} host(s):",
        started.elapsed(),
        descriptor.libvirt.version,
        descriptor.hosts.len(),
    );
    for h in &descriptor.hosts {
        eprintln!(
            "  {}: sshd {}:{}, libvirtd {}, pool {}",
            h.name,
            h.ssh.host,
            h.ssh.port,
            h.libvirt.socket.display(),
            h.pool.name
        );
    }
    println!("export {}={}", sandbox_kit::ENV_VAR, path.display());
    Ok(path)
}

fn start_all(dir: &Path, hosts: usize, record: &mut Record) -> Result<Descriptor> {
    // virtlogd: the QEMU driver needs it; reuse one that already answers.
    if std::os::unix::net::UnixStream::connect(VIRTLOGD_SOCK).is_err() {
        let pid_file = dir.join("virtlogd.pid");
        read(cmd(
            "/usr/sbin/virtlogd",
            ["-d".as_ref(), "-p".as_ref(), pid_file.as_os_str()],
        ))?;
        record
            .processes
            .push(("virtlogd".into(), wait_pid_file(&pid_file)?));
    }

    let guest_net = guest_net::start(dir, &mut record.processes)?;
    let libvirt = start_libvirtd(dir, record)?;
    let uri = format!("qemu+unix:///system?socket={}", libvirt.socket.display());
    record.domains_before = names(&uri, &["list", "--all", "--name"])?;
    record.pools_before = names(&uri, &["pool-list", "--all", "--name"])?;

    let pool = create_pool(&uri, &dir.join("pool"), false)?;

    let ssh = start_sshd(dir, record, SshListen::Loopback)?;
    let host1 = HypervisorHost {
        name: "host1".into(),
        libvirt: libvirt.clone(),
        ssh: ssh.clone(),
        remote_socket: libvirt.socket.clone(),
        pool: pool.clone(),
        network: None,
    };
    let mut all_hosts = vec![host1];
    for k in 2..=hosts {
        let host = self::hosts::start(dir, k, &ssh, record)?;
        // Host 1's known_hosts knows every host, as a fleet's file does
        // (a providers config names one file for all its hosts).
        let line = std::fs::read_to_string(&host.ssh.known_hosts_path)?;
        let mut known = std::fs::OpenOptions::new()
            .append(true)
            .open(&ssh.known_hosts_path)?;
        std::io::Write::write_all(&mut known, line.as_bytes())?;
        all_hosts.push(host);
    }
    let local_range = local_range::add()?;
    let kube = control_plane::start(dir, &mut record.processes, &mut record.scratch)?;
    // The proxy guest image: from the cache (a file read), or built first
    // (minutes, once per recipe); served over loopback HTTP like any
    // user image.
    let image = crate::image::guest::ensure()?;
    let guest_image = crate::sandbox::image_server::start(
        dir,
        &image.path,
        &image.sha256,
        &mut record.processes,
    )?;
    Ok(Descriptor {
        kube: Some(kube),
        guest_image: Some(guest_image),
        bridge: guest_net.bridge.clone(),
        guest_net,
        state_dir: dir.to_owned(),
        remote_socket: libvirt.socket.clone(),
        libvirt,
        ssh,
        pool,
        hosts: all_hosts,
        local_range: Some(local_range),
    })
}

fn start_libvirtd(dir: &Path, record: &mut Record) -> Result<LibvirtService> {
    let config = write_libvirtd_config(dir)?;
    let pid_file = dir.join("libvirtd.pid");
    // Inside the guests' namespace: the taps it creates join the bridge there.
    let mut daemon = guest_net::command("/usr/sbin/libvirtd");
    daemon
        .arg("-d")
        .arg("-f")
        .arg(&config)
        .arg("-p")
        .arg(&pid_file);
    read(daemon)?;
    record
        .processes
        .push(("libvirtd".into(), wait_pid_file(&pid_file)?));
    libvirtd_ready(dir, config, pid_file)
}

/// A `libvirtd.conf` putting the daemon's sockets and log in `dir`.
fn write_libvirtd_config(dir: &Path) -> Result<PathBuf> {
    let config = dir.join("libvirtd.conf");
    std::fs::write(
        &config,
        format!(
            "unix_sock_dir = \"{dir}\"\n\
             unix_sock_group = \"root\"\n\
             unix_sock_ro_perms = \"0777\"\n\
             unix_sock_rw_perms = \"0770\"\n\
             auth_unix_ro = \"none\"\n\
             auth_unix_rw = \"none\"\n\
             max_clients = 5000\n\
             max_anonymous_clients = 1000\n\
             max_client_requests = 64\n\
             log_outputs = \"3:file:{dir}/libvirtd.log\"\n",
            dir = dir.display()
        ),
    )?;
    Ok(config)
}

/// Waits until the libvirtd whose socket is in `dir` serves both drivers.
fn libvirtd_ready(dir: &Path, config: PathBuf, pid_file: PathBuf) -> Result<LibvirtService> {
    let socket = dir.join("libvirt-sock");
    let uri = format!("qemu+unix:///system?socket={}", socket.display());
    let test_uri = format!("test+unix:///default?socket={}", socket.display());
    wait_until_within("libvirtd", READY_BUDGET, || {
        Ok(output(cmd("virsh", ["-c", &uri, "list", "--name"]))?
            .status
            .success()
            && output(cmd("virsh", ["-c", &test_uri, "list", "--name"]))?
                .status
                .success())
    })?;
    let version = read(cmd("/usr/sbin/libvirtd", ["--version"]))?
        .split_whitespace()
        .last()
        .unwrap_or("unknown")
        .to_owned();
    Ok(LibvirtService {
        socket,
        qemu_uri: "qemu:///system".into(),
        test_uri: "test:///default".into(),
        pid_file,
        config,
        version,
    })
}

/// Makes the `dir` pool [`POOL_NAME`] at `pool_dir` on `uri`: transient
/// (it goes with the daemon; its files with the run directory), or
/// persistent and autostarted, so a host that a test stops and starts
/// again has it back, as a real host does.
fn create_pool(uri: &str, pool_dir: &Path, persistent: bool) -> Result<PoolInfo> {
    std::fs::create_dir_all(pool_dir)?;
    let virsh = |args: &[&std::ffi::OsStr]| {
        let mut c = cmd("virsh", ["-c", uri]);
        c.args(args);
        read(c)
    };
    let target = pool_dir.as_os_str();
    if persistent {
        virsh(&[
            "pool-define-as".as_ref(),
            POOL_NAME.as_ref(),
            "dir".as_ref(),
            "--target".as_ref(),
            target,
        ])?;
        virsh(&["pool-start".as_ref(), POOL_NAME.as_ref()])?;
        virsh(&["pool-autostart".as_ref(), POOL_NAME.as_ref()])?;
    } else {
        virsh(&[
            "pool-create-as".as_ref(),
            POOL_NAME.as_ref(),
            "dir".as_ref(),
            "--target".as_ref(),
            target,
        ])?;
    }
    Ok(PoolInfo {
        name: POOL_NAME.into(),
        dir: pool_dir.to_owned(),
    })
}

/// Where an sshd the sandbox starts listens.
#[derive(Clone, Copy)]
enum SshListen<'a> {
    /// 127.0.0.1 at a free port (host 1).
    Loopback,
    /// Port 22 of `address` inside the network namespace `netns`.
    InNetns { netns: &'a str, address: Ipv4Addr },
}

/// Starts an sshd with fresh host and client keys in `dir`. A `client`
/// given is authorized instead of a fresh client key (every host takes the
/// same key, as a fleet's hosts do).
fn start_sshd_for(
    dir: &Path,
    listen: SshListen<'_>,
    client: Option<&SshService>,
) -> Result<StartedSshd> {
    std::fs::create_dir_all("/run/sshd").context("cannot create /run/sshd")?;
    let host_key = dir.join("host_ed25519");
    let client_key = match client {
        Some(c) => c.key_path.clone(),
        None => dir.join("client_ed25519"),
    };
    let fresh: &[&PathBuf] = if client.is_some() {
        &[&host_key]
    } else {
        &[&host_key, &client_key]
    };
    for key in fresh {
        read(cmd(
            "ssh-keygen",
            [
                "-q".as_ref(),
                "-t".as_ref(),
                "ed25519".as_ref(),
                "-N".as_ref(),
                "".as_ref(),
                "-C".as_ref(),
                "kvm2-sandbox".as_ref(),
                "-f".as_ref(),
                key.as_os_str(),
            ],
        ))?;
    }
    let authorized_keys = dir.join("authorized_keys");
    std::fs::copy(client_key.with_extension("pub"), &authorized_keys)?;
    let (address, port) = match listen {
        SshListen::Loopback => (Ipv4Addr::LOCALHOST, free_port()?),
        SshListen::InNetns { address, .. } => (address, 22),
    };
    let host_pub = std::fs::read_to_string(host_key.with_extension("pub"))?;
    let mut fields = host_pub.split_whitespace();
    let (kind, blob) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
    let known_hosts = dir.join("known_hosts");
    // As OpenSSH writes them: the bare address for port 22.
    let pattern = if port == 22 {
        address.to_string()
    } else {
        format!("[{address}]:{port}")
    };
    std::fs::write(&known_hosts, format!("{pattern} {kind} {blob}\n"))?;

    let config = dir.join("sshd_config");
    let pid_file = dir.join("sshd.pid");
    std::fs::write(
        &config,
        format!(
            "Port {port}\n\
             ListenAddress {address}\n\
             HostKey {host_key}\n\
             PidFile {pid_file}\n\
             AuthorizedKeysFile {authorized_keys}\n\
             StrictModes no\n\
             UsePAM no\n\
             PermitRootLogin prohibit-password\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             AllowStreamLocalForwarding local\n\
             AllowTcpForwarding local\n\
             MaxStartups 200\n\
             MaxSessions 200\n",
            host_key = host_key.display(),
            pid_file = pid_file.display(),
            authorized_keys = authorized_keys.display(),
        ),
    )?;
    read(cmd(
        "/usr/sbin/sshd",
        ["-t".as_ref(), "-f".as_ref(), config.as_os_str()],
    ))?;
    let log = dir.join("sshd.log");
    let mut daemon = match listen {
        SshListen::Loopback => cmd("/usr/sbin/sshd", [] as [&str; 0]),
        SshListen::InNetns { netns, .. } => sandbox_kit::command_in(netns, "/usr/sbin/sshd"),
    };
    daemon.arg("-f").arg(&config).arg("-E").arg(&log);
    let argv = crate::util::argv(&daemon);
    read(daemon)?;
    wait_pid_file(&pid_file)?;
    wait_until_within("sshd", READY_BUDGET, || {
        let Ok(mut s) = TcpStream::connect_timeout(
            &std::net::SocketAddr::from((address, port)),
            Duration::from_secs(2),
        ) else {
            return Ok(false);
        };
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        let mut banner = [0u8; 8];
        Ok(s.read_exact(&mut banner).is_ok() && banner.starts_with(b"SSH-2.0"))
    })?;
    Ok(StartedSshd {
        service: SshService {
            host: address.to_string(),
            port,
            user: "root".into(),
            key_path: client_key,
            known_hosts_path: known_hosts,
            authorized_keys_path: authorized_keys,
            host_key_path: host_key,
            config,
        },
        pid_file,
        argv,
    })
}

/// An sshd [`start_sshd_for`] started.
struct StartedSshd {
    service: SshService,
    pid_file: PathBuf,
    /// The command that started it (a stopped host starts it again).
    argv: Vec<String>,
}

/// Host 1's sshd: on loopback, recorded for `down`.
fn start_sshd(dir: &Path, record: &mut Record, listen: SshListen<'_>) -> Result<SshService> {
    let sshd = start_sshd_for(dir, listen, None)?;
    record
        .processes
        .push(("sshd".into(), wait_pid_file(&sshd.pid_file)?));
    Ok(sshd.service)
}

/// Removes what tests created, then stops the processes `up` started.
pub fn down() -> Result<()> {
    let Ok(dir) = std::fs::read_link(CURRENT) else {
        eprintln!("sandbox: not up");
        return Ok(());
    };
    let record = load_record(&dir).unwrap_or_default();
    let socket = dir.join("libvirt-sock");
    let libvirtd_alive = record
        .processes
        .iter()
        .any(|(n, p)| n == "libvirtd" && alive(*p, n));
    if libvirtd_alive {
        let uri = format!("qemu+unix:///system?socket={}", socket.display());
        if let Err(e) = remove_created(&uri, &record) {
            eprintln!("sandbox: cleanup incomplete: {e:#}");
        }
    }
    for host in record.hosts.iter().rev() {
        hosts::stop_host(host);
    }
    // The node's pods first (the kubelet would restart them), then every
    // process in reverse start order: the node, the image server, the
    // control plane, sshd, libvirtd, the guest network's servers, virtlogd.
    crate::node::stop_pods(&dir, &record);
    for (name, pid) in record.processes.iter().rev() {
        stop(name, *pid);
    }
    crate::node::clean_up(&dir);
    for (path, value) in &record.sysctls {
        if let Err(e) = std::fs::write(path, value) {
            eprintln!("sandbox: cannot restore {}: {e}", path.display());
        }
    }
    let _ = std::fs::remove_dir_all(dir.join("pool"));
    for scratch in &record.scratch {
        let _ = std::fs::remove_dir_all(scratch);
    }
    // QEMU left inside, then the namespace with its bridge and taps.
    guest_net::remove();
    local_range::remove();
    let _ = std::fs::remove_file(CURRENT);
    eprintln!("sandbox: down (logs kept in {})", dir.display());
    Ok(())
}

pub(crate) fn remove_created(uri: &str, record: &Record) -> Result<()> {
    let mut removed = Vec::new();
    for domain in names(uri, &["list", "--all", "--name"])? {
        if record.domains_before.contains(&domain) {
            continue;
        }
        let _ = output(cmd("virsh", ["-c", uri, "destroy", &domain]));
        let undefined = output(cmd("virsh", ["-c", uri, "undefine", "--nvram", &domain]))?;
        if !undefined.status.success() {
            read(cmd("virsh", ["-c", uri, "undefine", &domain]))?;
        }
        removed.push(format!("domain {domain}"));
    }
    for pool in names(uri, &["pool-list", "--all", "--name"])? {
        if record.pools_before.contains(&pool) {
            continue;
        }
        let _ = output(cmd("virsh", ["-c", uri, "pool-refresh", &pool]));
        for vol in volumes(uri, &pool)? {
            let _ = output(cmd(
                "virsh",
                ["-c", uri, "vol-delete", "--pool", &pool, &vol],
            ));
            removed.push(format!("volume {pool}/{vol}"));
        }
        if pool != POOL_NAME {
            let _ = output(cmd("virsh", ["-c", uri, "pool-destroy", &pool]));
            let _ = output(cmd("virsh", ["-c", uri, "pool-undefine", &pool]));
            removed.push(format!("pool {pool}"));
        }
    }
    if !removed.is_empty() {
        eprintln!("sandbox: removed {}", removed.join(", "));
    }
    Ok(())
}

/// Changes the current sandbox's record (what `down` undoes) in place.
pub(crate) fn update_record(dir: &Path, change: impl FnOnce(&mut Record)) -> Result<()> {
    let mut record = load_record(dir)?;
    change(&mut record);
    save_record(dir, &record)
}

/// Prints what runs.
pub fn status() -> Result<bool> {
    let Ok(dir) = std::fs::read_link(CURRENT) else {
        println!("sandbox: not up");
        return Ok(false);
    };
    let record = load_record(&dir)?;
    let mut all = true;
    println!("sandbox: {}", dir.display());
    for (name, pid) in &record.processes {
        let up = alive(*pid, name);
        all &= up;
        println!(
            "  {name:<9} pid {pid:<7} {}",
            if up { "running" } else { "NOT running" }
        );
    }
    for h in &record.hosts {
        let running = h.running().len();
        all &= running == h.pid_files.len();
        println!(
            "  {:<9} {running} of {} daemons running ({})",
            h.name,
            h.pid_files.len(),
            h.netns
        );
    }
    if let Ok(d) = Descriptor::load(&dir.join("sandbox.json")) {
        println!(
            "  libvirt   {} ({})",
            d.libvirt.socket.display(),
            d.libvirt.version
        );
        for h in &d.hosts {
            println!(
                "  {:<9} sshd {}@{}:{}, pool {} at {}",
                h.name,
                h.ssh.user,
                h.ssh.host,
                h.ssh.port,
                h.pool.name,
                h.pool.dir.display()
            );
        }
        guest_net::print_status(&d.guest_net);
        if let Some(range) = &d.local_range {
            let up = local_range::present();
            all &= up;
            println!(
                "  local     {range} ({})",
                if up {
                    "routed to this machine"
                } else {
                    "NOT routed"
                }
            );
        }
        if let Some(k) = &d.kube {
            println!("  kube      {} ({})", k.server, k.version);
            println!("export KUBECONFIG={}", k.kubeconfig.display());
        }
        println!(
            "export {}={}",
            sandbox_kit::ENV_VAR,
            dir.join("sandbox.json").display()
        );
    }
    Ok(all)
}

fn names(uri: &str, args: &[&str]) -> Result<Vec<String>> {
    let mut c = cmd("virsh", ["-c", uri]);
    c.args(args);
    Ok(read(c)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Volume names of `pool` (`vol-list` has no `--name`: read its table).
fn volumes(uri: &str, pool: &str) -> Result<Vec<String>> {
    let table = read(cmd("virsh", ["-c", uri, "vol-list", "--pool", pool]))?;
    Ok(table
        .lines()
        .skip_while(|l| !l.starts_with("---"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

fn load_record(dir: &Path) -> Result<Record> {
    let text = std::fs::read_to_string(dir.join("record.json"))?;
    Ok(serde_json::from_str(&text)?)
}

pub(crate) fn save_record(dir: &Path, record: &Record) -> Result<()> {
    std::fs::write(
        dir.join("record.json"),
        serde_json::to_string_pretty(record)?,
    )?;
    Ok(())
}

fn remove_old_runs() {
    let Ok(entries) = std::fs::read_dir(BASE) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
        {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}
