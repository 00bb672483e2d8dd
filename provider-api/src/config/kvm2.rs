//! The validated `kvm2` block of a provider entry.

use std::collections::BTreeMap;
use std::fmt;

use super::values::{
    AbsolutePath, BridgeName, ByteSize, Cidr, HostAddress, HostPort, HttpUrl, Sha256Digest, SshUser,
};
use crate::error::Error;
use crate::ident::Identifier;

/// The `kvm2` block: VMs on libvirt/KVM hosts reached over SSH.
///
/// Built only by [`ProvidersConfig`](super::ProvidersConfig) parsing, so
/// every invariant below holds: at least one host, image and machine type;
/// host names unique; host `(address, port)` pairs unique; defaults name
/// existing keys; `known_hosts_file` present unless host keys are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Kvm2Config {
    /// How to log in to the hosts.
    pub ssh: Kvm2Ssh,
    /// The hosts, in config order (never empty, names unique).
    pub hosts: Vec<Kvm2Host>,
    /// Base images by key (never empty).
    pub images: BTreeMap<Identifier, Kvm2Image>,
    /// Machine types by name (never empty).
    pub machine_types: BTreeMap<Identifier, MachineType>,
    /// Firmware for every domain (default BIOS).
    pub firmware: Firmware,
    /// libvirt domain type: hardware-accelerated `kvm` (the default) or
    /// emulated `qemu` (hosts without KVM, tests).
    pub domain_type: DomainType,
    /// The Squid settings the provider writes into every VM's vendor data.
    pub proxy: ProxySettings,
    /// What a request that names no machine type or image gets.
    pub defaults: Kvm2Defaults,
}

impl Kvm2Config {
    /// The host named `name`.
    pub fn host(&self, name: &Identifier) -> Option<&Kvm2Host> {
        self.hosts.iter().find(|h| &h.name == name)
    }

    /// The machine type a request asks for: `requested`, or the configured
    /// default when `None`.
    ///
    /// # Errors
    /// [`Permanent`](crate::ErrorClass::Permanent) when the name is unknown,
    /// or nothing was requested and no default is configured.
    pub fn machine_type_for(
        &self,
        requested: Option<&Identifier>,
    ) -> Result<(&Identifier, &MachineType), Error> {
        lookup(
            &self.machine_types,
            requested,
            self.defaults.machine_type.as_ref(),
            "machine type",
        )
    }

    /// The image a request asks for: `requested`, or the configured default
    /// when `None`.
    ///
    /// # Errors
    /// [`Permanent`](crate::ErrorClass::Permanent) when the key is unknown,
    /// or nothing was requested and no default is configured.
    pub fn image_for(
        &self,
        requested: Option<&Identifier>,
    ) -> Result<(&Identifier, &Kvm2Image), Error> {
        lookup(
            &self.images,
            requested,
            self.defaults.image.as_ref(),
            "image",
        )
    }
}

pub(super) fn lookup<'a, T>(
    map: &'a BTreeMap<Identifier, T>,
    requested: Option<&Identifier>,
    default: Option<&Identifier>,
    what: &str,
) -> Result<(&'a Identifier, &'a T), Error> {
    let key = requested.or(default).ok_or_else(|| {
        Error::permanent(format!("no {what} requested and no default configured"))
    })?;
    map.get_key_value(key)
        .ok_or_else(|| Error::permanent(format!("unknown {what} {key}")))
}

/// `kvm2.ssh`: credentials and host-key policy. Files are re-read by the
/// provider on every dial, so rotating the mounted Secret needs no restart.
/// (Not `ssh_socket::SshConfig`, which is one dial's settings — host, port,
/// remote socket, timers — that the provider builds from this per host.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Kvm2Ssh {
    /// The login user.
    pub user: SshUser,
    /// The private key file.
    pub key_file: AbsolutePath,
    /// The OpenSSH `known_hosts` file; `None` only when
    /// `insecure_ignore_host_key` is set.
    pub known_hosts_file: Option<AbsolutePath>,
    /// Accept any host key (testing only). Default `false`.
    pub insecure_ignore_host_key: bool,
}

