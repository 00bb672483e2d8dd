//! The providers config tests and benchmarks hand to the kvm2 provider and
//! the operator: one kvm2 entry rendered as YAML from the sandbox's
//! [`Descriptor`] plus the few things a test varies.
//!
//! [`ProvidersYaml::sandbox`] starts from what the sandbox offers: its SSH
//! user, key and known_hosts file, the sandbox as `host1` (address, port,
//! bridge, pool; no `socket`, so the host options' socket applies), domain
//! type `qemu` (the sandbox's daemon runs guests under TCG), one image that
//! is never fetched, the machine type `small` (1 vCPU, 128 MiB, 1 GiB) and
//! the defaults naming the first image and `small`. Setters change one
//! thing each; [`render`](ProvidersYaml::render) writes the YAML and
//! [`kvm2`](ProvidersYaml::kvm2) parses it as the operator would.
//!
//! ```no_run
//! use testkit::providers_yaml::{Host, Image, ProvidersYaml};
//! let sandbox = testkit::Descriptor::require();
//! let yaml = ProvidersYaml::sandbox(&sandbox, "kvm2-it")
//!     .hosts([Host::sandbox(&sandbox, "host1").with_socket(&sandbox.remote_socket)])
//!     .images([Image::new("tiny", "http://127.0.0.1:8080/tiny.raw", "e3b0…", "raw")])
//!     .proxy(3128, [sandbox.guest_net.cidr()])
//!     .render();
//! # let _ = yaml;
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use provider_api::ProvidersConfig;
use provider_api::config::Kvm2Config;
use sandbox_kit::{Descriptor, HypervisorHost};

/// The sha256 of zero bytes: a valid digest for an image nothing fetches.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// One `kvm2.hosts` item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// `name`.
    pub name: String,
    /// `address`.
    pub address: String,
    /// `port` (SSH).
    pub port: u16,
    /// `bridge`.
    pub bridge: String,
    /// `pool`.
    pub pool: String,
    /// `socket`: libvirt's socket on the host; `None` leaves the key out
    /// (the host options' socket applies).
    pub socket: Option<PathBuf>,
    /// `max_instances`, when set.
    pub max_instances: Option<u32>,
    /// `reserved_memory` (e.g. `1TiB`), when set.
    pub reserved_memory: Option<String>,
    /// `jump`: bastions `(address, port, user)`, in order.
    pub jump: Vec<(String, u16, String)>,
}

impl Host {
    /// The sandbox's sshd as `name`, with the sandbox's bridge and pool and
    /// no `socket`.
    pub fn sandbox(sandbox: &Descriptor, name: &str) -> Host {
        Host {
            name: name.to_owned(),
            address: sandbox.ssh.host.clone(),
            port: sandbox.ssh.port,
            bridge: sandbox.bridge.clone(),
            pool: sandbox.pool.name.clone(),
            socket: None,
            max_instances: None,
            reserved_memory: None,
            jump: Vec::new(),
        }
    }

    /// The sandbox's hypervisor host `host` under its own name, with its
    /// address, port, pool and libvirt socket (and the guests' bridge,
    /// which every host shares).
    pub fn hypervisor(sandbox: &Descriptor, host: &HypervisorHost) -> Host {
        Host {
            name: host.name.clone(),
            address: host.ssh.host.clone(),
            port: host.ssh.port,
            bridge: sandbox.bridge.clone(),
            pool: host.pool.name.clone(),
            socket: Some(host.remote_socket.clone()),
            max_instances: None,
            reserved_memory: None,
            jump: Vec::new(),
        }
    }

    /// `h1` at 127.0.0.1:22 with bridge `br0` and pool `default`: a host
    /// for an entry that is built and never dialled (an instant provider,
    /// an operator that never creates).
    pub fn never_dialled() -> Host {
        Host {
            name: "h1".into(),
            address: "127.0.0.1".into(),
            port: 22,
            bridge: "br0".into(),
            pool: "default".into(),
            socket: None,
            max_instances: None,
            reserved_memory: None,
            jump: Vec::new(),
        }
    }

    /// The same host with `max_instances: n`.
    pub fn with_max_instances(self, n: u32) -> Host {
        Host {
            max_instances: Some(n),
            ..self
        }
    }

