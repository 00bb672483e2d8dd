//! `cargo xtask fuzz CRATE [--seconds N]`: runs a crate's stable-Rust
//! mutation fuzzer (there is no nightly toolchain here, so no libFuzzer).
//!
//! - `libvirt-rpc`: the packet and payload decoders
//!   (`xtask/libvirt-rpc-probes/src/bin/fuzz_decode.rs`), seeded with packets captured
//!   from a real libvirtd (`libvirt-rpc/testdata/packets/`).

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::cmd::{cmd, status};

/// Runs the fuzzer of `args[0]` for `--seconds N` (default 60).
pub fn run(args: &[&str]) -> Result<ExitCode> {
    let (krate, rest) = match args {
        [krate, rest @ ..] => (*krate, rest),
        [] => bail!("usage: cargo xtask fuzz CRATE [--seconds N]"),
    };
    let mut seconds = "60".to_owned();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match *a {
            "--seconds" => match it.next() {
                Some(n) if n.parse::<u64>().is_ok() => seconds = (*n).to_owned(),
                _ => bail!("--seconds needs a number"),
            },
            other => bail!("unknown fuzz argument {other}"),
        }
    }
    // (package, binary): the fuzzers live in unpublished crates.
    let (package, bin) = match krate {
        "libvirt-rpc" => ("libvirt-rpc-probes", "fuzz_decode"),
        other => bail!("no fuzzer for crate {other} (known: libvirt-rpc)"),
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
