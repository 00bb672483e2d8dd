//! Builds Kubernetes' binaries from Debian's `kubernetes` source package, once.
//!
//! No registry this machine reaches ships a runnable kube-apiserver or
//! kubelet, so `cargo xtask setup` builds v1.20.2 from bookworm's source
//! package with Debian's Go 1.19 and Kubernetes' own `make WHAT=...`
//! (offline: `GOPROXY=off`, everything is vendored). One fix is applied first:
//! the vendored `modern-go/reflect2` 1.0.1 crashes under Go ≥ 1.18 when JSON
//! encodes a map, so it is replaced by Debian's 1.0.2.
//!
//! Two builds, cached apart so neither invalidates the other: [`APISERVER`]
//! (what every test needs) and [`NODE`] (kube-controller-manager,
//! kube-scheduler, kubelet and kube-proxy: what runs the operator's pod in
//! the demo and routes Services' cluster IPs on the node).
//! Each is cached outside the work tree under [`CACHE`], in a directory
//! named by its key: the source's `.dsc` digest, the build's name and its
//! recipe. A cache hit is one `stat`. A build is made in a scratch
//! directory and renamed into place, so an interrupted build never looks
//! complete; both share Go's build cache.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::util::{CACHE, cmd, run, sha256_file};

/// The source package version, pinned so the cache key is known offline.
const VERSION: &str = "1.20.5+really1.20.2-1.1+deb12u1";
/// The Kubernetes version that package builds (what the binaries report):
/// the one place the sandbox's Kubernetes version is written.
pub const KUBE_VERSION: &str = "v1.20.2";
/// sha256 of that version's `.dsc` (which lists the tarballs' digests).
const DSC_SHA256: &str = "19fa1da5aefcef673894ac9511986bd98a14410cf8eea0b626613c30df435257";
/// The deb-src entry `apt-get source` needs (bookworm main only).
const SRC_LIST: &str = "/etc/apt/sources.list.d/egress-proxies-src.sources";
const SRC_ENTRY: &str = "Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
";
const GO_ROOT: &str = "/usr/lib/go-1.19";
const REFLECT2: &str = "/usr/share/gocode/src/github.com/modern-go/reflect2";

/// One `make WHAT=...` and the binaries it leaves in `_output/bin`.
pub struct Build {
    /// Names the cache directory (with the recipe).
    name: &'static str,
    /// Bumped whenever the build steps change, so old binaries are not reused.
    recipe: &'static str,
    /// The binaries, as `cmd/<binary>` in the tree.
    binaries: &'static [&'static str],
    /// What the progress lines say it takes.
    expect: &'static str,
}

/// kube-apiserver (its cache key predates [`NODE`] and is kept: `r1`).
pub const APISERVER: Build = Build {
    name: "",
    recipe: "r1",
    binaries: &["kube-apiserver"],
    expect: "about 11 min cold on 2 cores",
};

/// What turns the API server into a one-node cluster.
pub const NODE: Build = Build {
    name: "node-",
    recipe: "r2",
    binaries: &[
        "kube-controller-manager",
        "kube-scheduler",
        "kubelet",
        "kube-proxy",
    ],
    expect: "about 4 min with Go's cache warm from kube-apiserver's build",
};

impl Build {
    /// The cached binary `name` of this build (it may not exist yet).
    pub fn path(&self, name: &str) -> PathBuf {
        self.key_dir().join(name)
    }

    /// Whether every binary is cached.
    pub fn cached(&self) -> bool {
        self.binaries.iter().all(|b| self.path(b).exists())
    }

    fn key_dir(&self) -> PathBuf {
        PathBuf::from(CACHE).join("kube").join(format!(
            "{KUBE_VERSION}-{}-{}{}",
            &DSC_SHA256[..16],
            self.name,
            self.recipe
        ))
    }

    fn what(&self) -> String {
        let cmds: Vec<String> = self.binaries.iter().map(|b| format!("cmd/{b}")).collect();
        format!("WHAT={}", cmds.join(" "))
    }
}

