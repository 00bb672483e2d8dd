//! Checks of a crate as published: `cargo package` builds it on its own
//! (outside the workspace, its path-only dev-dependencies stripped), and
//! the unpacked crate's own tests and doctests pass there.
//!
//! The nested cargo runs use a target directory of their own,
//! `target/package-check/` under the workspace (the outer `cargo test`
//! holds the usual one), so only the first run builds the dependencies.
//! Needs the crates.io index (or a cargo cache that has it), like any
//! build of the workspace.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target_dir() -> PathBuf {
    workspace_root().join("target/package-check")
}

/// Runs cargo with `args` in `dir` and returns its output (stdout then
/// stderr); fails the test, printing the output, when cargo fails.
pub fn cargo(dir: &Path, args: &[&str]) -> String {
    // The cargo running the tests, when there is one.
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        // Built once per run: incremental state would only take disk.
        .env("CARGO_INCREMENTAL", "0")
        // Whatever the outer run was told about the sandbox: packaged
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

/// The files `cargo package` would put in `crate_name`'s package.
pub fn listing(crate_name: &str) -> Vec<String> {
    let text = cargo(
        &workspace_root(),
        &["package", "-p", crate_name, "--allow-dirty", "--list"],
    );
    text.lines()
        .filter(|l| !l.starts_with("warning") && !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// A crate packaged and unpacked outside the workspace; the directory is
/// removed on drop.
pub struct Unpacked {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// `--config` arguments pointing crates.io's name of each packaged
    /// workspace dependency at its unpacked copy.
    patches: Vec<String>,
}

impl Unpacked {
    /// Packages `crate_name` of `version` (`cargo package` verifies that
    /// the packaged crate builds alone) and unpacks it into a temporary
    /// directory, where cargo cannot find the workspace.
    pub fn new(crate_name: &str, version: &str) -> Self {
        Self::with_dependencies(crate_name, version, &[])
    }

    /// As [`Unpacked::new`] for a crate depending on the (unpublished)
    /// workspace crates `dependencies` of the same version: they are
    /// packaged in the same `cargo package` run, first, as a publish would
    /// go (cargo verifies `crate_name` against their packages), and the
    /// unpacked crate's cargo runs take them from their unpacked copies
    /// (`[patch.crates-io]`), as it would take them from crates.io.
    pub fn with_dependencies(crate_name: &str, version: &str, dependencies: &[&str]) -> Self {
        let mut args = vec!["package"];
        for name in dependencies.iter().chain([&crate_name]) {
            args.extend(["-p", name]);
        }
        args.push("--allow-dirty");
        cargo(&workspace_root(), &args);
        let dir = tempfile::tempdir().unwrap();
        let unpack = |name: &str| {
            let file = target_dir().join(format!("package/{name}-{version}.crate"));
            assert!(file.is_file(), "{} was not written", file.display());
            // Fresh modification times (`-m`): cargo's fingerprints hold
            // paths relative to the package, so sources carrying the old
            // times would let it reuse test binaries built in an earlier
            // run's directory, whose `CARGO_MANIFEST_DIR` is gone.
            let status = Command::new("tar")
                .arg("-xzmf")
                .arg(&file)
                .arg("-C")
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success(), "tar -xzmf {}", file.display());
            dir.path().join(format!("{name}-{version}"))
        };
        let patches = dependencies
            .iter()
            .map(|name| {
                let path = unpack(name);
                format!(
                    "patch.crates-io.{name}.path={:?}",
                    path.display().to_string()
                )
            })
            .collect();
        let root = unpack(crate_name);
        Self {
            _dir: dir,
            root,
            patches,
        }
    }

    /// The unpacked crate's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The packaged (normalised) `Cargo.toml`.
    pub fn manifest(&self) -> String {
        std::fs::read_to_string(self.root.join("Cargo.toml")).unwrap()
    }

    /// Runs cargo with `args` in the unpacked crate (see [`cargo`]).
    pub fn cargo(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = Vec::new();
        for patch in &self.patches {
            all.extend(["--config", patch]);
        }
        all.extend(args);
        cargo(&self.root, &all)
    }
}

/// The lines of the TOML table `header` (up to the next table) of
/// `manifest`.
pub fn section<'a>(manifest: &'a str, header: &str) -> &'a str {
    let start = manifest
        .find(header)
        .unwrap_or_else(|| panic!("no {header} in {manifest}"));
    let body = &manifest[start + header.len()..];
    &body[..body.find("\n[").unwrap_or(body.len())]
}

/// How many tests passed in `cargo test` output, summed over its suites.
pub fn passed(out: &str) -> usize {
    out.split("test result: ok. ")
        .skip(1)
        .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passed_sums_the_suites_and_section_stops_at_the_next_table() {
        let out = "test result: ok. 3 passed; 0 failed\nx\ntest result: ok. 12 passed; 0 failed";
        assert_eq!(passed(out), 15);
        assert_eq!(passed("test result: FAILED. 1 passed"), 0);
        let manifest = "[a]\nx = 1\n[b]\ny = 2\n";
        assert_eq!(section(manifest, "[a]"), "\nx = 1");
        assert_eq!(section(manifest, "[b]"), "\ny = 2\n");
    }
}
