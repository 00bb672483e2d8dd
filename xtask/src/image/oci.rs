//! Container images without a registry or a container builder: one layer
//! tarred from a root filesystem assembled here, its config, and a
//! `manifest.json`, packed as the docker-archive tarball `ctr images import`
//! (and `docker load`) read.
//!
//! The layer is reproducible for the same files: names sorted, times zero,
//! owner root. Its digest is the config's `diff_id`; the config's own digest
//! names it in the archive.

use std::path::{Path, PathBuf};

use std::ffi::OsStr;
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::util::sha256_file;

/// What goes into the root filesystem.
pub enum Layer {
    /// A file copied in (following symlinks), mode kept.
    File {
        /// On this machine.
        from: PathBuf,
        /// Inside the image, relative to `/`.
        to: PathBuf,
    },
    /// A file written with `content`, mode 0644.
    Text {
        /// Inside the image, relative to `/`.
        to: PathBuf,
        /// Its bytes.
        content: String,
    },
    /// An empty directory, mode 1777 (like `/tmp`).
    Dir(PathBuf),
    /// A whole root tree (owners, modes and links kept), copied in at `/`.
    Tree(PathBuf),
}

/// The image config's runtime part.
pub struct Config {
    /// `ENTRYPOINT`.
    pub entrypoint: Vec<String>,
    /// `CMD`.
    pub cmd: Vec<String>,
    /// `USER` (`uid:gid`).
    pub user: String,
    /// `EXPOSE`d TCP ports.
    pub exposed_ports: Vec<u16>,
}

/// Builds the image named `reference` (e.g. `localhost/name:tag`) from
/// `files` into the docker-archive `out`, using `work` as scratch.
pub fn build(
    work: &Path,
    reference: &str,
    files: &[Layer],
    config: &Config,
    out: &Path,
) -> Result<()> {
    let _ = std::fs::remove_dir_all(work);
    let rootfs = work.join("rootfs");
    let archive = work.join("archive");
    std::fs::create_dir_all(&rootfs)?;
    std::fs::create_dir_all(&archive)?;
    for f in files {
        place(&rootfs, f)?;
    }
    let layer = archive.join("layer.tar");
    read(
        "tar",
        [
            "--sort=name".as_ref(),
            "--mtime=@0".as_ref(),
            "--owner=0".as_ref(),
            "--group=0".as_ref(),
            "--numeric-owner".as_ref(),
            "-C".as_ref(),
            rootfs.as_os_str(),
            "-cf".as_ref(),
            layer.as_os_str(),
            ".".as_ref(),
        ],
    )?;
    let diff_id = sha256_file(&layer)?;
    let config_json = config_json(config, &diff_id)?;
    let config_digest = hex(&Sha256::digest(config_json.as_bytes()));
    let config_name = format!("{config_digest}.json");
    std::fs::write(archive.join(&config_name), &config_json)?;
    let manifest = serde_json::json!([{
        "Config": config_name,
        "RepoTags": [reference],
        "Layers": ["layer.tar"],
    }]);
    std::fs::write(
        archive.join("manifest.json"),
        serde_json::to_string(&manifest)?,
    )?;
    read(
        "tar",
        [
            "-C".as_ref(),
            archive.as_os_str(),
            "-cf".as_ref(),
            out.as_os_str(),
            "manifest.json".as_ref(),
            config_name.as_ref(),
            "layer.tar".as_ref(),
        ],
    )?;
    let _ = std::fs::remove_dir_all(work);
    Ok(())
}

fn place(rootfs: &Path, f: &Layer) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let inside = |to: &Path| rootfs.join(to.strip_prefix("/").unwrap_or(to));
    match f {
        Layer::File { from, to } => {
            let dest = inside(to);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::copy(from, &dest)
                .with_context(|| format!("cannot copy {} into the image", from.display()))?;
        }
        Layer::Text { to, content } => {
            let dest = inside(to);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&dest, content)?;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644))?;
        }
        Layer::Dir(to) => {
            let dest = inside(to);
            std::fs::create_dir_all(&dest)?;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o1777))?;
        }
        Layer::Tree(from) => {
            let mut source = from.clone().into_os_string();
            source.push("/.");
            read(
                "cp",
                ["-a".as_ref(), source.as_os_str(), rootfs.as_os_str()],
            )?;
        }
    }
    Ok(())
}

