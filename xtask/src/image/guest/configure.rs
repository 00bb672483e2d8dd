//! Turns the bootstrapped tree into the proxy guest: the recipe's files,
//! moves and removals, units enabled and masked, a small initramfs, and the
//! manifest of installed packages.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sandbox_kit::guest_recipe::{ENABLE, FILES, MASK, MOVE, REMOVE};

use super::run_logged;
use crate::util::{cmd, read};

/// What the boot partition needs from the tree, and the manifest.
pub struct Boot {
    /// `/boot/vmlinuz-*` in the tree.
    pub kernel: PathBuf,
    /// `/boot/initrd.img-*` in the tree (rebuilt here).
    pub initrd: PathBuf,
    /// `dpkg-query` of every installed package: `name<TAB>version<TAB>arch`.
    pub manifest: String,
}

/// Configures `tree` in place.
pub fn run(tree: &Path, log: &Path) -> Result<Boot> {
    for (path, content) in FILES {
        let target = inside(tree, path);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&target, content)
            .with_context(|| format!("cannot write {}", target.display()))?;
    }
    for (from, to) in MOVE {
        std::fs::rename(inside(tree, from), inside(tree, to))
            .with_context(|| format!("cannot move {from} to {to} in the image"))?;
    }
    for path in REMOVE {
        if let Some(script) = path.strip_prefix("/etc/init.d/") {
            // Its rc?.d links go first, through Debian's own tool.
            run_logged(in_tree(tree, "update-rc.d", ["-f", script, "remove"]), log)?;
        }
        std::fs::remove_file(inside(tree, path))
            .with_context(|| format!("cannot remove {path} from the image"))?;
    }
    let mut enable = in_tree(tree, "systemctl", ["enable"]);
    enable.args(ENABLE);
    run_logged(enable, log)?;
    let mut mask = in_tree(tree, "systemctl", ["mask"]);
    mask.args(MASK);
    run_logged(mask, log)?;
    run_logged(in_tree(tree, "update-initramfs", ["-u", "-k", "all"]), log)?;
    let manifest = read(in_tree(
        tree,
        "dpkg-query",
        ["-W", "-f", "${Package}\t${Version}\t${Architecture}\n"],
    ))?;
    Ok(Boot {
        kernel: only(tree, "vmlinuz-")?,
        initrd: only(tree, "initrd.img-")?,
        manifest,
    })
}

/// `path` (absolute in the image) inside `tree`.
fn inside(tree: &Path, path: &str) -> PathBuf {
    tree.join(path.trim_start_matches('/'))
}

/// `chroot TREE PROGRAM ARGS...`, with a neutral environment.
fn in_tree<const N: usize>(tree: &Path, program: &str, args: [&str; N]) -> std::process::Command {
    let mut c = cmd("chroot", [tree.as_os_str()]);
    c.arg(program).args(args);
    c.env("DEBIAN_FRONTEND", "noninteractive")
        .env("LC_ALL", "C.UTF-8");
    c
}

/// The one file in the tree's /boot whose name starts with `prefix`.
fn only(tree: &Path, prefix: &str) -> Result<PathBuf> {
    let boot = tree.join("boot");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&boot)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            found.push(entry.path());
        }
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => bail!(
            "expected one {prefix}* in {}, found {}",
            boot.display(),
            found.len()
        ),
    }
}
