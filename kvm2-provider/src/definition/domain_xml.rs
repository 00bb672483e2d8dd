//! Domain XML for a proxy VM, built from typed structs.
//!
//! [`render`] is a pure function of a [`DomainSpec`] whose every field is
//! already valid (parsed where it entered: [`MemoryMib`], [`Vcpus`],
//! [`MacAddress`], [`disk_path`](super::disk_path), ...),
//! so no input makes it fail; quick-xml serialises and escapes each value.
//! The document has:
//!
//! - `<domain type='kvm'>` (or `'qemu'` for TCG emulation), name, memory in
//!   MiB, vCPUs, the ownership mark in `<metadata>`;
//! - firmware: BIOS, or UEFI through libvirt's firmware auto-selection
//!   (`<os firmware='efi'>`; libvirt picks OVMF from the host's firmware
//!   descriptors and creates the NVRAM file — undefine needs the NVRAM flag);
//! - the overlay as a `type='file'` virtio disk and the seed ISO as a
//!   read-only virtio disk (guests' cloud kernels often lack AHCI, so a SATA
//!   cdrom would be invisible), both by path (not `type='volume'`, which
//!   AppArmor's helper cannot resolve);
//! - a virtio NIC on a host bridge, a serial console, the QEMU guest agent
//!   channel and a virtio RNG.

use serde::Serialize;

use super::domain_values::{BootFirmware, MacAddress, MachineName, MemoryMib, Vcpus};
use super::ownership_mark::{MARK_ELEMENT, MARK_NAMESPACE, MARK_PREFIX, OwnerMark};
use crate::Error;
use provider_api::Identifier;
use provider_api::config::DomainType;
use provider_api::config::values::{AbsolutePath, BridgeName};

/// Everything the domain XML is made of; every field's type holds only
/// values the document can carry.
#[derive(Debug, Clone)]
pub struct DomainSpec {
    /// Domain type: `kvm` (the guest CPU is the host's,
    /// `host-passthrough`) or `qemu` (TCG emulation, default CPU model).
    pub domain_type: DomainType,
    /// Domain name (the instance name).
    pub name: Identifier,
    /// Memory.
    pub memory: MemoryMib,
    /// vCPUs.
    pub vcpus: Vcpus,
    /// QEMU machine type, e.g. `q35`.
    pub machine: MachineName,
    /// Firmware.
    pub firmware: BootFirmware,
    /// Path of the per-VM qcow2 overlay.
    pub overlay_path: AbsolutePath,
    /// Path of the cloud-init seed ISO.
    pub seed_path: AbsolutePath,
    /// Host bridge the NIC attaches to.
    pub bridge: BridgeName,
    /// Fixed MAC address, or libvirt picks one.
    pub mac: Option<MacAddress>,
    /// The ownership mark.
    pub mark: OwnerMark,
}

/// Renders `spec` as a libvirt domain XML document.
///
/// # Errors
/// [`Error::XmlWrite`] only if the serialiser fails; no value of a
/// [`DomainSpec`] makes it (the fields were checked when they were made).
pub fn render(spec: &DomainSpec) -> Result<String, Error> {
    let xml = DomainXml {
        virt_type: spec.domain_type.as_str(),
        name: spec.name.as_str(),
        metadata: metadata(&spec.mark),
        memory: Sized_ {
            unit: "MiB",
            value: spec.memory.get(),
        },
        vcpu: Vcpu {
            placement: "static",
            value: spec.vcpus.get(),
        },
        os: os(spec),
        features: Features { acpi: (), apic: () },
        cpu: (spec.domain_type == DomainType::Kvm).then_some(Cpu {
            mode: "host-passthrough",
        }),
        clock: Clock { offset: "utc" },
        on_poweroff: "destroy",
        on_reboot: "restart",
        on_crash: "destroy",
        devices: devices(spec),
    };
    quick_xml::se::to_string(&xml).map_err(Error::XmlWrite)
}

/// The ownership mark under `<metadata>`.
fn metadata(mark: &OwnerMark) -> MetadataXml<'_> {
    MetadataXml {
        instance: MarkXml {
            xmlns: MARK_NAMESPACE,
            owner_uid: mark.owner_uid().as_str(),
            entry: mark.entry().as_str(),
            created_at: mark.created_at().to_string(),
            tags: mark.tags_text(),
        },
    }
}

/// `<os>`: machine type, firmware, boot from the first disk.
fn os(spec: &DomainSpec) -> Os<'_> {
    let efi = spec.firmware == BootFirmware::Uefi;
    Os {
        firmware: efi.then_some("efi"),
        os_type: OsType {
            arch: "x86_64",
            machine: spec.machine.as_str(),
            value: "hvm",
        },
        firmware_features: efi.then(|| FirmwareFeatures {
            feature: vec![FirmwareFeature {
                enabled: "no",
                name: "secure-boot",
            }],
        }),
        boot: Boot { dev: "hd" },
    }
}