    /// The same host with `reserved_memory: size` (e.g. `1TiB`).
    pub fn with_reserved_memory(self, size: &str) -> Host {
        Host {
            reserved_memory: Some(size.to_owned()),
            ..self
        }
    }

    /// The same host at `127.0.0.1:port` (a relay in front of it, or a
    /// port nothing listens on).
    pub fn at_loopback_port(self, port: u16) -> Host {
        Host {
            address: "127.0.0.1".to_owned(),
            port,
            ..self
        }
    }

    /// The same host reached through one more jump host `address:port`,
    /// logging in there as `user`.
    pub fn with_jump(mut self, address: &str, port: u16, user: &str) -> Host {
        self.jump.push((address.to_owned(), port, user.to_owned()));
        self
    }

    /// The same host with `socket: path`.
    pub fn with_socket(self, path: &Path) -> Host {
        Host {
            socket: Some(path.to_owned()),
            ..self
        }
    }

    fn render(&self, out: &mut String) {
        let Host {
            name,
            address,
            port,
            bridge,
            pool,
            socket,
            max_instances,
            reserved_memory,
            jump,
        } = self;
        let _ = writeln!(out, "        - name: {name}");
        let _ = writeln!(out, "          address: {address}");
        let _ = writeln!(out, "          port: {port}");
        let _ = writeln!(out, "          bridge: {bridge}");
        let _ = writeln!(out, "          pool: {pool}");
        if let Some(socket) = socket {
            let _ = writeln!(out, "          socket: {}", socket.display());
        }
        if let Some(n) = max_instances {
            let _ = writeln!(out, "          max_instances: {n}");
        }
        if let Some(size) = reserved_memory {
            let _ = writeln!(out, "          reserved_memory: {size}");
        }
        if !jump.is_empty() {
            let _ = writeln!(out, "          jump:");
            for (address, port, user) in jump {
                let _ = writeln!(
                    out,
                    "            - {{address: {address}, port: {port}, user: {user}}}"
                );
            }
        }
    }
}

/// One `kvm2.images` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// The key under `images`.
    pub key: String,
    /// `url`.
    pub url: String,
    /// `sha256` (lower-case hex).
    pub sha256: String,
    /// `format`: `raw` or `qcow2`.
    pub format: &'static str,
}

impl Image {
    /// An image entry.
    pub fn new(
        key: impl Into<String>,
        url: impl Into<String>,
        sha256: impl Into<String>,
        format: &'static str,
    ) -> Image {
        Image {
            key: key.into(),
            url: url.into(),
            sha256: sha256.into(),
            format,
        }
    }

    /// `tiny` at a URL nothing serves (port 1), with the digest of zero
    /// bytes: for a config whose images are never fetched.
    pub fn never_fetched(format: &'static str) -> Image {
        Image::new("tiny", "http://127.0.0.1:1/x", EMPTY_SHA256, format)
    }

    /// The sandbox's proxy guest image (`proxy-guest`, qcow2), which
    /// `cargo xtask sandbox up` builds and serves.
    ///
    /// # Panics
    /// When the sandbox serves no guest image.
    pub fn guest(sandbox: &Descriptor) -> Image {
        let image = sandbox.guest_image.as_ref().expect(
            "the sandbox serves no guest image: `cargo xtask sandbox up` builds and serves it",
        );
        Image::new("proxy-guest", &image.url, &image.sha256, "qcow2")
    }

    fn render(&self, out: &mut String) {
        let Image {
            key,
            url,
            sha256,
            format,
        } = self;
        let _ = writeln!(out, "        {key}:");
        let _ = writeln!(out, "          url: {url}");
        let _ = writeln!(out, "          sha256: {sha256}");
        let _ = writeln!(out, "          format: {format}");
    }
}

/// How the provider checks host keys (`kvm2.ssh`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostKeys {
    /// `known_hosts_file: PATH`.
    KnownHosts(PathBuf),
    /// `insecure_ignore_host_key: true`.
    Insecure,
}

