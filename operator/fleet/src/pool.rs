//! `ProxyPool`: `replicas` Proxies from one template, spread over the
//! provider entry's hosts, rolled when the template changes.
//!
//! The operator's pool controller reads the pool and its members (the
//! Proxies it owns), the entry's hosts from the latest provider check, and
//! asks [`ValidPool::plan`] what to do: which members to make (named
//! `<pool>-<template hash>-<index>`, each with the host chosen for it) and
//! which to delete. It carries that out and writes
//! [`ProxyPoolStatus::observe`]. The rules are in [`plan`]'s docs.
//!
//! ```
//! use fleet::pool::{HostState, Member, ProxyPoolSpec};
//!
//! let spec: ProxyPoolSpec = serde_json::from_str(
//!     r#"{"replicas": 3, "template": {"spec": {"provider": "kvm2-home"}}}"#,
//! )?;
//! let pool = spec.validate("egress").map_err(|i| format!("{i:?}"))?;
//! let hosts = ["host1", "host2"].map(|h| HostState { name: h.into(), ready: true });
//! let plan = pool.plan(&[], Some(&hosts));
//! let names: Vec<&str> = plan.create.iter().map(|m| m.name.as_str()).collect();
//! assert_eq!(names.len(), 3);
//! assert!(names[0].starts_with("egress-") && names[0].ends_with("-0"));
//! // Spread: two hosts take three members as 2 + 1.
//! let on_host1 = plan.create.iter()
//!     .filter(|m| m.spec.placement.host.as_deref() == Some("host1"))
//!     .count();
//! assert!(on_host1 == 1 || on_host1 == 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod plan;
mod spec;
mod status;
#[cfg(test)]
mod tests;

pub use plan::{Counts, HostState, Member, NewMember, Plan, Progress};
pub use spec::{
    HASH_LEN, MAX_POOL_NAME, MAX_REPLICAS, ProxyPoolSpec, ProxyTemplate, RolloutStrategy,
    SpreadSpec, TemplateMetadata, ValidPool, template_hash,
};
pub use status::{HostMembers, PoolReason, ProxyPoolStatus, selector_of};

/// The label naming a member's pool (the pool's selector).
pub const POOL_LABEL: &str = "egress-proxies.io/pool";
/// The label holding the template hash a member was made from.
pub const TEMPLATE_LABEL: &str = "egress-proxies.io/pool-template";
/// The finalizer the pool controller puts on every pool: members are
/// deleted (and gone) before the pool is.
pub const POOL_FINALIZER: &str = "egress-proxies.io/members";
