//! `cargo xtask guest-image [--force]`: builds the proxy guest image from
//! Debian packages, or finds it in the cache.
//!
//! ```text
//! mmdebstrap ──▶ root tree ──configure──▶ mkfs.ext4 -d ─┐
//!  (bookworm,     (chroot: systemctl,                    ├─▶ disk.raw ──▶ qcow2 + sha256
//!   no mounts)     update-initramfs)   mkfs.fat + mcopy ─┘   (sfdisk,      ──▶ rename into
//!                                      + syslinux             MBR code)        CACHE_ROOT/<key>/
//! ```
//!
//! No step mounts anything or uses a loop device: mmdebstrap runs with
//! `--skip=chroot/mount`, filesystems are written into the disk file at
//! their partitions' offsets, SYSLINUX is installed through mtools.
//!
//! The recipe and the cache key are [`sandbox_kit::guest_recipe`]. A build runs in
//! `CACHE_ROOT/.build-<key>-<pid>/` under an exclusive lock, and its output
//! directory is renamed to `CACHE_ROOT/<key>/` last, so an interrupted build
//! never looks complete; the next build removes its debris.

mod bootstrap;
mod configure;
mod disk;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sandbox_kit::guest_recipe::{
    self, CACHE_ROOT, CachedImage, IMAGE_FILE, MANIFEST_FILE, RECIPE_FILE, SHA256_FILE,
};

use crate::util::{cmd, read, sha256_file};

/// Where the log of the last failed build is kept (the build's own
/// directory is removed).
const FAILED_LOG: &str = "failed-build.log";
use crate::setup;

/// `cargo xtask guest-image [--force]`: prints `<sha256>  <path>` on stdout.
pub fn run(force: bool) -> Result<()> {
    let image = if force { build(true)? } else { ensure()? };
    println!("{}  {}", image.sha256, image.path.display());
    Ok(())
}

/// The image of the current recipe: from the cache (costs a file read), or
/// built first (minutes; needs root and Debian's archive).
///
/// # Errors
/// When the build fails; the cache is then left as it was.
pub fn ensure() -> Result<CachedImage> {
    if let Some(image) = hit()? {
        tidy();
        return Ok(image);
    }
    build(false)
}

/// Best effort, on a cache hit: removes an interrupted build's debris when
/// no build is running (the lock is free).
fn tidy() {
    let root = Path::new(CACHE_ROOT);
    let Ok(lock) = File::create(root.join(".lock")) else {
        return;
    };
    if lock.try_lock().is_ok()
        && let Err(e) = remove_debris(root)
    {
        eprintln!("guest-image: cannot tidy {CACHE_ROOT}: {e:#}");
    }
}

fn hit() -> Result<Option<CachedImage>> {
    let dir = guest_recipe::image_dir();
    let found = guest_recipe::cached_in(&dir)
        .with_context(|| format!("the cached guest image in {} is damaged", dir.display()))?;
    if let Some(image) = &found {
        eprintln!(
            "guest-image: cached: {} (sha256 {})",
            image.path.display(),
            image.sha256
        );
    }
    Ok(found)
}

/// Builds the image (again when `force`) and publishes it in the cache.
fn build(force: bool) -> Result<CachedImage> {
    let root = Path::new(CACHE_ROOT);
    std::fs::create_dir_all(root)
        .with_context(|| format!("cannot create {CACHE_ROOT} (run as root)"))?;
    let lock = File::create(root.join(".lock"))
        .with_context(|| format!("cannot create the lock file in {CACHE_ROOT}"))?;
    if lock.try_lock().is_err() {
        eprintln!("guest-image: another build holds {CACHE_ROOT}/.lock; waiting for it");
        lock.lock().context("cannot lock the guest image cache")?;
    }
    // Under the lock: a build that finished while we waited is a hit.
    if !force && let Some(image) = hit()? {
        return Ok(image);
    }
    remove_debris(root)?;
    let key = guest_recipe::key();
    let work = root.join(format!(".build-{key}-{}", std::process::id()));
    let result = build_in(&work, &key);
    if result.is_err() {
        let kept = root.join(FAILED_LOG);
        if std::fs::copy(work.join("out/build.log"), &kept).is_ok() {
            eprintln!("guest-image: the failed build's log: {}", kept.display());
        }
    }
    if let Err(e) = std::fs::remove_dir_all(&work)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        eprintln!("guest-image: cannot remove {}: {e}", work.display());
    }
    result
}