/// The cached kube-apiserver binary (it may not exist yet).
pub fn apiserver_path() -> PathBuf {
    APISERVER.path("kube-apiserver")
}

/// What a build measured, kept beside the binary.
#[derive(Serialize)]
struct BuildInfo {
    source: String,
    dsc_sha256: &'static str,
    binaries: &'static [&'static str],
    recipe: &'static str,
    seconds: u64,
    peak_rss_mib: u64,
    binary_bytes: u64,
}

/// Builds `build` unless the cache has all its binaries.
pub fn ensure(build: &Build) -> Result<()> {
    if build.cached() {
        return Ok(());
    }
    let started = Instant::now();
    let names = build.binaries.join(", ");
    eprintln!(
        "setup: building {names} {KUBE_VERSION} from Debian's source ({}; cached in {})",
        build.expect,
        build.key_dir().display()
    );
    let sources = fetch_source()?;
    let scratch = PathBuf::from(CACHE)
        .join("kube")
        .join(format!("build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let peak = match build_in(&scratch, &sources, &build.what()) {
        Ok(peak) => peak,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&scratch);
            return Err(e);
        }
    };
    let out = scratch.join("out");
    std::fs::create_dir_all(&out)?;
    let mut bytes = 0;
    for binary in build.binaries {
        let built = scratch.join("src/_output/bin").join(binary);
        std::fs::rename(&built, out.join(binary))
            .with_context(|| format!("cannot move {}", built.display()))?;
        bytes += std::fs::metadata(out.join(binary))?.len();
    }
    let info = BuildInfo {
        source: format!("kubernetes {VERSION}"),
        dsc_sha256: DSC_SHA256,
        binaries: build.binaries,
        recipe: build.recipe,
        seconds: started.elapsed().as_secs(),
        peak_rss_mib: peak / (1024 * 1024),
        binary_bytes: bytes,
    };
    std::fs::write(out.join("build.json"), serde_json::to_string_pretty(&info)?)?;
    let dest = build.key_dir();
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::rename(&out, &dest).context("cannot publish the build")?;
    let _ = std::fs::remove_dir_all(&scratch);
    eprintln!(
        "setup: {names} built in {:.0?}: peak memory {} MiB (whole build tree), {} MiB of binaries, in {}",
        started.elapsed(),
        info.peak_rss_mib,
        info.binary_bytes / (1024 * 1024),
        dest.display()
    );
    Ok(())
}

/// Downloads the source package (once) and checks it against the pin.
fn fetch_source() -> Result<PathBuf> {
    let dir = PathBuf::from(CACHE).join("src");
    let dsc = dir.join(format!("kubernetes_{VERSION}.dsc"));
    if !dsc.exists() || sha256_file(&dsc)? != DSC_SHA256 {
        std::fs::create_dir_all(&dir)?;
        if !Path::new(SRC_LIST).exists() {
            eprintln!("setup: adding Debian source packages to apt ({SRC_LIST})");
            std::fs::write(SRC_LIST, SRC_ENTRY)
                .with_context(|| format!("cannot write {SRC_LIST} (run as root)"))?;
            run(cmd("apt-get", ["update", "-q"]))?;
        }
        let mut get = cmd(
            "apt-get",
            [
                "source",
                "--download-only",
                &format!("kubernetes={VERSION}"),
            ],
        );
        get.current_dir(&dir);
        if let Err(e) = run(get) {
            bail!(
                "{e:#}: Debian no longer serves kubernetes {VERSION}? \
                 update VERSION and DSC_SHA256 in xtask/src/setup/kube_build.rs"
            );
        }
        let got = sha256_file(&dsc)?;
        if got != DSC_SHA256 {
            bail!("{} has sha256 {got}, expected {DSC_SHA256}", dsc.display());
        }
    }
    // dpkg-source checks the tarballs against the digests the .dsc lists.
    Ok(dsc)
}

