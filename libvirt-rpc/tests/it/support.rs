//! libvirt-rpc clients for the tests: to the sandbox daemon, or to a
//! private daemon of the test's own ([`testkit::libvirtd`]), and the small
//! XML documents the tests define.

use std::time::Duration;

use libvirt_rpc::{Client, Config, Domain, DomainDefineFlags, ListDomainsFlags, OpenFlags};
use testkit::Descriptor;
use testkit::libvirtd::{POOL, PrivateLibvirtd, STORAGE_URI};
use testkit::virsh::Virsh;

/// A client of the sandbox daemon for `uri`, over `connect_unix` as callers
/// on the daemon's host do (it also raises the socket's send buffer, so the
/// stream tests cover that path).
pub async fn connect_uri(uri: &str, config: Config) -> Client {
    let d = Descriptor::require();
    tokio::time::timeout(
        Duration::from_secs(30),
        Client::connect_unix(&d.libvirt.socket, uri, OpenFlags::empty(), config),
    )
    .await
    .expect("handshake within 30 s")
    .expect("handshake")
}

/// The sandbox daemon's `test:///default`.
pub async fn test_driver() -> Client {
    connect_uri(&Descriptor::require().libvirt.test_uri, Config::default()).await
}

/// The sandbox daemon's `qemu:///system`.
pub async fn qemu() -> Client {
    connect_uri(&Descriptor::require().libvirt.qemu_uri, Config::default()).await
}

/// A client of `daemon` for `uri` (retrying while its socket comes up).
pub async fn connect(daemon: &PrivateLibvirtd, uri: &str, config: Config) -> Client {
    let mut last = None;
    for _ in 0..100 {
        match tokio::net::UnixStream::connect(daemon.socket()).await {
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

/// A client of `daemon`'s `storage:///system`, its `dir` pool [`POOL`]
/// defined.
pub async fn storage(daemon: &PrivateLibvirtd) -> Client {
    let c = connect(daemon, STORAGE_URI, Config::default()).await;
    if c.storage_pool_lookup_by_name(POOL).await.is_err() {
        let xml = format!(
            "<pool type='dir'><name>{POOL}</name><target><path>{}</path></target></pool>",
            daemon.pool_dir().display()
        );
        // REMOTE_PROC_STORAGE_POOL_CREATE_XML = 76: {xml, flags} -> pool
        let _: libvirt_rpc::StoragePool = c
            .call(76, &(xml.as_str(), 0u32))
            .await
            .expect("create private pool");
    }
    c
}

/// A client of `daemon` for `uri`, connected as user `uid` (see
/// [`PrivateLibvirtd::socket_as`]). Bounded by 30 s.
pub async fn connect_as(
    daemon: &PrivateLibvirtd,
    uid: u32,
    uri: &str,
) -> libvirt_rpc::Result<Client> {
    tokio::time::timeout(
        Duration::from_secs(30),
        Client::connect(
            daemon.socket_as(uid),
            uri,
            OpenFlags::empty(),
            Config::default(),
        ),
    )
    .await
    .expect("handshake within 30 s")
}

/// Asserts that `c`, a client of `test:///default`, lists the driver's
/// built-in domain `test`.
pub async fn assert_lists_test_domain(c: &Client) {
    let doms = c
        .connect_list_all_domains(ListDomainsFlags::empty())
        .await
        .unwrap();
    assert!(doms.iter().any(|d| d.name == "test"), "{doms:?}");
}

/// A minimal domain for the test driver.
pub fn domain_xml(name: &str) -> String {
    format!(
        "<domain type='test'><name>{name}</name><memory unit='KiB'>65536</memory>\
         <os><type arch='x86_64'>hvm</type></os></domain>"
    )
}

/// A raw volume of `bytes`.
pub fn volume_xml(name: &str, bytes: u64) -> String {
    format!(
        "<volume><name>{name}</name><capacity unit='bytes'>{bytes}</capacity>\
         <target><format type='raw'/></target></volume>"
    )
}

/// Runs virsh clean-up commands when dropped (also when a test fails).
pub struct Cleanup {
    virsh: Virsh,
    commands: Vec<Vec<String>>,
}

impl Cleanup {
    /// No commands yet.
    pub fn new(virsh: Virsh) -> Self {
        Self {
            virsh,
            commands: Vec::new(),
        }
    }
    /// Runs `virsh args` at the drop (the last pushed first).
    pub fn push(&mut self, args: &[&str]) {
        self.commands
            .push(args.iter().map(|s| s.to_string()).collect());
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in self.commands.iter().rev() {
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            let _ = self.virsh.run(&args);
        }
    }
}

/// A QEMU domain that boots no OS, with the devices named in `devices`.
pub fn qemu_xml(name: &str, devices: &str) -> String {
    format!(
        "<domain type='qemu'><name>{name}</name><memory unit='MiB'>32</memory>\
         <vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os>\
         <devices>{devices}</devices></domain>"
    )
}

/// Defines `xml` on `qemu:///system`, with its clean-up.
pub async fn define(c: &Client, cleanup: &mut Cleanup, name: &str, xml: &str) -> Domain {
    let dom = c
        .domain_define_xml_flags(xml, DomainDefineFlags::empty())
        .await
        .unwrap();
    cleanup.push(&["undefine", name]);
    cleanup.push(&["destroy", name]);
    dom
}
