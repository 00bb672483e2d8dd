//! [`Kvm2Provider`]: the kvm2 entry of the providers config as a
//! [`provider_api::Provider`], and [`register`] for the operator's
//! constructor table.
//!
//! The struct holds what every operation shares — the entry's name and
//! config, the [`HostTable`], the [`ImageCache`] — and forwards each trait
//! method to the module that does the work ([`create`](crate::create),
//! [`delete`](crate::delete), `get`, `list`, `check`). Construction dials
//! nothing: a host that is down at start-up fails the operations that need
//! it, not the operator.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use provider_api::config::Kvm2Config;
use provider_api::{
    Checker, CreateRequest, Error as ApiError, Identifier, Instance, ListedInstance, Provider,
    ProviderEntry, ProviderId, ProviderType, Registry, Tag, TargetStatus,
};

use crate::domain_xml::VirtType;
use crate::host_table::{HostOptions, HostTable};
use crate::image_cache::{CacheOptions, ImageCache};
use crate::image_source::{ImageSource, SourceLimits};
use crate::vendor_data::{ClientRange, ProxySettings};

/// How the provider behaves beyond what the providers config says: budgets,
/// limits and the settings the config does not carry yet.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProviderOptions {
    /// How hosts are dialled (remote socket, URI, dial budget, per-call
    /// deadline).
    pub hosts: HostOptions,
    /// `kvm` (production) or `qemu` (TCG, hosts without `/dev/kvm`).
    pub virt_type: VirtType,
    /// QEMU machine type of every domain (default `q35`).
    pub machine: String,
    /// Bounds on a base image download (size cap, redirects, deadline).
    pub source: SourceLimits,
    /// The image cache's budgets and headroom.
    pub cache: CacheOptions,
    /// How long Create watches a started domain for an immediate verdict
    /// (crashed, shut off, paused) before returning Provisioning.
    pub start_watch: Duration,
    /// The Squid settings written into every VM's vendor data.
    pub proxy: ProxySettings,
    /// Largest cloud-init seed ISO, in bytes.
    pub seed_size_limit: u64,
}

impl Default for ProviderOptions {
    /// KVM, `q35`, default download limits and cache budgets, a 3 s start
    /// watch, Squid on 3128 for the RFC 1918 ranges, 1 MiB seeds.
    fn default() -> Self {
        let allowed_clients = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
            .iter()
            .filter_map(|c| ClientRange::parse(c).ok())
            .collect();
        Self {
            hosts: HostOptions::default(),
            virt_type: VirtType::Kvm,
            machine: "q35".to_owned(),
            source: SourceLimits::default(),
            cache: CacheOptions::default(),
            start_watch: Duration::from_secs(3),
            proxy: ProxySettings {
                port: 3128,
                allowed_clients,
            },
            seed_size_limit: crate::seed_iso::DEFAULT_SIZE_LIMIT,
        }
    }
}

/// The kvm2 provider: proxy VMs on libvirt hosts reached over SSH.
///
/// Cheap to share behind an `Arc`; every operation may run concurrently
/// with every other.
pub struct Kvm2Provider {
    inner: Arc<Inner>,
    checker: Kvm2Checker,
}

/// What the operations share.
#[allow(dead_code)] // get, list and check use every field once they land
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
        let checker = Kvm2Checker {
            hosts: hosts.clone(),
            config: config.clone(),
            entry: name.clone(),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                name,
                config,
                options,
                hosts,
                images,
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
        crate::create::create(&self.inner, req).await
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, ApiError> {
        let _ = id;
        Err(not_yet("get"))
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), ApiError> {
        crate::delete::delete(&self.inner, id).await
    }

    async fn list_by_tag(&self, tag: &Tag) -> Result<Vec<ListedInstance>, ApiError> {
        let _ = tag;
        Err(not_yet("list_by_tag"))
    }

    fn checker(&self) -> Option<&dyn Checker> {
        Some(&self.checker)
    }
}

fn not_yet(what: &str) -> ApiError {
    ApiError::permanent(format!("kvm2 provider: {what} is not implemented yet"))
}

/// The kvm2 health check: every host, on dedicated connections.
struct Kvm2Checker {
    hosts: Arc<HostTable>,
    config: Arc<Kvm2Config>,
    entry: Identifier,
}

#[async_trait]
impl Checker for Kvm2Checker {
    async fn check(&self, timeout: Duration) -> Vec<TargetStatus> {
        let _ = (&self.hosts, &self.entry, timeout);
        self.config
            .hosts
            .iter()
            .map(|h| {
                TargetStatus::unreachable(
                    h.name.clone(),
                    provider_api::CheckReason::Other,
                    "kvm2 provider: check is not implemented yet",
                )
            })
            .collect()
    }
}