/// A providers config with one kvm2 entry; see the [module docs](self).
#[derive(Clone, Debug)]
#[must_use]
pub struct ProvidersYaml {
    entry: String,
    domain_type: String,
    firmware: Option<String>,
    user: String,
    key_file: PathBuf,
    host_keys: HostKeys,
    hosts: Vec<Host>,
    images: Vec<Image>,
    /// `small`'s vCPUs, memory and disk as written.
    machine: (u32, String, String),
    proxy: Option<(u16, Vec<String>)>,
    /// `proxy.allowed_destinations` (the sandbox's upstream: guests may
    /// CONNECT to it although it is an internal address).
    destinations: Vec<String>,
    /// `proxy.probe_target` (the sandbox's upstream).
    probe_target: Option<String>,
    /// `proxy.credentials_file`.
    credentials_file: Option<PathBuf>,
}

impl ProvidersYaml {
    /// The entry `entry` on the sandbox: see the [module docs](self) for
    /// what it holds.
    pub fn sandbox(sandbox: &Descriptor, entry: &str) -> ProvidersYaml {
        let upstream = Some(sandbox.guest_net.upstream).filter(|u| u.port() != 0);
        ProvidersYaml {
            entry: entry.to_owned(),
            domain_type: "qemu".to_owned(),
            firmware: None,
            user: sandbox.ssh.user.clone(),
            key_file: sandbox.ssh.key_path.clone(),
            host_keys: HostKeys::KnownHosts(sandbox.ssh.known_hosts_path.clone()),
            hosts: vec![Host::sandbox(sandbox, "host1")],
            images: vec![Image::never_fetched("raw")],
            machine: (1, "128MiB".to_owned(), "1GiB".to_owned()),
            proxy: None,
            destinations: upstream
                .filter(|u| !u.ip().is_unspecified())
                .map(|u| format!("{}/32", u.ip()))
                .into_iter()
                .collect(),
            probe_target: upstream.map(|u| u.to_string()),
            credentials_file: None,
        }
    }

    /// `kvm2.hosts`, in order.
    pub fn hosts(mut self, hosts: impl IntoIterator<Item = Host>) -> Self {
        self.hosts = hosts.into_iter().collect();
        self
    }

    /// One more `kvm2.hosts` item, after those set.
    pub fn with_host(mut self, host: Host) -> Self {
        self.hosts.push(host);
        self
    }

    /// `kvm2.images`, in order; the first is the default image.
    pub fn images(mut self, images: impl IntoIterator<Item = Image>) -> Self {
        self.images = images.into_iter().collect();
        self
    }

    /// `ssh.key_file`.
    pub fn key_file(mut self, path: &Path) -> Self {
        self.key_file = path.to_owned();
        self
    }

    /// `ssh.known_hosts_file`, or `insecure_ignore_host_key`.
    pub fn host_keys(mut self, host_keys: HostKeys) -> Self {
        self.host_keys = host_keys;
        self
    }

    /// `ssh.known_hosts_file: path`.
    pub fn known_hosts(self, path: &Path) -> Self {
        self.host_keys(HostKeys::KnownHosts(path.to_owned()))
    }

    /// `domain_type` (`qemu` unless set).
    pub fn domain_type(mut self, domain_type: &str) -> Self {
        domain_type.clone_into(&mut self.domain_type);
        self
    }

    /// `firmware` (left out unless set).
    pub fn firmware(mut self, firmware: &str) -> Self {
        self.firmware = Some(firmware.to_owned());
        self
    }

    /// The machine type `small`: vCPUs, memory and disk as written
    /// (`"512MiB"`, `"4GiB"`).
    pub fn machine_type(mut self, vcpus: u32, memory: &str, disk: &str) -> Self {
        self.machine = (vcpus, memory.to_owned(), disk.to_owned());
        self
    }

    /// `proxy.port`, and `proxy.allowed_clients` unless empty.
    pub fn proxy<S: Into<String>>(
        mut self,
        port: u16,
        allowed_clients: impl IntoIterator<Item = S>,
    ) -> Self {
        let allowed = allowed_clients.into_iter().map(Into::into).collect();
        self.proxy = Some((port, allowed));
        self
    }

    /// `proxy.credentials_file`: the proxy wants basic auth.
    pub fn credentials_file(mut self, path: &Path) -> Self {
        self.credentials_file = Some(path.to_owned());
        self
    }

