//! The base image cache (work in progress).

use std::sync::Arc;
use std::time::Duration;

use provider_api::Identifier;

use crate::host_table::HostTable;
use crate::image_source::ImageSource;

/// Budgets of the image cache.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CacheOptions {
    /// Bound on one cold fill (download, upload, verify, publish).
    pub fill_budget: Duration,
    /// Space left free in the pool beyond the image.
    pub headroom: u64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            fill_budget: Duration::from_secs(45 * 60),
            headroom: crate::pool_space::DEFAULT_HEADROOM,
        }
    }
}

/// Base images per (entry, host, key).
pub struct ImageCache {
    #[allow(dead_code)]
    entry: Identifier,
    #[allow(dead_code)]
    hosts: Arc<HostTable>,
    #[allow(dead_code)]
    source: ImageSource,
    #[allow(dead_code)]
    options: CacheOptions,
}

impl ImageCache {
    /// A cache for entry `entry`.
    pub fn new(
        entry: Identifier,
        hosts: Arc<HostTable>,
        source: ImageSource,
        options: CacheOptions,
    ) -> Self {
        Self {
            entry,
            hosts,
            source,
            options,
        }
    }
}
