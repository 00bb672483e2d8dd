//! Host connections: the per-host connection table, one connection's
//! handle, and host capacity.
//!
//! Other subsystems reach a host through [`HostTable`] (shared and
//! dedicated [`Connection`]s) and ask [`capacity`] what it has free.

pub mod capacity;
mod connection;
mod host_table;

pub use connection::Connection;
pub use host_table::{DEFAULT_CALL_TIMEOUT, HostOptions, HostTable};