/// `<devices>`: the two disks, the NIC, console, guest agent and RNG.
fn devices(spec: &DomainSpec) -> Devices<'_> {
    Devices {
        disk: vec![
            file_disk(&spec.overlay_path, "qcow2", "vda", false),
            // A read-only virtio disk, not a SATA cdrom: Debian's cloud
            // kernel (and so Debian's own cloud images) has no AHCI
            // driver, and cloud-init finds the `cidata` ISO on any block
            // device.
            file_disk(&spec.seed_path, "raw", "vdb", true),
        ],
        interface: Interface {
            if_type: "bridge",
            mac: spec.mac.as_ref().map(|mac| Mac {
                address: mac.as_str(),
            }),
            source: BridgeSource {
                bridge: spec.bridge.as_str(),
            },
            model: Model {
                model_type: "virtio",
            },
        },
        serial: Serial {
            serial_type: "pty",
            target: SerialTarget { port: 0 },
        },
        console: Console {
            console_type: "pty",
            target: ConsoleTarget {
                target_type: "serial",
                port: 0,
            },
        },
        channel: Channel {
            channel_type: "unix",
            target: ChannelTarget {
                target_type: "virtio",
                name: "org.qemu.guest_agent.0",
            },
        },
        rng: Rng {
            model: "virtio",
            backend: RngBackend {
                model: "random",
                value: "/dev/urandom",
            },
        },
    }
}

/// A `type='file'` virtio disk by path.
fn file_disk<'a>(
    path: &'a AbsolutePath,
    format: &'static str,
    dev: &'static str,
    readonly: bool,
) -> Disk<'a> {
    Disk {
        disk_type: "file",
        device: "disk",
        driver: Driver {
            name: "qemu",
            format,
        },
        source: FileSource {
            file: path.as_str(),
        },
        target: Target { dev, bus: "virtio" },
        readonly: readonly.then_some(()),
    }
}

// ---- The document, as serde structs. Field order is element order. ----

#[derive(Serialize)]
#[serde(rename = "domain")]
struct DomainXml<'a> {
    #[serde(rename = "@type")]
    virt_type: &'a str,
    name: &'a str,
    metadata: MetadataXml<'a>,
    memory: Sized_,
    vcpu: Vcpu,
    os: Os<'a>,
    features: Features,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu: Option<Cpu>,
    clock: Clock,
    on_poweroff: &'a str,
    on_reboot: &'a str,
    on_crash: &'a str,
    devices: Devices<'a>,
}

#[derive(Serialize)]
struct MetadataXml<'a> {
    // The prefix is fixed here; the reader resolves it by namespace URI.
    #[serde(rename = "kvm2:instance")]
    instance: MarkXml<'a>,
}

#[derive(Serialize)]
struct MarkXml<'a> {
    #[serde(rename = "@xmlns:kvm2")]
    xmlns: &'a str,
    #[serde(rename = "kvm2:owner-uid")]
    owner_uid: &'a str,
    #[serde(rename = "kvm2:entry")]
    entry: &'a str,
    #[serde(rename = "kvm2:created-at")]
    created_at: String,
    #[serde(rename = "kvm2:tags", skip_serializing_if = "String::is_empty")]
    tags: String,
}

#[derive(Serialize)]
struct Sized_ {
    #[serde(rename = "@unit")]
    unit: &'static str,
    #[serde(rename = "$text")]
    value: u64,
}

#[derive(Serialize)]
struct Vcpu {
    #[serde(rename = "@placement")]
    placement: &'static str,
    #[serde(rename = "$text")]
    value: u32,
}

#[derive(Serialize)]
struct Os<'a> {
    #[serde(rename = "@firmware", skip_serializing_if = "Option::is_none")]
    firmware: Option<&'static str>,
    #[serde(rename = "type")]
    os_type: OsType<'a>,
    #[serde(rename = "firmware", skip_serializing_if = "Option::is_none")]
    firmware_features: Option<FirmwareFeatures>,
    boot: Boot,
}

#[derive(Serialize)]
struct OsType<'a> {
    #[serde(rename = "@arch")]
    arch: &'static str,
    #[serde(rename = "@machine")]
    machine: &'a str,
    #[serde(rename = "$text")]
    value: &'static str,
}

#[derive(Serialize)]
struct FirmwareFeatures {
    feature: Vec<FirmwareFeature>,
}

#[derive(Serialize)]
struct FirmwareFeature {
    #[serde(rename = "@enabled")]
    enabled: &'static str,
    #[serde(rename = "@name")]
    name: &'static str,
}

#[derive(Serialize)]
struct Boot {
    #[serde(rename = "@dev")]
    dev: &'static str,
}

