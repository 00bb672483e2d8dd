//! Storage pools and volumes: the pool calls (`PoolOps`), per-entry volume
//! names (invariant 5) and volume XML.
//!
//! Other subsystems name volumes with [`BaseNames`] and [`VmVolumes`],
//! describe them with [`volume_xml`] and make, read and remove them
//! through `storage::PoolOps`.

mod volume_names;
pub mod volume_xml;
mod volumes;

pub use volume_names::{BaseNames, VmVolumes};
pub(crate) use volumes::PoolOps;
