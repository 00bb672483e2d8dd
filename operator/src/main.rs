//! The egress-proxies operator: watches `Proxy` resources and keeps one proxy
//! VM per resource through the configured providers.
//!
//! ```text
//!  operator run ──▶ lease (leader election) ──leader only──┐
//!     │                                                    ▼
//!     │   Proxy Controller (finalizer, fleet::Reconciler::step, SSA status,
//!     │     Events) ── per-Proxy owned provider tasks ──▶ provider-api
//!     │   ProviderHealth monitor ── checker().check ──────▶ provider-api
//!     │   GC sweeper ── fleet::gc::plan ── list_by_tag / delete
//!     │   health engine ── fleet::probe (CONNECT) ── Healthy condition
//!     └─ every replica: /metrics /healthz /readyz /proxies (discovery)
//! ```
//!
//! This binary is glue: every decision lives in the `fleet` library; this
//! crate maps Kubernetes objects to `fleet`'s inputs and carries out what it
//! decides. The only provider it knows by name is registered in
//! [`providers::registry`].

mod cli;
mod crd;
mod gc;
mod health;
mod http;
mod leader;
mod metrics;
mod monitor;
mod netns;
mod providers;
mod reconciler;
mod run;
mod telemetry;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli.command {
        cli::Command::Crd { without_cel } => match crd::crds_yaml(!without_cel) {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
        cli::Command::Validate { config } => providers::validate_command(&config),
        cli::Command::Check { config, timeout } => {
            providers::check_command(&config, timeout.into())
        }
        cli::Command::Run(args) => run::main(*args),
    }
}
