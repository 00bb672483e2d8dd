#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Domain XML against the sandbox's real libvirtd: schema validation, define
//! and undefine on qemu:///system and test:///default, and the ownership
//! mark read back through `dumpxml` and `metadata`.

use std::path::Path;
use std::process::Command;

use kvm2_provider::__internals::address::interface_macs;
use kvm2_provider::__internals::definition::domain_xml::render;
use kvm2_provider::__internals::definition::{
    BootFirmware, DomainSpec, MARK_NAMESPACE, MacAddress, parse_mark, parse_metadata_reply,
};
use provider_api::config::DomainType;
use testkit::Descriptor;

use testkit::virsh::Virsh;

fn unique_name(tag: &str) -> String {
    testkit::names::unique(&format!("kvm2-it-{tag}"))
}

fn spec(name: &str, dir: &Path) -> DomainSpec {
    DomainSpec {
        mac: Some(MacAddress::parse("52:54:00:aa:bb:cc").unwrap()),
        ..crate::test_domain::spec(
            name,
            &dir.join("overlay.qcow2").display().to_string(),
            &dir.join("seed.iso").display().to_string(),
            "br-kvm2-none",
            crate::test_domain::mark("kvm2-it", "0b6c3d2a-7e4f-4a1b-9c8d-0123456789ab"),
        )
    }
}

/// Undefines the domain when the test ends, pass or fail.
struct Defined<'a> {
    uri: &'a str,
    name: String,
}

impl Drop for Defined<'_> {
    fn drop(&mut self) {
        let _ = Virsh::new(self.uri).run(&["undefine", "--nvram", &self.name]);
    }
}

/// Renders `s` into a file in `dir`, defines it with virsh and returns the
/// guard that undefines it.
fn define<'a>(uri: &'a str, s: &DomainSpec, dir: &Path) -> Defined<'a> {
    let file = dir.join("domain.xml");
    std::fs::write(&file, render(s).unwrap()).unwrap();
    Virsh::new(uri).ok(&["define", file.to_str().unwrap()]);
    Defined {
        uri,
        name: s.name.to_string(),
    }
}

#[test]
fn rendered_xml_passes_libvirts_schema() {
    let dir = tempfile::tempdir().unwrap();
    for firmware in [BootFirmware::Bios, BootFirmware::Uefi] {
        for domain_type in [DomainType::Qemu, DomainType::Kvm] {
            let mut s = spec(&unique_name("schema"), dir.path());
            s.firmware = firmware;
            s.domain_type = domain_type;
            let file = dir.path().join("domain.xml");
            std::fs::write(&file, render(&s).unwrap()).unwrap();
            let out = Command::new("virt-xml-validate")
                .arg(&file)
                .arg("domain")
                .output()
                .expect("run virt-xml-validate");
            assert!(
                out.status.success(),
                "{firmware:?}/{domain_type:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn define_on_qemu_system_and_read_the_mark_back() {
    let sandbox = Descriptor::require();
    let uri = sandbox.virsh_uri(&sandbox.libvirt.qemu_uri);
    let dir = tempfile::tempdir().unwrap();
    // Metacharacters in a path must reach libvirt as data, not markup.
    let odd = dir.path().join("a'b\"c<d>&e");
    let mut s = spec(&unique_name("q"), &odd);
    s.firmware = BootFirmware::Uefi;
    let _guard = define(&uri, &s, dir.path());

    let dump = Virsh::new(&uri).ok(&["dumpxml", s.name.as_str()]);
    assert_eq!(parse_mark(&dump).unwrap(), Some(s.mark.clone()));
    // libvirt resolved UEFI to OVMF and made an NVRAM file path.
    assert!(dump.contains("/usr/share/OVMF/"), "{dump}");
    assert!(dump.contains("<nvram"), "{dump}");

    let reply = Virsh::new(&uri).ok(&["metadata", s.name.as_str(), "--uri", MARK_NAMESPACE]);
    assert_eq!(parse_metadata_reply(&reply).unwrap(), s.mark);

    let disks = Virsh::new(&uri).ok(&["domblklist", s.name.as_str()]);
    assert!(disks.contains(s.seed_path.as_str()), "{disks}");
    assert!(disks.contains(s.overlay_path.as_str()), "{disks}");
}

#[test]
fn the_nic_mac_libvirt_assigns_reads_back_from_the_dump() {
    let sandbox = Descriptor::require();
    let uri = sandbox.virsh_uri(&sandbox.libvirt.qemu_uri);
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(&unique_name("mac"), dir.path());
    s.mac = None;
    let _guard = define(&uri, &s, dir.path());
    let dump = Virsh::new(&uri).ok(&["dumpxml", s.name.as_str()]);
    let macs = interface_macs(&dump).unwrap();
    assert_eq!(macs.len(), 1, "{dump}");
    assert!(macs[0].starts_with("52:54:00:"), "{macs:?}");
    // The same MAC `virsh domiflist` shows for the bridge NIC.
    let list = Virsh::new(&uri).ok(&["domiflist", s.name.as_str()]);
    assert!(list.to_ascii_lowercase().contains(&macs[0]), "{list}");
}

#[test]
fn define_on_the_test_driver_and_read_the_mark_back() {
    let sandbox = Descriptor::require();
    let uri = sandbox.virsh_uri(&sandbox.libvirt.test_uri);
    let dir = tempfile::tempdir().unwrap();
    let s = spec(&unique_name("t"), dir.path());
    let file = dir.path().join("domain.xml");
    std::fs::write(&file, render(&s).unwrap()).unwrap();
    // The daemon's test driver keeps state per connection: one session.
    let script = format!(
        "define {file}; dumpxml {name}; echo @@@; metadata {name} --uri {ns}; echo @@@; undefine {name}",
        file = file.display(),
        name = s.name,
        ns = MARK_NAMESPACE
    );
    let out = Virsh::new(&uri).ok(&[&script]);
    let parts: Vec<&str> = out.split("@@@").collect();
    assert_eq!(parts.len(), 3, "{out}");
    let dump = &parts[0][parts[0].find("<domain").expect("a dump")..];
    assert_eq!(parse_mark(dump).unwrap(), Some(s.mark.clone()));
    assert_eq!(parse_metadata_reply(parts[1].trim()).unwrap(), s.mark);
    assert!(parts[2].contains("undefined"), "{out}");
}
