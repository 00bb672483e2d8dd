//! Running `virsh` against the sandbox's libvirtd from tests.

use std::process::{Command, Output};

/// Runs `virsh -c uri args...` and returns its output, whatever its status.
pub fn virsh(uri: &str, args: &[&str]) -> Output {
    Command::new("virsh")
        .arg("-c")
        .arg(uri)
        .args(args)
        .output()
        .expect("run virsh")
}

/// The stdout of a successful `virsh` run; fails the test naming `what`
/// with virsh's stderr otherwise.
pub fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 from virsh")
}
