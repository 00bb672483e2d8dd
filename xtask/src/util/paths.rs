//! Where things are: the workspace this tool runs in, and the cache it keeps
//! outside the work tree.

use std::path::{Path, PathBuf};

/// Where built binaries, downloaded sources and images are kept between
/// runs (outside the work tree, so a fresh clone finds them).
pub const CACHE: &str = "/var/cache/egress-proxies";

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