    /// The entry's name.
    pub fn entry(&self) -> &str {
        &self.entry
    }

    /// The YAML text.
    pub fn render(&self) -> String {
        let mut y = String::new();
        let _ = writeln!(y, "providers:");
        let _ = writeln!(y, "  - name: {}", self.entry);
        let _ = writeln!(y, "    type: kvm2");
        let _ = writeln!(y, "    kvm2:");
        let _ = writeln!(y, "      domain_type: {}", self.domain_type);
        if let Some(firmware) = &self.firmware {
            let _ = writeln!(y, "      firmware: {firmware}");
        }
        let _ = writeln!(y, "      ssh:");
        let _ = writeln!(y, "        user: {}", self.user);
        let _ = writeln!(y, "        key_file: {}", self.key_file.display());
        match &self.host_keys {
            HostKeys::KnownHosts(path) => {
                let _ = writeln!(y, "        known_hosts_file: {}", path.display());
            }
            HostKeys::Insecure => {
                let _ = writeln!(y, "        insecure_ignore_host_key: true");
            }
        }
        let _ = writeln!(y, "      hosts:");
        y += &self.hosts_yaml();
        let _ = writeln!(y, "      images:");
        for image in &self.images {
            image.render(&mut y);
        }
        let (vcpus, memory, disk) = &self.machine;
        let _ = writeln!(y, "      machine_types:");
        let _ = writeln!(y, "        small:");
        let _ = writeln!(y, "          vcpus: {vcpus}");
        let _ = writeln!(y, "          memory: {memory}");
        let _ = writeln!(y, "          disk: {disk}");
        let _ = writeln!(y, "      proxy:");
        if let Some((port, allowed)) = &self.proxy {
            let _ = writeln!(y, "        port: {port}");
            if !allowed.is_empty() {
                let _ = writeln!(y, "        allowed_clients: [{}]", allowed.join(", "));
            }
        }
        if !self.destinations.is_empty() {
            let _ = writeln!(
                y,
                "        allowed_destinations: [{}]",
                self.destinations.join(", ")
            );
        }
        if let Some(file) = &self.credentials_file {
            let _ = writeln!(y, "        credentials_file: {}", file.display());
        }
        if let Some(target) = &self.probe_target {
            let _ = writeln!(y, "        probe_target: \"{target}\"");
        }
        let _ = writeln!(y, "      defaults:");
        let _ = writeln!(y, "        machine_type: small");
        if let Some(first) = self.images.first() {
            let _ = writeln!(y, "        image: {}", first.key);
        }
        y
    }

    /// The `kvm2.hosts` items alone (without the `hosts:` key).
    pub fn hosts_yaml(&self) -> String {
        let mut y = String::new();
        for host in &self.hosts {
            host.render(&mut y);
        }
        y
    }

