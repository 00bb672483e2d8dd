//! The crate as published: `cargo package` builds it on its own (without
//! the workspace, and with the workspace-only `xtask` and `testkit`
//! dev-dependencies stripped), and the packaged crate's own tests and doctests pass outside
//! this workspace. Needs no sandbox; needs the crates.io index (or a cargo
//! cache that has it) like any build of the workspace.
//!
//! The nested cargo runs use a target directory of their own under the
//! workspace's `target/` (the outer `cargo test` holds the usual one), so
//! only the first run builds the dependencies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn workspace_root() -> &'static Path {
    manifest_dir()
        .parent()
        .expect("libvirt-rpc sits in the workspace")
}

fn target_dir() -> PathBuf {
    workspace_root().join("target/package-check")
}

fn cargo(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        // Whatever the outer run was told about the sandbox: the packaged
        // tests must not need it.
        .env_remove("KVM2_SANDBOX")
        .output()
        .expect("cargo runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "cargo {args:?} in {} failed:\n{text}",
        dir.display()
    );
    text
}

/// Packages `crate_name` (verifying that the packaged crate builds alone)
/// and returns the path of the `.crate` file.
fn package(crate_name: &str) -> PathBuf {
    cargo(
        workspace_root(),
        &["package", "-p", crate_name, "--allow-dirty"],
    );
    let version = env!("CARGO_PKG_VERSION");
    let file = target_dir().join(format!("package/{crate_name}-{version}.crate"));
    assert!(file.is_file(), "{} was not written", file.display());
    file
}

fn listing(crate_name: &str) -> Vec<String> {
    let text = cargo(
        workspace_root(),
        &["package", "-p", crate_name, "--allow-dirty", "--list"],
    );
    text.lines()
        .filter(|l| !l.starts_with("warning") && !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// The lines of the TOML table `header` (up to the next table).
fn section<'a>(manifest: &'a str, header: &str) -> &'a str {
    let start = manifest
        .find(header)
        .unwrap_or_else(|| panic!("no {header} in {manifest}"));
    let body = &manifest[start + header.len()..];
    &body[..body.find("\n[").unwrap_or(body.len())]
}

#[test]
fn packaged_crate_holds_the_library_and_no_workspace_only_target() {
    let files = listing("libvirt-rpc");
    for needed in ["Cargo.toml", "README.md", "LICENSE", "src/lib.rs"] {
        assert!(files.iter().any(|f| f == needed), "{needed} in {files:?}");
    }
    // The targets that use `xtask` or `testkit` (absent from the published
    // crate).
    for left_out in [
        "tests/it/main.rs",
        "tests/it/support.rs",
        "benches/throughput.rs",
        "tests/it/package.rs",
    ] {
        assert!(
            !files.iter().any(|f| f == left_out),
            "{left_out} in {files:?}"
        );
    }
    assert!(
        !files.iter().any(|f| f.starts_with("examples/")),
        "{files:?}"
    );
}

#[test]
fn packaged_crate_builds_and_passes_its_tests_on_its_own() {
    let file = package("libvirt-rpc");
    // Unpack outside the workspace, so cargo cannot find its Cargo.toml,
    // with fresh modification times (`-m`): cargo's fingerprints hold paths
    // relative to the package, so sources carrying the old times would let
    // it reuse test binaries built in an earlier run's directory, whose
    // `CARGO_MANIFEST_DIR` is gone.
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("tar")
        .arg("-xzmf")
        .arg(&file)
        .arg("-C")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let unpacked = dir
        .path()
        .join(format!("libvirt-rpc-{}", env!("CARGO_PKG_VERSION")));
    let manifest = std::fs::read_to_string(unpacked.join("Cargo.toml")).unwrap();
    assert!(
        !manifest.contains("xtask") && !manifest.contains("testkit"),
        "{manifest}"
    );
    // Users get the library's tokio features, not the workspace's.
    let tokio = section(&manifest, "[dependencies.tokio]");
    assert!(tokio.contains("\"rt\""), "{tokio}");
    assert!(!tokio.contains("rt-multi-thread"), "{tokio}");
    // Unit tests, the packaged integration tests (`tests/offline/`, which
    // plays the daemon with the `testing` feature, and
    // `tests/decode_allocation.rs`) and the doctests (the README's example
    // and the `testing` module's among them), with every feature
    // (`testing`, `tls`), so a feature's code also builds and passes its
    // unit tests outside the workspace.
    let out = cargo(&unpacked, &["test", "--quiet", "--all-features"]);
    let suites = out.matches("test result: ok").count();
    assert!(suites >= 4, "lib, 2 test binaries and the doctests: {out}");
    // The offline tests ran: a build without `testing` skips them
    // (`required-features`), and the count above would not show it.
    let offline = cargo(
        &unpacked,
        &[
            "test",
            "--quiet",
            "--features",
            "testing",
            "--test",
            "offline",
        ],
    );
    let passed: usize = offline
        .split("test result: ok. ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(passed >= 20, "the fake-daemon tests ran: {offline}");
    for packaged in ["tests/offline/main.rs", "tests/decode_allocation.rs"] {
        assert!(unpacked.join(packaged).is_file(), "{packaged} not packaged");
    }
}

/// `ssh-socket` as it stands packages and builds on its own (its
/// `libvirt-rpc` and `xtask` dev-dependencies are path-only and stripped).
/// Its manifest, README and `include` list are its own crate's business;
/// this only keeps the packaging from breaking unnoticed.
#[test]
fn ssh_socket_packages_and_builds_on_its_own() {
    package("ssh-socket");
}
