//! The Squid container image's recipe (the `kubernetes` provider's Pods
//! run it): Debian's `squid` package and what it needs, nothing else, from
//! the same suite and mirrors as the guest image, run as Debian's `proxy`
//! user. Data only: xtask's `image::squid` builds it; tests name it with
//! [`reference`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::guest_recipe::{DPKG_EXCLUDES, DPKG_INCLUDES, MIRRORS, SUITE, hex};

/// Where built images are kept, one directory per key.
pub const CACHE_ROOT: &str = "/var/cache/egress-proxies/squid-image";
/// The docker-archive in a key's directory.
pub const ARCHIVE_FILE: &str = "squid-image.tar";
/// Bumped whenever the build steps change the image.
pub const BUILD_VERSION: u32 = 1;
/// mmdebstrap's variant: the Essential packages, then [`PACKAGES`].
pub const VARIANT: &str = "essential";
/// Installed on top of the variant.
pub const PACKAGES: &[&str] = &["squid"];
/// Removed from the tree before it is packed (apt's state and what only an
/// init system or a package manager reads).
pub const REMOVE: &[&str] = &[
    "var/lib/apt/lists",
    "var/cache/apt",
    "var/cache/debconf",
    "var/log",
    "etc/init.d",
    "etc/logrotate.d",
];
/// The image's name (the tag is the key).
pub const NAME: &str = "localhost/egress-proxies/squid";

/// The recipe as text: what [`key`] hashes.
pub fn recipe_text() -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(s, "build-version {BUILD_VERSION}");
    let _ = writeln!(s, "suite {SUITE}");
    let _ = writeln!(s, "variant {VARIANT}");
    for m in MIRRORS {
        let _ = writeln!(s, "mirror {m}");
    }
    for p in PACKAGES {
        let _ = writeln!(s, "package {p}");
    }
    for p in DPKG_EXCLUDES {
        let _ = writeln!(s, "dpkg-exclude {p}");
    }
    for p in DPKG_INCLUDES {
        let _ = writeln!(s, "dpkg-include {p}");
    }
    for p in REMOVE {
        let _ = writeln!(s, "remove {p}");
    }
    s
}

/// The cache key: the first 16 hex digits of the recipe's sha256.
pub fn key() -> String {
    let mut k = hex(&Sha256::digest(recipe_text()));
    k.truncate(16);
    k
}

/// The image reference the node knows it by: `NAME:<key>`.
pub fn reference() -> String {
    format!("{NAME}:{}", key())
}

/// The archive of the current recipe (it may not exist yet).
pub fn archive() -> PathBuf {
    Path::new(CACHE_ROOT).join(key()).join(ARCHIVE_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_tagged_with_the_key() {
        assert_eq!(key().len(), 16);
        assert!(reference().ends_with(&format!(":{}", key())));
        assert!(recipe_text().contains("package squid\n"));
        assert!(archive().starts_with(CACHE_ROOT));
    }
}
