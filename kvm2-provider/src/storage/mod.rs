//! Storage pools and volumes: the pool calls (`PoolOps`), per-entry volume names (invariant 5) and volume XML.

pub mod volume_names;
pub mod volume_xml;
pub(crate) mod volumes;
