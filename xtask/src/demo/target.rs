//! Where the validation suite runs: the local sandbox (`cargo xtask demo`,
//! and `cargo xtask integration` without `--host`) or a hypervisor host and
//! cluster the user names (`cargo xtask integration --host ...`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use sandbox_kit::{Descriptor, KubeService};

use crate::flags::IntegrationArgs;

/// How a guest's QEMU is made to die for the replacement row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// `kill -9` of the QEMU process (the host is this machine).
    Process,
    /// `virsh destroy` (a remote host: the domain stops as if it crashed).
    Destroy,
}

/// Who the operator runs as.
#[derive(Debug, Clone)]
pub enum Identity {
    /// deploy/'s ServiceAccount, with a token from the sandbox's API server
    /// (so a missing RBAC rule fails the run), on deploy/'s Lease.
    ServiceAccount(KubeService),
    /// The user's kubeconfig, on a Lease of the run's own.
    Kubeconfig(PathBuf),
}

/// Everything the suite needs to know about where it runs.
#[derive(Debug, Clone)]
pub struct Target {
    /// The providers config the operator runs with (one entry).
    provider: ProviderConfig,
    /// That entry's name.
    pub entry: String,
    /// The image key its Proxies use, and the base volume's name.
    pub base_volume: String,
    /// The digest the image must have.
    pub image_sha256: String,
    /// Its size when known (the sandbox's image).
    pub image_bytes: Option<u64>,
    /// virsh's URI for the host (`qemu+libssh`: unlike `qemu+ssh`, which
    /// runs OpenSSH with the user's own known_hosts, it takes the key and
    /// known_hosts files the operator uses).
    pub virsh_uri: String,
    /// The host's storage pool.
    pub pool: String,
    /// The pool's directory, when it is on this machine (download progress).
    pub pool_dir: Option<PathBuf>,
    /// `host:port` the health engine CONNECTs to through each proxy.
    pub probe_target: String,
    /// The network namespace probes are opened in, if any.
    pub probe_netns: Option<String>,
    /// kubectl's kubeconfig (an administrator).
    pub admin_kubeconfig: PathBuf,
    /// Who the operator runs as.
    pub identity: Identity,
    /// How the replacement row kills a guest.
    pub kill: Kill,
    /// The namespace, cluster identity and Lease name of this run: nothing
    /// outside them is touched.
    pub tag: String,
}

impl Target {
    /// The local sandbox.
    pub fn sandbox(sandbox: &Descriptor, tag: &str) -> Result<Target> {
        let kube = sandbox
            .kube
            .clone()
            .context("the sandbox has no API server: restart it (`cargo xtask sandbox down; cargo xtask sandbox up`)")?;
        let image = sandbox
            .guest_image
            .clone()
            .context("the sandbox serves no guest image: restart it")?;
        let s = &sandbox.ssh;
        let entry = tag.to_owned();
        let host = format!(
            "        - name: host1\n          address: {}\n          port: {}\n          bridge: {}\n          pool: {}\n          socket: {}\n",
            s.host,
            s.port,
            sandbox.bridge,
            sandbox.pool.name,
            sandbox.remote_socket.display(),
        );
        let ssh = Ssh {
            user: s.user.clone(),
            key: s.key_path.display().to_string(),
            known_hosts: s.known_hosts_path.display().to_string(),
        };
        Ok(Target {
            provider: ProviderConfig {
                entry: entry.clone(),
                domain_type: "qemu".into(),
                ssh,
                hosts: host,
                url: image.url.clone(),
                sha256: image.sha256.clone(),
                allowed: sandbox.guest_net.cidr(),
                probe_target: sandbox.guest_net.upstream.to_string(),
                destinations: Some(format!("{}/32", sandbox.guest_net.upstream.ip())),
                pods: None,
            },
            base_volume: format!("base-{entry}.proxy-guest.qcow2"),
            entry,
            image_sha256: image.sha256.clone(),
            image_bytes: Some(image.bytes),
            virsh_uri: sandbox.virsh_uri(&sandbox.libvirt.qemu_uri),
            pool: sandbox.pool.name.clone(),
            pool_dir: Some(sandbox.pool.dir.clone()),
            probe_target: sandbox.guest_net.upstream.to_string(),
            probe_netns: Some(sandbox.guest_net.netns.clone()),
            admin_kubeconfig: kube.kubeconfig.clone(),
            identity: Identity::ServiceAccount(kube.clone()),
            kill: Kill::Process,
            tag: tag.to_owned(),
        })
    }

