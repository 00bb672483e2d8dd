//! Sandbox helpers for the Create / Delete / image cache tests: a providers
//! config with a unique entry name (so base volumes never collide with
//! another test's), a provider with test budgets, and a guard that removes
//! every domain and volume the test may have made, also when it fails.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use kvm2_provider::{CacheOptions, HostOptions, Kvm2Provider, ProviderOptions};
use libvirt_rpc::Config as RpcConfig;
use provider_api::config::Kvm2Config;
use provider_api::{
    CreateRequest, Identifier, ObjectName, OwnerUid, Placement, ProvidersConfig, name_from_uid,
};
use testkit::Descriptor;
use testkit::providers_yaml::ProvidersYaml;
use testkit::virsh::Virsh;

pub use testkit::providers_yaml::{Host, Image};

/// An image entry whose URL nothing answers (port 9): a Create that
/// reaches the download fails Transient.
pub fn unreachable_image(key: &str) -> Image {
    Image::new(
        key,
        "http://127.0.0.1:9/never",
        crate::http_server::digest(b"x").to_string(),
        "raw",
    )
}

/// The image entry for `body` served by `server` at `/{key}.{format}`.
pub fn served_image(
    server: &crate::http_server::Server,
    key: &str,
    body: &[u8],
    format: &'static str,
) -> Image {
    Image::new(
        key,
        server.url(&format!("/{key}.{format}")).to_string(),
        crate::http_server::digest(body).to_string(),
        format,
    )
}

/// A blank 64 MiB qcow2 served by a server of its own, and its image entry
/// `tiny` (what the placement and event tests create VMs from).
pub async fn tiny_served_image() -> (crate::http_server::Server, Image) {
    let body = crate::http_server::qcow2_image("64M");
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "tiny", &body, "qcow2");
    (server, image)
}

