//! Raw (as written) → typed (as used): every rule, every message.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::kubernetes::{KubernetesConfig, POD_MEMORY_MAX, POD_MEMORY_MIN, PodImage, PodResources};
use super::kvm2::{
    DISK_MAX, DISK_MIN, DomainType, Firmware, ImageFormat, Kvm2Config, Kvm2Defaults, Kvm2Host,
    Kvm2Image, Kvm2Jump, Kvm2Ssh, MAX_INSTANCES_MAX, MAX_JUMPS, MEMORY_MAX, MEMORY_MIN,
    MachineType, ProxySettings, VCPUS_MAX, VCPUS_MIN,
};
use super::raw::{
    Entries, RawConfig, RawDefaults, RawHost, RawJump, RawKubernetes, RawKvm2, RawMachineType,
    RawPodResources, RawProvider, RawProxy, RawSsh,
};
use super::values::{
    AbsolutePath, BridgeName, ByteSize, Cidr, HostAddress, HostPort, HttpUrl, ImageReference,
    MilliCpu, Sha256Digest, SshUser,
};
use super::{ConfigError, ConfigIssue, ProviderBlock, ProviderEntry, ProvidersConfig};
use crate::ident::{Identifier, ParseError};
use crate::provider_type::ProviderType;

/// The default sshd port.
const DEFAULT_SSH_PORT: u16 = 22;
/// How much of a rejected value a message quotes.
const QUOTE_MAX: usize = 80;

/// Parses the YAML into the raw structs; serde errors carry their path.
pub(super) fn deserialize(yaml: &str) -> Result<RawConfig, ConfigError> {
    let mut options = serde_saphyr::Options::default();
    // Repeated keys reach `Entries` so the validator can name them; derived
    // structs still reject a repeated field.
    options.duplicate_keys = serde_saphyr::options::DuplicateKeyPolicy::PassThrough;
    // `yes`/`no`/`on`/`off` are not booleans.
    options.strict_booleans = true;
    options.with_snippet = false;
    if yaml.trim().is_empty() {
        return Err(ConfigError::Invalid(vec![issue(
            "providers",
            "is required",
        )]));
    }
    let mut path = String::new();
    let out = serde_saphyr::with_deserializer_from_str_with_options(yaml, options, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    out.map_err(|e| ConfigError::Syntax {
        path: if path.is_empty() {
            ".".to_owned()
        } else {
            path
        },
        message: e.to_string(),
    })
}

fn issue(path: impl Into<String>, message: impl Into<String>) -> ConfigIssue {
    ConfigIssue {
        path: path.into(),
        message: message.into(),
    }
}

/// `value` quoted for a message: Rust string escaping, truncated.
fn quote(value: &str) -> String {
    if value.chars().count() <= QUOTE_MAX {
        format!("{value:?}")
    } else {
        let cut: String = value.chars().take(QUOTE_MAX).collect();
        format!("{cut:?}…")
    }
}

/// `parent.key` for identifier-like keys, `parent["key"]` otherwise.
fn key_path(parent: &str, key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", quote(key))
    }
}

/// Collects issues while turning raw values into typed ones.
struct Validator {
    issues: Vec<ConfigIssue>,
}

impl Validator {
    fn push(&mut self, path: &str, message: impl Into<String>) {
        self.issues.push(issue(path, message));
    }

