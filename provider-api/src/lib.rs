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
//!   ProvidersConfig::from_yaml(…) ── strict schema + validation
//! ```
//!
//! What it holds:
//! * the contract: [`Provider`] (create, get, delete, list by tag) and
//!   [`Checker`] (per-target health), documented per operation;
//! * data: [`CreateRequest`], [`Instance`], [`InstanceState`],
//!   [`ListedInstance`], [`ProviderId`], [`TargetStatus`], and
//!   [`name_from_uid`], the stable instance name;
//! * validated strings ([`Identifier`] and friends) that cannot carry XML,
//!   path or URL syntax, and [`SecretString`] for cloud-init user data;
//! * [`Error`] with its [`ErrorClass`], the only retry signal.
//!
//! What it deliberately does not do: talk to any hypervisor, parse libvirt
//! XML, open connections, or know Kubernetes types.
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