/// A test's sandbox view and clean-up guard.
pub struct Env {
    pub sandbox: Descriptor,
    /// Unique per test: every base / upload volume name contains it.
    pub entry: String,
    pub uri: String,
    pools: Mutex<Vec<String>>,
    domains: Mutex<Vec<String>>,
    /// Run after the volumes are removed (e.g. destroy a test pool).
    teardown: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl Env {
    pub fn new() -> Self {
        let sandbox = Descriptor::require();
        let uri = sandbox.virsh_uri(&sandbox.libvirt.qemu_uri);
        let pools = Mutex::new(vec![sandbox.pool.name.clone()]);
        Env {
            entry: format!("kvm2-t{}", &testkit::names::random_hex()[..10]),
            uri,
            sandbox,
            pools,
            domains: Mutex::new(Vec::new()),
            teardown: Mutex::new(Vec::new()),
        }
    }

    /// The sandbox as `name`, with its libvirt socket.
    pub fn host(&self, name: &str) -> Host {
        Host::sandbox(&self.sandbox, name).with_socket(&self.sandbox.remote_socket)
    }

    pub fn watch_pool(&self, pool: &str) {
        self.pools.lock().unwrap().push(pool.to_owned());
    }

    pub fn on_teardown(&self, f: impl FnOnce() + Send + 'static) {
        self.teardown.lock().unwrap().push(Box::new(f));
    }

    /// A fresh owner UID whose domain the guard removes.
    pub fn owner(&self) -> OwnerUid {
        let uid = OwnerUid::parse(&format!("uid-{}", testkit::names::random_hex())).unwrap();
        self.domains
            .lock()
            .unwrap()
            .push(name_from_uid(&uid).to_string());
        uid
    }

    /// The providers config of this test's entry with the sandbox as
    /// `host1`; the caller sets the images and whatever else it varies.
    pub fn providers(&self) -> ProvidersYaml {
        ProvidersYaml::sandbox(&self.sandbox, &self.entry).hosts([self.host("host1")])
    }

    /// The providers config of this test's entry with `hosts`, `images`
    /// (the first one the default) and `known_hosts` instead of the
    /// sandbox's file when given.
    pub fn yaml(&self, hosts: &[Host], images: &[Image], known_hosts: Option<&str>) -> String {
        let mut providers = self
            .providers()
            .hosts(hosts.iter().cloned())
            .images(images.iter().cloned());
        if let Some(path) = known_hosts {
            providers = providers.known_hosts(Path::new(path));
        }
        providers.render()
    }

    pub fn config(&self, yaml: &str) -> Kvm2Config {
        let config = ProvidersConfig::from_yaml_str(yaml).unwrap();
        config.providers[0].kvm2().unwrap().clone()
    }

    pub fn options(&self) -> ProviderOptions {
        let mut options = ProviderOptions::default();
        // The socket comes from each host's `socket` in the config.
        options.hosts = HostOptions {
            dial_budget: Duration::from_secs(30),
            rpc: RpcConfig::default().call_timeout(Duration::from_secs(60)),
            ..HostOptions::default()
        };
        let mut cache = CacheOptions::default();
        cache.fill_budget = Duration::from_secs(120);
        options.cache = cache;
        options.source.deadline = Duration::from_secs(120);
        options.start_watch = Duration::from_secs(1);
        options
    }

    /// A provider with the sandbox as its only host (`host1`), `image` as
    /// its only image and the test options.
    pub fn one_host_provider(&self, image: Image) -> Kvm2Provider {
        let yaml = self.yaml(&[self.host("host1")], &[image], None);
        self.provider(&yaml, self.options())
    }

    pub fn provider(&self, yaml: &str, options: ProviderOptions) -> Kvm2Provider {
        Kvm2Provider::with_options(
            Identifier::parse(&self.entry).unwrap(),
            self.config(yaml),
            options,
        )
        .unwrap()
    }

    pub fn request(&self, owner: OwnerUid, placement: Placement) -> CreateRequest {
        let mut req = CreateRequest::new(
            owner,
            ObjectName::parse("proxy-a").unwrap(),
            Identifier::parse("default").unwrap(),
        );
        req.placement = placement;
        req
    }

    /// Runs virsh on the sandbox's `qemu:///system`: whether it succeeded,
    /// and its output and errors.
    pub fn virsh(&self, args: &[&str]) -> (bool, String) {
        Virsh::new(self.uri.as_str()).status(args)
    }

    /// Volume names in `pool`.
    pub fn volumes(&self, pool: &str) -> Vec<String> {
        let _ = self.virsh(&["pool-refresh", pool]);
        let (_, out) = self.virsh(&["vol-list", "--pool", pool]);
        out.lines()
            .skip(2)
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .collect()
    }

    /// Volumes in the sandbox pool that belong to this test: every name the
    /// provider derives carries the entry (`base-<entry>.`, `tmp-<entry>.`,
    /// `vm-<entry>.`).
    pub fn our_volumes(&self, pool: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .volumes(pool)
            .into_iter()
            .filter(|v| v.contains(&format!("-{}.", self.entry)))
            .collect();
        v.sort();
        v
    }

    pub fn domain_exists(&self, name: &str) -> bool {
        self.virsh(&["dominfo", name]).0
    }

    pub fn domain_state(&self, name: &str) -> String {
        self.virsh(&["domstate", name]).1.trim().to_owned()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for d in self.domains.lock().unwrap().iter() {
            if self.domain_exists(d) {
                let _ = self.virsh(&["destroy", d]);
                let _ = self.virsh(&["undefine", "--nvram", d]);
            }
        }
        let pools = self.pools.lock().unwrap().clone();
        for pool in pools {
            for vol in self.our_volumes(&pool) {
                let _ = self.virsh(&["vol-delete", "--pool", &pool, &vol]);
            }
        }
        // The other hypervisor hosts: what a placement test put there.
        for host in self.sandbox.hosts.iter().skip(1) {
            let virsh = Virsh::new(host.virsh_uri(&host.libvirt.qemu_uri));
            if !virsh.status(&["list", "--name"]).0 {
                continue; // stopped by a test (its guard starts it again)
            }
            for d in self.domains.lock().unwrap().iter() {
                if virsh.status(&["dominfo", d]).0 {
                    let _ = virsh.status(&["destroy", d]);
                    let _ = virsh.status(&["undefine", "--nvram", d]);
                }
            }
            let pool = host.pool.name.as_str();
            let _ = virsh.status(&["pool-refresh", pool]);
            let (_, out) = virsh.status(&["vol-list", "--pool", pool]);
            for vol in out
                .lines()
                .skip(2)
                .filter_map(|l| l.split_whitespace().next())
                .filter(|v| v.contains(&format!("-{}.", self.entry)))
            {
                let _ = virsh.status(&["vol-delete", "--pool", pool, vol]);
            }
        }
        for f in self.teardown.lock().unwrap().drain(..) {
            f();
        }
    }
}