    /// A required field: reports `is required` when absent.
    fn required<'a, T>(&mut self, path: &str, v: &'a Option<T>) -> Option<&'a T> {
        if v.is_none() {
            self.push(path, "is required");
        }
        v.as_ref()
    }

    /// Parses with `parse`, reporting `<rule>; got "<value>"`.
    fn parsed<T>(
        &mut self,
        path: &str,
        value: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Option<T> {
        match parse(value) {
            Ok(v) => Some(v),
            Err(e) => {
                self.push(path, format!("{}; got {}", e.rule(), quote(value)));
                None
            }
        }
    }

    /// A required string field parsed with `parse`.
    fn field<T>(
        &mut self,
        path: &str,
        value: &Option<String>,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Option<T> {
        let v = self.required(path, value)?;
        self.parsed(path, v, parse)
    }

    /// An integer within `min..=max`.
    fn ranged(&mut self, path: &str, value: i64, min: i64, max: i64) -> Option<i64> {
        if (min..=max).contains(&value) {
            Some(value)
        } else {
            self.push(
                path,
                format!("must be between {min} and {max}; got {value}"),
            );
            None
        }
    }

    /// A size within `min..=max`.
    fn sized(
        &mut self,
        path: &str,
        value: &Option<String>,
        min: ByteSize,
        max: ByteSize,
    ) -> Option<ByteSize> {
        let size = self.field(path, value, ByteSize::parse)?;
        if (min..=max).contains(&size) {
            Some(size)
        } else {
            self.push(path, format!("must be between {min} and {max}; got {size}"));
            None
        }
    }

    /// A map of `Entries`: keys must be identifiers and unique.
    fn entries<'a, R, T>(
        &mut self,
        path: &str,
        entries: &'a Entries<R>,
        what: &str,
        mut each: impl FnMut(&mut Self, &str, &'a R) -> Option<T>,
    ) -> BTreeMap<Identifier, T> {
        let mut out = BTreeMap::new();
        let mut seen: HashSet<&str> = HashSet::new();
        if entries.0.is_empty() {
            self.push(path, format!("must define at least one {what}"));
        }
        for (key, raw) in &entries.0 {
            let p = key_path(path, key);
            if !seen.insert(key.as_str()) {
                self.push(
                    &p,
                    format!("must be unique; key {} appears more than once", quote(key)),
                );
                continue;
            }
            let id = self.parsed(&p, key, Identifier::parse);
            let value = each(self, &p, raw);
            if let (Some(id), Some(value)) = (id, value) {
                out.insert(id, value);
            }
        }
        out
    }
}

/// Validates the whole file, collecting every issue.
pub(super) fn validate(raw: RawConfig) -> Result<ProvidersConfig, Vec<ConfigIssue>> {
    let mut v = Validator { issues: Vec::new() };
    let mut providers = Vec::new();
    if let Some(list) = v.required("providers", &raw.providers) {
        if list.is_empty() {
            v.push("providers", "must list at least one provider");
        }
        let mut names: HashMap<&str, usize> = HashMap::new();
        for (i, p) in list.iter().enumerate() {
            let path = format!("providers[{i}]");
            // A repeated entry is still validated, so every issue in it is
            // reported too; it is never kept.
            let entry = provider(&mut v, &path, p);
            if let Some(name) = &p.name {
                let first = *names.entry(name.as_str()).or_insert(i);
                if first != i {
                    v.push(
                        &format!("{path}.name"),
                        format!(
                            "must be unique; {} is also providers[{first}].name",
                            quote(name)
                        ),
                    );
                    continue;
                }
            }
            providers.extend(entry);
        }
    }
    if v.issues.is_empty() {
        Ok(ProvidersConfig { providers })
    } else {
        Err(v.issues)
    }
}

fn provider(v: &mut Validator, path: &str, p: &RawProvider) -> Option<ProviderEntry> {
    let name = v.field(&format!("{path}.name"), &p.name, Identifier::parse);
    let ty = v.field(
        &format!("{path}.type"),
        &p.provider_type,
        ProviderType::parse,
    )?;
    // A block of another type is a mistake (the entry would silently
    // ignore it).
    let present = [
        (ProviderType::Kvm2, p.kvm2.is_some()),
        (ProviderType::Kubernetes, p.kubernetes.is_some()),
    ];
    for (other, is_present) in present {
        if is_present && other != ty {
            v.push(
                &format!("{path}.{other}"),
                format!("must be absent when type is {ty}"),
            );
        }
    }
    let bpath = format!("{path}.{ty}");
    let block = match ty {
        ProviderType::Kvm2 => {
            let Some(raw) = &p.kvm2 else {
                v.push(&bpath, "is required when type is kvm2");
                return None;
            };
            ProviderBlock::Kvm2(kvm2(v, &bpath, raw)?)
        }
        ProviderType::Kubernetes => {
            let Some(raw) = &p.kubernetes else {
                v.push(&bpath, "is required when type is kubernetes");
                return None;
            };
            ProviderBlock::Kubernetes(kubernetes(v, &bpath, raw)?)
        }
    };
    Some(ProviderEntry { name: name?, block })
}

fn kvm2(v: &mut Validator, path: &str, raw: &RawKvm2) -> Option<Kvm2Config> {
    let ssh = v
        .required(&format!("{path}.ssh"), &raw.ssh)
        .and_then(|s| ssh(v, &format!("{path}.ssh"), s));

    let hosts = hosts(v, &format!("{path}.hosts"), &raw.hosts);

    let images_path = format!("{path}.images");
    let images = v.required(&images_path, &raw.images).map(|e| {
        v.entries(&images_path, e, "image", |v, p, img| {
            let url = v.field(&format!("{p}.url"), &img.url, HttpUrl::parse);
            let sha256 = v.field(&format!("{p}.sha256"), &img.sha256, Sha256Digest::parse);
            let format = v.field(&format!("{p}.format"), &img.format, parse_format);
            Some(Kvm2Image {
                url: url?,
                sha256: sha256?,
                format: format?,
            })
        })
    });

    let mt_path = format!("{path}.machine_types");
    let machine_types = v
        .required(&mt_path, &raw.machine_types)
        .map(|e| v.entries(&mt_path, e, "machine type", machine_type));

    let firmware = match &raw.firmware {
        None => Some(Firmware::default()),
        Some(f) => v.parsed(&format!("{path}.firmware"), f, parse_firmware),
    };
    let domain_type = match &raw.domain_type {
        None => Some(DomainType::default()),
        Some(t) => v.parsed(&format!("{path}.domain_type"), t, parse_domain_type),
    };
    let proxy = match &raw.proxy {
        None => Some(ProxySettings::default()),
        Some(p) => proxy(v, &format!("{path}.proxy"), p),
    };

    let defaults = defaults(
        v,
        path,
        &raw.defaults,
        (&raw.images, &images),
        (&raw.machine_types, &machine_types),
    );

    Some(Kvm2Config {
        ssh: ssh?,
        hosts: hosts?,
        images: images?,
        machine_types: machine_types?,
        firmware: firmware?,
        domain_type: domain_type?,
        proxy: proxy?,
        defaults: defaults?,
    })
}

/// `kvm2.hosts`: each host, unique by name and by address and port;
/// `None` when any host is refused (every issue still reported).
fn hosts(v: &mut Validator, hosts_path: &str, raw: &Option<Vec<RawHost>>) -> Option<Vec<Kvm2Host>> {
    let mut hosts = Vec::new();
    let mut hosts_ok = true;
    if let Some(list) = v.required(hosts_path, raw) {
        if list.is_empty() {
            v.push(hosts_path, "must list at least one host");
        }
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut endpoints: HashMap<(String, u16), usize> = HashMap::new();
        for (i, h) in list.iter().enumerate() {
            let hp = format!("{hosts_path}[{i}]");
            // A repeated host is still validated (every issue is reported);
            // it is never kept.
            let parsed = host(v, &hp, h);
            if let Some(name) = &h.name {
                let first = *names.entry(name.as_str()).or_insert(i);
                if first != i {
                    v.push(
                        &format!("{hp}.name"),
                        format!(
                            "must be unique; {} is also hosts[{first}].name",
                            quote(name)
                        ),
                    );
                    hosts_ok = false;
                    continue;
                }
            }
            match parsed {
                Some(host) => {
                    let first = *endpoints
                        .entry((host.address.to_string(), host.port))
                        .or_insert(i);
                    if first != i {
                        v.push(
                            &format!("{hp}.address"),
                            format!(
                                "must be unique with its port; {}:{} is also hosts[{first}]",
                                host.address, host.port
                            ),
                        );
                        hosts_ok = false;
                    } else {
                        hosts.push(host);
                    }
                }
                None => hosts_ok = false,
            }
        }
    } else {
        hosts_ok = false;
    }
    hosts_ok.then_some(hosts)
}

fn kubernetes(v: &mut Validator, path: &str, raw: &RawKubernetes) -> Option<KubernetesConfig> {
    let namespace = v.field(
        &format!("{path}.namespace"),
        &raw.namespace,
        Identifier::parse,
    );
    let kubeconfig_file = match &raw.kubeconfig_file {
        None => Some(None),
        Some(f) => v
            .parsed(&format!("{path}.kubeconfig_file"), f, AbsolutePath::parse)
            .map(Some),
    };
    let images_path = format!("{path}.images");
    let images = v.required(&images_path, &raw.images).map(|e| {
        v.entries(&images_path, e, "image", |v, p, img| {
            let reference = v.field(
                &format!("{p}.reference"),
                &img.reference,
                ImageReference::parse,
            );
            Some(PodImage {
                reference: reference?,
            })
        })
    });
    let mt_path = format!("{path}.machine_types");
    let machine_types = v
        .required(&mt_path, &raw.machine_types)
        .map(|e| v.entries(&mt_path, e, "machine type", pod_resources));
    let proxy = match &raw.proxy {
        None => Some(ProxySettings::default()),
        Some(p) => proxy(v, &format!("{path}.proxy"), p),
    };
    let defaults = defaults(
        v,
        path,
        &raw.defaults,
        (&raw.images, &images),
        (&raw.machine_types, &machine_types),
    );
    Some(KubernetesConfig {
        namespace: namespace?,
        kubeconfig_file: kubeconfig_file?,
        images: images?,
        machine_types: machine_types?,
        proxy: proxy?,
        defaults: defaults?,
    })
}

fn pod_resources(v: &mut Validator, path: &str, raw: &RawPodResources) -> Option<PodResources> {
    let cpu = v.field(&format!("{path}.cpu"), &raw.cpu, MilliCpu::parse);
    let memory = v.sized(
        &format!("{path}.memory"),
        &raw.memory,
        POD_MEMORY_MIN,
        POD_MEMORY_MAX,
    );
    Some(PodResources {
        cpu: cpu?,
        memory: memory?,
    })
}

/// A map as written and as validated (`None` when it was refused).
type Written<'a, R, T> = (&'a Option<Entries<R>>, &'a Option<BTreeMap<Identifier, T>>);

/// `<block>.defaults`: each names a key of its map; `None` when one does not.
fn defaults<RI, I, RM, M>(
    v: &mut Validator,
    path: &str,
    raw_defaults: &Option<RawDefaults>,
    (raw_images, images): Written<'_, RI, I>,
    (raw_machine_types, machine_types): Written<'_, RM, M>,
) -> Option<Kvm2Defaults> {
    let images_path = format!("{path}.images");
    let mt_path = format!("{path}.machine_types");
    let mut defaults = Kvm2Defaults::default();
    let mut defaults_ok = true;
    if let Some(d) = raw_defaults {
        let dp = format!("{path}.defaults");
        if let (Some(name), Some(map)) = (&d.machine_type, machine_types) {
            let p = format!("{dp}.machine_type");
            match v.parsed(&p, name, Identifier::parse) {
                Some(id) if map.contains_key(&id) || raw_has_key(raw_machine_types, name) => {
                    defaults.machine_type = Some(id)
                }
                Some(_) => {
                    v.push(
                        &p,
                        format!("must name a key of {mt_path}; got {}", quote(name)),
                    );
                    defaults_ok = false;
                }
                None => defaults_ok = false,
            }
        }
        if let (Some(name), Some(map)) = (&d.image, images) {
            let p = format!("{dp}.image");
            match v.parsed(&p, name, Identifier::parse) {
                Some(id) if map.contains_key(&id) || raw_has_key(raw_images, name) => {
                    defaults.image = Some(id)
                }
                Some(_) => {
                    v.push(
                        &p,
                        format!("must name a key of {images_path}; got {}", quote(name)),
                    );
                    defaults_ok = false;
                }
                None => defaults_ok = false,
            }
        }
    }
    defaults_ok.then_some(defaults)
}

/// Whether the raw map has `key` (so a default naming an entry that is
/// itself invalid reports only the entry's own issue).
fn raw_has_key<R>(entries: &Option<Entries<R>>, key: &str) -> bool {
    entries
        .as_ref()
        .is_some_and(|e| e.0.iter().any(|(k, _)| k == key))
}

fn ssh(v: &mut Validator, path: &str, raw: &RawSsh) -> Option<Kvm2Ssh> {
    let user = v.field(&format!("{path}.user"), &raw.user, SshUser::parse);
    let key_file = v.field(
        &format!("{path}.key_file"),
        &raw.key_file,
        AbsolutePath::parse,
    );
    let insecure = raw.insecure_ignore_host_key.unwrap_or(false);
    let kh_path = format!("{path}.known_hosts_file");
    let known_hosts_file = match (&raw.known_hosts_file, insecure) {
        (None, false) => {
            v.push(
                &kh_path,
                "is required unless insecure_ignore_host_key is true",
            );
            return None;
        }
        (Some(_), true) => {
            v.push(
                &kh_path,
                "must be absent when insecure_ignore_host_key is true",
            );
            return None;
        }
        (None, true) => None,
        (Some(p), false) => Some(v.parsed(&kh_path, p, AbsolutePath::parse)?),
    };
    Some(Kvm2Ssh {
        user: user?,
        key_file: key_file?,
        known_hosts_file,
        insecure_ignore_host_key: insecure,
    })
}

fn host(v: &mut Validator, path: &str, raw: &RawHost) -> Option<Kvm2Host> {
    let name = v.field(&format!("{path}.name"), &raw.name, Identifier::parse);
    let address = v.field(&format!("{path}.address"), &raw.address, HostAddress::parse);
    let port = match raw.port {
        None => Some(DEFAULT_SSH_PORT),
        Some(p) => v
            .ranged(&format!("{path}.port"), p, 1, i64::from(u16::MAX))
            .and_then(|p| u16::try_from(p).ok()),
    };
    let bridge = v.field(&format!("{path}.bridge"), &raw.bridge, BridgeName::parse);
    let pool = v.field(&format!("{path}.pool"), &raw.pool, Identifier::parse);
    let socket = match &raw.socket {
        None => Some(None),
        Some(s) => v
            .parsed(&format!("{path}.socket"), s, AbsolutePath::parse)
            .map(Some),
    };
    let max_instances = match raw.max_instances {
        None => Some(None),
        Some(n) => v
            .ranged(
                &format!("{path}.max_instances"),
                n,
                0,
                i64::from(MAX_INSTANCES_MAX),
            )
            .and_then(|n| u32::try_from(n).ok())
            .map(Some),
    };
    let reserved_memory = match &raw.reserved_memory {
        None => Some(ByteSize::from_bytes(0)),
        Some(_) => v.sized(
            &format!("{path}.reserved_memory"),
            &raw.reserved_memory,
            ByteSize::from_bytes(0),
            MEMORY_MAX,
        ),
    };
    let jpath = format!("{path}.jump");
    let jump = match &raw.jump {
        None => Some(Vec::new()),
        Some(list) if list.len() > MAX_JUMPS => {
            v.push(
                &jpath,
                format!(
                    "must list at most {MAX_JUMPS} jump hosts; got {}",
                    list.len()
                ),
            );
            None
        }
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(j, raw)| jump_host(v, &format!("{jpath}[{j}]"), raw))
            .collect::<Vec<_>>()
            .into_iter()
            .collect(),
    };
    Some(Kvm2Host {
        name: name?,
        address: address?,
        port: port?,
        bridge: bridge?,
        pool: pool?,
        socket: socket?,
        max_instances: max_instances?,
        reserved_memory: reserved_memory?,
        jump: jump?,
    })
}