/// `kvm2.hosts[i]`: one libvirt host.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Kvm2Host {
    /// Unique within the entry; the `host` part of provider IDs.
    pub name: Identifier,
    /// Where sshd listens.
    pub address: HostAddress,
    /// sshd's port (default 22, never 0).
    pub port: u16,
    /// The bridge every domain's NIC attaches to.
    pub bridge: BridgeName,
    /// The storage pool for base images, disks and seeds.
    pub pool: Identifier,
    /// libvirtd's unix socket on the host, forwarded over SSH; `None`:
    /// libvirt's system socket (`/var/run/libvirt/libvirt-sock`, which the
    /// provider takes from `libvirt-rpc`, the crate that knows libvirt).
    pub socket: Option<AbsolutePath>,
    /// At most this many of the entry's instances on the host (`None`: no
    /// limit but the host's resources; `0`: no new instances, a drain).
    pub max_instances: Option<u32>,
    /// Memory kept free for the host itself: a new VM must fit in what the
    /// host can give minus this (default 0).
    pub reserved_memory: ByteSize,
    /// Jump hosts (bastions) the provider dials through to reach the host,
    /// in order (OpenSSH's `ProxyJump`); empty: the host is dialled
    /// directly. Each logs in with the entry's `ssh` key and checks its
    /// host key against the entry's known_hosts.
    pub jump: Vec<Kvm2Jump>,
}

/// `kvm2.hosts[i].jump[j]`: one bastion on the way to a host.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Kvm2Jump {
    /// Where its sshd listens (as the hop before it resolves the name).
    pub address: HostAddress,
    /// sshd's port (default 22).
    pub port: u16,
    /// The user to log in as (default: the entry's `ssh.user`).
    pub user: Option<SshUser>,
}

/// The most jump hosts on the way to one host.
pub const MAX_JUMPS: usize = 8;

/// The most `kvm2.hosts[i].max_instances` takes.
pub const MAX_INSTANCES_MAX: u32 = 100_000;

/// `kvm2.domain_type`: how libvirt runs the VMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum DomainType {
    /// Hardware virtualization (`<domain type='kvm'>`), the default.
    #[default]
    Kvm,
    /// Full emulation (`<domain type='qemu'>`): slow, for hosts without KVM.
    Qemu,
}

impl DomainType {
    /// `kvm` or `qemu` (also libvirt's name for it).
    pub fn as_str(self) -> &'static str {
        match self {
            DomainType::Kvm => "kvm",
            DomainType::Qemu => "qemu",
        }
    }
}

impl fmt::Display for DomainType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `proxy`: the Squid every instance runs (the same block in `kvm2` and
/// `kubernetes` entries).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProxySettings {
    /// The port Squid listens on (default [`DEFAULT_PROXY_PORT`]).
    pub port: u16,
    /// The client networks allowed to use the proxy (never empty; default
    /// the RFC 1918 ranges).
    pub allowed_clients: Vec<Cidr>,
    /// Internal destinations the proxy may CONNECT to after all (default
    /// none): by default every CONNECT to a private, loopback, link-local
    /// (the 169.254.169.254 metadata address among them), shared (CGNAT) or
    /// unique-local address is refused, whatever name resolves to it.
    pub allowed_destinations: Vec<Cidr>,
    /// Basic authentication for the proxy: the file holding `user:password`
    /// (a Secret mounted into the operator's pod, re-read for every Create
    /// and every probe round; docs/operator.md). `None`: no authentication
    /// beyond `allowed_clients`.
    pub credentials_file: Option<AbsolutePath>,
    /// What the operator's health probe CONNECTs to through each proxy
    /// (default [`DEFAULT_PROBE_TARGET`]): a destination the guests can
    /// reach and that answers TLS, such as the upstream your consumers use.
    pub probe_target: HostPort,
}

/// The health probe's target unless `proxy.probe_target` says otherwise:
/// Debian's package mirror, which the Debian guest image reaches wherever it
/// has a way out.
pub const DEFAULT_PROBE_TARGET: &str = "deb.debian.org:443";

/// Squid's port unless `proxy.port` says otherwise.
pub const DEFAULT_PROXY_PORT: u16 = 3128;

