//! `cargo xtask`: every project task — setup, sandbox, test, ci, bench, fuzz.
//!
//! ```text
//! cargo xtask setup                   install what tests need (apt), fast no-op when present
//! cargo xtask sandbox up|down|status  real libvirtd + virtlogd + pool + sshd + guest network for tests
//! cargo xtask test [ARGS]             setup → sandbox up → cargo test --workspace → sandbox down
//! cargo xtask ci                      fmt --check, clippy -D warnings, test, then demo
//! cargo xtask bench CRATE [ARGS]      sandbox up → cargo bench -p CRATE (benchmarks print ratios)
//! cargo xtask fuzz libvirt-rpc [--seconds N]  mutation fuzzer over the packet decoder
//! cargo xtask guest-image [--force]   build (or find cached) the proxy guest qcow2
//! cargo xtask demo [--keep]           the whole system: operator, API server, real proxy guests; validation table
//! cargo xtask integration [--host ...] the same table against a host you name (default: the sandbox)
//! ```

mod cmd;
mod codegen;
mod control_plane;
mod demo;
mod fuzz;
mod guest_image;
mod guest_net;
mod image_server;
mod kube_build;
mod leaks;
mod node;
mod sandbox;
mod setup;

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::cmd::{cmd, run, status};

const USAGE: &str = "usage: cargo xtask <setup | sandbox up|node|down|status | test [cargo test args] | ci | bench CRATE [ARGS] | fuzz libvirt-rpc [--seconds N] | codegen libvirt-rpc [--check] | guest-image [--force] | demo [--keep] | integration [--host U@A ... (docs/integration.md)] [--keep]>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: &[String]) -> Result<ExitCode> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["setup"] => setup::setup().map(|()| ExitCode::SUCCESS),
        ["sandbox", "up"] => sandbox::up().map(|_| ExitCode::SUCCESS),
        ["sandbox", "down"] => sandbox::down().map(|()| ExitCode::SUCCESS),
        ["sandbox", "node"] => sandbox::up().and_then(|path| {
            let d = xtask::Descriptor::load(&path)?;
            let node = node::ensure(&d)?;
            println!(
                "node {} Ready (containerd at {})",
                node.name,
                node.containerd.display()
            );
            Ok(ExitCode::SUCCESS)
        }),
        ["sandbox", "status"] => sandbox::status().map(|up| {
            if up {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }),
        ["test", rest @ ..] => test(rest),
        ["ci"] => ci(),
        ["bench", "demo", rest @ ..] => demo::run_bench(rest),
        ["bench", krate, rest @ ..] => bench(krate, rest),
        ["fuzz", rest @ ..] => fuzz::run(rest),
        ["codegen", rest @ ..] => codegen::run(rest),
        ["demo", rest @ ..] => demo::run_demo(rest),
        ["integration", rest @ ..] => demo::run_integration(rest),
        ["guest-image", rest @ ..] => guest_image::run(rest).map(|()| ExitCode::SUCCESS),
        _ => bail!("{USAGE}"),
    }
}

/// Runs a crate's benchmarks (`benches/*.rs`, `harness = false`) against the
/// sandbox. Each benchmark runs its peer in the same run and prints ratios.
fn bench(krate: &str, extra: &[&str]) -> Result<ExitCode> {
    // Short names the issues use.
    let krate = match krate {
        "kvm2" => "kvm2-provider",
        other => other,
    };
    let mut c = cmd("cargo", ["bench", "-p", krate]);
    c.args(extra);
    against_sandbox(c, "benchmarks")
}

/// setup when something is missing → sandbox up → tests → sandbox down
/// (also when tests fail).
fn test(extra: &[&str]) -> Result<ExitCode> {
    let mut c = cmd("cargo", ["test", "--workspace"]);
    c.args(extra);
    against_sandbox(c, "tests")
}

/// Runs `c` with the sandbox's descriptor in its environment: installs what
/// is missing, starts the sandbox and stops it afterwards, also when `c`
/// fails. A sandbox that was already up is used and left up.
fn against_sandbox(mut c: std::process::Command, what: &str) -> Result<ExitCode> {
    if setup::needed() {
        setup::setup()?;
    }
    let was_up = sandbox::current();
    let descriptor = match &was_up {
        Some(path) => path.clone(),
        None => sandbox::up()?,
    };
    guard_interrupts();
    let before = leaks::snapshot();
    c.env(xtask::ENV_VAR, &descriptor);
    let result = status(&mut c);
    let leftovers = leaks::leftovers(&before, &sandbox::recorded_pids());
    for l in &leftovers {
        eprintln!("xtask: the {what} left {l}");
    }
    if was_up.is_none() {
        sandbox::down()?;
    } else {
        eprintln!("xtask: the sandbox was up before the {what}; leaving it up");
    }
    let status = result?;
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
        eprintln!("xtask: interrupted; stopping the sandbox once the tests exit");
    }) {
        eprintln!("xtask: cannot install the Ctrl-C handler: {e}");
    }
}

fn ci() -> Result<ExitCode> {
    run(cmd("cargo", ["fmt", "--all", "--check"]))?;
    // libvirt-rpc's generated code is what a fresh run makes.
    let generated = codegen::run(&["libvirt-rpc", "--check"])?;
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
    let tests = test(&[])?;
    if tests != ExitCode::SUCCESS {
        return Ok(tests);
    }
    // The demo's validation table, end to end (its own sandbox cycle, the
    // node and the operator's pod included): it too must leave nothing.
    let before = leaks::snapshot();
    let demo = demo::run_demo(&[])?;
    let leftovers = leaks::leftovers(&before, &sandbox::recorded_pids());
    for l in &leftovers {
        eprintln!("xtask: the demo left {l}");
    }
    Ok(if leftovers.is_empty() {
        demo
    } else {
        ExitCode::FAILURE
    })
}
