//! The provider contract of the egress-proxies operator.
//!
//! This crate is what a VM provider implements and what the operator calls:
//! traits and plain data, with no libvirt, SSH or Kubernetes dependency.
//!
//! ```text
//!   operator (reconciler, GC sweeper, health monitor)
//!        │ Arc<dyn Provider>            ▲ ErrorClass decides retries
//!        ▼                              │
//!   Traced ─▶ Metered ─▶ dyn Provider ──┘  (decorators forward checker())
//!                          ▲
//!   Registry::build(&ProvidersConfig) ── constructor per ProviderType
//!                          ▲                   (kvm2-provider registers "kvm2")
//!   ProvidersConfig::load(path) ── strict schema + validation
//! ```
//!
//! What it holds:
//! * the contract: [`Provider`] (create, get, delete, list by tag) and
//!   [`Checker`] (per-target health), documented per operation;
//! * data: [`CreateRequest`], [`Instance`], [`InstanceState`],
//!   [`ListedInstance`], [`ProviderId`], [`TargetStatus`], and
//!   [`name_from_uid`], the stable instance name;
//! * validated strings ([`Identifier`] and friends, [`config::values`]) that
//!   cannot carry XML, path or URL syntax, and [`SecretString`] for
//!   cloud-init user data;
//! * [`Error`] with its [`ErrorClass`], the only retry signal (see the
//!   table in [`error`]);
//! * the providers config file ([`config`]), the [`Registry`] that builds
//!   providers from it, and the [`Metered`] / [`Traced`] decorators.
//!
//! What it deliberately does not do: talk to any hypervisor, parse libvirt
//! XML, open connections, spawn tasks, or know Kubernetes types.
//! `docs/provider-contract.md` in the repository restates the contract in
//! one place.
//!
//! # Checklist for a provider author
//!
//! 1. Name instances [`name_from_uid`]`(owner_uid)` and store the ownership
//!    mark (owner UID, [`Tag::managed`]) with each; derive every other name
//!    (volumes, seeds) from the entry name, the instance name and image
//!    *keys* — never from URLs or free text.
//! 2. `create` is idempotent by owner and never adopts an instance with
//!    another (or no) owner; `delete` is idempotent (`Ok` when gone) and never
//!    touches what is not ours; `list_by_tag` is all or nothing.
//! 3. `get` returns `NotFound` only when the instance is gone, and
//!    `Transient` — not `Provisioning` — when every address source failed.
//! 4. Classify every error ([`ErrorClass`]); never put user data or key
//!    material in a message.
//! 5. Return your [`Checker`] from [`Provider::checker`] if you have one;
//!    `check` finishes within its timeout on connections of its own.
//! 6. Export `register(&mut Registry)` that registers a constructor for your
//!    [`ProviderType`]; the constructor validates nothing (the config already
//!    is) and dials nothing.
//!
//! # Example: implementing a provider, and the operator's side
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use async_trait::async_trait;
//! use provider_api::*;
//!
//! // A provider (in its own crate, e.g. `kvm2-provider`).
//! struct Null { name: Identifier }
//!
//! #[async_trait]
//! impl Provider for Null {
//!     fn name(&self) -> &Identifier { &self.name }
//!     fn provider_type(&self) -> ProviderType { ProviderType::Kvm2 }
//!     async fn create(&self, _: &CreateRequest) -> Result<Instance, Error> {
//!         Err(Error::quota_exceeded("no hosts"))
//!     }
//!     async fn get(&self, id: &ProviderId) -> Result<Instance, Error> {
//!         Err(Error::not_found(format!("{id}")))
//!     }
//!     async fn delete(&self, _: &ProviderId) -> Result<(), Error> { Ok(()) }
//!     async fn list_by_tag(&self, _: &Tag) -> Result<Vec<ListedInstance>, Error> {
//!         Ok(Vec::new())
//!     }
//! }
//!
//! // Its crate's `register` (what `kvm2_provider::register` does).
//! fn register(registry: &mut Registry) -> Result<(), Error> {
//!     registry.register(ProviderType::Kvm2, |entry: &ProviderEntry| -> Result<Arc<dyn Provider>, Error> {
//!         Ok(Arc::new(Null { name: entry.name.clone() }))
//!     })
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The operator: the mounted config, the registry, the decorators.
//! let config = ProvidersConfig::from_yaml_str(r#"
//! providers:
//!   - name: kvm2-home
//!     type: kvm2
//!     kvm2:
//!       ssh: {user: root, key_file: /etc/kvm2/id_ed25519, known_hosts_file: /etc/kvm2/known_hosts}
//!       hosts: [{name: host1, address: 192.168.10.11, bridge: br0, pool: default}]
//!       images:
//!         debian-12:
//!           url: https://example.org/debian-12.qcow2
//!           sha256: 8c0ad7e35fbca0ad7d6a3ba0d9ac3d8efd5fba8a1c8e7cd9e0a4c6e8f4b3c2a1
//!           format: qcow2
//!       machine_types: {small: {vcpus: 1, memory: 1GiB, disk: 10GiB}}
//! "#)?;
//! let mut registry = Registry::new();
//! register(&mut registry)?;
//! let mut exposition = prometheus_client::registry::Registry::default();
//! let metrics = ProviderMetrics::new(&mut exposition);
//! let providers = registry.build(&config)?.instrumented(&metrics);
//!
//! let provider = providers.get(&Identifier::parse("kvm2-home")?).ok_or("no such entry")?;
//! let id = ProviderId::parse("kvm2://kvm2-home/host1/ep-e7749fc11676e12e")?;
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! // The class alone decides what happens next.
//! match rt.block_on(provider.get(&id)) {
//!     Ok(instance) => println!("{}: {}", instance.id, instance.state.as_str()),
//!     Err(e) if e.is_not_found() => println!("{id} is gone: recreate it"),
//!     Err(e) if e.is_retryable() => println!("retry later: {e}"),
//!     Err(e) => println!("fix the spec or config: {e}"),
//! }
//! // The health monitor sees the checker through both decorators.
//! if let Some(checker) = provider.checker() {
//!     for status in rt.block_on(checker.check(Duration::from_secs(5))) {
//!         println!("{}: {}", status.target, status.reason.as_str());
//!     }
//! }
//! # Ok(())
//! # }
//! ```

pub mod check;
pub mod config;
pub mod error;
pub mod events;
pub mod ident;
pub mod instance;
pub mod instance_name;
pub mod metrics;
pub mod provider;
pub mod provider_id;
pub mod provider_type;
pub mod proxy_credentials;
pub mod registry;
pub mod request;
pub mod secret;
pub mod squid;
pub mod traced;

pub use check::{CheckReason, Checker, TargetStatus};
pub use config::{ConfigError, ConfigIssue, ProviderBlock, ProviderEntry, ProvidersConfig};
pub use error::{BoxError, Error, ErrorClass, ResultExt};
pub use events::{Change, InstanceEvent, InstanceEventSource, InstanceEvents};
pub use ident::{Identifier, ObjectName, OwnerUid, ParseError, TagValue};
pub use instance::{AddressSource, AddressSources, Instance, InstanceState, ListedInstance};
pub use instance_name::name_from_uid;
pub use metrics::{Metered, ProviderMetrics};
pub use provider::Provider;
pub use provider_id::ProviderId;
pub use provider_type::ProviderType;
pub use proxy_credentials::{CredentialsError, ProxyCredentials};
pub use registry::{Constructor, Providers, Registry};
pub use request::{CreateRequest, MANAGED_BY_KEY, MANAGED_BY_VALUE, Placement, Tag, Tags};
pub use secret::SecretString;
pub use traced::Traced;
