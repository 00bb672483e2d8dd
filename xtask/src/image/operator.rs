//! `cargo xtask image`: the operator's image, as `operator/Dockerfile`
//! builds it (the release binary, the glibc it links, CA roots, user
//! 65532), assembled without docker and written as a docker-archive that
//! `docker load`, `podman load` and `ctr images import` accept. The demo
//! imports the same image into its node.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use super::oci::{self, Config, Layer};
use crate::util::{cmd, run, workspace};

/// The image name deploy/ uses (its kustomization's `images:` entry).
pub const NAME: &str = "egress-proxies-operator";

/// `cargo xtask image [--out PATH]`: builds the release binary and the
/// image `egress-proxies-operator:<version>`; prints the archive's path.
pub fn run_image(out: Option<PathBuf>) -> Result<()> {
    let binary = build_release(&workspace())?;
    let version = env!("CARGO_PKG_VERSION");
    let reference = format!("{NAME}:{version}");
    let target = target_dir(&workspace());
    let out = out.unwrap_or_else(|| target.join(format!("{NAME}-{version}.tar")));
    build(&binary, &reference, &target.join("image-work"), &out)?;
    println!("{reference}  {}", out.display());
    eprintln!(
        "image: load it with `docker load -i {0}` (or `podman load -i {0}`, `ctr images import {0}`), \
         push it, then `cd deploy && kustomize edit set image {NAME}=REGISTRY/{NAME}:{version}`",
        out.display()
    );
    Ok(())
}

/// The first 12 hex digits of `binary`'s sha256 (a tag that changes with
/// every build).
pub fn binary_digest(binary: &Path) -> Result<String> {
    let bytes = std::fs::read(binary).with_context(|| format!("read {}", binary.display()))?;
    Ok(Sha256::digest(&bytes)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Writes the image of `binary`, named `reference`, to the archive `out`
/// (`work` is scratch space).
pub fn build(binary: &Path, reference: &str, work: &Path, out: &Path) -> Result<()> {
    let mut layers = vec![
        Layer::File {
            from: binary.to_owned(),
            to: "usr/local/bin/operator".into(),
        },
        Layer::Text {
            to: "etc/passwd".into(),
            content: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n".into(),
        },
        Layer::Text {
            to: "etc/group".into(),
            content: "root:x:0:\nnonroot:x:65532:\n".into(),
        },
        Layer::Dir("tmp".into()),
    ];
    for lib in oci::shared_libraries(binary)? {
        layers.push(Layer::File {
            to: lib.strip_prefix("/").unwrap_or(&lib).to_owned(),
            from: lib,
        });
    }
    let roots = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if roots.exists() {
        layers.push(Layer::File {
            from: roots.to_owned(),
            to: "etc/ssl/certs/ca-certificates.crt".into(),
        });
    }
    oci::build(
        work,
        reference,
        &layers,
        &Config {
            entrypoint: vec!["/usr/local/bin/operator".into()],
            cmd: vec![
                "run".into(),
                "--providers-config=/etc/egress-proxies/config/providers-config.yaml".into(),
            ],
            user: "65532:65532".into(),
            exposed_ports: vec![8080],
        },
        out,
    )
}

/// Builds the release binary the image carries (what the Dockerfile builds).
pub fn build_release(workspace: &Path) -> Result<PathBuf> {
    println!("image: building the operator (release, as the Dockerfile does)");
    run(cmd(
        "cargo",
        ["build", "--release", "--locked", "-p", "operator"],
    ))?;
    Ok(target_dir(workspace).join("release/operator"))
}

fn target_dir(workspace: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
}
