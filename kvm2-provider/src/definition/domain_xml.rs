//! Domain XML for a proxy VM, built from typed structs.
//!
//! [`render`] is a pure function of a [`DomainSpec`]: every value is checked
//! (identifiers, absolute paths, characters XML 1.0 can carry) and then
//! serialised by quick-xml, which escapes it. The document has:
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

use crate::Error;
use crate::ownership_mark::{MARK_ELEMENT, MARK_NAMESPACE, MARK_PREFIX, OwnerMark};
use provider_api::Identifier;
use provider_api::config::Firmware;
use provider_api::config::values::BridgeName;

/// Largest memory size accepted, in MiB (1 TiB).
pub const MAX_MEMORY_MIB: u64 = 1 << 20;
/// Largest vCPU count accepted.
pub const MAX_VCPUS: u32 = 256;
/// Longest path accepted for a disk.
pub const MAX_PATH_LEN: usize = 4096;

/// The libvirt domain type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VirtType {
    /// Hardware virtualisation (production). The guest CPU is the host's
    /// (`host-passthrough`).
    Kvm,
    /// TCG emulation (hosts without `/dev/kvm`, such as CI). Default CPU model.
    Qemu,
}

/// Everything the domain XML is made of.
#[derive(Debug, Clone)]
pub struct DomainSpec {
    /// Domain type.
    pub virt_type: VirtType,
    /// Domain name (the instance name).
    pub name: Identifier,
    /// Memory in MiB, 1..=[`MAX_MEMORY_MIB`].
    pub memory_mib: u64,
    /// vCPUs, 1..=[`MAX_VCPUS`].
    pub vcpus: u32,
    /// QEMU machine type, e.g. `q35` (letters, digits, `.`, `-`, `_`).
    pub machine: String,
    /// Firmware: BIOS (SeaBIOS), or UEFI through libvirt's firmware
    /// auto-selection with secure boot off. A UEFI domain gets an NVRAM
    /// file: undefine it with `VIR_DOMAIN_UNDEFINE_NVRAM`.
    pub firmware: Firmware,
    /// Absolute path of the per-VM qcow2 overlay.
    pub overlay_path: String,
    /// Absolute path of the cloud-init seed ISO.
    pub seed_path: String,
    /// Host bridge the NIC attaches to.
    pub bridge: BridgeName,
    /// Fixed MAC address (`52:54:00:xx:xx:xx` style), or libvirt picks one.
    pub mac: Option<String>,
    /// The ownership mark.
    pub mark: OwnerMark,
}

