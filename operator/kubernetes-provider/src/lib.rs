//! The `kubernetes` provider: each egress proxy a Pod running Squid, in a
//! namespace of a cluster the provider entry names (the cluster the
//! operator runs in, or another through a kubeconfig file).
//!
//! ```text
//!  Provider::create ──▶ Pod  <instance name>  (Squid as uid 13, no privileges,
//!                        │                     readiness = TCP on the proxy port)
//!                        └─owns─ Secret <instance name>  (squid.conf [+ passwd])
//! ```
//!
//! - **Same proxy as kvm2's**: squid.conf comes from
//!   [`provider_api::squid`] (CONNECT to 443 only, the clients the entry
//!   allows, internal destinations refused unless allowed, basic
//!   authentication when the entry has a credentials file), with the
//!   container layout (logs on stdout and stderr).
//! - **Ownership** ([`labels`]): labels carry the entry and the owner UID;
//!   a Pod without them, or with another entry's, is never adopted,
//!   changed or deleted (`Permanent`). Deletes carry the Pod's UID as a
//!   precondition, so a Pod that replaced ours under the same name is not
//!   touched.
//! - **IDs**: `kubernetes://<entry>/<namespace>/<instance>`; the namespace
//!   is the entry's one target (host), which the [`check::PodsChecker`]
//!   reports reachable when the API server answers and lets the provider
//!   list Pods there.
//! - **States** ([`pod_state`]): Pending → `Provisioning`, Running and
//!   ready with an IP → `Running`, an image that cannot be pulled or a
//!   crash loop → `Failed`, being deleted → `Stopped`.
//! - **Events** ([`events`]): a watch on the entry's Pods reports a Pod
//!   turning ready, failing, being deleted or vanishing, so the operator
//!   looks again at once rather than at its next poll.
//! - **Errors** ([`errors`]): 404 → `NotFound`, a quota → `QuotaExceeded`,
//!   refused or invalid → `Permanent`, conflicts, overload and no answer →
//!   `Transient`.
//!
//! The provider needs, in its namespace: `pods` get, list, watch, create, delete
//! and `secrets` get, create, update, delete (docs/kubernetes-provider.md).
//!
//! # Example
//!
//! Building the provider reads and dials nothing (the client is made on
//! the first call):
//!
//! ```
//! use provider_api::{Provider, ProviderType, ProvidersConfig, Registry};
//!
//! let config = ProvidersConfig::from_yaml_str(r#"
//! providers:
//!   - name: pods
//!     type: kubernetes
//!     kubernetes:
//!       namespace: egress-pods
//!       images: {squid: {reference: "registry.example/egress-proxies/squid:5.7"}}
//!       machine_types: {small: {cpu: 250m, memory: 128MiB}}
//!       defaults: {machine_type: small, image: squid}
//! "#).unwrap();
//! let mut registry = Registry::new();
//! kubernetes_provider::register(&mut registry).unwrap();
//! let providers = registry.build(&config).unwrap();
//! let pods = providers.get(&config.providers[0].name).unwrap();
//! assert_eq!(pods.provider_type(), ProviderType::Kubernetes);
//! assert!(pods.checker().is_some());
//! ```

pub mod check;
mod client;
pub mod errors;
pub mod events;
pub mod labels;
pub mod manifest;
pub mod pod_state;
mod provider;

pub use provider::{CALL_BUDGET, DEFAULT_CREATE_BUDGET, KubernetesProvider, register};