#[derive(Serialize)]
struct Features {
    acpi: (),
    apic: (),
}

#[derive(Serialize)]
struct Cpu {
    #[serde(rename = "@mode")]
    mode: &'static str,
}

#[derive(Serialize)]
struct Clock {
    #[serde(rename = "@offset")]
    offset: &'static str,
}

#[derive(Serialize)]
struct Devices<'a> {
    disk: Vec<Disk<'a>>,
    interface: Interface<'a>,
    serial: Serial,
    console: Console,
    channel: Channel,
    rng: Rng,
}

#[derive(Serialize)]
struct Disk<'a> {
    #[serde(rename = "@type")]
    disk_type: &'static str,
    #[serde(rename = "@device")]
    device: &'static str,
    driver: Driver,
    source: FileSource<'a>,
    target: Target,
    #[serde(skip_serializing_if = "Option::is_none")]
    readonly: Option<()>,
}

#[derive(Serialize)]
struct Driver {
    #[serde(rename = "@name")]
    name: &'static str,
    #[serde(rename = "@type")]
    format: &'static str,
}

#[derive(Serialize)]
struct FileSource<'a> {
    #[serde(rename = "@file")]
    file: &'a str,
}

#[derive(Serialize)]
struct Target {
    #[serde(rename = "@dev")]
    dev: &'static str,
    #[serde(rename = "@bus")]
    bus: &'static str,
}

#[derive(Serialize)]
struct Interface<'a> {
    #[serde(rename = "@type")]
    if_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mac: Option<Mac<'a>>,
    source: BridgeSource<'a>,
    model: Model,
}

#[derive(Serialize)]
struct Mac<'a> {
    #[serde(rename = "@address")]
    address: &'a str,
}

#[derive(Serialize)]
struct BridgeSource<'a> {
    #[serde(rename = "@bridge")]
    bridge: &'a str,
}

#[derive(Serialize)]
struct Model {
    #[serde(rename = "@type")]
    model_type: &'static str,
}

#[derive(Serialize)]
struct Serial {
    #[serde(rename = "@type")]
    serial_type: &'static str,
    target: SerialTarget,
}

#[derive(Serialize)]
struct SerialTarget {
    #[serde(rename = "@port")]
    port: u32,
}

#[derive(Serialize)]
struct Console {
    #[serde(rename = "@type")]
    console_type: &'static str,
    target: ConsoleTarget,
}

#[derive(Serialize)]
struct ConsoleTarget {
    #[serde(rename = "@type")]
    target_type: &'static str,
    #[serde(rename = "@port")]
    port: u32,
}

#[derive(Serialize)]
struct Channel {
    #[serde(rename = "@type")]
    channel_type: &'static str,
    target: ChannelTarget,
}

#[derive(Serialize)]
struct ChannelTarget {
    #[serde(rename = "@type")]
    target_type: &'static str,
    #[serde(rename = "@name")]
    name: &'static str,
}

#[derive(Serialize)]
struct Rng {
    #[serde(rename = "@model")]
    model: &'static str,
    backend: RngBackend,
}

#[derive(Serialize)]
struct RngBackend {
    #[serde(rename = "@model")]
    model: &'static str,
    #[serde(rename = "$text")]
    value: &'static str,
}