/// Renders `spec` as a libvirt domain XML document.
///
/// # Errors
/// [`Error::InvalidValue`] naming the offending field when a value is out of
/// range or could not be represented safely; [`Error::XmlWrite`] if the
/// serialiser fails.
pub fn render(spec: &DomainSpec) -> Result<String, Error> {
    if !(1..=MAX_MEMORY_MIB).contains(&spec.memory_mib) {
        return Err(Error::invalid(
            "memory",
            format!("must be 1 to {MAX_MEMORY_MIB} MiB"),
        ));
    }
    if !(1..=MAX_VCPUS).contains(&spec.vcpus) {
        return Err(Error::invalid("vcpus", format!("must be 1 to {MAX_VCPUS}")));
    }
    check_machine(&spec.machine)?;
    check_path("overlay path", &spec.overlay_path)?;
    check_path("seed path", &spec.seed_path)?;
    let efi = match spec.firmware {
        Firmware::Bios => false,
        Firmware::Uefi => true,
        other => {
            return Err(Error::invalid(
                "firmware",
                format!("{other} is not supported by this provider"),
            ));
        }
    };
    if let Some(mac) = &spec.mac {
        check_mac(mac)?;
    }

    let xml = DomainXml {
        virt_type: match spec.virt_type {
            VirtType::Kvm => "kvm",
            VirtType::Qemu => "qemu",
        },
        name: spec.name.as_str(),
        metadata: MetadataXml {
            instance: MarkXml {
                xmlns: MARK_NAMESPACE,
                owner_uid: spec.mark.owner_uid().as_str(),
                entry: spec.mark.entry().as_str(),
                created_at: spec.mark.created_at().to_string(),
                tags: spec.mark.tags_text(),
            },
        },
        memory: Sized_ {
            unit: "MiB",
            value: spec.memory_mib,
        },
        vcpu: Vcpu {
            placement: "static",
            value: spec.vcpus,
        },
        os: Os {
            firmware: efi.then_some("efi"),
            os_type: OsType {
                arch: "x86_64",
                machine: &spec.machine,
                value: "hvm",
            },
            firmware_features: efi.then(|| FirmwareFeatures {
                feature: vec![FirmwareFeature {
                    enabled: "no",
                    name: "secure-boot",
                }],
            }),
            boot: Boot { dev: "hd" },
        },
        features: Features { acpi: (), apic: () },
        cpu: match spec.virt_type {
            VirtType::Kvm => Some(Cpu {
                mode: "host-passthrough",
            }),
            VirtType::Qemu => None,
        },
        clock: Clock { offset: "utc" },
        on_poweroff: "destroy",
        on_reboot: "restart",
        on_crash: "destroy",
        devices: Devices {
            disk: vec![
                Disk {
                    disk_type: "file",
                    device: "disk",
                    driver: Driver {
                        name: "qemu",
                        format: "qcow2",
                    },
                    source: FileSource {
                        file: &spec.overlay_path,
                    },
                    target: Target {
                        dev: "vda",
                        bus: "virtio",
                    },
                    readonly: None,
                },
                // A read-only virtio disk, not a SATA cdrom: Debian's cloud
                // kernel (and so Debian's own cloud images) has no AHCI
                // driver, and cloud-init finds the `cidata` ISO on any block
                // device.
                Disk {
                    disk_type: "file",
                    device: "disk",
                    driver: Driver {
                        name: "qemu",
                        format: "raw",
                    },
                    source: FileSource {
                        file: &spec.seed_path,
                    },
                    target: Target {
                        dev: "vdb",
                        bus: "virtio",
                    },
                    readonly: Some(()),
                },
            ],
            interface: Interface {
                if_type: "bridge",
                mac: spec.mac.as_deref().map(|address| Mac { address }),
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
        },
    };
    quick_xml::se::to_string(&xml).map_err(Error::XmlWrite)
}

fn check_machine(machine: &str) -> Result<(), Error> {
    if machine.is_empty()
        || machine.len() > 64
        || !machine
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err(Error::invalid(
            "machine type",
            "must be 1 to 64 ASCII letters, digits, '.', '-' or '_'",
        ));
    }
    Ok(())
}

/// Absolute, normalised enough to be unambiguous, and representable in XML.
pub(crate) fn check_path(field: &'static str, path: &str) -> Result<(), Error> {
    if !path.starts_with('/') || path.len() > MAX_PATH_LEN {
        return Err(Error::invalid(
            field,
            format!("must be an absolute path of at most {MAX_PATH_LEN} bytes"),
        ));
    }
    if path.split('/').any(|c| c == "..") {
        return Err(Error::invalid(field, "must not contain '..'"));
    }
    if path
        .chars()
        .any(|c| c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}')
    {
        return Err(Error::invalid(
            field,
            "must not contain control or non-XML characters",
        ));
    }
    Ok(())
}

