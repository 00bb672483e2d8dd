//! Hypervisor hosts 2..=N (`sandbox up --hosts N`): each a host on a
//! network, as [`sandbox_kit::HypervisorHost`] describes.
//!
//! ```text
//!  machine (root netns)             kvm2-hK netns          guest netns kvm2-sbx
//!  10.213.20.(4K+1) ──veth kvm2-hK── eth0 10.213.20.(4K+2)
//!                                    sshd :22 ─ streamlocal ─▶ hosts/hostK/libvirt-sock
//!                                                             libvirtd (own mount ns:
//!                                                             /etc,/run,/var/{lib,cache,log}
//!                                                             /libvirt from hosts/hostK/)
//!                                                             └─ taps on kvm2-sbx0
//! ```
//!
//! libvirtd runs in the guest network namespace (its taps must join the
//! guests' bridge, as host 1's do) and in a mount namespace of its own
//! whose `…/libvirt` state directories are the host's: a second QEMU
//! driver on one machine takes its own pid-file lock, domain definitions,
//! monitor sockets and logs there, with its own virtlogd. Mounts the
//! machine makes later still reach it (`--propagation slave`).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sandbox_kit::{HostNetwork, HypervisorHost, SshService};
use serde::{Deserialize, Serialize};

use super::{Record, SshListen, create_pool, guest_net, libvirtd_ready, write_libvirtd_config};
use crate::util::{alive, argv, cmd, output, read, stop, wait_pid_file};

/// At most this many hosts (the address plan's /30s in one /24).
pub const MAX_HOSTS: usize = 32;
/// Hosts `sandbox up` starts unless told otherwise.
pub const DEFAULT_HOSTS: usize = 2;
/// The link's name inside a host's namespace.
const LINK: &str = "eth0";
/// libvirt's state directories a host has of its own.
const STATE_DIRS: &[(&str, &str)] = &[
    ("etc", "/etc/libvirt"),
    ("run", "/run/libvirt"),
    ("lib", "/var/lib/libvirt"),
    ("cache", "/var/cache/libvirt"),
    ("log", "/var/log/libvirt"),
];

/// What `down` needs of a host, recorded before anything of it starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HostRecord {
    pub(crate) name: String,
    pub(crate) netns: String,
    pub(crate) dir: PathBuf,
    /// (comm, pid file) of its daemons: pids change when a test stops and
    /// starts the host, so the files are read when needed.
    pub(crate) pid_files: Vec<(String, PathBuf)>,
}

impl HostRecord {
    /// The pids of its daemons that run now.
    pub(crate) fn running(&self) -> Vec<(String, u32)> {
        self.pid_files
            .iter()
            .filter_map(|(comm, file)| {
                let pid = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
                alive(pid, comm).then(|| (comm.clone(), pid))
            })
            .collect()
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("libvirt-sock")
    }
}

/// The host's name and its namespace's.
fn names(k: usize) -> (String, String) {
    (format!("host{k}"), format!("kvm2-h{k}"))
}

/// Host `k`'s address and the machine's on its link (a /30 each).
fn addresses(k: usize) -> (Ipv4Addr, Ipv4Addr) {
    let base = u8::try_from(4 * k).unwrap_or(u8::MAX - 3);
    (
        Ipv4Addr::new(10, 213, 20, base + 2),
        Ipv4Addr::new(10, 213, 20, base + 1),
    )
}

/// Starts host `k` (2..=[`MAX_HOSTS`]) in `run_dir/hosts/hostK`; its sshd
/// takes host 1's client key.
pub(crate) fn start(
    run_dir: &Path,
    k: usize,
    host1: &SshService,
    record: &mut Record,
) -> Result<HypervisorHost> {
    if !(2..=MAX_HOSTS).contains(&k) {
        bail!("host {k}: the sandbox has hosts 1..={MAX_HOSTS}");
    }
    let (name, netns) = names(k);
    let dir = run_dir.join("hosts").join(&name);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let pid_files = vec![
        ("sshd".to_owned(), dir.join("sshd.pid")),
        ("virtlogd".to_owned(), dir.join("virtlogd.pid")),
        ("libvirtd".to_owned(), dir.join("libvirtd.pid")),
    ];
    record.hosts.push(HostRecord {
        name: name.clone(),
        netns: netns.clone(),
        dir: dir.clone(),
        pid_files: pid_files.clone(),
    });
    super::save_record(run_dir, record)?;

    let (address, peer_address) = addresses(k);
    link(&netns, address, peer_address)?;
    let (libvirtd, libvirt) = start_libvirtd(&dir)?;
    let pool = create_pool(
        &format!("qemu+unix:///system?socket={}", libvirt.socket.display()),
        &dir.join("pool"),
        true,
    )?;
    let sshd = super::start_sshd_for(
        &dir,
        SshListen::InNetns {
            netns: &netns,
            address,
        },
        Some(host1),
    )?;
    Ok(HypervisorHost {
        name,
        remote_socket: libvirt.socket.clone(),
        libvirt,
        ssh: sshd.service,
        pool,
        network: Some(HostNetwork {
            netns,
            address,
            peer_address,
            link: LINK.into(),
            pid_files: pid_files.into_iter().map(|(_, f)| f).collect(),
            qemu_run_dir: dir.join("run/qemu"),
            start: vec![libvirtd, sshd.argv],
        }),
    })
}

