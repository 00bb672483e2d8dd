//! The sandbox as configured hosts, for the Get / List / Check tests: a
//! providers config naming the sandbox (directly or through a
//! `testkit::relay::Relay`), host options, and marked QEMU domains defined
//! and started with libvirt-rpc and removed on drop.

use std::path::Path;
use std::time::Duration;

use kvm2_provider::__internals::definition::domain_xml::render;
use kvm2_provider::__internals::definition::{DomainSpec, MemoryMib, OwnerMark};
use kvm2_provider::__internals::hosts::Connection;
use kvm2_provider::__internals::storage::volume_xml::raw_volume;
use kvm2_provider::HostOptions;
use libvirt_rpc::{
    Client, Config as RpcConfig, Domain, DomainCreateFlags, DomainDefineFlags, OpenFlags,
    StorageVol, StorageVolCreateFlags,
};
use provider_api::Identifier;
use provider_api::config::Kvm2Config;
use testkit::Descriptor;
pub use testkit::providers_yaml::Host;
use testkit::providers_yaml::{Image, ProvidersYaml};
use testkit::virsh::Virsh;

pub const ENTRY: &str = "kvm2-it";

/// The providers config of [`ENTRY`] with the sandbox as `host1`, the
/// sandbox's key and known_hosts, and an image nothing fetches; tests set
/// the hosts and credentials they vary.
pub fn providers(sandbox: &Descriptor) -> ProvidersYaml {
    ProvidersYaml::sandbox(sandbox, ENTRY).images([Image::never_fetched("qcow2")])
}

/// The sandbox as `host1` with its own key and known_hosts.
pub fn sandbox_config(sandbox: &Descriptor) -> Kvm2Config {
    providers(sandbox).kvm2()
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

pub fn id(s: &str) -> Identifier {
    Identifier::parse(s).unwrap()
}

/// A unique lowercase name (an identifier) for a test domain.
pub fn unique(tag: &str) -> String {
    testkit::names::unique(&format!("kvm2-itb-{tag}"))
}

pub use crate::test_domain::mark;

/// Domain XML for `name` (64 MiB, the sandbox bridge) with `mark`, or
/// without any mark when `mark` is `None`. Disk files live in `dir`.
pub fn domain_xml(sandbox: &Descriptor, name: &str, dir: &Path, mark: Option<OwnerMark>) -> String {
    let spec = DomainSpec {
        memory: MemoryMib::new(64).unwrap(),
        ..crate::test_domain::spec(
            name,
            &dir.join("overlay.qcow2").display().to_string(),
            &dir.join("seed.iso").display().to_string(),
            &sandbox.bridge,
            mark.clone()
                .unwrap_or_else(|| self::mark(ENTRY, "00000000-0000-4000-8000-000000000000")),
        )
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
    testkit::qemu_img::create_qcow2(&overlay, "16M");
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
    virsh: Virsh,
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
            virsh: Virsh::qemu(sandbox),
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
        let _ = self.virsh.run(&["destroy", &self.name]);
        let _ = self.virsh.run(&["undefine", "--nvram", &self.name]);
    }
}

/// An empty raw volume in the sandbox pool, deleted with virsh when dropped
/// (independent of the connection under test, which may be dead by then).
pub struct TempVolume {
    pub vol: StorageVol,
    virsh: Virsh,
}

impl Drop for TempVolume {
    fn drop(&mut self) {
        let _ = self
            .virsh
            .run(&["vol-delete", "--pool", &self.vol.pool, &self.vol.name]);
    }
}

/// Makes a [`TempVolume`] named for `tag` over `conn`.
pub async fn temp_volume(conn: &Connection, sandbox: &Descriptor, tag: &str) -> TempVolume {
    let client = conn.client();
    let pool = client
        .storage_pool_lookup_by_name(&sandbox.pool.name)
        .await
        .unwrap();
    let name = format!("{}.raw", testkit::names::unique(&format!("tmp-it-{tag}")));
    let vol = client
        .storage_vol_create_xml(
            &pool,
            &raw_volume(&name, 0).unwrap(),
            StorageVolCreateFlags::empty(),
        )
        .await
        .unwrap();
    TempVolume {
        vol,
        virsh: Virsh::qemu(sandbox),
    }
}
