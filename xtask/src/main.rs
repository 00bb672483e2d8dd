//! `cargo xtask`: every project task — setup, sandbox, test, ci, bench, fuzz,
//! codegen, images, demo. `cargo xtask help` lists them with their flags
//! (all in [`flags`]).
//!
//! One folder or file per subcommand; what several share is in [`util`]:
//!
//! ```text
//! main.rs, flags.rs   dispatch; every flag (clap derive)
//! setup/              apt packages; the API server and node built from Debian's source (cached)
//! sandbox/            up / down / status, the guest network, control plane, image server;
//!                     Session: the sandbox for the length of one command; leak checks
//! node/               the sandbox's Kubernetes node (containerd, kubelet, ...)
//! test.rs, ci.rs      `test` and `bench CRATE` against a Session; `ci`
//! demo/               `demo`, `integration`, `bench demo`: the validation table
//! image/              OCI images (no docker): the operator's (`image`); the proxy guest image
//! codegen/            libvirt-rpc's generated code
//! fuzz.rs             the decoder fuzzer
//! ```

mod ci;
mod codegen;
mod demo;
mod flags;
mod fuzz;
mod image;
mod node;
mod sandbox;
mod setup;
mod test;
#[cfg(test)]
mod tidy;
mod util;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use crate::flags::{BenchTarget, Command, SandboxAction, Xtask};

fn main() -> ExitCode {
    let flags = Xtask::parse();
    match dispatch(flags.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(command: Command) -> Result<ExitCode> {
    let done = |()| ExitCode::SUCCESS;
    match command {
        Command::Setup => setup::setup().map(done),
        Command::Sandbox { action } => match action {
            SandboxAction::Up { hosts } => sandbox::up(hosts).map(|_| ExitCode::SUCCESS),
            SandboxAction::Down => sandbox::down().map(done),
            SandboxAction::Node => node::up().map(done),
            SandboxAction::Status => sandbox::status().map(|up| {
                if up {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            }),
        },
        Command::Test { args } => test::test(&args),
        Command::Ci => ci::ci(),
        Command::Bench { target } => match target {
            BenchTarget::Demo { rounds, keep } => demo::bench::run(rounds, keep),
            BenchTarget::Crate(args) => test::bench(&args),
        },
        Command::Fuzz { krate, seconds } => fuzz::run(krate, seconds),
        Command::Codegen { target, check } => codegen::run(target, check),
        Command::Image { out } => image::operator::run_image(out).map(done),
        Command::GuestImage { force } => image::guest::run(force).map(done),
        Command::SquidImage => image::squid::run().map(done),
        Command::Demo { keep } => demo::run_demo(keep),
        Command::Integration(args) => demo::run_integration(&args),
    }
}
