//! The crate as published ([`testkit::package`]): `cargo package` builds
//! it on its own (without the workspace, its workspace-only `xtask`,
//! `testkit` and `libvirt-rpc` dev-dependencies stripped), and the
//! packaged crate's unit tests and doctests (the README's among them) pass
//! outside this workspace. Needs no sandbox.

use testkit::package::{Unpacked, listing, section};

const CRATE: &str = "ssh-socket";

#[test]
fn packaged_crate_holds_the_library_its_readme_and_licence_only() {
    let files = listing(CRATE);
    for needed in ["Cargo.toml", "README.md", "LICENSE", "src/lib.rs"] {
        assert!(files.iter().any(|f| f == needed), "{needed} in {files:?}");
    }
    // The user example ships (it needs only the crate and tokio).
    assert!(
        files.iter().any(|f| f == "examples/forward.rs"),
        "examples/forward.rs in {files:?}"
    );
    for left_out in ["tests/", "benches/"] {
        assert!(
            !files.iter().any(|f| f.starts_with(left_out)),
            "{left_out} in {files:?}"
        );
    }
}

#[test]
fn packaged_crate_builds_and_passes_its_tests_on_its_own() {
    let unpacked = Unpacked::new(CRATE, env!("CARGO_PKG_VERSION"));
    let manifest = unpacked.manifest();
    for workspace_only in ["sandbox-kit", "testkit", "libvirt-rpc"] {
        assert!(!manifest.contains(workspace_only), "{manifest}");
    }
    for metadata in [
        "readme = \"README.md\"",
        "keywords",
        "categories",
        "rust-version = \"1.89\"",
    ] {
        assert!(manifest.contains(metadata), "{metadata}: {manifest}");
    }
    // Users get the library's tokio features, not the workspace's.
    let tokio = section(&manifest, "[dependencies.tokio]");
    assert!(!tokio.contains("rt-multi-thread"), "{tokio}");
    let out = unpacked.cargo(&["test", "--quiet"]);
    // The unit tests and the doctests (the README's quick example).
    let suites = out.matches("test result: ok").count();
    assert!(suites >= 2, "lib and the doctests: {out}");
    assert!(
        unpacked.root().join("LICENSE").is_file(),
        "LICENSE not packaged"
    );
}