    /// A host the user names: `cargo xtask integration --host user@addr[:port]
    /// --key F --known-hosts F --bridge B --pool P --image-url U
    /// --image-sha256 H --kubeconfig K [--socket S] [--domain-type kvm|qemu]
    /// [--allowed-clients CIDR] [--probe-target host:port] [--probe-netns NS]`.
    pub fn from_flags(flags: &IntegrationArgs, tag: &str) -> Result<Target> {
        fn need<'a, T: ?Sized>(value: Option<&'a T>, name: &str) -> Result<&'a T> {
            value.with_context(|| format!("--host needs --{name} (see docs/integration.md)"))
        }
        let host = need(flags.host.as_deref(), "host")?;
        let (user, addr) = host
            .split_once('@')
            .context("--host is user@address[:port]")?;
        let (addr, port) = match addr.rsplit_once(':') {
            Some((a, p)) => (a, p.parse::<u16>().context("--host's port")?),
            None => (addr, 22),
        };
        let key = need(flags.key.as_deref(), "key")?.display().to_string();
        let known_hosts = need(flags.known_hosts.as_deref(), "known-hosts")?
            .display()
            .to_string();
        let bridge = need(flags.bridge.as_deref(), "bridge")?;
        let pool = need(flags.pool.as_deref(), "pool")?;
        let url = need(flags.image_url.as_deref(), "image-url")?;
        let sha = need(flags.image_sha256.as_deref(), "image-sha256")?;
        let kubeconfig = need(flags.kubeconfig.as_deref(), "kubeconfig")?;
        let socket = flags.socket.as_str();
        let domain_type = flags.domain_type.as_str();
        let allowed = flags.allowed_clients.as_str();
        let entry = tag.to_owned();
        let host_yaml = format!(
            "        - name: host1\n          address: {addr}\n          port: {port}\n          bridge: {bridge}\n          pool: {pool}\n          socket: {socket}\n"
        );
        let ssh = Ssh {
            user: user.to_owned(),
            key: key.clone(),
            known_hosts: known_hosts.clone(),
        };
        Ok(Target {
            provider: ProviderConfig {
                entry: entry.clone(),
                domain_type: domain_type.to_owned(),
                ssh,
                hosts: host_yaml,
                url: url.to_owned(),
                sha256: sha.to_owned(),
                allowed: allowed.to_owned(),
                probe_target: flags.probe_target.clone(),
                destinations: None,
                pods: None,
            },
            base_volume: format!("base-{entry}.proxy-guest.qcow2"),
            entry,
            image_sha256: sha.to_owned(),
            image_bytes: None,
            virsh_uri: format!(
                "qemu+libssh://{user}@{addr}:{port}/system?keyfile={key}&known_hosts={known_hosts}&socket={socket}&sshauth=privkey"
            ),
            pool: pool.to_owned(),
            pool_dir: None,
            probe_target: flags.probe_target.clone(),
            probe_netns: flags.probe_netns.clone(),
            admin_kubeconfig: PathBuf::from(kubeconfig),
            identity: Identity::Kubeconfig(PathBuf::from(kubeconfig)),
            kill: Kill::Destroy,
            tag: tag.to_owned(),
        })
    }
}

#[derive(Debug, Clone)]
struct Ssh {
    user: String,
    key: String,
    known_hosts: String,
}

