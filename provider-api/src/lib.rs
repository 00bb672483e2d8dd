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
//! # Implementing a provider
//!
//! ```
//! use async_trait::async_trait;
//! use provider_api::*;
//!
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
//! let p: std::sync::Arc<dyn Provider> =
//!     std::sync::Arc::new(Null { name: Identifier::parse("null").unwrap() });
//! assert!(p.checker().is_none());
//! ```

pub mod check;
pub mod config;
pub mod error;
pub mod ident;
pub mod instance;
pub mod instance_name;
pub mod metrics;
pub mod provider;
pub mod provider_id;
pub mod provider_type;
pub mod registry;
pub mod request;
pub mod secret;
pub mod traced;

pub use check::{CheckReason, Checker, TargetStatus};
pub use config::{ConfigError, ConfigIssue, ProviderBlock, ProviderEntry, ProvidersConfig};
pub use error::{BoxError, Error, ErrorClass, ResultExt};
pub use ident::{Identifier, ObjectName, OwnerUid, ParseError, TagValue};
pub use instance::{Instance, InstanceState, ListedInstance};
pub use instance_name::name_from_uid;
pub use metrics::{Metered, ProviderMetrics};
pub use provider::Provider;
pub use provider_id::ProviderId;
pub use provider_type::ProviderType;
pub use registry::{Constructor, Providers, Registry};
pub use request::{CreateRequest, Placement, Tag, Tags};
pub use secret::SecretString;
pub use traced::Traced;
