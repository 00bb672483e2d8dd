//! The crate as published ([`testkit::package`]): `cargo package` builds
//! it on its own (without the workspace, and with the workspace-only
//! `xtask`, `testkit` and `ssh-socket` dev-dependencies stripped), and the
//! packaged crate's own tests, examples and doctests pass outside this
//! workspace. Needs no sandbox.

use testkit::package::{Unpacked, listing, passed, section};

const CRATE: &str = "libvirt-rpc";

#[test]
fn packaged_crate_holds_the_library_and_no_workspace_only_target() {
    let files = listing(CRATE);
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
    // The user examples ship (`connect_ssh` with the `ssh` feature); the
    // internal probes live in `xtask/libvirt-rpc-probes`.
    let examples: Vec<&str> = files
        .iter()
        .filter(|f| f.starts_with("examples/"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        examples,
        [
            "examples/clone_volume.rs",
            "examples/connect_ssh.rs",
            "examples/connect_tls.rs",
            "examples/domain_stats.rs",
            "examples/list_domains.rs",
            "examples/reconnect.rs",
            "examples/upload_volume.rs",
            "examples/watch_events.rs"
        ],
        "{files:?}"
    );
}

#[test]
fn packaged_crate_builds_and_passes_its_tests_on_its_own() {
    // Feature `ssh` needs `ssh-socket`, unpublished here: packaged in the
    // same run and taken from its package, as from crates.io once
    // published.
    let unpacked = Unpacked::with_dependencies(CRATE, env!("CARGO_PKG_VERSION"), &["ssh-socket"]);
    let manifest = unpacked.manifest();
    for workspace_only in ["sandbox-kit", "testkit"] {
        assert!(!manifest.contains(workspace_only), "{manifest}");
    }
    // `ssh-socket` only as the optional dependency of feature `ssh`, by
    // version.
    let ssh = section(&manifest, "[dependencies.ssh-socket]");
    assert!(ssh.contains("optional = true"), "{ssh}");
    assert!(ssh.contains("version = \"0.1.0\""), "{ssh}");
    assert!(!ssh.contains("path"), "{ssh}");
    // Users get the library's tokio features, not the workspace's.
    let tokio = section(&manifest, "[dependencies.tokio]");
    assert!(tokio.contains("\"rt\""), "{tokio}");
    assert!(!tokio.contains("rt-multi-thread"), "{tokio}");
    // Unit tests, the packaged integration tests (`tests/offline/`, which
    // plays the daemon with the `testing` feature, and
    // `tests/decode_allocation.rs`), the examples (built) and the doctests
    // (the README's example and the `testing` module's among them), with
    // every feature (`testing`, `tls`, `ssh`), so a feature's code also builds and
    // passes its unit tests outside the workspace.
    let out = unpacked.cargo(&["test", "--quiet", "--all-features"]);
    let suites = out.matches("test result: ok").count();
    assert!(suites >= 4, "lib, 2 test binaries and the doctests: {out}");
    // The offline tests ran: a build without `testing` skips them
    // (`required-features`), and the count above would not show it.
    let offline = unpacked.cargo(&[
        "test",
        "--quiet",
        "--features",
        "testing",
        "--test",
        "offline",
    ]);
    assert!(
        passed(&offline) >= 20,
        "the fake-daemon tests ran: {offline}"
    );
    for packaged in [
        "tests/offline/main.rs",
        "tests/decode_allocation.rs",
        "examples/list_domains.rs",
        "examples/connect_ssh.rs",
    ] {
        assert!(
            unpacked.root().join(packaged).is_file(),
            "{packaged} not packaged"
        );
    }
}