/// What the providers config is made of.
#[derive(Debug, Clone)]
struct ProviderConfig {
    entry: String,
    domain_type: String,
    ssh: Ssh,
    hosts: String,
    url: String,
    sha256: String,
    allowed: String,
    /// `proxy.probe_target`: what the health probe CONNECTs to.
    probe_target: String,
    /// `proxy.allowed_destinations` (the sandbox's upstream, an internal
    /// address).
    destinations: Option<String>,
    /// A second entry, of type `kubernetes`: Pods of this image in the RBAC
    /// sample's namespace, with the operator's in-cluster credentials.
    pods: Option<String>,
}

impl ProviderConfig {
    fn render(&self, key: &str, known_hosts: &str) -> String {
        format!(
            "providers:\n  - name: {entry}\n    type: kvm2\n    kvm2:\n      domain_type: {domain_type}\n      ssh:\n        user: {user}\n        key_file: {key}\n        known_hosts_file: {known_hosts}\n      hosts:\n{hosts}      images:\n        proxy-guest:\n          url: {url}\n          sha256: {sha}\n          format: qcow2\n      machine_types:\n        small: {{vcpus: 1, memory: 512MiB, disk: 4GiB}}\n      proxy:\n        port: 3128\n        allowed_clients: [{allowed}]\n        probe_target: \"{probe}\"\n{destinations}      defaults: {{machine_type: small, image: proxy-guest}}\n",
            entry = self.entry,
            domain_type = self.domain_type,
            user = self.ssh.user,
            hosts = self.hosts,
            url = self.url,
            sha = self.sha256,
            allowed = self.allowed,
            probe = self.probe_target,
            destinations = match &self.destinations {
                Some(d) => format!("        allowed_destinations: [{d}]\n"),
                None => String::new(),
            },
        ) + &self.pods_entry()
    }

    /// The `kubernetes` entry, when the run has one.
    fn pods_entry(&self) -> String {
        use sandbox_kit::node::{POD_GATEWAY, POD_SUBNET};
        let Some(image) = &self.pods else {
            return String::new();
        };
        format!(
            "  - name: {entry}-pods\n    type: kubernetes\n    kubernetes:\n      namespace: {ns}\n      images:\n        squid: {{reference: \"{image}\"}}\n      machine_types:\n        small: {{cpu: 100m, memory: 96MiB}}\n      proxy:\n        allowed_clients: [{POD_SUBNET}]\n        allowed_destinations: [{POD_GATEWAY}/32]\n        probe_target: \"{POD_GATEWAY}:{port}\"\n      defaults: {{machine_type: small, image: squid}}\n",
            entry = self.entry,
            ns = super::pods_row::POD_NAMESPACE,
            port = super::pods_row::UPSTREAM_PORT,
        )
    }
}

impl Target {
    /// This target with a `kubernetes` entry beside the kvm2 one (the
    /// sandbox's node runs its Pods; the operator runs as a pod there).
    pub fn with_pods(mut self) -> Target {
        self.provider.pods = Some(sandbox_kit::squid_recipe::reference());
        self
    }

    /// The `kubernetes` entry's name, when the run has one.
    pub fn pods_entry(&self) -> Option<String> {
        self.provider
            .pods
            .as_ref()
            .map(|_| format!("{}-pods", self.provider.entry))
    }

    /// The providers config, with the SSH files where they are on this
    /// machine.
    pub fn config_yaml(&self) -> String {
        let ssh = &self.provider.ssh;
        self.provider.render(&ssh.key, &ssh.known_hosts)
    }

    /// The providers config for a pod that mounts the SSH Secret (keys
    /// `id_ed25519` and `known_hosts`) at `dir`.
    pub fn config_for_ssh_dir(&self, dir: &str) -> String {
        self.provider
            .render(&format!("{dir}/id_ed25519"), &format!("{dir}/known_hosts"))
    }

    /// The SSH key and known_hosts files on this machine.
    pub fn ssh_files(&self) -> (&str, &str) {
        (&self.provider.ssh.key, &self.provider.ssh.known_hosts)
    }

    /// The API server's URL, when the suite runs on the sandbox's.
    pub fn api_server(&self) -> Option<&str> {
        match &self.identity {
            Identity::ServiceAccount(kube) => Some(&kube.server),
            Identity::Kubeconfig(_) => None,
        }
    }
}
