//! `cargo xtask fuzz CRATE [--seconds N]`: runs a crate's stable-Rust
//! mutation fuzzer (there is no nightly toolchain here, so no libFuzzer).
//!
//! - `libvirt-rpc`: the packet and payload decoders
//!   (`xtask/libvirt-rpc-probes/src/bin/fuzz_decode.rs`), seeded with packets captured
//!   from a real libvirtd (`libvirt-rpc/testdata/packets/`).

use std::process::ExitCode;

use anyhow::Result;

use crate::flags::FuzzTarget;
use crate::util::{cmd, status};

/// Runs the fuzzer of `krate` for `seconds`.
pub fn run(krate: FuzzTarget, seconds: u64) -> Result<ExitCode> {
    let seconds = seconds.to_string();
    // (package, binary): the fuzzers live in unpublished crates.
    let (package, bin) = match krate {
        FuzzTarget::LibvirtRpc => ("libvirt-rpc-probes", "fuzz_decode"),
    };
    let mut c = cmd(
        "cargo",
        [
            "run",
            "--release",
            "-p",
            package,
            "--bin",
            bin,
            "--",
            "--seconds",
            &seconds,
        ],
    );
    Ok(if status(&mut c)?.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
