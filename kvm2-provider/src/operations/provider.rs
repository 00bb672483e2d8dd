//! [`Kvm2Provider`]: the kvm2 entry of the providers config as a
//! [`provider_api::Provider`], and [`register`] for the operator's
//! constructor table.
//!
//! The struct holds what every operation shares — the entry's name and
//! config, the [`HostTable`], the [`ImageCache`] — and forwards each trait
//! method to the module that does the work (`create`,
//! `delete`, [`get`](super::get), [`list`](super::list),
//! [`check`](super::check)). Construction dials
//! nothing: a host that is down at start-up fails the operations that need
//! it, not the operator.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use provider_api::config::Kvm2Config;
use provider_api::{
    Checker, CreateRequest, Error as ApiError, Identifier, Instance, ListedInstance, Provider,
    ProviderEntry, ProviderId, ProviderType, Registry, Tag,
};

use super::check::HostChecker;
use crate::hosts::{HostOptions, HostTable};
use crate::images::{CacheOptions, ImageCache, ImageSource, SourceLimits};

/// How the provider behaves beyond what the providers config says: budgets
/// and limits.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProviderOptions {
    /// How hosts are dialled (remote socket, URI, dial budget, per-call
    /// deadline).
    pub hosts: HostOptions,
    /// QEMU machine type of every domain (default `q35`).
    pub machine: String,
    /// Bounds on a base image download (size cap, redirects, deadline).
    pub source: SourceLimits,
    /// The image cache's budgets and headroom.
    pub cache: CacheOptions,
    /// How long Create watches a started domain for an immediate verdict
    /// (crashed, shut off, paused) before returning Provisioning.
    pub start_watch: Duration,
    /// Largest cloud-init seed ISO, in bytes.
    pub seed_size_limit: u64,
    /// How long a Create may take when its request carries no deadline
    /// (default 10 minutes).
    pub create_budget: Duration,
    /// How long a host whose dial failed is ranked after the others
    /// (placements `Any` and `Prefer`; default 60 s).
    pub dial_cooldown: Duration,
    /// Pool space a new VM's overlay must find free, on top of its seed
    /// (default 1 GiB; overlays are thin, so the machine type's whole disk
    /// is not reserved — raise it to the disk size for strict reservation).
    pub overlay_reserve: u64,
    /// Whether Create checks the host's CPUs, free memory and pool space
    /// before defining a domain (default true).
    pub capacity_check: bool,
}

impl Default for ProviderOptions {
    /// `q35`, default download limits and cache budgets, a 3 s start
    /// watch, 1 MiB seeds, a 10 min Create budget, a 60 s dial cool-down,
    /// a 1 GiB overlay reserve, the capacity check on.
    fn default() -> Self {
        Self {
            hosts: HostOptions::default(),
            machine: "q35".to_owned(),
            source: SourceLimits::default(),
            cache: CacheOptions::default(),
            start_watch: Duration::from_secs(3),
            seed_size_limit: crate::definition::seed_iso::DEFAULT_SIZE_LIMIT,
            create_budget: Duration::from_secs(10 * 60),
            dial_cooldown: Duration::from_secs(60),
            overlay_reserve: 1 << 30,
            capacity_check: true,
        }
    }
}

/// The kvm2 provider: proxy VMs on libvirt hosts reached over SSH.
///
/// Cheap to share behind an `Arc`; every operation may run concurrently
/// with every other.
pub struct Kvm2Provider {
    inner: Arc<Inner>,
    checker: HostChecker,
}

/// What the operations share.
pub(crate) struct Inner {
    /// The config entry's name.
    pub(crate) name: Identifier,
    /// The entry's kvm2 block.
    pub(crate) config: Arc<Kvm2Config>,
    /// Budgets and settings.
    pub(crate) options: ProviderOptions,
    /// Connections to the hosts.
    pub(crate) hosts: Arc<HostTable>,
    /// The base image cache.
    pub(crate) images: ImageCache,
    /// Instance names with a Create running.
    pub(crate) creating: super::create::Creating,
    /// When each host's dial last failed (Create's cool-down ranking).
    pub(crate) dial_failures: super::placement::DialFailures,
}

impl std::fmt::Debug for Kvm2Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kvm2Provider")
            .field("name", &self.inner.name)
            .field("hosts", &self.inner.config.hosts.len())
            .finish_non_exhaustive()
    }
}

