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
//!     │   health engine ── probe (CONNECT; fleet::Probe judges) ── Healthy condition
//!     └─ every replica: /metrics /healthz /readyz /proxies (discovery)
//! ```
//!
//! This binary is glue: every decision lives in the `fleet` library; this
//! crate maps Kubernetes objects to `fleet`'s inputs and carries out what it
//! decides. The only provider it knows by name is registered in
//! [`registry`].
//!
//! The binary is `src/main.rs`: [`main`] with [`registry`]. The library
//! exists so a harness can run the same operator over another set of
//! provider types (the `operator` benchmark's instant provider); it is not
//! a stable API.

mod cli;
mod crd;
mod gc;
mod gone;
mod health;
mod http;
mod leader;
mod leases;
mod metrics;
mod monitor;
mod netns;
mod pool;
mod probe;
mod provider_events;
mod providers;
mod proxy_changes;
mod proxy_feed;
mod reconciler;
mod run;
mod services;
mod status_apply;
mod store_ready;
mod telemetry;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

pub use providers::registry;

/// Builds the provider registry: which provider types the operator can run.
pub type RegistryFn = fn() -> anyhow::Result<provider_api::Registry>;

/// Parses `args` (the first is the program name) and runs the command,
/// building providers from `registry`; returns the process's exit status.
pub fn main<I, T>(args: I, registry: RegistryFn) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match cli.command {
        cli::Command::Crd { without_cel } => match crd::crds_yaml(!without_cel) {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {}", provider_api::error::chain(e.as_ref()));
                ExitCode::FAILURE
            }
        },
        cli::Command::Validate { config } => providers::validate_command(&config, registry),
        cli::Command::Check { config, timeout } => {
            providers::check_command(&config, timeout.into(), registry)
        }
        cli::Command::Run(args) => run::main(*args, registry),
    }
}
