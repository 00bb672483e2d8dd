//! The provider's operations: the `Provider` impl and create, delete, get,
//! list-by-tag and host checks.
//!
//! [`Kvm2Provider`] forwards each trait method to its operation's module;
//! the read operations and the checker are exported on their own too
//! ([`get`], [`list_by_tag`], [`HostChecker`]), so the crate's tests can run
//! them against a [`HostTable`](crate::hosts::HostTable) without a provider.

mod check;
mod create;
mod delete;
mod events;
mod get;
mod list;
mod placement;
mod provider;

pub use check::HostChecker;
pub use get::get;
pub use list::list_by_tag;
pub use provider::{Kvm2Provider, ProviderOptions, register};
