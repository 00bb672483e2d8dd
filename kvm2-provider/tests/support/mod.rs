//! Sandbox helpers for the Get / List / Check tests: a providers config
//! naming the sandbox (directly or through a relay), marked QEMU domains
//! defined and started with libvirt-rpc and removed on drop, and a TCP relay
//! that can be cut.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kvm2_provider::domain_xml::{DomainSpec, VirtType, render};
use kvm2_provider::host_table::HostOptions;
use kvm2_provider::ownership_mark::OwnerMark;
use kvm2_provider::timestamp::Timestamp;
use libvirt_rpc::{
    Client, Config as RpcConfig, Domain, DomainCreateFlags, DomainDefineFlags, OpenFlags,
};
use provider_api::config::values::BridgeName;
use provider_api::config::{Firmware, Kvm2Config};
use provider_api::{Identifier, OwnerUid, ProvidersConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use xtask::Descriptor;

pub const ENTRY: &str = "kvm2-it";

/// A host of the generated config.
pub struct HostSpec {
    pub name: &'static str,
    pub address: String,
    pub port: u16,
}

impl HostSpec {
    pub fn sandbox(name: &'static str, sandbox: &Descriptor) -> Self {
        HostSpec {
            name,
            address: sandbox.ssh.host.clone(),
            port: sandbox.ssh.port,
        }
    }
}

/// A kvm2 config with `hosts`, the sandbox's user, pool and bridge.
pub fn config(
    sandbox: &Descriptor,
    hosts: &[HostSpec],
    key: &Path,
    known_hosts: &Path,
) -> Kvm2Config {
    let mut host_yaml = String::new();
    for h in hosts {
        host_yaml.push_str(&format!(
            "        - name: {}\n          address: {}\n          port: {}\n          bridge: {}\n          pool: {}\n",
            h.name, h.address, h.port, sandbox.bridge, sandbox.pool.name
        ));
    }
    let yaml = format!(
        "providers:\n  - name: {ENTRY}\n    type: kvm2\n    kvm2:\n      ssh:\n        user: {user}\n        key_file: {key}\n        known_hosts_file: {kh}\n      hosts:\n{host_yaml}      images:\n        tiny:\n          url: http://127.0.0.1:1/x\n          sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n          format: qcow2\n      machine_types:\n        small:\n          vcpus: 1\n          memory: 128MiB\n          disk: 1GiB\n",
        user = sandbox.ssh.user,
        key = key.display(),
        kh = known_hosts.display(),
    );
    ProvidersConfig::from_yaml_str(&yaml).unwrap().providers[0]
        .kvm2()
        .unwrap()
        .clone()
}

/// The sandbox as `host1` with its own key and known_hosts.
pub fn sandbox_config(sandbox: &Descriptor) -> Kvm2Config {
    config(
        sandbox,
        &[HostSpec::sandbox("host1", sandbox)],
        &sandbox.ssh.key_path,
        &sandbox.ssh.known_hosts_path,
    )
}

/// Host options for the sandbox (its libvirt socket), opening `uri`.
pub fn options(sandbox: &Descriptor, uri: &str) -> HostOptions {
    HostOptions {
        remote_socket: sandbox.remote_socket.display().to_string(),
        uri: uri.to_owned(),
        dial_budget: Duration::from_secs(20),
        ..HostOptions::default()
    }
}

/// A known_hosts file in `dir` that also trusts the sandbox's host key at
/// 127.0.0.1:`port` (for relays).
pub fn known_hosts_with_port(sandbox: &Descriptor, dir: &Path, port: u16) -> PathBuf {
    let host_key =
        std::fs::read_to_string(format!("{}.pub", sandbox.ssh.host_key_path.display())).unwrap();
    let path = dir.join("known_hosts");
    std::fs::write(
        &path,
        format!(
            "[127.0.0.1]:{port} {}\n{}",
            host_key.trim(),
            std::fs::read_to_string(&sandbox.ssh.known_hosts_path).unwrap()
        ),
    )
    .unwrap();
    path
}

pub fn id(s: &str) -> Identifier {
    Identifier::parse(s).unwrap()
}

/// A unique lowercase name (an identifier) for a test domain.
pub fn unique(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("kvm2-itb-{tag}-{:x}{nanos:x}", std::process::id())
}

pub fn mark(entry: &str, owner: &str) -> OwnerMark {
    OwnerMark::new(
        OwnerUid::parse(owner).unwrap(),
        Identifier::parse(entry).unwrap(),
        Timestamp::from_unix_seconds(1_796_200_000).unwrap(),
    )
}

/// Domain XML for `name` (TCG, BIOS, the sandbox bridge) with `mark`, or
/// without any mark when `mark` is `None`. Disk files live in `dir`.
pub fn domain_xml(sandbox: &Descriptor, name: &str, dir: &Path, mark: Option<OwnerMark>) -> String {
    let spec = DomainSpec {
        virt_type: VirtType::Qemu,
        name: Identifier::parse(name).unwrap(),
        memory_mib: 64,
        vcpus: 1,
        machine: "q35".into(),
        firmware: Firmware::Bios,
        overlay_path: dir.join("overlay.qcow2").display().to_string(),
        seed_path: dir.join("seed.iso").display().to_string(),
        bridge: BridgeName::parse(&sandbox.bridge).unwrap(),
        mac: None,
        mark: mark
            .clone()
            .unwrap_or_else(|| self::mark(ENTRY, "00000000-0000-4000-8000-000000000000")),
    };
    let xml = render(&spec).unwrap();
    if mark.is_some() {
        return xml;
    }
    let start = xml.find("<metadata>").expect("rendered XML has metadata");
    let end = xml.find("</metadata>").expect("closed metadata") + "</metadata>".len();
    format!("{}{}", &xml[..start], &xml[end..])
}

/// Disk files QEMU can open: an empty qcow2 overlay and a small "ISO".
pub fn disk_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("kvm2-itb-")
        .tempdir()
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let overlay = dir.path().join("overlay.qcow2");
    let out = std::process::Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2"])
        .arg(&overlay)
        .arg("16M")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.path().join("seed.iso"), vec![0u8; 64 * 1024]).unwrap();
    dir
}