fn config_json(config: &Config, diff_id: &str) -> Result<String> {
    let ports: serde_json::Map<String, serde_json::Value> = config
        .exposed_ports
        .iter()
        .map(|p| (format!("{p}/tcp"), serde_json::json!({})))
        .collect();
    let doc = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": config.user,
            "Entrypoint": config.entrypoint,
            "Cmd": config.cmd,
            "ExposedPorts": ports,
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
        },
        "rootfs": { "type": "layers", "diff_ids": [format!("sha256:{diff_id}")] },
    });
    Ok(serde_json::to_string(&doc)?)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The shared libraries `binary` loads, with the dynamic loader, as `ldd`
/// resolves them on this machine (paths as the binary will look them up).
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let out = read("ldd", [binary])?;
    let mut libs = Vec::new();
    for line in out.lines() {
        let line = line.trim();
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` or
        // `/lib64/ld-linux-x86-64.so.2 (0x...)`; vdso has no file.
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

/// Runs `program ARGS` quietly; its stdout, or an error with its stderr.
fn read<I, S>(program: &str, args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} failed: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_names_its_layer_by_the_digest_docker_and_containerd_check() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("hello");
        std::fs::write(&bin, b"#!/bin/sh\necho hi\n").unwrap();
        let out = dir.path().join("image.tar");
        build(
            &dir.path().join("work"),
            "localhost/test:1",
            &[
                Layer::File {
                    from: bin,
                    to: "/usr/local/bin/hello".into(),
                },
                Layer::Text {
                    to: "etc/passwd".into(),
                    content: "nonroot:x:65532:65532::/:/sbin/nologin\n".into(),
                },
                Layer::Dir("tmp".into()),
            ],
            &Config {
                entrypoint: vec!["/usr/local/bin/hello".into()],
                cmd: vec!["run".into()],
                user: "65532:65532".into(),
                exposed_ports: vec![8080],
            },
            &out,
        )
        .unwrap();
        let unpacked = dir.path().join("unpacked");
        std::fs::create_dir_all(&unpacked).unwrap();
        read(
            "tar",
            [
                "-C".as_ref(),
                unpacked.as_os_str(),
                "-xf".as_ref(),
                out.as_os_str(),
            ],
        )
        .unwrap();
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(unpacked.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest[0]["RepoTags"][0], "localhost/test:1");
        let config_name = manifest[0]["Config"].as_str().unwrap();
        let config_bytes = std::fs::read(unpacked.join(config_name)).unwrap();
        assert_eq!(
            format!("{}.json", hex(&Sha256::digest(&config_bytes))),
            config_name
        );
        let config: serde_json::Value = serde_json::from_slice(&config_bytes).unwrap();
        let layer = unpacked.join("layer.tar");
        assert_eq!(
            config["rootfs"]["diff_ids"][0],
            format!("sha256:{}", sha256_file(&layer).unwrap())
        );
        assert_eq!(config["config"]["User"], "65532:65532");
        assert!(config["config"]["ExposedPorts"]["8080/tcp"].is_object());
        let listing = read("tar", ["-tvf".as_ref(), layer.as_os_str()]).unwrap();
        assert!(listing.contains("./usr/local/bin/hello"), "{listing}");
        assert!(listing.contains("0/0"), "owned by root: {listing}");
        assert!(listing.contains("drwxrwxrwt"), "tmp is 1777: {listing}");
    }

    #[test]
    fn ldd_output_names_the_loader_and_every_library() {
        let libs = shared_libraries(Path::new("/bin/ls")).unwrap();
        assert!(libs.iter().any(|l| l.ends_with("libc.so.6")), "{libs:?}");
        assert!(
            libs.iter()
                .any(|l| l.to_string_lossy().contains("ld-linux")),
            "{libs:?}"
        );
    }
}