fn jump_host(v: &mut Validator, path: &str, raw: &RawJump) -> Option<Kvm2Jump> {
    let address = v.field(&format!("{path}.address"), &raw.address, HostAddress::parse);
    let port = match raw.port {
        None => Some(DEFAULT_SSH_PORT),
        Some(p) => v
            .ranged(&format!("{path}.port"), p, 1, i64::from(u16::MAX))
            .and_then(|p| u16::try_from(p).ok()),
    };
    let user = match &raw.user {
        None => Some(None),
        Some(u) => v
            .parsed(&format!("{path}.user"), u, SshUser::parse)
            .map(Some),
    };
    Some(Kvm2Jump {
        address: address?,
        port: port?,
        user: user?,
    })
}

fn proxy(v: &mut Validator, path: &str, raw: &RawProxy) -> Option<ProxySettings> {
    let defaults = ProxySettings::default();
    let port = match raw.port {
        None => Some(defaults.port),
        Some(p) => v
            .ranged(&format!("{path}.port"), p, 1, i64::from(u16::MAX))
            .and_then(|p| u16::try_from(p).ok()),
    };
    let cpath = format!("{path}.allowed_clients");
    let allowed_clients = match &raw.allowed_clients {
        None => Some(defaults.allowed_clients),
        Some(list) if list.is_empty() => {
            v.push(&cpath, "must list at least one network");
            None
        }
        Some(list) => {
            let parsed: Vec<Option<Cidr>> = list
                .iter()
                .enumerate()
                .map(|(i, c)| v.parsed(&format!("{cpath}[{i}]"), c, Cidr::parse))
                .collect();
            parsed.into_iter().collect()
        }
    };
    let dpath = format!("{path}.allowed_destinations");
    let allowed_destinations: Option<Vec<Cidr>> = match &raw.allowed_destinations {
        None => Some(Vec::new()),
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, c)| v.parsed(&format!("{dpath}[{i}]"), c, Cidr::parse))
            .collect::<Vec<_>>()
            .into_iter()
            .collect(),
    };
    let credentials_file = match &raw.credentials_file {
        None => Some(None),
        Some(f) => v
            .parsed(&format!("{path}.credentials_file"), f, AbsolutePath::parse)
            .map(Some),
    };
    let probe_target = match &raw.probe_target {
        None => Some(defaults.probe_target),
        Some(t) => v.parsed(&format!("{path}.probe_target"), t, HostPort::parse),
    };
    Some(ProxySettings {
        port: port?,
        allowed_clients: allowed_clients?,
        allowed_destinations: allowed_destinations?,
        credentials_file: credentials_file?,
        probe_target: probe_target?,
    })
}

