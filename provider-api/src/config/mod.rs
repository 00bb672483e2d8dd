//! The providers config file: what the deployment mounts, parsed strictly.
//!
//! ```yaml
//! providers:
//!   - name: kvm2-home            # identifier; unique; reaches volume names
//!     type: kvm2                 # selects the block below
//!     kvm2:
//!       ssh:
//!         user: root
//!         key_file: /etc/kvm2/ssh/id_ed25519
//!         known_hosts_file: /etc/kvm2/ssh/known_hosts
//!         insecure_ignore_host_key: false   # optional, default false
//!       hosts:                   # at least one; names unique
//!         - {name: host1, address: 192.168.1.10, port: 22, bridge: br0, pool: default}
//!           # socket: /var/run/libvirt/libvirt-sock   (optional, libvirtd's socket on the host)
//!           # jump: [{address: bastion.example.com, port: 22, user: jump}]   (optional bastions, in order)
//!       images:                  # at least one; keys are identifiers
//!         debian-12:
//!           url: https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-genericcloud-amd64.qcow2
//!           sha256: <64 hex>
//!           format: qcow2        # qcow2 | raw
//!       machine_types:           # at least one
//!         small: {vcpus: 1, memory: 1GiB, disk: 10GiB}
//!       firmware: bios           # bios | uefi, default bios
//!       domain_type: kvm         # kvm | qemu (emulated), default kvm
//!       proxy:                   # optional: Squid in every VM
//!         port: 3128             # default 3128
//!         allowed_clients: [10.0.0.0/8]   # CIDRs; default the RFC 1918 ranges
//!       defaults: {machine_type: small, image: debian-12}
//!   - name: pods                 # each proxy a Pod running Squid
//!     type: kubernetes
//!     kubernetes:
//!       namespace: egress-proxies-pods   # where the Pods go
//!       # kubeconfig_file: /etc/egress-proxies/clusters/remote/kubeconfig  (optional; default: this cluster)
//!       images:
//!         squid: {reference: registry.example/egress-proxies/squid:5.7}
//!       machine_types:
//!         small: {cpu: 250m, memory: 128MiB}
//!       proxy: {allowed_clients: [10.0.0.0/8]}   # the same block as kvm2's
//!       defaults: {machine_type: small, image: squid}
//! ```
//!
//! Parsing happens in two steps: the YAML is read into plain serde structs
//! that reject unknown fields (and keep repeated mapping keys so they can be
//! reported), then the validator turns them into the typed
//! [`ProvidersConfig`], collecting *every* problem as a [`ConfigIssue`]
//! whose message names the field path and the rule broken, e.g.
//!
//! ```text
//! providers[1].kvm2.hosts[0].name: must be an identifier (1 to 63 characters from a-z, 0-9 and '-', starting and ending with a letter or digit); got "Host_1"
//! ```
//!
//! The YAML parser (`serde-saphyr`) is panic-free and enforces budgets
//! against alias bombs; YAML 1.1 booleans (`yes`, `on`) are rejected.

mod kubernetes;
mod kvm2;
mod placeholders;
mod raw;
mod validate;
pub mod values;

use std::fmt;
use std::path::Path;

pub use kubernetes::{KubernetesConfig, POD_MEMORY_MAX, POD_MEMORY_MIN, PodImage, PodResources};
pub use kvm2::{
    DEFAULT_PROBE_TARGET, DEFAULT_PROXY_PORT, DISK_MAX, DISK_MIN, DomainType, Firmware,
    ImageFormat, Kvm2Config, Kvm2Defaults, Kvm2Host, Kvm2Image, Kvm2Jump, Kvm2Ssh,
    MAX_INSTANCES_MAX, MAX_JUMPS, MEMORY_MAX, MEMORY_MIN, MachineType, ProxySettings, VCPUS_MAX,
    VCPUS_MIN,
};
pub use values::{
    AbsolutePath, BridgeName, ByteSize, Cidr, HostAddress, HostPort, HttpUrl, ImageReference,
    MilliCpu, Sha256Digest, SshUser,
};

use crate::ident::Identifier;
use crate::provider_type::ProviderType;

/// The largest config file [`ProvidersConfig::load`] reads (1 MiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A validated providers config: every value in it satisfies its rule.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProvidersConfig {
    /// The entries, in file order (at least one; names unique).
    pub providers: Vec<ProviderEntry>,
}

/// One provider entry: a name and its type's block.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderEntry {
    /// Unique among entries; the `provider` part of provider IDs, and part
    /// of every name the provider derives (so two entries never share a
    /// volume, even on the same pool).
    pub name: Identifier,
    /// The type-specific settings.
    pub block: ProviderBlock,
}

