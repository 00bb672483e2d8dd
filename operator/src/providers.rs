//! The provider registry and the `check` / `validate` commands.
//!
//! This is the only place a concrete provider is named: each provider crate
//! exports `register`, and [`registry`] calls it. Everything else in the
//! operator sees `provider_api::Provider` (a test keeps it so).

use provider_api::error::chain;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use provider_api::{ConfigError, Providers, ProvidersConfig, Registry};

use crate::RegistryFn;

/// Every provider type this operator can build.
///
/// # Errors
/// When a provider registers its type twice (a programming error).
pub fn registry() -> anyhow::Result<Registry> {
    let mut registry = Registry::new();
    kvm2_provider::register(&mut registry).context("register the kvm2 provider")?;
    kubernetes_provider::register(&mut registry).context("register the kubernetes provider")?;
    Ok(registry)
}

/// Loads the providers config and builds every entry (dialling nothing).
///
/// # Errors
/// When the file cannot be read or is invalid, or an entry cannot be built.
pub fn load(path: &Path, registry: RegistryFn) -> anyhow::Result<(ProvidersConfig, Providers)> {
    let config = ProvidersConfig::load(path)?;
    let providers = registry()?.build(&config).context("build the providers")?;
    Ok((config, providers))
}

/// `operator validate --config F`: prints every problem, exits 1 when any.
pub fn validate_command(path: &Path, registry: RegistryFn) -> ExitCode {
    match ProvidersConfig::load(path) {
        Ok(config) if !config.placeholders().is_empty() => {
            let left = config.placeholders();
            println!(
                "{}: {} placeholder(s) from the sample left to replace",
                path.display(),
                left.len()
            );
            for issue in left {
                println!("  {issue}");
            }
            ExitCode::FAILURE
        }
        Ok(config) => match registry().and_then(|r| Ok(r.build(&config)?)) {
            Ok(providers) => {
                println!(
                    "{}: valid ({} provider entr{})",
                    path.display(),
                    providers.len(),
                    if providers.len() == 1 { "y" } else { "ies" }
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("{}: {}", path.display(), chain(e.as_ref()));
                ExitCode::FAILURE
            }
        },
        Err(ConfigError::Invalid(issues)) => {
            println!("{}: {} problem(s)", path.display(), issues.len());
            for issue in issues {
                println!("  {issue}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("{}: {}", path.display(), chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// `operator check --config F`: one row per host of every entry; exits 1
/// when any host fails (or an entry cannot be checked).
pub fn check_command(path: &Path, timeout: Duration, registry: RegistryFn) -> ExitCode {
    let (_, providers) = match load(path, registry) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {}", chain(e.as_ref()));
            return ExitCode::FAILURE;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = false;
    println!(
        "{:<20} {:<20} {:<10} {:>8} {:<10} {:<16} MESSAGE",
        "PROVIDER", "HOST", "REACHABLE", "LATENCY", "VERSION", "REASON"
    );
    for provider in providers.iter() {
        let Some(checker) = provider.checker() else {
            println!("{:<20} {:<20} (no health check)", provider.name(), "-");
            continue;
        };
        // The checker returns within its timeout; the outer bound is slack.
        let statuses = rt.block_on(async {
            tokio::time::timeout(timeout + Duration::from_secs(5), checker.check(timeout)).await
        });
        let Ok(statuses) = statuses else {
            println!(
                "{:<20} {:<20} no answer within {timeout:?}",
                provider.name(),
                "-"
            );
            failed = true;
            continue;
        };
        for s in statuses {
            failed |= !s.reachable;
            println!(
                "{:<20} {:<20} {:<10} {:>8} {:<10} {:<16} {}",
                provider.name().as_str(),
                s.target.as_str(),
                if s.reachable { "yes" } else { "no" },
                s.latency
                    .map(|l| format!("{}ms", l.as_millis()))
                    .unwrap_or_else(|| "-".into()),
                s.version.as_deref().unwrap_or("-"),
                s.reason.as_str(),
                s.message
            );
        }
    }
    // Checkers close their connections before returning; nothing to wait for.
    rt.shutdown_timeout(Duration::from_secs(2));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Each provider crate appears in the operator's sources only as its
    /// `register` call in this file (the boundary: the operator knows
    /// provider-api, not a provider's internals).
    #[test]
    fn kvm2_is_named_only_by_its_register_call() {
        // Spelled in parts so this test's own text does not match.
        only_registered(concat!("kvm2", "_provider"));
        only_registered(concat!("kubernetes", "_provider"));
    }

    fn only_registered(needle: &str) {
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut stack = vec![std::path::PathBuf::from(src)];
        let allowed = format!("{needle}::register(&mut registry)");
        let mut hits = Vec::new();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for (i, line) in text.lines().enumerate() {
                    if line.contains(needle) {
                        hits.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                    }
                }
            }
        }
        let stray: Vec<&String> = hits
            .iter()
            .filter(|h| !(h.contains("/providers.rs:") && h.contains(&allowed)))
            .collect();
        assert!(
            stray.is_empty(),
            "{needle} is named outside its register call: {stray:#?}"
        );
        assert_eq!(hits.len(), 1, "{hits:#?}");
    }

    #[test]
    fn the_registry_knows_every_type() {
        let registry = registry().unwrap();
        for t in provider_api::ProviderType::ALL {
            assert!(registry.is_registered(t), "{t}");
        }
    }

    #[test]
    fn the_sample_providers_config_builds() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/providers-config.yaml"
        );
        let (config, providers) = load(Path::new(path), registry).unwrap();
        assert_eq!(config.providers.len(), providers.len());
    }
}
