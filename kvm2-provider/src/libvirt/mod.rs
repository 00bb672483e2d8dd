//! The provider's side of libvirt-rpc: observed calls, error classes, domain
//! states, and the domain calls with the one ownership check.
//!
//! Other subsystems reach it as `libvirt::observed(..)` (every call),
//! `libvirt::to_provider_error(..)` and [`errors`] (the error table),
//! [`state`] (the state table) and `libvirt::DomainOps`.

mod domains;
pub mod errors;
mod observe;
pub mod state;

pub(crate) use domains::{DomainOps, Foreign, Ownership};
pub use errors::{is_absent, to_provider_error};
pub use observe::{observed, observed_source};
