//! The root tree: mmdebstrap installs the recipe's packages from Debian's
//! archive into a directory, as root, without mounting anything in it.

use std::path::Path;

use anyhow::Result;
use sandbox_kit::guest_recipe::{DPKG_EXCLUDES, DPKG_INCLUDES, MIRRORS, PACKAGES, SUITE, VARIANT};

use super::run_logged;
use crate::util::cmd;

/// Runs mmdebstrap into `tree` (which must not exist yet).
///
/// `--skip=chroot/mount`: no /proc, /sys or /dev mounts in the chroot (the
/// packages' maintainer scripts do not need them, and a CI machine may not
/// allow mounts). mmdebstrap's cleanup removes apt's lists and caches.
pub fn run(tree: &Path, log: &Path) -> Result<()> {
    let mut c = cmd(
        "mmdebstrap",
        [
            "--mode=root",
            &format!("--variant={VARIANT}"),
            "--skip=chroot/mount",
        ],
    );
    for p in DPKG_EXCLUDES {
        c.arg(format!("--dpkgopt=path-exclude={p}"));
    }
    for p in DPKG_INCLUDES {
        c.arg(format!("--dpkgopt=path-include={p}"));
    }
    c.arg(format!("--include={}", PACKAGES.join(",")));
    c.arg(SUITE).arg(tree).args(MIRRORS);
    c.env("DEBIAN_FRONTEND", "noninteractive");
    run_logged(c, log)
}
