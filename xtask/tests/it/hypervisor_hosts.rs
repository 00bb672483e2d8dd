//! The sandbox's hypervisor hosts (`sandbox up --hosts N`, default 2): each
//! its own libvirtd behind its own sshd, and hosts 2..=N can be cut off,
//! frozen and stopped, and come back.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use testkit::names::unique;
use testkit::virsh::Virsh;
use testkit::{Descriptor, HypervisorHost};

use crate::sandbox_smoke::openssh_forward;

/// The tests here take turns with host 2 (one cuts and stops it).
static HOST2: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn second_host(sandbox: &Descriptor) -> &HypervisorHost {
    assert!(
        sandbox.hosts.len() >= 2,
        "the sandbox has {} host(s); `cargo xtask sandbox up` starts 2",
        sandbox.hosts.len()
    );
    &sandbox.hosts[1]
}

fn ssh_addr(host: &HypervisorHost) -> SocketAddr {
    SocketAddr::new(host.ssh.host.parse().unwrap(), host.ssh.port)
}

/// Whether sshd's banner arrives within `budget`.
fn banner(host: &HypervisorHost, budget: Duration) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&ssh_addr(host), budget)
        .map_err(|e| format!("connect: {e} ({:?})", e.kind()))?;
    s.set_read_timeout(Some(budget)).unwrap();
    let mut b = [0u8; 8];
    s.read_exact(&mut b)
        .map_err(|e| format!("banner: {e} ({:?})", e.kind()))?;
    if b.starts_with(b"SSH-2.0") {
        Ok(())
    } else {
        Err(format!("not an SSH banner: {b:?}"))
    }
}

fn until(what: &str, budget: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + budget;
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {budget:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Transient domain `name` on `uri` with a NIC on the guests' bridge.
fn start_domain(uri: &str, name: &str, bridge: &str) {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("d.xml");
    std::fs::write(
        &xml,
        format!(
            "<domain type='qemu'><name>{name}</name><memory unit='MiB'>32</memory>\
             <vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os>\
             <devices><interface type='bridge'><source bridge='{bridge}'/>\
             <model type='virtio'/></interface></devices></domain>"
        ),
    )
    .unwrap();
    Virsh::new(uri).ok(&["create", xml.to_str().unwrap()]);
}

#[test]
fn every_host_is_a_libvirtd_of_its_own_behind_an_sshd_of_its_own() {
    let sandbox = Descriptor::require();
    let _turn = HOST2
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let second = second_host(&sandbox);
    assert_eq!(
        sandbox.hosts[0].ssh, sandbox.ssh,
        "host 1 is the top level's"
    );
    assert_ne!(second.ssh.host, sandbox.ssh.host);
    assert_ne!(second.libvirt.socket, sandbox.libvirt.socket);

    // Reached as a real host is: OpenSSH's client, its known_hosts entry,
    // libvirt's socket forwarded; its pool is there.
    for host in &sandbox.hosts {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("fwd.sock");
        let _forward = openssh_forward(&host.ssh, &host.remote_socket, &local);
        let uri = format!("qemu+unix:///system?socket={}", local.display());
        let pools = Virsh::new(&uri).ok(&["pool-list", "--name"]);
        assert!(
            pools.lines().any(|l| l.trim() == host.pool.name),
            "{}: {pools:?}",
            host.name
        );
    }

    // A domain on host 2 is host 2's alone: its QEMU's pid file is in the
    // host's own run directory, and host 1 does not list it.
    let uri2 = second.virsh_uri(&second.libvirt.qemu_uri);
    let uri1 = sandbox.virsh_uri(&sandbox.libvirt.qemu_uri);
    let name = unique("host2-dom");
    start_domain(&uri2, &name, &sandbox.bridge);
    let listed = |uri: &str| {
        Virsh::new(uri)
            .ok(&["list", "--all", "--name"])
            .lines()
            .any(|l| l.trim() == name)
    };
    let on_host2 = listed(&uri2);
    let on_host1 = listed(&uri1);
    let pid_file = second
        .network
        .as_ref()
        .unwrap()
        .qemu_run_dir
        .join(format!("{name}.pid"));
    let pid_file_there = pid_file.exists();
    Virsh::new(&uri2).ok(&["destroy", &name]);
    assert!(on_host2 && !on_host1, "host2 {on_host2}, host1 {on_host1}");
    assert!(pid_file_there, "{} missing", pid_file.display());
}

/// Undoes whatever a test did to a host, also when it fails.
struct Restore<'a>(&'a HypervisorHost);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let _ = self.0.thaw();
        let _ = self.0.restore_link();
        if self.0.pids().is_ok_and(|p| p.is_empty())
            || banner(self.0, Duration::from_secs(2)).is_err()
        {
            let _ = self.0.start();
        }
    }
}

#[test]
fn a_host_cut_off_frozen_or_stopped_comes_back() {
    let sandbox = Descriptor::require();
    let _turn = HOST2
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let host = second_host(&sandbox);
    let _restore = Restore(host);
    let short = Duration::from_secs(2);
    banner(host, Duration::from_secs(10)).unwrap();
    assert!(host.network.is_some());
    assert!(
        sandbox.hosts[0].cut_off().is_err(),
        "host 1 is shared: never cut"
    );

    // Cut off: silence, neither a refusal nor a reset.
    host.cut_off().unwrap();
    let cut = TcpStream::connect_timeout(&ssh_addr(host), short);
    assert_eq!(
        cut.as_ref().map_err(std::io::Error::kind).err(),
        Some(std::io::ErrorKind::TimedOut),
        "{cut:?}"
    );
    host.restore_link().unwrap();
    host.restore_link().unwrap(); // a no-op the second time
    banner(host, Duration::from_secs(10)).unwrap();

    // Frozen: the kernel still accepts, the daemon never speaks.
    host.freeze().unwrap();
    let frozen = banner(host, short);
    host.thaw().unwrap();
    assert!(frozen.is_err(), "a frozen sshd sent its banner");
    banner(host, Duration::from_secs(10)).unwrap();

    // Stopped: its daemons gone, nothing answers; started again, both
    // sshd and libvirtd serve.
    host.stop().unwrap();
    assert_eq!(host.pids().unwrap(), Vec::<u32>::new());
    assert!(banner(host, short).is_err());
    host.start().unwrap();
    until("sshd after start", Duration::from_secs(20), || {
        banner(host, short).is_ok()
    });
    let uri = host.virsh_uri(&host.libvirt.qemu_uri);
    until("libvirtd after start", Duration::from_secs(20), || {
        Virsh::new(&uri)
            .run(&["pool-list", "--name"])
            .status
            .success()
    });
}
