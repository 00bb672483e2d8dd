//! The base image cache and what it is built from: download, marker, single
//! flight, the fill lease and its fence, base users, pool space.
//!
//! Other subsystems ask [`ImageCache`] for a [`BaseImage`] on a host; the
//! rest of the folder is the cache's own machinery. [`ImageSource`] (the
//! hashed, capped download), [`ImageMarker`] and the fill [`Lease`] are
//! exported for the crate's tests as well.

mod base_users;
mod fenced_read;
mod fill_lease;
mod image_cache;
mod image_marker;
mod image_source;
mod pool_space;
mod single_flight;

pub use fill_lease::{Fenced, Lease, LeaseTiming};
pub use image_cache::{BaseImage, CacheOptions, ImageCache, refuse_placeholder};
pub use image_marker::ImageMarker;
pub use image_source::{Download, ImageSource, SourceLimits};