/// The host's namespace and its veth pair to the machine. A namespace of
/// the same name left by a killed run is removed first: the name is ours.
fn link(netns: &str, address: Ipv4Addr, peer: Ipv4Addr) -> Result<()> {
    remove_netns(netns);
    read(cmd("ip", ["netns", "add", netns]))?;
    read(cmd("ip", ["-n", netns, "link", "set", "lo", "up"]))?;
    read(cmd(
        "ip",
        [
            "link", "add", netns, "type", "veth", "peer", "name", LINK, "netns", netns,
        ],
    ))?;
    // The machine routes nothing through the host's link.
    let forwarding = format!("/proc/sys/net/ipv4/conf/{netns}/forwarding");
    std::fs::write(&forwarding, "0").with_context(|| format!("cannot write {forwarding}"))?;
    read(cmd(
        "ip",
        ["address", "add", &format!("{peer}/30"), "dev", netns],
    ))?;
    read(cmd("ip", ["link", "set", netns, "up"]))?;
    read(cmd(
        "ip",
        [
            "-n",
            netns,
            "address",
            "add",
            &format!("{address}/30"),
            "dev",
            LINK,
        ],
    ))?;
    read(cmd("ip", ["-n", netns, "link", "set", LINK, "up"]))?;
    Ok(())
}

/// Starts the host's virtlogd and libvirtd (see the module's docs); returns
/// the command that did, and the daemon once it answers.
fn start_libvirtd(dir: &Path) -> Result<(Vec<String>, sandbox_kit::LibvirtService)> {
    for (own, _) in STATE_DIRS {
        std::fs::create_dir_all(dir.join(own))?;
    }
    // The machine's configuration files (not its definitions: the host
    // starts with none), and its QEMU capabilities cache (probing QEMU
    // again takes seconds under emulation).
    for entry in std::fs::read_dir("/etc/libvirt").context("cannot read /etc/libvirt")? {
        let path = entry?.path();
        if let (true, Some(file)) = (
            path.extension().is_some_and(|x| x == "conf"),
            path.file_name(),
        ) {
            std::fs::copy(&path, dir.join("etc").join(file))?;
        }
    }
    if Path::new("/var/cache/libvirt/qemu").is_dir() {
        read(cmd(
            "cp",
            [
                "-a".as_ref(),
                "/var/cache/libvirt/qemu".as_ref(),
                dir.join("cache").as_os_str(),
            ],
        ))?;
    }
    let config = write_libvirtd_config(dir)?;
    let pid_file = dir.join("libvirtd.pid");
    let mut script = String::from("set -e\n");
    for (own, system) in STATE_DIRS {
        script.push_str(&format!(
            "mkdir -p {system}\nmount --bind {} {system}\n",
            dir.join(own).display()
        ));
    }
    script.push_str(&format!(
        "/usr/sbin/virtlogd -d -p {}\nexec /usr/sbin/libvirtd -d -f {} -p {}\n",
        dir.join("virtlogd.pid").display(),
        config.display(),
        pid_file.display()
    ));
    let mut daemon = guest_net::command("/usr/bin/unshare");
    daemon
        .args(["--mount", "--propagation", "slave", "--", "/bin/sh", "-c"])
        .arg(&script);
    let started = argv(&daemon);
    read(daemon)?;
    wait_pid_file(&pid_file)?;
    let libvirt = libvirtd_ready(dir, config, pid_file)?;
    Ok((started, libvirt))
}

/// Removes what tests made on the host's libvirtd, stops its daemons and
/// deletes its namespace (its QEMUs, in the guest network, go with it).
pub(crate) fn stop_host(host: &HostRecord) {
    // A frozen host answers nothing: thaw it (and drop a cut) first.
    let pids: Vec<String> = host.running().iter().map(|(_, p)| p.to_string()).collect();
    if !pids.is_empty() {
        let _ = output(cmd("kill", std::iter::once("-CONT".to_owned()).chain(pids)));
    }
    let _ = output(cmd(
        "nft",
        [
            "delete",
            "table",
            "inet",
            &format!("kvm2_cut_{}", host.name),
        ],
    ));
    if host.running().iter().any(|(comm, _)| comm == "libvirtd") {
        let uri = format!("qemu+unix:///system?socket={}", host.socket().display());
        if let Err(e) = super::remove_created(&uri, &Record::default()) {
            eprintln!("sandbox: {}: cleanup incomplete: {e:#}", host.name);
        }
    }
    for (comm, pid) in host.running().into_iter().rev() {
        stop(&comm, pid);
    }
    remove_netns(&host.netns);
}

/// Deletes `netns` after stopping what runs in it (sshd sessions).
fn remove_netns(netns: &str) {
    if !sandbox_kit::netns_path(netns).exists() {
        return;
    }
    if let Ok(pids) = read(cmd("ip", ["netns", "pids", netns])) {
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            stop(comm.trim(), pid);
        }
    }
    if let Err(e) = read(cmd("ip", ["netns", "delete", netns])) {
        eprintln!("sandbox: cannot delete network namespace {netns}: {e:#}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_have_disjoint_links() {
        let mut seen = std::collections::HashSet::new();
        for k in 2..=MAX_HOSTS {
            let (host, peer) = addresses(k);
            assert!(seen.insert(host) && seen.insert(peer), "host {k}");
            // One /30: network, peer, host, broadcast.
            assert_eq!(u32::from(host) & !3, u32::from(peer) & !3, "host {k}");
            assert_eq!(u32::from(host) & 3, 2);
            assert!(
                names(k).1.len() <= 15,
                "interface names are at most 15 bytes"
            );
        }
    }
}
