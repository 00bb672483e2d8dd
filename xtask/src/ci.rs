//! `cargo xtask ci`: what CI runs on a clean clone (`.ci/run`).

use std::process::ExitCode;

use anyhow::Result;

use crate::flags::CodegenTarget;
use crate::sandbox::leaks;
use crate::util::{cmd, run};

/// fmt --check, codegen --check, clippy -D warnings, the tests, then the
/// demo; fails on the first failure and on anything left running.
pub fn ci() -> Result<ExitCode> {
    run(cmd("cargo", ["fmt", "--all", "--check"]))?;
    // libvirt-rpc's generated code is what a fresh run makes.
    let generated = crate::codegen::run(CodegenTarget::LibvirtRpc, true)?;
    if generated != ExitCode::SUCCESS {
        return Ok(generated);
    }
    run(cmd(
        "cargo",
        [
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    ))?;
    let tests = crate::test::test(&[])?;
    if tests != ExitCode::SUCCESS {
        return Ok(tests);
    }
    // The demo's validation table, end to end (its own sandbox session, the
    // node and the operator's pod included): it too must leave nothing.
    let before = leaks::snapshot();
    let demo = crate::demo::run_demo(false)?;
    let leftovers = leaks::leftovers(&before, &crate::sandbox::recorded_pids());
    for l in &leftovers {
        eprintln!("xtask: the demo left {l}");
    }
    Ok(if leftovers.is_empty() {
        demo
    } else {
        ExitCode::FAILURE
    })
}
