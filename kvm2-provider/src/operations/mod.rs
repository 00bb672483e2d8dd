//! The provider's operations: the `Provider` impl and create, delete, get, list-by-tag and host checks.

pub mod check;
pub(crate) mod create;
pub(crate) mod delete;
pub mod get;
pub mod list;
pub mod provider;