/// Unpacks, patches and builds in `scratch`; returns the peak memory seen.
fn build_in(scratch: &Path, dsc: &Path, what: &str) -> Result<u64> {
    let tree = scratch.join("src");
    eprintln!("setup: [kube] unpacking the source");
    run(cmd(
        "dpkg-source",
        [
            "--no-check".as_ref(),
            "-x".as_ref(),
            dsc.as_os_str(),
            tree.as_os_str(),
        ],
    ))?;
    eprintln!("setup: [kube] replacing vendored reflect2 1.0.1 by Debian's 1.0.2");
    let vendored = tree.join("vendor/github.com/modern-go/reflect2");
    std::fs::remove_dir_all(&vendored)
        .with_context(|| format!("cannot remove {}", vendored.display()))?;
    run(cmd(
        "cp",
        ["-r".as_ref(), REFLECT2.as_ref(), vendored.as_os_str()],
    ))?;
    let gopath = scratch.join("gopath");
    let link = gopath.join("src/k8s.io/kubernetes");
    std::fs::create_dir_all(gopath.join("src/k8s.io"))?;
    std::os::unix::fs::symlink(&tree, &link)?;

    let mut make = cmd("make", [what]);
    let path = format!(
        "{GO_ROOT}/bin:{}",
        std::env::var("PATH").unwrap_or_default()
    );
    make.current_dir(&link)
        .env("GOROOT", GO_ROOT)
        .env("GOPATH", &gopath)
        .env("PATH", path)
        .env("CGO_ENABLED", "0")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env("GOCACHE", PathBuf::from(CACHE).join("go-build"))
        .env("KUBE_VERBOSE", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    eprintln!("setup: [kube] make {what} (progress every 30 s)");
    let mut child = make.spawn().context("cannot run make")?;
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (peak, done, pid) = (peak.clone(), done.clone(), child.id());
        std::thread::spawn(move || watch(pid, &peak, &done))
    };
    let mut tails = Vec::new();
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        tails.push(std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                eprintln!("setup: [kube] {line}");
            }
        }));
    }
    let status = child.wait();
    done.store(true, Ordering::Relaxed);
    for t in tails {
        let _ = t.join();
    }
    let _ = watcher.join();
    let status = status.context("make did not run")?;
    if !status.success() {
        bail!("building Kubernetes ({what}) failed: make exited with {status}");
    }
    Ok(peak.load(Ordering::Relaxed))
}

/// Prints elapsed time and the build tree's memory every 30 s; records the peak.
fn watch(root: u32, peak: &AtomicU64, done: &AtomicBool) {
    let started = Instant::now();
    let mut last_print = Instant::now();
    while !done.load(Ordering::Relaxed) {
        let rss = tree_rss(root);
        peak.fetch_max(rss, Ordering::Relaxed);
        if last_print.elapsed() >= Duration::from_secs(30) {
            eprintln!(
                "setup: [kube] building… {:.0?} elapsed, {} MiB in use",
                started.elapsed(),
                rss / (1024 * 1024)
            );
            last_print = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Resident memory of `root` and all its descendants, in bytes.
fn tree_rss(root: u32) -> u64 {
    let mut parent_of = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name, which is in parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ppid = fields
            .get(1)
            .and_then(|s| s.parse::<u32>().ok())
            .unwrap_or(0);
        let rss_pages = fields
            .get(21)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        parent_of.push((pid, ppid, rss_pages));
    }
    let mut inside = vec![root];
    let mut total = 0;
    let mut changed = true;
    while changed {
        changed = false;
        for (pid, ppid, _) in &parent_of {
            if inside.contains(ppid) && !inside.contains(pid) {
                inside.push(*pid);
                changed = true;
            }
        }
    }
    for (pid, _, pages) in &parent_of {
        if inside.contains(pid) {
            total += pages * 4096;
        }
    }
    total
}
