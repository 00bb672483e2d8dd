//! The one mmdebstrap invocation both image builds use (the guest's root
//! tree and the Squid container's): Debian's suite and mirrors from the
//! guest recipe, documentation left out but the licences, as root, with no
//! mounts in the tree.

use std::path::Path;
use std::process::Command;

use sandbox_kit::guest_recipe::{DPKG_EXCLUDES, DPKG_INCLUDES, MIRRORS, SUITE};

use crate::util::cmd;

/// `mmdebstrap` of `variant` plus `packages` into `tree` (which must not
/// exist yet).
///
/// `--skip=chroot/mount`: no /proc, /sys or /dev mounts in the chroot (the
/// packages' maintainer scripts do not need them, and a CI machine may not
/// allow mounts). mmdebstrap's cleanup removes apt's lists and caches.
pub fn command(variant: &str, packages: &[&str], tree: &Path) -> Command {
    let mut c = cmd(
        "mmdebstrap",
        [
            "--mode=root",
            &format!("--variant={variant}"),
            "--skip=chroot/mount",
        ],
    );
    for p in DPKG_EXCLUDES {
        c.arg(format!("--dpkgopt=path-exclude={p}"));
    }
    for p in DPKG_INCLUDES {
        c.arg(format!("--dpkgopt=path-include={p}"));
    }
    c.arg(format!("--include={}", packages.join(",")));
    c.arg(SUITE).arg(tree).args(MIRRORS);
    c.env("DEBIAN_FRONTEND", "noninteractive");
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_names_variant_packages_tree_and_mirrors_in_order() {
        let c = command("essential", &["squid", "curl"], Path::new("/t"));
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            &args[..3],
            ["--mode=root", "--variant=essential", "--skip=chroot/mount"]
        );
        assert!(args.contains(&"--include=squid,curl".to_owned()));
        let tree = args.iter().position(|a| a == "/t").unwrap();
        assert_eq!(args[tree - 1], SUITE);
        assert_eq!(&args[tree + 1..], MIRRORS);
    }
}
