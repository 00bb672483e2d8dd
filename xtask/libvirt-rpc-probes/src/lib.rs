//! libvirt-rpc's internal probes, as binaries of a crate that is never
//! published (so the published crate ships only user examples):
//!
//! - `fuzz_decode`: the stable-Rust mutation fuzzer over the packet and
//!   payload decoders, seeded with `libvirt-rpc/testdata/packets/`
//!   (`cargo xtask fuzz libvirt-rpc --seconds N` runs it).
//! - `capture_packets`: records what the sandbox daemon sends during a
//!   typical session into `libvirt-rpc/testdata/packets/`.
//! - `call_probe`, `upload_probe`: our side of the call-rate and upload
//!   benchmarks alone, so the daemon can be traced during them.
//!
//! Each says how to run it at its top.

use std::path::PathBuf;

/// `libvirt-rpc/testdata/packets/`: the captured packets (the fuzzer's
/// seeds, the capture's output).
pub fn packets_dir() -> PathBuf {
    workspace_root().join("libvirt-rpc/testdata/packets")
}

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}
