//! `cargo xtask test [ARGS]` and `cargo xtask bench CRATE [ARGS]`: cargo
//! against the sandbox, which a [`Session`] starts and stops around it, and
//! a check that nothing the run started is left behind.

use std::process::{Command, ExitCode};

use anyhow::{Context, Result};

use crate::sandbox::{Session, leaks};
use crate::util::{cmd, status};

/// setup when something is missing → sandbox up (and its node) → `cargo
/// test --workspace ARGS` → sandbox down (also when tests fail).
pub fn test(args: &[String]) -> Result<ExitCode> {
    let mut c = cmd("cargo", ["test", "--workspace"]);
    c.args(args);
    against_sandbox(c, "tests")
}

/// A crate's benchmarks (`benches/*.rs`, `harness = false`) against the
/// sandbox: `args` is the crate (`kvm2` for `kvm2-provider`), then what
/// `cargo bench` takes. Each benchmark runs its peer in the same run and
/// prints ratios.
pub fn bench(args: &[String]) -> Result<ExitCode> {
    let (krate, rest) = args
        .split_first()
        .context("cargo xtask bench CRATE [ARGS]")?;
    let krate = match krate.as_str() {
        "kvm2" => "kvm2-provider",
        other => other,
    };
    let mut c = cmd("cargo", ["bench", "-p", krate]);
    c.args(rest);
    against_sandbox(c, "benchmarks")
}

/// Runs `c` with the sandbox's descriptor in its environment, in a
/// [`Session`] with its node (the kubernetes provider's tests run Pods;
/// the operator's failover bench reaches a pool through its cluster IP,
/// kube-proxy's); fails when `c` fails or leaves a process or namespace,
/// or when the sandbox it started leaves anything after its `down`.
fn against_sandbox(mut c: Command, what: &str) -> Result<ExitCode> {
    // What a sandbox this run starts must remove again at its `down`.
    let pristine = leaks::snapshot();
    let session = Session::start(false)?;
    if let Err(e) = crate::node::ensure(&session.descriptor()?) {
        session.finish()?;
        return Err(e);
    }
    guard_interrupts();
    let before = leaks::snapshot();
    c.env(sandbox_kit::ENV_VAR, session.path());
    let result = status(&mut c);
    let leftovers = leaks::leftovers(&before, &crate::sandbox::recorded_pids());
    for l in &leftovers {
        eprintln!("xtask: the {what} left {l}");
    }
    let stops = session.stops_sandbox();
    session.finish()?;
    let status = result?;
    if stops {
        let after_down = leaks::leftovers(&pristine, &[]);
        for l in &after_down {
            eprintln!("xtask: `sandbox down` left {l}");
        }
        if !after_down.is_empty() {
            return Ok(ExitCode::FAILURE);
        }
    }
    if !leftovers.is_empty() {
        eprintln!(
            "xtask: {what} must stop every process and remove every network namespace they start"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        eprintln!("xtask: {what} failed: {status}");
        ExitCode::FAILURE
    })
}

/// Ctrl-C reaches the child `cargo` too (same process group); this process
/// outlives it so the sandbox it started is still stopped.
fn guard_interrupts() {
    if let Err(e) = ctrlc::set_handler(|| {
        eprintln!("xtask: interrupted; stopping the sandbox once the child exits");
    }) {
        eprintln!("xtask: cannot install the Ctrl-C handler: {e}");
    }
}
