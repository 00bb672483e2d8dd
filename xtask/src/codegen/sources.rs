//! The generator's inputs, from Debian (not vendored into the repository):
//! libvirt's upstream tarball as Debian's source package ships it (the
//! `.x` protocol files and the client library's C sources) and the
//! `libvirt-dev` package (the API descriptions). Both are pinned by sha256, downloaded once into the cache
//! outside the work tree, and unpacked into a directory named by the pin.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::util::CACHE;
use crate::util::{cmd, run, sha256_file};

/// The libvirt release the generated code describes (the sandbox's
/// libvirtd, from bookworm-backports).
pub const LIBVIRT_VERSION: &str = "11.3.0";
const MIRROR: &str = "http://deb.debian.org/debian/pool/main/libv/libvirt";
/// Debian's copy of the upstream tarball (listed in
/// `libvirt_11.3.0-2~bpo12+1.dsc` with this digest).
const TARBALL: (&str, &str) = (
    "libvirt_11.3.0.orig.tar.xz",
    "6bcb0c42c4580436fea262ced56f68a6afe20f7390b1bea2116718cc034a0283",
);
/// The API descriptions (`/usr/share/libvirt/api/*.xml`).
const DEV_DEB: (&str, &str) = (
    "libvirt-dev_11.3.0-2~bpo12+1_amd64.deb",
    "6b35f576f3a62c10642ff9be503bf624b2cdda7d4f88e08f4a0bbe0faa7d878b",
);
/// The protocol files the generator reads, inside the tarball.
pub const PROTOCOLS: [&str; 3] = [
    "src/remote/remote_protocol.x",
    "src/remote/qemu_protocol.x",
    "src/remote/lxc_protocol.x",
];
/// The client library's sources, inside the tarball (a `tar` pattern):
/// read for what the C library does to a call's flags before sending it.
const CLIENT_SOURCES: &str = "src/libvirt*.c";
/// Names the layout of the unpacked cache directory; changed whenever
/// `ensure` unpacks other files, so an older cache is not taken for
/// complete.
const LAYOUT: &str = "v2";
/// The API descriptions, inside the package.
pub const APIS: [&str; 3] = [
    "usr/share/libvirt/api/libvirt-api.xml",
    "usr/share/libvirt/api/libvirt-qemu-api.xml",
    "usr/share/libvirt/api/libvirt-lxc-api.xml",
];

/// Where the inputs are unpacked (downloading and unpacking them first
/// when needed): `protocol/<file>.x`, `client/libvirt-*.c` and
/// `api/<file>.xml`.
pub fn ensure() -> Result<PathBuf> {
    let dir = PathBuf::from(CACHE).join(format!(
        "libvirt-{LIBVIRT_VERSION}-{}-{LAYOUT}",
        &TARBALL.1[..16]
    ));
    let done = dir.join(".complete");
    if done.exists() {
        return Ok(dir);
    }
    let tarball = download(TARBALL)?;
    let deb = download(DEV_DEB)?;
    let scratch = dir.with_file_name(format!("libvirt-{LIBVIRT_VERSION}.partial"));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.join("protocol"))?;
    std::fs::create_dir_all(scratch.join("api"))?;
    let top = format!("libvirt-{LIBVIRT_VERSION}");
    let mut tar = cmd("tar", ["-xJf"]);
    tar.arg(&tarball)
        .arg("-C")
        .arg(scratch.join("protocol"))
        .arg("--strip-components=3")
        .args(PROTOCOLS.iter().map(|p| format!("{top}/{p}")));
    run(tar)?;
    std::fs::create_dir_all(scratch.join("client"))?;
    let mut tar = cmd("tar", ["-xJf"]);
    tar.arg(&tarball)
        .arg("-C")
        .arg(scratch.join("client"))
        .arg("--strip-components=2")
        .arg("--wildcards")
        .arg(format!("{top}/{CLIENT_SOURCES}"));
    run(tar)?;
    let mut deb_x = cmd("dpkg-deb", ["-x"]);
    deb_x.arg(&deb).arg(scratch.join("deb"));
    run(deb_x)?;
    for api in APIS {
        let from = scratch.join("deb").join(api);
        let name = from.file_name().context("API file name")?;
        std::fs::rename(&from, scratch.join("api").join(name))
            .with_context(|| format!("{} is not in {}", api, deb.display()))?;
    }
    std::fs::remove_dir_all(scratch.join("deb"))?;
    std::fs::write(scratch.join(".complete"), "")?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&scratch, &dir)?;
    Ok(dir)
}

/// The file in the cache, downloaded when missing and checked against its
/// pin either way.
fn download((name, digest): (&str, &str)) -> Result<PathBuf> {
    let dir = PathBuf::from(CACHE).join("src");
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create {} (run as root)", dir.display()))?;
    let path = dir.join(name);
    if !path.exists() || sha256_file(&path)? != digest {
        let url = format!("{MIRROR}/{}", name.replace('~', "%7e").replace('+', "%2b"));
        eprintln!("codegen: downloading {url}");
        let partial = dir.join(format!("{name}.partial"));
        let mut curl = cmd("curl", ["-sSfL", "--retry", "3", "-o"]);
        curl.arg(&partial).arg(&url);
        run(curl).with_context(|| {
            format!(
                "Debian no longer serves {name}? update the pins in xtask/src/codegen/sources.rs"
            )
        })?;
        std::fs::rename(&partial, &path)?;
    }
    let got = sha256_file(&path)?;
    if got != digest {
        bail!("{} has sha256 {got}, expected {digest}", path.display());
    }
    Ok(path)
}

/// The client library's C files, unpacked: name → text.
pub fn client_sources(dir: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let client = dir.join("client");
    for entry in
        std::fs::read_dir(&client).with_context(|| format!("cannot list {}", client.display()))?
    {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".c") {
            out.push((name.clone(), read(dir, &format!("client/{name}"))?));
        }
    }
    out.sort();
    if out.is_empty() {
        bail!("no client sources under {}", client.display());
    }
    Ok(out)
}

/// The text of an unpacked input.
pub fn read(dir: &Path, relative: &str) -> Result<String> {
    let path = dir.join(relative);
    std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
}