/// The steps, each timed; `work` holds everything until the output
/// directory is renamed into place.
fn build_in(work: &Path, key: &str) -> Result<CachedImage> {
    let mut progress = Progress::new(7);
    preflight()?;
    let tree = work.join("root");
    let out = work.join("out");
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let log = out.join("build.log");
    eprintln!(
        "guest-image: building {key} (Debian {}, {} packages); log: {}",
        guest_recipe::SUITE,
        guest_recipe::PACKAGES.len(),
        log.display()
    );

    progress.phase("bootstrap (mmdebstrap, downloads the packages)");
    bootstrap::run(&tree, &log)?;
    progress.phase("configure (files, units, initramfs, manifest)");
    let boot = configure::run(&tree, &log)?;
    std::fs::write(out.join(MANIFEST_FILE), &boot.manifest)?;
    progress.phase("root filesystem and boot partition");
    let raw = work.join("disk.raw");
    disk::assemble(&raw, &tree, &boot, &log)?;
    progress.phase("remove the root tree");
    std::fs::remove_dir_all(&tree).with_context(|| format!("cannot remove {}", tree.display()))?;
    progress.phase("qcow2 (compressed)");
    let image = out.join(IMAGE_FILE);
    disk::to_qcow2(&raw, &image, &log)?;
    std::fs::remove_file(&raw)?;
    progress.phase("sha256");
    let sha256 = sha256_file(&image)?;
    std::fs::write(out.join(SHA256_FILE), format!("{sha256}  {IMAGE_FILE}\n"))?;
    std::fs::write(out.join(RECIPE_FILE), guest_recipe::recipe_text())?;
    progress.phase("publish");
    let published = publish(&out, &guest_recipe::image_dir())?;
    let bytes = std::fs::metadata(published.join(IMAGE_FILE))?.len();
    progress.done();
    eprintln!(
        "guest-image: built {} ({:.0} MiB, sha256 {sha256}) in {:.0?}",
        published.join(IMAGE_FILE).display(),
        bytes as f64 / f64::from(1 << 20),
        progress.started.elapsed()
    );
    Ok(CachedImage {
        path: published.join(IMAGE_FILE),
        sha256,
    })
}

/// Root, and the host tools (installed by `cargo xtask setup`).
fn preflight() -> Result<()> {
    if read(cmd("id", ["-u"]))?.trim() != "0" {
        bail!("cargo xtask guest-image must run as root (mmdebstrap, chroot)");
    }
    if !setup::missing().is_empty() {
        setup::setup()?;
    }
    Ok(())
}

/// Renames `out` to `dest`; an existing `dest` (a forced rebuild) is moved
/// aside first and removed after.
fn publish(out: &Path, dest: &Path) -> Result<PathBuf> {
    let old = dest.with_extension("replaced");
    let replacing = dest.exists();
    if replacing {
        std::fs::rename(dest, &old)
            .with_context(|| format!("cannot move {} aside", dest.display()))?;
    }
    std::fs::rename(out, dest)
        .with_context(|| format!("cannot rename {} to {}", out.display(), dest.display()))?;
    if replacing {
        std::fs::remove_dir_all(&old)
            .with_context(|| format!("cannot remove {}", old.display()))?;
    }
    Ok(dest.to_owned())
}

/// Removes what interrupted builds left (called under the lock, so no build
/// is running).
fn remove_debris(root: &Path) -> Result<()> {
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".build-") || name.ends_with(".replaced") {
            eprintln!("guest-image: removing an interrupted build's {name}");
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Runs `c` with its output appended to `log`; on failure the error carries
/// the log's last lines.
fn run_logged(mut c: Command, log: &Path) -> Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    c.stdout(file.try_clone()?).stderr(file);
    let status = crate::util::status(&mut c)?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "`{}` failed: {status}; the end of {}:\n{}",
            c.get_program().to_string_lossy(),
            log.display(),
            tail.join("\n")
        );
    }
    Ok(())
}

/// Numbered phases with their elapsed times.
struct Progress {
    started: Instant,
    current: Option<(usize, &'static str, Instant)>,
    total: usize,
    count: usize,
}

impl Progress {
    fn new(total: usize) -> Self {
        Self {
            started: Instant::now(),
            current: None,
            total,
            count: 0,
        }
    }

    fn phase(&mut self, name: &'static str) {
        self.done();
        self.count += 1;
        eprintln!("guest-image: [{}/{}] {name}", self.count, self.total);
        self.current = Some((self.count, name, Instant::now()));
    }

    fn done(&mut self) {
        if let Some((n, name, at)) = self.current.take() {
            eprintln!(
                "guest-image: [{n}/{}] {name}: done in {} (total {})",
                self.total,
                short(at.elapsed()),
                short(self.started.elapsed())
            );
        }
    }
}

fn short(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}