impl Kvm2Provider {
    /// The provider for entry `name` with `config` and default options.
    /// Dials nothing.
    ///
    /// # Errors
    /// Permanent when the config cannot be used (no known_hosts file while
    /// host keys are checked) or the HTTP client cannot be built.
    pub fn new(name: Identifier, config: Kvm2Config) -> Result<Self, ApiError> {
        Self::with_options(name, config, ProviderOptions::default())
    }

    /// As [`new`](Self::new), with explicit options.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_options(
        name: Identifier,
        config: Kvm2Config,
        options: ProviderOptions,
    ) -> Result<Self, ApiError> {
        let hosts = Arc::new(HostTable::new(&config, &options.hosts)?);
        let source = ImageSource::new(options.source).map_err(|e| {
            ApiError::permanent("cannot build the image download client").with_source(e)
        })?;
        let config = Arc::new(config);
        let images = ImageCache::new(name.clone(), hosts.clone(), source, options.cache.clone());
        let checker = HostChecker::new(hosts.clone());
        Ok(Self {
            inner: Arc::new(Inner {
                name,
                config,
                options,
                hosts,
                images,
                creating: super::create::Creating::default(),
                dial_failures: super::placement::DialFailures::default(),
            }),
            checker,
        })
    }

    /// The image cache (for tests and tools that pre-warm hosts).
    pub fn image_cache(&self) -> &ImageCache {
        &self.inner.images
    }
}

/// Registers the kvm2 constructor in `registry`: it builds a
/// [`Kvm2Provider`] (with default options) from a `type: kvm2` entry.
///
/// # Errors
/// Permanent when kvm2 is already registered.
pub fn register(registry: &mut Registry) -> Result<(), ApiError> {
    registry.register(
        ProviderType::Kvm2,
        |entry: &ProviderEntry| -> Result<Arc<dyn Provider>, ApiError> {
            let config = entry.kvm2().ok_or_else(|| {
                ApiError::permanent(format!("provider {} is not a kvm2 entry", entry.name))
            })?;
            Ok(Arc::new(Kvm2Provider::new(
                entry.name.clone(),
                config.clone(),
            )?))
        },
    )
}

#[async_trait]
impl Provider for Kvm2Provider {
    fn name(&self) -> &Identifier {
        &self.inner.name
    }

    fn provider_type(&self) -> ProviderType {
        ProviderType::Kvm2
    }

    async fn create(&self, req: &CreateRequest) -> Result<Instance, ApiError> {
        let port = self.inner.config.proxy.port;
        super::create::create(&self.inner, req)
            .await
            .map(|i| i.with_proxy_port(port))
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, ApiError> {
        let port = self.inner.config.proxy.port;
        super::get::get(&self.inner.hosts, &self.inner.name, id)
            .await
            .map(|i| i.with_proxy_port(port))
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), ApiError> {
        super::delete::delete(&self.inner, id).await
    }

    async fn list_by_tag(&self, tag: &Tag) -> Result<Vec<ListedInstance>, ApiError> {
        super::list::list_by_tag(&self.inner.hosts, &self.inner.name, tag).await
    }

    fn checker(&self) -> Option<&dyn Checker> {
        Some(&self.checker)
    }

    /// Lifecycle events on each host's shared connection
    /// (`operations/events.rs`).
    fn instance_events(&self) -> Option<provider_api::InstanceEvents> {
        super::events::watch(&self.inner)
    }

    /// The image cache's fills in progress, by (host, image).
    fn fills_in_flight(&self) -> Option<usize> {
        Some(self.inner.images.in_flight())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::ProvidersConfig;

    #[test]
    fn register_builds_a_kvm2_provider_without_dialling() {
        let yaml = "providers:\n  - name: kvm2-home\n    type: kvm2\n    kvm2:\n      ssh:\n        user: root\n        key_file: /nonexistent/key\n        known_hosts_file: /nonexistent/known_hosts\n      hosts:\n        - {name: h1, address: 192.0.2.1, bridge: br0, pool: default}\n      images:\n        i:\n          url: http://192.0.2.1/i\n          sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n          format: raw\n      machine_types:\n        m: {vcpus: 1, memory: 128MiB, disk: 1GiB}\n";
        let config = ProvidersConfig::from_yaml_str(yaml).unwrap();
        let mut registry = Registry::new();
        register(&mut registry).unwrap();
        assert!(
            register(&mut registry).is_err(),
            "registering twice is refused"
        );
        // Unreachable host, missing key files: building still succeeds.
        let providers = registry.build(&config).unwrap();
        let p = providers
            .get(&Identifier::parse("kvm2-home").unwrap())
            .unwrap();
        assert_eq!(p.provider_type(), ProviderType::Kvm2);
        assert!(p.checker().is_some());
    }
}