impl ProviderEntry {
    /// The entry's type.
    pub fn provider_type(&self) -> ProviderType {
        match self.block {
            ProviderBlock::Kvm2(_) => ProviderType::Kvm2,
            ProviderBlock::Kubernetes(_) => ProviderType::Kubernetes,
        }
    }

    /// The Squid settings of the entry's proxies (its `proxy` block).
    pub fn proxy(&self) -> &ProxySettings {
        match &self.block {
            ProviderBlock::Kvm2(k) => &k.proxy,
            ProviderBlock::Kubernetes(k) => &k.proxy,
        }
    }

    /// What the operator's health probe CONNECTs to through this entry's
    /// proxies (`proxy.probe_target`).
    pub fn probe_target(&self) -> &HostPort {
        &self.proxy().probe_target
    }

    /// The kvm2 block, if this is a kvm2 entry.
    pub fn kvm2(&self) -> Option<&Kvm2Config> {
        match &self.block {
            ProviderBlock::Kvm2(k) => Some(k),
            ProviderBlock::Kubernetes(_) => None,
        }
    }

    /// The kubernetes block, if this is a kubernetes entry.
    pub fn kubernetes(&self) -> Option<&KubernetesConfig> {
        match &self.block {
            ProviderBlock::Kubernetes(k) => Some(k),
            ProviderBlock::Kvm2(_) => None,
        }
    }
}

/// The type-specific block of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderBlock {
    /// `type: kvm2`.
    Kvm2(Kvm2Config),
    /// `type: kubernetes`.
    Kubernetes(KubernetesConfig),
}

impl ProvidersConfig {
    /// Parses and validates YAML text.
    ///
    /// # Errors
    /// [`ConfigError::Syntax`] when the text is not YAML of the expected
    /// shape (including unknown fields and wrong value types);
    /// [`ConfigError::Invalid`] with every broken rule otherwise.
    pub fn from_yaml_str(yaml: &str) -> Result<Self, ConfigError> {
        let raw = validate::deserialize(yaml)?;
        validate::validate(raw).map_err(ConfigError::Invalid)
    }

    /// Reads (at most [`MAX_CONFIG_BYTES`]) and parses the file at `path`.
    ///
    /// # Errors
    /// [`ConfigError::Read`] when the file cannot be read, is too large or is
    /// not UTF-8; otherwise as [`from_yaml_str`](Self::from_yaml_str).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        use std::io::Read;
        let read_err = |source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_err)?;
        let mut buf = Vec::new();
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut buf)
            .map_err(read_err)?;
        if buf.len() as u64 > MAX_CONFIG_BYTES {
            return Err(read_err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("larger than {MAX_CONFIG_BYTES} bytes"),
            )));
        }
        let text = String::from_utf8(buf)
            .map_err(|e| read_err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        Self::from_yaml_str(&text)
    }

    /// The entry named `name`.
    pub fn provider(&self, name: &Identifier) -> Option<&ProviderEntry> {
        self.providers.iter().find(|p| &p.name == name)
    }
}

/// One broken rule: where, and what (non-exhaustive).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigIssue {
    /// The field path, e.g. `providers[1].kvm2.hosts[0].name`.
    pub path: String,
    /// The rule broken, with the offending value where it helps, e.g.
    /// `must be between 1 and 65535; got 0`.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Why a providers config was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("read providers config {path}")]
    Read {
        /// The file's path.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not YAML of the expected shape: bad syntax, an unknown
    /// field, a value of the wrong type, a repeated field.
    #[error("providers config: {path}: {message}")]
    Syntax {
        /// The field path where parsing stopped (`.` for the document).
        path: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// The YAML parsed, but values break rules; every problem is listed.
    #[error("providers config is invalid:\n{}", list(.0))]
    Invalid(Vec<ConfigIssue>),
}

impl ConfigError {
    /// The issues of an [`Invalid`](Self::Invalid) error (empty otherwise).
    pub fn issues(&self) -> &[ConfigIssue] {
        match self {
            ConfigError::Invalid(v) => v,
            _ => &[],
        }
    }
}

fn list(issues: &[ConfigIssue]) -> String {
    issues
        .iter()
        .map(|i| format!("  {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl From<ConfigError> for crate::Error {
    /// A config error is [`Permanent`](crate::ErrorClass::Permanent): it
    /// goes away only when the file changes.
    fn from(e: ConfigError) -> Self {
        crate::Error::wrap(crate::ErrorClass::Permanent, "invalid providers config", e)
    }
}

#[cfg(test)]
mod tests;