/// Six colon-separated hex octets, unicast.
fn check_mac(mac: &str) -> Result<(), Error> {
    let octets: Vec<&str> = mac.split(':').collect();
    let well_formed = octets.len() == 6
        && octets
            .iter()
            .all(|o| o.len() == 2 && o.bytes().all(|b| b.is_ascii_hexdigit()));
    let unicast = octets
        .first()
        .and_then(|o| u8::from_str_radix(o, 16).ok())
        .is_some_and(|first| first & 1 == 0);
    if !well_formed || !unicast {
        return Err(Error::invalid(
            "MAC address",
            "must be six hex octets like 52:54:00:12:34:56, unicast",
        ));
    }
    Ok(())
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
    use crate::ownership_mark::parse_mark;
    use crate::timestamp::Timestamp;
    use provider_api::OwnerUid;

    pub(crate) fn spec() -> DomainSpec {
        DomainSpec {
            virt_type: VirtType::Qemu,
            name: Identifier::parse("proxy-abc").unwrap(),
            memory_mib: 512,
            vcpus: 1,
            machine: "q35".into(),
            firmware: Firmware::Bios,
            overlay_path: "/var/lib/libvirt/images/vm-proxy-abc.overlay.qcow2".into(),
            seed_path: "/var/lib/libvirt/images/vm-proxy-abc.seed.iso".into(),
            bridge: BridgeName::parse("br0").unwrap(),
            mac: Some("52:54:00:12:34:56".into()),
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
        s.firmware = Firmware::Uefi;
        s.virt_type = VirtType::Kvm;
        let xml = render(&s).unwrap();
        assert!(xml.contains("<domain type=\"kvm\">"));
        assert!(xml.contains("<os firmware=\"efi\">"));
        assert!(xml.contains("<feature enabled=\"no\" name=\"secure-boot\"/>"));
        assert!(xml.contains("<cpu mode=\"host-passthrough\"/>"));
    }

    #[test]
    fn metacharacters_in_paths_are_escaped() {
        let mut s = spec();
        s.overlay_path = "/pool/a'b\"c<d>&e.qcow2".into();
        let xml = render(&s).unwrap();
        assert!(
            xml.contains("file=\"/pool/a'b&quot;c&lt;d&gt;&amp;e.qcow2\""),
            "{xml}"
        );
        // Still well-formed, and the mark unaffected.
        assert_eq!(parse_mark(&xml).unwrap().unwrap(), s.mark);
    }

    #[test]
    fn rejects_values_that_cannot_be_represented() {
        type Mutation = Box<dyn Fn(&mut DomainSpec)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("memory", Box::new(|s| s.memory_mib = 0)),
            ("memory", Box::new(|s| s.memory_mib = MAX_MEMORY_MIB + 1)),
            ("vcpus", Box::new(|s| s.vcpus = 0)),
            ("machine type", Box::new(|s| s.machine = "q35'/>".into())),
            (
                "overlay path",
                Box::new(|s| s.overlay_path = "rel/x".into()),
            ),
            (
                "overlay path",
                Box::new(|s| s.overlay_path = "/a/../b".into()),
            ),
            ("seed path", Box::new(|s| s.seed_path = "/a\u{1}b".into())),
            ("seed path", Box::new(|s| s.seed_path = "/a\u{FFFF}".into())),
            (
                "MAC address",
                Box::new(|s| s.mac = Some("01:00:00:00:00:00".into())),
            ),
            (
                "MAC address",
                Box::new(|s| s.mac = Some("52:54:00:12:34".into())),
            ),
        ];
        for (field, mutate) in cases {
            let mut s = spec();
            mutate(&mut s);
            match render(&s) {
                Err(Error::InvalidValue { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: expected InvalidValue, got {other:?}"),
            }
        }
    }

    proptest::proptest! {
        // Any path that passes the checks renders to a document whose mark
        // still parses: user values cannot break out of their attribute.
        #[test]
        fn arbitrary_paths_stay_inside_their_attribute(tail in "\\PC{0,40}") {
            let mut s = spec();
            s.seed_path = format!("/{tail}");
            if let Ok(xml) = render(&s) {
                proptest::prop_assert_eq!(parse_mark(&xml).unwrap(), Some(s.mark.clone()));
                let count = xml.matches("<disk ").count();
                proptest::prop_assert_eq!(count, 2);
            }
        }
    }
}
