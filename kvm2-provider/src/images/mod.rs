//! The base image cache and what it is built from: download, marker, single flight, the fill lease and its fence, base users, pool space.

pub mod base_users;
pub(crate) mod fenced_read;
pub mod fill_lease;
pub mod image_cache;
pub mod image_marker;
pub mod image_source;
pub mod pool_space;
pub mod single_flight;
