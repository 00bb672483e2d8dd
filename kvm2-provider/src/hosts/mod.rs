//! Host connections: the per-host connection table, one connection's handle, and host capacity.

pub mod connection;
pub mod host_capacity;
pub mod host_table;