/// A direct (unix socket) libvirt connection to the sandbox's qemu:///system.
pub async fn direct(sandbox: &Descriptor) -> Client {
    Client::connect_unix(
        &sandbox.libvirt.socket,
        &sandbox.libvirt.qemu_uri,
        OpenFlags::empty(),
        RpcConfig::default().call_timeout(Duration::from_secs(60)),
    )
    .await
    .unwrap()
}

/// A domain on qemu:///system, destroyed and undefined (with virsh) on drop.
pub struct QemuDomain {
    pub name: String,
    pub domain: Domain,
    uri: String,
    _dir: tempfile::TempDir,
}

impl QemuDomain {
    /// Defines `name` with `mark` (or none) and starts it when `start`.
    pub async fn define(
        sandbox: &Descriptor,
        client: &Client,
        name: &str,
        mark: Option<OwnerMark>,
        start: bool,
    ) -> Self {
        let dir = disk_dir();
        let xml = domain_xml(sandbox, name, dir.path(), mark);
        let domain = client
            .domain_define_xml_flags(&xml, DomainDefineFlags::empty())
            .await
            .unwrap();
        let guard = QemuDomain {
            name: name.to_owned(),
            domain: domain.clone(),
            uri: sandbox.virsh_uri(&sandbox.libvirt.qemu_uri),
            _dir: dir,
        };
        if start {
            client
                .domain_create_with_flags(&domain, DomainCreateFlags::empty())
                .await
                .unwrap();
        }
        guard
    }
}

impl Drop for QemuDomain {
    fn drop(&mut self) {
        let virsh = |args: &[&str]| {
            let _ = std::process::Command::new("virsh")
                .arg("-c")
                .arg(&self.uri)
                .args(args)
                .output();
        };
        virsh(&["destroy", &self.name]);
        virsh(&["undefine", "--nvram", &self.name]);
    }
}

/// A TCP relay to `upstream` that can be cut: every forwarded connection
/// closed at once, later ones refused (accepted and dropped).
pub struct Relay {
    pub port: u16,
    /// Connections being forwarded right now.
    pub active: Arc<AtomicUsize>,
    cut: Arc<AtomicBool>,
    cut_now: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort(); // drops the JoinSet: every pump is aborted
    }
}

impl Relay {
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let cut_now = Arc::new(Notify::new());
        let active = Arc::new(AtomicUsize::new(0));
        let (c, n, a) = (cut.clone(), cut_now.clone(), active.clone());
        let task = tokio::spawn(async move {
            let mut pumps = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                while pumps.try_join_next().is_some() {}
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: the dial fails
                }
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let n = n.clone();
                let a = a.clone();
                a.fetch_add(1, Ordering::SeqCst);
                pumps.spawn(async move {
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = n.notified() => {}
                    }
                    let _ = client.shutdown().await;
                    a.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Relay {
            port,
            active,
            cut,
            cut_now,
            task,
        }
    }

    /// Closes every forwarded connection and refuses new ones. Not async:
    /// callable from a tracing hook.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.cut_now.notify_waiters();
    }
}

/// A TCP listener that accepts and never answers; counts connections still
/// open (a peer that closed is noticed by a read returning 0).
pub struct Silent {
    pub port: u16,
    pub open: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Silent {
    pub async fn start() -> Self {
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicUsize::new(0));
        let o = open.clone();
        let task = tokio::spawn(async move {
            let mut held = JoinSet::new();
            while let Ok((mut socket, _)) = listener.accept().await {
                let o = o.clone();
                o.fetch_add(1, Ordering::SeqCst);
                held.spawn(async move {
                    let mut buf = [0u8; 1024];
                    while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
                    o.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Silent { port, open, task }
    }
}

/// Waits (up to 10 s) for `counter` to reach 0.
pub async fn drained(counter: &AtomicUsize) -> bool {
    for _ in 0..200 {
        if counter.load(Ordering::SeqCst) == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A fresh ed25519 key pair in `dir` (private key path returned).
pub fn new_key(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}
