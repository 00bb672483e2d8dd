//! A real Prometheus (Debian's) scrapes the operator as the shipped
//! ServiceMonitor would (a bearer token allowed `get /metrics`, every
//! second) with the shipped alert rules loaded: every expression of the
//! Grafana dashboard returns data, every rule evaluates without error, every
//! series a rule reads exists, and no alert fires on a healthy fleet.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::prometheus::Prometheus;

use crate::instant::{self, World};

const WITHIN: Duration = Duration::from_secs(120);

/// The dashboard expression that stays empty here: instances deleted by
/// the GC (there are no orphans to delete).
const NO_DATA_HERE: &[&str] = &["egress_proxies_operator_gc_deletes_total"];

fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(path)
}

/// Polls `expr` until it returns data, at most [`WITHIN`].
fn until_data(p: &Prometheus, expr: &str) -> Vec<Value> {
    let deadline = Instant::now() + WITHIN;
    loop {
        let result = p.query(expr);
        if !result.is_empty() {
            return result;
        }
        assert!(
            Instant::now() < deadline,
            "no data for {expr} within {WITHIN:?}; prometheus log:\n{}",
            p.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub async fn prometheus_reads_every_dashboard_series_and_the_alert_rules() {
    let world = World::new().await;
    world.use_hosts(3);
    let client = &world.client;
    let responder = instant::responder().await;
    let ns = world.namespace("prom");
    let proxies = instant::proxies(client, &ns);
    let pools = instant::pools(client, &ns);
    instant::create_proxy(&proxies, &ns, &world.entry, "solo").await;
    instant::create_pool(&pools, &ns, &world.entry, "egress", 3).await;
    let operator = world
        .operator(
            &ns,
            responder,
            &[
                "--probe-interval",
                "1s",
                "--gc-interval",
                "2s",
                "--log",
                "info,kube=warn",
            ],
        )
        .await;
    instant::wait_all(&proxies, 4, WITHIN, "Healthy", instant::healthy).await;

    let rules = deploy("prometheus/rules.yaml");
    let prom = Prometheus::start(&operator.http_addr(), operator.reader.token(), &rules);
    let up = until_data(&prom, "up{job=\"egress-proxies-operator\"} == 1");
    assert_eq!(up.len(), 1, "{up:?}");

    // Every panel's expression.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(deploy("grafana/operator-dashboard.json")).unwrap(),
    )
    .unwrap();
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_owned))
        .collect();
    assert!(exprs.len() >= 15, "{exprs:?}");
    for expr in &exprs {
        if NO_DATA_HERE.iter().any(|n| expr.contains(n)) {
            continue;
        }
        let result = until_data(&prom, expr);
        println!("{expr}: {} series", result.len());
    }
    // The fleet as Prometheus sees it.
    let healthy = until_data(
        &prom,
        "sum(max by (namespace, phase, healthy) (egress_proxies_operator_proxies{healthy=\"true\"}))",
    );
    assert_eq!(healthy[0]["value"][1], "4", "{healthy:?}");

    // The alert rules: each evaluates cleanly, each series it reads exists,
    // and none fires on this healthy fleet.
    let deadline = Instant::now() + WITHIN;
    let evaluated = loop {
        let r = prom.rules();
        if !r.is_empty() && r.iter().all(|(_, health, _)| health != "unknown") {
            break r;
        }
        assert!(Instant::now() < deadline, "rules not evaluated: {r:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(evaluated.len(), 9, "{evaluated:?}");
    for (name, health, error) in &evaluated {
        assert_eq!(health, "ok", "{name}: {error}");
    }
    let text = std::fs::read_to_string(&rules).unwrap();
    let mut names: Vec<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("egress_proxies_"))
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        until_data(&prom, &format!("count({{__name__=\"{name}\"}})"));
    }
    let firing = prom.query("ALERTS{alertstate=\"firing\"}");
    assert!(
        firing.is_empty(),
        "alerts firing on a healthy fleet: {firing:?}"
    );

    drop(prom);
    pools.delete("egress", &Default::default()).await.unwrap();
    instant::delete_all(&proxies).await;
    instant::wait_gone(&proxies, WITHIN).await;
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