// MARK_ELEMENT is spelled out in the serde rename above; keep them in step.
const _: () = assert!(matches!(MARK_ELEMENT.as_bytes(), b"instance"));
const _: () = assert!(matches!(MARK_PREFIX.as_bytes(), b"kvm2"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::{MAX_MEMORY_MIB, MAX_VCPUS, disk_path, parse_mark};
    use crate::timestamp::Timestamp;
    use provider_api::OwnerUid;

    pub(crate) fn spec() -> DomainSpec {
        DomainSpec {
            domain_type: DomainType::Qemu,
            name: Identifier::parse("proxy-abc").unwrap(),
            memory: MemoryMib::new(512).unwrap(),
            vcpus: Vcpus::new(1).unwrap(),
            machine: MachineName::parse("q35").unwrap(),
            firmware: BootFirmware::Bios,
            overlay_path: AbsolutePath::parse("/var/lib/libvirt/images/vm-proxy-abc.overlay.qcow2")
                .unwrap(),
            seed_path: AbsolutePath::parse("/var/lib/libvirt/images/vm-proxy-abc.seed.iso")
                .unwrap(),
            bridge: BridgeName::parse("br0").unwrap(),
            mac: Some(MacAddress::parse("52:54:00:12:34:56").unwrap()),
            mark: OwnerMark::new(
                OwnerUid::parse("6a1f0c2e-1111-4222-8333-944455556666").unwrap(),
                Identifier::parse("kvm2-home").unwrap(),
                Timestamp::from_unix_seconds(1_796_202_916).unwrap(),
            ),
        }
    }

    #[test]
    fn renders_the_expected_document() {
        let xml = render(&spec()).unwrap();
        println!("{xml}");
        for needle in [
            "<domain type=\"qemu\"><name>proxy-abc</name>",
            "<kvm2:instance xmlns:kvm2=\"http://egress-proxies.invalid/xmlns/kvm2/1\">",
            "<kvm2:owner-uid>6a1f0c2e-1111-4222-8333-944455556666</kvm2:owner-uid>",
            "<kvm2:created-at>2026-12-02T09:15:16Z</kvm2:created-at>",
            "<memory unit=\"MiB\">512</memory>",
            "<type arch=\"x86_64\" machine=\"q35\">hvm</type>",
            "<disk type=\"file\" device=\"disk\"><driver name=\"qemu\" type=\"qcow2\"/><source file=\"/var/lib/libvirt/images/vm-proxy-abc.overlay.qcow2\"/>",
            "<disk type=\"file\" device=\"disk\"><driver name=\"qemu\" type=\"raw\"/><source file=\"/var/lib/libvirt/images/vm-proxy-abc.seed.iso\"/><target dev=\"vdb\" bus=\"virtio\"/><readonly/></disk>",
            "<interface type=\"bridge\"><mac address=\"52:54:00:12:34:56\"/><source bridge=\"br0\"/><model type=\"virtio\"/></interface>",
            "<target type=\"virtio\" name=\"org.qemu.guest_agent.0\"/>",
        ] {
            assert!(xml.contains(needle), "missing {needle}");
        }
        assert!(!xml.contains("firmware"));
        assert!(!xml.contains("host-passthrough"));
        let mark = parse_mark(&xml).unwrap().unwrap();
        assert_eq!(mark, spec().mark);
    }

    #[test]
    fn the_marks_tags_render_and_read_back() {
        let mut s = spec();
        assert!(
            !render(&s).unwrap().contains("kvm2:tags"),
            "no tags, no field"
        );
        let tags: provider_api::Tags = [("team", "net"), ("tier", "edge")]
            .iter()
            .map(|(k, v)| {
                (
                    Identifier::parse(k).unwrap(),
                    provider_api::TagValue::parse(v).unwrap(),
                )
            })
            .collect();
        s.mark = s.mark.clone().with_tags(&tags).unwrap();
        let xml = render(&s).unwrap();
        assert!(
            xml.contains("<kvm2:tags>team=net,tier=edge</kvm2:tags>"),
            "{xml}"
        );
        assert_eq!(parse_mark(&xml).unwrap().unwrap().tags(), &tags);
    }

    #[test]
    fn uefi_and_kvm() {
        let mut s = spec();
        s.firmware = BootFirmware::Uefi;
        s.domain_type = DomainType::Kvm;
        let xml = render(&s).unwrap();
        assert!(xml.contains("<domain type=\"kvm\">"));
        assert!(xml.contains("<os firmware=\"efi\">"));
        assert!(xml.contains("<feature enabled=\"no\" name=\"secure-boot\"/>"));
        assert!(xml.contains("<cpu mode=\"host-passthrough\"/>"));
    }

    #[test]
    fn metacharacters_in_paths_are_escaped() {
        let mut s = spec();
        s.overlay_path = AbsolutePath::parse("/pool/a'b\"c<d>&e.qcow2").unwrap();
        let xml = render(&s).unwrap();
        assert!(
            xml.contains("file=\"/pool/a'b&quot;c&lt;d&gt;&amp;e.qcow2\""),
            "{xml}"
        );
        // Still well-formed, and the mark unaffected.
        assert_eq!(parse_mark(&xml).unwrap().unwrap(), s.mark);
    }

    proptest::proptest! {
        // Any path that passes the path rule renders to a document whose
        // mark still parses: user values cannot break out of their
        // attribute.
        #[test]
        fn arbitrary_paths_stay_inside_their_attribute(tail in "\\PC{0,40}") {
            let mut s = spec();
            if let Ok(path) = disk_path("seed path", &format!("/{tail}")) {
                s.seed_path = path;
                let xml = render(&s).unwrap();
                proptest::prop_assert_eq!(parse_mark(&xml).unwrap(), Some(s.mark.clone()));
                let count = xml.matches("<disk ").count();
                proptest::prop_assert_eq!(count, 2);
            }
        }

        // A spec is valid by construction, so render has nothing to refuse.
        #[test]
        fn every_valid_spec_renders(mib in 1..=MAX_MEMORY_MIB, cpus in 1..=MAX_VCPUS, uefi: bool) {
            let mut s = spec();
            s.memory = MemoryMib::new(mib).unwrap();
            s.vcpus = Vcpus::new(cpus).unwrap();
            s.firmware = if uefi { BootFirmware::Uefi } else { BootFirmware::Bios };
            proptest::prop_assert!(render(&s).is_ok());
        }
    }
}
