//! The operator's API cost, against the sandbox's real kube-apiserver, with
//! an instant provider (`support/instant.rs`): the operator binary's code
//! run as a child process under deploy/'s ServiceAccount.
//!
//! - Every Proxy reaches Running with at most 4 writes (finalizer, status
//!   before the Create, status after it, the `Created` Event), counted by
//!   the API server; exactly one Create and one `Created` Event each (a
//!   reconcile on a watch cache that lags the operator's own status write
//!   once repeated both).
//! - Once every Proxy is Healthy, nothing is written at all.
//!
//! A test binary with its own `main` (`harness = false`), because it re-runs
//! itself as the operator.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::print_stdout,
    dead_code
)]

#[path = "support/instant.rs"]
mod instant;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use instant::{World, delta, object_writes, show, writes};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};

const PROXIES: usize = 100;
const WITHIN: Duration = Duration::from_secs(180);
const STEADY: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    if let Some(code) = instant::run_child_if_asked() {
        return code;
    }
    // `cargo test -- --list` and filters: one test, named below.
    let args: Vec<String> = std::env::args().skip(1).collect();
    const NAME: &str = "proxies_reach_running_in_four_writes_and_then_write_nothing";
    if args.iter().any(|a| a == "--list") {
        println!("{NAME}: test");
        return ExitCode::SUCCESS;
    }
    // (A bare number is an option's value, e.g. `--test-threads 2`.)
    let filter = args
        .iter()
        .find(|a| !a.starts_with('-') && a.parse::<u64>().is_err());
    if filter.is_some_and(|f| !NAME.contains(f.as_str())) {
        return ExitCode::SUCCESS;
    }
    println!("running 1 test");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(proxies_reach_running_in_four_writes_and_then_write_nothing());
    println!("test {NAME} ... ok");
    ExitCode::SUCCESS
}

async fn proxies_reach_running_in_four_writes_and_then_write_nothing() {
    let world = World::new().await;
    let client = &world.client;
    let responder = instant::responder().await;
    let ns = world.namespace("instant");
    let api = instant::proxies(client, &ns);
    instant::create_proxies(&api, &ns, &world.entry, PROXIES).await;

    let before = writes(client).await;
    let operator = world
        .operator(
            &ns,
            responder,
            &["--probe-interval", "1s", "--log", "info,kube=warn"],
        )
        .await;
    instant::wait_all(&api, PROXIES, WITHIN, "Running", instant::running).await;

    // One Create and one `Created` Event per Proxy (a repeat is a second
    // Event object or a series, count > 1). Events follow the status write
    // that announces Running: wait for all of them.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let created = loop {
        let mut created: BTreeMap<String, i32> = BTreeMap::new();
        for e in events.list(&ListParams::default()).await.unwrap().items {
            if e.reason.as_deref() == Some("Created") {
                let name = e.involved_object.name.clone().unwrap_or_default();
                *created.entry(name).or_default() += e.count.unwrap_or(1);
            }
        }
        if created.len() >= PROXIES || tokio::time::Instant::now() > deadline {
            break created;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // The health engine writes status too (Healthy), maybe already: the
    // reconciler's status writes are the operator's own count; finalizers
    // and Events the API server's.
    let to_running = delta(&writes(client).await, &before);
    let status_writes = operator
        .metric("operator_status_writes_total{writer=\"reconciler\"}")
        .await as u64;
    let others: u64 = to_running
        .iter()
        .filter(|(k, _)| k.as_str() == "proxies PATCH" || k.starts_with("events "))
        .map(|(_, v)| v)
        .sum();
    println!(
        "writes to Running: reconciler status {status_writes}; API server: {}",
        show(&to_running)
    );
    assert!(
        to_running.get("proxies/status APPLY").copied().unwrap_or(0) >= status_writes,
        "the API server saw fewer status writes than the operator counted"
    );
    assert!(
        status_writes + others <= 4 * PROXIES as u64,
        "more than 4 writes per Proxy to Running: {status_writes} status + {}",
        show(&to_running)
    );
    let repeated: Vec<_> = created.iter().filter(|(_, c)| **c != 1).collect();
    assert!(repeated.is_empty(), "Created more than once: {repeated:?}");
    assert_eq!(created.len(), PROXIES, "{created:?}");

    instant::wait_all(&api, PROXIES, WITHIN, "Healthy", instant::healthy).await;
    let settled = writes(client).await;
    tokio::time::sleep(STEADY).await;
    let steady = delta(&writes(client).await, &settled);
    assert_eq!(
        object_writes(&steady),
        0,
        "writes in {STEADY:?} of steady state: {}\noperator log: {}",
        show(&steady),
        operator.log_path().display()
    );

    instant::delete_all(&api).await;
    instant::wait_gone(&api, WITHIN).await;
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
