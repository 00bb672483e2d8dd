//! `cargo xtask squid-image`: the Squid container image of the
//! `kubernetes` provider's Pods, from the recipe in
//! [`sandbox_kit::squid_recipe`]: mmdebstrap installs Debian's `squid`
//! into a directory (no mounts, no container builder), [`oci`] packs it
//! as a docker-archive run as the `proxy` user. Cached outside the tree
//! by the recipe's key (`CACHE_ROOT/<key>/`, renamed into place last, so
//! an interrupted build never looks complete); the node imports it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use sandbox_kit::squid_recipe::{self, ARCHIVE_FILE, CACHE_ROOT, PACKAGES, REMOVE, VARIANT};

use super::oci::{self, Config, Layer};
use crate::image::mmdebstrap;
use crate::util::read;

/// `cargo xtask squid-image`: prints `<reference>  <archive>`.
pub fn run() -> Result<()> {
    let archive = ensure()?;
    println!("{}  {}", squid_recipe::reference(), archive.display());
    Ok(())
}

/// The current recipe's archive: cached, or built first (about half a
/// minute; needs root and Debian's archive).
pub fn ensure() -> Result<PathBuf> {
    let archive = squid_recipe::archive();
    if archive.is_file() {
        return Ok(archive);
    }
    let root = Path::new(CACHE_ROOT);
    std::fs::create_dir_all(root)
        .with_context(|| format!("cannot create {CACHE_ROOT} (run as root)"))?;
    let lock = File::create(root.join(".lock"))
        .with_context(|| format!("cannot create the lock file in {CACHE_ROOT}"))?;
    lock.lock().context("cannot lock the squid image cache")?;
    if archive.is_file() {
        return Ok(archive);
    }
    let key = squid_recipe::key();
    let work = root.join(format!(".build-{key}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let started = Instant::now();
    eprintln!(
        "squid-image: building {} (mmdebstrap)",
        squid_recipe::reference()
    );
    let result = build_in(&work, &key);
    let _ = std::fs::remove_dir_all(&work);
    result?;
    eprintln!(
        "squid-image: built in {:.0?}: {}",
        started.elapsed(),
        archive.display()
    );
    Ok(archive)
}

fn build_in(work: &Path, key: &str) -> Result<()> {
    let tree = work.join("tree");
    let out = work.join("out");
    std::fs::create_dir_all(&out)?;
    let c = mmdebstrap::command(VARIANT, PACKAGES, &tree);
    read(c).context("mmdebstrap failed")?;
    for p in REMOVE {
        let path = tree.join(p);
        if path.is_dir() {
            std::fs::remove_dir_all(&path)?;
        }
    }
    oci::build(
        &work.join("oci"),
        &squid_recipe::reference(),
        &[Layer::Tree(tree)],
        &Config {
            entrypoint: vec!["/usr/sbin/squid".into(), "-N".into()],
            cmd: Vec::new(),
            user: "13:13".into(),
            exposed_ports: vec![3128],
        },
        &out.join(ARCHIVE_FILE),
    )?;
    let dest = Path::new(CACHE_ROOT).join(key);
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::rename(&out, &dest).with_context(|| format!("cannot publish {}", dest.display()))?;
    Ok(())
}