impl ProxySettings {
    /// Settings with `port` and `allowed_clients` (the config builds them
    /// from YAML; this is for code that builds them directly).
    pub fn new(port: u16, allowed_clients: Vec<Cidr>) -> Self {
        Self {
            port,
            allowed_clients,
            allowed_destinations: Vec::new(),
            credentials_file: None,
            probe_target: default_probe_target(),
        }
    }

    /// These settings with basic authentication from `credentials_file`.
    pub fn with_credentials_file(mut self, credentials_file: AbsolutePath) -> Self {
        self.credentials_file = Some(credentials_file);
        self
    }

    /// These settings with `allowed_destinations`.
    pub fn with_allowed_destinations(mut self, allowed: Vec<Cidr>) -> Self {
        self.allowed_destinations = allowed;
        self
    }

    /// These settings with `probe_target`.
    pub fn with_probe_target(mut self, probe_target: HostPort) -> Self {
        self.probe_target = probe_target;
        self
    }
}

impl Default for ProxySettings {
    fn default() -> Self {
        let rfc1918 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"];
        ProxySettings {
            port: DEFAULT_PROXY_PORT,
            allowed_clients: rfc1918.iter().filter_map(|c| Cidr::parse(c).ok()).collect(),
            allowed_destinations: Vec::new(),
            credentials_file: None,
            probe_target: default_probe_target(),
        }
    }
}

fn default_probe_target() -> HostPort {
    HostPort::parse_or_loopback(DEFAULT_PROBE_TARGET)
}

/// The disk format of a base image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageFormat {
    /// QEMU copy-on-write v2.
    Qcow2,
    /// A raw disk image.
    Raw,
}

impl ImageFormat {
    /// `qcow2` or `raw` (also libvirt's name for the format).
    pub fn as_str(self) -> &'static str {
        match self {
            ImageFormat::Qcow2 => "qcow2",
            ImageFormat::Raw => "raw",
        }
    }
}

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `kvm2.images.<key>`: a base image downloaded once per host and pool.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Kvm2Image {
    /// Where to download it (http or https).
    pub url: HttpUrl,
    /// The digest the download must have; a mismatch is refused.
    pub sha256: Sha256Digest,
    /// Its disk format.
    pub format: ImageFormat,
}

/// `kvm2.machine_types.<name>`: the size of a VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MachineType {
    /// Virtual CPUs, within [`VCPUS_MIN`]..=[`VCPUS_MAX`].
    pub vcpus: u32,
    /// Memory, within [`MEMORY_MIN`]..=[`MEMORY_MAX`], whole MiB.
    pub memory: ByteSize,
    /// Root disk size, within [`DISK_MIN`]..=[`DISK_MAX`], whole MiB.
    pub disk: ByteSize,
}

/// Fewest vCPUs a machine type may have.
pub const VCPUS_MIN: u32 = 1;
/// Most vCPUs a machine type may have.
pub const VCPUS_MAX: u32 = 128;
/// Least memory a machine type may have (128 MiB).
pub const MEMORY_MIN: ByteSize = ByteSize::from_bytes(128 * ByteSize::MIB);
/// Most memory a machine type may have (1 TiB).
pub const MEMORY_MAX: ByteSize = ByteSize::from_bytes(ByteSize::TIB);
/// Smallest root disk (1 GiB).
pub const DISK_MIN: ByteSize = ByteSize::from_bytes(ByteSize::GIB);
/// Largest root disk (16 TiB).
pub const DISK_MAX: ByteSize = ByteSize::from_bytes(16 * ByteSize::TIB);

/// Domain firmware.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Firmware {
    /// SeaBIOS (the default).
    #[default]
    Bios,
    /// OVMF (UEFI).
    Uefi,
}

impl Firmware {
    /// `bios` or `uefi`.
    pub fn as_str(self) -> &'static str {
        match self {
            Firmware::Bios => "bios",
            Firmware::Uefi => "uefi",
        }
    }
}

impl fmt::Display for Firmware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `kvm2.defaults`: what a [`CreateRequest`](crate::CreateRequest) that
/// names no machine type or image gets. Each, when set, is a key of
/// `machine_types` / `images`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Kvm2Defaults {
    /// The default machine type.
    pub machine_type: Option<Identifier>,
    /// The default image key.
    pub image: Option<Identifier>,
}