    /// The entry's kvm2 block, parsed and validated by provider-api as the
    /// operator parses its file.
    ///
    /// # Panics
    /// When provider-api refuses the YAML (its message says which field).
    pub fn kvm2(&self) -> Kvm2Config {
        let yaml = self.render();
        let config = ProvidersConfig::from_yaml_str(&yaml)
            .unwrap_or_else(|e| panic!("the providers config does not parse: {e}\n{yaml}"));
        config.providers[0]
            .kvm2()
            .expect("the entry is of type kvm2")
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use provider_api::config::{DomainType, Firmware, ProxySettings};

    use super::*;

    fn sandbox() -> Descriptor {
        let json = r#"{
            "state_dir": "/tmp/sbx",
            "libvirt": {"socket": "/tmp/sbx/libvirt-sock", "qemu_uri": "qemu:///system",
                "test_uri": "test:///default", "pid_file": "/tmp/sbx/libvirtd.pid",
                "config": "/tmp/sbx/libvirtd.conf", "version": "11.0.0"},
            "ssh": {"host": "127.0.0.1", "port": 2222, "user": "tester",
                "key_path": "/tmp/sbx/id_ed25519", "known_hosts_path": "/tmp/sbx/known_hosts",
                "authorized_keys_path": "/tmp/sbx/authorized_keys",
                "host_key_path": "/tmp/sbx/host_key", "config": "/tmp/sbx/sshd_config"},
            "remote_socket": "/tmp/sbx/libvirt-sock",
            "pool": {"name": "kvm2-test", "dir": "/tmp/sbx/pool"},
            "bridge": "kvm2-br0"
        }"#;
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_sandbox_entry_parses_with_what_the_sandbox_offers() {
        let d = sandbox();
        let kvm2 = ProvidersYaml::sandbox(&d, "kvm2-it").kvm2();
        assert_eq!(kvm2.ssh.user.as_str(), "tester");
        assert_eq!(kvm2.ssh.key_file.as_path(), d.ssh.key_path);
        assert_eq!(
            kvm2.ssh.known_hosts_file.as_ref().map(|f| f.as_path()),
            Some(d.ssh.known_hosts_path.as_path())
        );
        assert!(!kvm2.ssh.insecure_ignore_host_key);
        assert_eq!(kvm2.hosts.len(), 1);
        let host = &kvm2.hosts[0];
        assert_eq!(host.name.as_str(), "host1");
        assert_eq!(host.address.to_string(), "127.0.0.1");
        assert_eq!(host.port, 2222);
        assert_eq!(host.bridge.as_str(), "kvm2-br0");
        assert_eq!(host.pool.as_str(), "kvm2-test");
        assert!(host.socket.is_none());
        assert_eq!(kvm2.images.len(), 1);
        assert_eq!(kvm2.machine_types.len(), 1);
        assert_eq!(kvm2.domain_type, DomainType::Qemu);
        assert_eq!(kvm2.proxy, ProxySettings::default());
        assert_eq!(
            kvm2.defaults.image.as_ref().map(|i| i.as_str()),
            Some("tiny")
        );
        assert_eq!(
            kvm2.defaults.machine_type.as_ref().map(|m| m.as_str()),
            Some("small")
        );
    }

    #[test]
    fn every_setting_parses() {
        let d = sandbox();
        let kvm2 = ProvidersYaml::sandbox(&d, "kvm2-all")
            .hosts([
                Host::sandbox(&d, "host1").with_socket(&d.remote_socket),
                Host {
                    pool: "other".into(),
                    ..Host::sandbox(&d, "host2").at_loopback_port(4022)
                },
            ])
            .images([
                Image::new(
                    "big",
                    "http://127.0.0.1:8080/big.qcow2",
                    "ab".repeat(32),
                    "qcow2",
                ),
                Image::never_fetched("raw"),
            ])
            .host_keys(HostKeys::Insecure)
            .key_file(Path::new("/tmp/other_key"))
            .firmware("uefi")
            .machine_type(2, "512MiB", "4GiB")
            .proxy(8443, ["10.213.7.0/26", "10.0.0.0/8"])
            .kvm2();
        assert!(kvm2.ssh.insecure_ignore_host_key);
        assert!(kvm2.ssh.known_hosts_file.is_none());
        assert_eq!(kvm2.ssh.key_file.as_path(), Path::new("/tmp/other_key"));
        assert_eq!(
            kvm2.hosts[0].socket.as_ref().map(|s| s.as_path()),
            Some(d.remote_socket.as_path())
        );
        assert_eq!(kvm2.hosts[1].port, 4022);
        assert_eq!(kvm2.hosts[1].pool.as_str(), "other");
        assert_eq!(kvm2.images.len(), 2);
        assert_eq!(kvm2.proxy.port, 8443);
        assert_eq!(kvm2.proxy.allowed_clients.len(), 2);
        assert_eq!(kvm2.firmware, Firmware::Uefi);
        assert_eq!(
            kvm2.defaults.image.as_ref().map(|i| i.as_str()),
            Some("big")
        );
    }

    #[test]
    fn a_proxy_without_clients_leaves_the_list_out() {
        let yaml = ProvidersYaml::sandbox(&sandbox(), "kvm2-p")
            .proxy(8443, Vec::<String>::new())
            .render();
        assert!(
            yaml.contains("      proxy:\n        port: 8443\n"),
            "{yaml}"
        );
        assert!(!yaml.contains("allowed_clients"));
    }
}
