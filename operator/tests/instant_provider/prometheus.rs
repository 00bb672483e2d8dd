//! A real Prometheus (Debian's) scrapes the operator as the shipped
//! ServiceMonitor would (a bearer token allowed `get /metrics`, every
//! second) with the shipped alert rules loaded: every expression of the
//! Grafana dashboard returns data, every rule evaluates without error, every
//! series a rule reads exists, and no alert fires on a healthy fleet.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use testkit::prometheus::Prometheus;

use crate::instant::{self, World};

const WITHIN: Duration = Duration::from_secs(120);

fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(path)
}

/// Polls `expr` until it returns data, at most [`WITHIN`].
fn until_data(p: &Prometheus, expr: &str) -> Vec<Value> {
    let result = p.wait_data(expr, WITHIN);
    assert!(
        !result.is_empty(),
        "no data for {expr} within {WITHIN:?}; prometheus log:\n{}",
        p.log()
    );
    result
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
    let prom = Prometheus::start(&operator.http_addr(), operator.reader.token(), &rules).unwrap();
    let up = until_data(&prom, "up{job=\"egress-proxies-operator\"} == 1");
    assert_eq!(up.len(), 1, "{up:?}");

    // Every panel's expression.
    let exprs = testkit::prometheus::dashboard_exprs(&deploy("grafana/operator-dashboard.json"));
    assert!(exprs.len() >= 15, "{exprs:?}");
    // All of them, the GC's deletes too: its series exist at zero before
    // anything is deleted.
    for expr in &exprs {
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
    let evaluated = prom.evaluated_rules(WITHIN);
    assert_eq!(evaluated.len(), 9, "{evaluated:?}");
    for (name, health, error) in &evaluated {
        assert_eq!(health, "ok", "{name}: {error}");
    }
    for name in testkit::prometheus::rule_series(&rules) {
        until_data(&prom, &format!("count({{__name__=\"{name}\"}})"));
    }
    let firing = prom.query("ALERTS{alertstate=\"firing\"}").unwrap();
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