fn machine_type(v: &mut Validator, path: &str, raw: &RawMachineType) -> Option<MachineType> {
    let vp = format!("{path}.vcpus");
    let vcpus = v
        .required(&vp, &raw.vcpus)
        .copied()
        .and_then(|n| v.ranged(&vp, n, i64::from(VCPUS_MIN), i64::from(VCPUS_MAX)))
        .and_then(|n| u32::try_from(n).ok());
    let memory = v.sized(
        &format!("{path}.memory"),
        &raw.memory,
        MEMORY_MIN,
        MEMORY_MAX,
    );
    let disk = v.sized(&format!("{path}.disk"), &raw.disk, DISK_MIN, DISK_MAX);
    Some(MachineType {
        vcpus: vcpus?,
        memory: memory?,
        disk: disk?,
    })
}

/// The rule text for image formats.
pub(super) const FORMAT_RULE: &str = "must be one of qcow2, raw";
/// The rule text for the domain type.
pub(super) const DOMAIN_TYPE_RULE: &str = "must be one of kvm, qemu";

fn parse_domain_type(s: &str) -> Result<DomainType, ParseError> {
    match s {
        "kvm" => Ok(DomainType::Kvm),
        "qemu" => Ok(DomainType::Qemu),
        _ => Err(ParseError::new(DOMAIN_TYPE_RULE)),
    }
}

/// The rule text for firmware.
pub(super) const FIRMWARE_RULE: &str = "must be one of bios, uefi";

fn parse_format(s: &str) -> Result<ImageFormat, ParseError> {
    match s {
        "qcow2" => Ok(ImageFormat::Qcow2),
        "raw" => Ok(ImageFormat::Raw),
        _ => Err(ParseError::new(FORMAT_RULE)),
    }
}

fn parse_firmware(s: &str) -> Result<Firmware, ParseError> {
    match s {
        "bios" => Ok(Firmware::Bios),
        "uefi" => Ok(Firmware::Uefi),
        _ => Err(ParseError::new(FIRMWARE_RULE)),
    }
}

/// For tests: a message list as one string per line.
#[cfg(test)]
pub(super) fn render(issues: &[ConfigIssue]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for i in issues {
        let _ = writeln!(s, "{i}");
    }
    s
}
