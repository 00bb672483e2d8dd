//! Smoke tests proving each sandbox service is real: libvirtd's test and QEMU
//! drivers, a real QEMU domain, sshd forwarding libvirt's socket with
//! OpenSSH's own client, and a volume upload/download through the dir pool.
//!
//! These need `cargo xtask test` (or `cargo xtask sandbox up` and the
//! exported variable); without the sandbox they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testkit::Descriptor;
use testkit::names::unique;
use testkit::virsh::Virsh;

#[test]
fn test_driver_lists_its_default_domain() {
    let sandbox = Descriptor::require();
    let uri = sandbox.virsh_uri(&sandbox.libvirt.test_uri);
    let names = Virsh::new(&uri).ok(&["list", "--all", "--name"]);
    assert!(
        names.lines().any(|l| l.trim() == "test"),
        "test:///default should hold its built-in domain 'test', got {names:?}"
    );
}

/// Undefines (and destroys) a domain when dropped, even if the test panics.
struct DomainGuard<'a> {
    uri: &'a str,
    name: String,
}

impl Drop for DomainGuard<'_> {
    fn drop(&mut self) {
        let _ = Virsh::new(self.uri).run(&["destroy", &self.name]);
        let _ = Virsh::new(self.uri).run(&["undefine", &self.name]);
    }
}

#[test]
fn qemu_domain_defines_starts_and_destroys() {
    let sandbox = Descriptor::require();
    let uri = sandbox.virsh_uri(&sandbox.libvirt.qemu_uri);
    let name = unique("smoke-qemu");
    let dir = tempfile::tempdir().unwrap();
    let xml_path = dir.path().join("domain.xml");
    std::fs::write(
        &xml_path,
        format!(
            "<domain type='qemu'><name>{name}</name><memory unit='MiB'>32</memory>\
             <vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os>\
             <devices><serial type='pty'/>\
             <interface type='bridge'><source bridge='{bridge}'/><model type='virtio'/></interface>\
             </devices></domain>",
            bridge = sandbox.bridge
        ),
    )
    .unwrap();
    let guard = DomainGuard {
        uri: &uri,
        name: name.clone(),
    };
    Virsh::new(&uri).ok(&["define", xml_path.to_str().unwrap()]);
    Virsh::new(&uri).ok(&["start", &name]);
    assert_eq!(Virsh::new(&uri).ok(&["domstate", &name]).trim(), "running");
    // A real QEMU process backs it.
    let pid_file = format!("/run/libvirt/qemu/{name}.pid");
    let pid = std::fs::read_to_string(&pid_file).expect("QEMU pid file");
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", pid.trim())).unwrap();
    assert!(
        comm.starts_with("qemu-system"),
        "domain process is {comm:?}"
    );
    Virsh::new(&uri).ok(&["destroy", &name]);
    assert_eq!(Virsh::new(&uri).ok(&["domstate", &name]).trim(), "shut off");
    Virsh::new(&uri).ok(&["undefine", &name]);
    std::mem::forget(guard);
    assert!(!Virsh::new(&uri).run(&["domstate", &name]).status.success());
}

/// Kills the forwarding `ssh` when dropped.
pub(crate) struct Forward(Child);

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(path: &Path, budget: Duration) -> bool {
    let deadline = Instant::now() + budget;
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// OpenSSH's own client forwarding `local` to `remote` on `ssh`'s host;
/// returns once the local socket exists.
pub(crate) fn openssh_forward(ssh: &testkit::SshService, remote: &Path, local: &Path) -> Forward {
    let child = Command::new("ssh")
        .args(["-N", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes"])
        .args(["-o", "StrictHostKeyChecking=yes"])
        .arg("-o")
        .arg(format!(
            "UserKnownHostsFile={}",
            ssh.known_hosts_path.display()
        ))
        .arg("-i")
        .arg(&ssh.key_path)
        .arg("-p")
        .arg(ssh.port.to_string())
        .arg("-L")
        .arg(format!("{}:{}", local.display(), remote.display()))
        .arg(format!("{}@{}", ssh.user, ssh.host))
        .stdin(Stdio::null())
        .spawn()
        .expect("ssh runs");
    let forward = Forward(child);
    assert!(
        wait_for(local, Duration::from_secs(20)),
        "ssh -L did not create {}",
        local.display()
    );
    forward
}

#[test]
fn openssh_forwards_libvirt_socket() {
    let sandbox = Descriptor::require();
    let dir = tempfile::tempdir().unwrap();
    let local: PathBuf = dir.path().join("fwd.sock");
    let _forward = openssh_forward(&sandbox.ssh, &sandbox.remote_socket, &local);
    let uri = format!("test+unix:///default?socket={}", local.display());
    let names = Virsh::new(&uri).ok(&["list", "--all", "--name"]);
    assert!(names.lines().any(|l| l.trim() == "test"), "{names:?}");
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// Deletes a volume when dropped.
struct VolumeGuard<'a> {
    uri: &'a str,
    pool: &'a str,
    name: String,
}

impl Drop for VolumeGuard<'_> {
    fn drop(&mut self) {
        let _ = Virsh::new(self.uri).run(&["vol-delete", "--pool", self.pool, &self.name]);
    }
}

#[test]
fn volume_upload_and_download_round_trip() {
    let sandbox = Descriptor::require();
    let uri = sandbox.virsh_uri(&sandbox.libvirt.qemu_uri);
    let pool = sandbox.pool.name.as_str();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("random.bin");
    let back = dir.path().join("back.bin");
    let mut data = vec![0u8; 16 << 20];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut data)
        .unwrap();
    std::fs::write(&source, &data).unwrap();

    let name = unique("smoke-vol");
    let _guard = VolumeGuard {
        uri: &uri,
        pool,
        name: name.clone(),
    };
    Virsh::new(&uri).ok(&["vol-create-as", pool, &name, "16M", "--format", "raw"]);
    Virsh::new(&uri).ok(&[
        "vol-upload",
        "--pool",
        pool,
        &name,
        source.to_str().unwrap(),
    ]);
    Virsh::new(&uri).ok(&[
        "vol-download",
        "--pool",
        pool,
        &name,
        back.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::metadata(&back).unwrap().len(), 16 << 20);
    assert_eq!(sha256(&source), sha256(&back));
    // The volume really lives in the pool's directory.
    assert!(sandbox.pool.dir.join(&name).exists());
}

/// Every address of the sandbox's local range is this machine's: a
/// listener bound to one, and one bound to all addresses, are reached
/// through addresses of the range.
#[test]
fn the_local_range_reaches_this_machine() {
    use std::io::{Read, Write};
    let sandbox = testkit::Descriptor::require();
    let range = sandbox
        .local_range
        .expect("the sandbox descriptor has no local_range: restart the sandbox");
    let net: std::net::Ipv4Addr = range.trim_end_matches("/24").parse().unwrap();
    let [a, b, c, _] = net.octets();
    for (bind, dial) in [
        ([a, b, c, 77], [a, b, c, 77]),
        ([0, 0, 0, 0], [a, b, c, 200]),
    ] {
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::from(bind), 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let addr = std::net::SocketAddr::from((dial, port));
        let mut client =
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        let (mut server, peer) = listener.accept().unwrap();
        assert_eq!(server.local_addr().unwrap().ip(), addr.ip(), "{peer}");
        client.write_all(b"x").unwrap();
        let mut byte = [0];
        server.read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"x");
    }
}
