//! The provider's side of libvirt-rpc: observed calls, error classes, domain states, and the domain calls with the one ownership check (`DomainOps`).

pub(crate) mod domains;
pub mod libvirt_errors;
pub mod observe;
pub mod state;
