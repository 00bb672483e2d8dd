//! The Prometheus row: a real Prometheus (Debian's) scrapes the demo's
//! operator as deploy/prometheus/'s ServiceMonitor would (a ServiceAccount
//! bound by deploy/samples/metrics-reader.yaml, its bearer token), with
//! deploy/prometheus/rules.yaml loaded. It passes when every Grafana panel's
//! expression returns data (but those this demo has nothing for), every
//! rule evaluates cleanly, every series a rule reads exists, and no alert
//! fires on the demo's healthy fleet.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use sandbox_kit::prometheus::{Prometheus, dashboard_exprs, rule_series};

use super::world::World;
use crate::demo::report::Report;

/// The series the demo has no data for, and why: dashboard expressions
/// and rules reading them are not expected to find any.
const NO_DATA_HERE: &[(&str, &str)] = &[("egress_proxies_operator_pool_replicas", "no ProxyPool")];
/// How long each expression may take to have data (a few scrapes).
const WITHIN: Duration = Duration::from_secs(60);
/// Prometheus' ServiceAccount, in the demo's namespace.
const ACCOUNT: &str = "prometheus";

pub(super) fn prometheus_row(w: &World, report: &mut Report, deploy: &Path) -> Result<()> {
    let token = scraper_token(w, deploy)?;
    let addr = w
        .http_addr()
        .context("the operator logged no HTTP address")?;
    let rules = deploy.join("prometheus/rules.yaml");
    let prom = Prometheus::start(&addr, &token, &rules)?;
    let up = !prom
        .wait_data("up{job=\"egress-proxies-operator\"} == 1", WITHIN)
        .is_empty();
    let exprs = dashboard_exprs(&deploy.join("grafana/operator-dashboard.json"));
    let mut empty = Vec::new();
    let mut expected_empty = 0;
    for expr in &exprs {
        if NO_DATA_HERE.iter().any(|(series, _)| expr.contains(series)) {
            expected_empty += 1;
            continue;
        }
        if prom.wait_data(expr, WITHIN).is_empty() {
            empty.push(expr.clone());
        }
    }
    let evaluated = prom.evaluated_rules(WITHIN);
    let bad_rules: Vec<String> = evaluated
        .iter()
        .filter(|(_, health, _)| health != "ok")
        .map(|(name, health, error)| format!("{name} {health} {error}"))
        .collect();
    let missing: Vec<String> = rule_series(&rules)
        .into_iter()
        .filter(|name| !NO_DATA_HERE.iter().any(|(series, _)| name == series))
        .filter(|name| {
            prom.wait_data(&format!("count({{__name__=\"{name}\"}})"), WITHIN)
                .is_empty()
        })
        .collect();
    let firing: Vec<String> = prom
        .query("ALERTS{alertstate=\"firing\"}")?
        .iter()
        .map(|a| a["metric"]["alertname"].as_str().unwrap_or("?").to_owned())
        .collect();
    let pass = up
        && !exprs.is_empty()
        && empty.is_empty()
        && !evaluated.is_empty()
        && bad_rules.is_empty()
        && missing.is_empty()
        && firing.is_empty();
    let skipped: Vec<String> = NO_DATA_HERE
        .iter()
        .map(|(series, why)| format!("{series}: {why}"))
        .collect();
    report.row(
        "Prometheus scrapes the operator: dashboard expressions return data, rules evaluate, none fires",
        pass,
        format!(
            "{}/{} expressions with data ({expected_empty} skipped: {}){}; {} rules ok{}{}{}",
            exprs.len() - expected_empty - empty.len(),
            exprs.len() - expected_empty,
            skipped.join(", "),
            if empty.is_empty() {
                String::new()
            } else {
                format!(", EMPTY: {}", empty.join(" | "))
            },
            evaluated.len() - bad_rules.len(),
            if bad_rules.is_empty() {
                String::new()
            } else {
                format!(", BAD: {}", bad_rules.join(" | "))
            },
            if missing.is_empty() {
                String::new()
            } else {
                format!(", MISSING series: {}", missing.join(" "))
            },
            if firing.is_empty() {
                String::new()
            } else {
                format!(", FIRING: {}", firing.join(" "))
            },
        ),
    );
    if !pass {
        eprintln!("demo: prometheus log:\n{}", prom.log());
    }
    drop(prom);
    for object in [
        "clusterrolebinding/prometheus-egress-proxies-metrics",
        "clusterrole/egress-proxies-metrics-reader",
    ] {
        let _ = w.kubectl(&["delete", object, "--ignore-not-found", "--wait=false"]);
    }
    Ok(())
}

/// A token of Prometheus' ServiceAccount in the demo's namespace, bound
/// as deploy/samples/metrics-reader.yaml binds it (its `monitoring`
/// namespace replaced by the demo's).
fn scraper_token(w: &World, deploy: &Path) -> Result<String> {
    if w.kubectl(&["-n", &w.ns, "get", "serviceaccount", ACCOUNT])
        .is_err()
    {
        w.kubectl(&["-n", &w.ns, "create", "serviceaccount", ACCOUNT])?;
    }
    let sample = std::fs::read_to_string(deploy.join("samples/metrics-reader.yaml"))
        .context("read deploy/samples/metrics-reader.yaml")?;
    let binding = w.dir.join("metrics-reader.yaml");
    std::fs::write(
        &binding,
        sample.replace("namespace: monitoring", &format!("namespace: {}", w.ns)),
    )?;
    w.kubectl(&["apply", "-f", &binding.to_string_lossy()])?;
    let token = w.kubectl(&["-n", &w.ns, "create", "token", ACCOUNT, "--duration=1h"])?;
    Ok(token.trim().to_owned())
}
