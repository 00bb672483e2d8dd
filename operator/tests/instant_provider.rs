//! The operator's API cost, against the sandbox's real kube-apiserver, with
//! an instant provider (`support/instant.rs`): the operator binary's code
//! run as a child process under a ServiceAccount holding deploy/'s RBAC
//! rules (`support/operator_account.rs`); its HTTP API read with a
//! consumer's token (`support/consumer.rs`).
//!
//! - Every Proxy reaches Running with at most 4 writes (finalizer, status
//!   before the Create, status after it, the `Created` Event), counted by
//!   the API server; exactly one Create and one `Created` Event each (a
//!   reconcile on a watch cache that lags the operator's own status write
//!   once repeated both).
//! - Once every Proxy is Healthy, nothing is written at all.
//! - `Healthy` describes the current instance (invariant 14): when a
//!   healthy Proxy's instance fails and is replaced by one with the same
//!   name and address, the old verdict is reset at once, discovery stops
//!   listing it as healthy, and `Healthy=True` comes back earned by the new
//!   instance.
//! - A ProxyPool fills, scales, rolls within its bounds and is deleted with
//!   its members (`instant_provider/pools.rs`).
//! - Services carry exactly the `Healthy` proxies
//!   (`instant_provider/services.rs`).
//! - Consumer leases: 20 consumers racing for 5 proxies get 5 distinct
//!   leases; renewal, release, expiry, ends on unhealthy and deleted
//!   proxies, an operator restart (`instant_provider/leases.rs`).
//! - Existing proxies (`spec.existing`) are probed by real Squids and
//!   published, never made (`instant_provider/existing.rs`).
//! - API server outages cost a term, not the process: the operator reaches
//!   the API server through a relay that is cut or frozen for 30 s three
//!   times in a row; each time it loses the Lease, stops its work, keeps
//!   running (same process, never exited) and leads again within
//!   [`RELEAD_BOUND`] of the link coming back, and every Proxy — also one
//!   created during each outage — is created exactly once.
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

#[path = "support/consumer.rs"]
mod consumer;
#[path = "instant_provider/existing.rs"]
mod existing;
#[path = "support/instant.rs"]
mod instant;
#[path = "instant_provider/leases.rs"]
mod leases;
#[path = "support/operator_account.rs"]
mod operator_account;
#[path = "instant_provider/pools.rs"]
mod pools;
#[path = "instant_provider/prometheus.rs"]
mod prometheus;
#[path = "instant_provider/services.rs"]
mod services;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use instant::{World, delta, object_writes, show, writes};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};

const PROXIES: usize = 100;
const WITHIN: Duration = Duration::from_secs(180);
const STEADY: Duration = Duration::from_secs(20);
/// The outage test's lease duration (renewals and campaign attempts every
/// third of it, each bounded by a third).
const LEASE_DURATION: Duration = Duration::from_secs(6);
/// How long one API server outage lasts.
const OUTAGE: Duration = Duration::from_secs(30);
/// Leading again after the link comes back: the campaign attempt in flight
/// when it did (at most a third of the lease duration), the pause before
/// the next (a third) and that attempt (at most a third) — one lease
/// duration — plus 4 s of slack for a loaded machine.
const RELEAD_BOUND: Duration = Duration::from_secs(LEASE_DURATION.as_secs() + 4);

fn main() -> ExitCode {
    if let Some(code) = instant::run_child_if_asked() {
        return code;
    }
    // `cargo test -- --list` and filters: the tests named below.
    let args: Vec<String> = std::env::args().skip(1).collect();
    const WRITES: &str = "proxies_reach_running_in_three_writes_and_then_write_nothing";
    const HEALTH: &str = "healthy_is_reset_on_replacement_and_earned_again_by_the_new_instance";
    const AUTH: &str = "the_probe_authenticates_with_the_entrys_credentials_file";
    const OUTAGES: &str = "api_outages_neither_restart_the_operator_nor_create_twice";
    const LONG: &str = "the_longest_proxy_name_gets_its_events";
    const POOLS: &str = "a_pool_fills_scales_rolls_and_deletes_its_members";
    const SERVICES: &str = "services_carry_exactly_the_healthy_proxies";
    const REFUSED: &str = "a_refused_service_write_is_retried_after_a_backoff";
    const EXISTING: &str = "existing_proxies_are_probed_and_published_never_made";
    const PROMETHEUS: &str = "prometheus_reads_every_dashboard_series_and_the_alert_rules";
    const LEASES: &str = "consumers_lease_distinct_healthy_proxies_until_they_end";
    let all = [
        WRITES, HEALTH, AUTH, OUTAGES, LONG, POOLS, SERVICES, REFUSED, EXISTING, PROMETHEUS, LEASES,
    ];
    if args.iter().any(|a| a == "--list") {
        for name in all {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    // (A bare number is an option's value, e.g. `--test-threads 2`.)
    let filter = args
        .iter()
        .find(|a| !a.starts_with('-') && a.parse::<u64>().is_err());
    let chosen: Vec<&str> = all
        .into_iter()
        .filter(|name| filter.is_none_or(|f| name.contains(f.as_str())))
        .collect();
    println!("running {} tests", chosen.len());
    let rt = tokio::runtime::Runtime::new().unwrap();
    for name in chosen {
        match name {
            WRITES => rt.block_on(proxies_reach_running_in_three_writes_and_then_write_nothing()),
            OUTAGES => rt.block_on(api_outages_neither_restart_the_operator_nor_create_twice()),
            AUTH => rt.block_on(the_probe_authenticates_with_the_entrys_credentials_file()),
            LONG => rt.block_on(the_longest_proxy_name_gets_its_events()),
            POOLS => rt.block_on(pools::a_pool_fills_scales_rolls_and_deletes_its_members()),
            SERVICES => rt.block_on(services::services_carry_exactly_the_healthy_proxies()),
            REFUSED => rt.block_on(services::a_refused_service_write_is_retried_after_a_backoff()),
            PROMETHEUS => rt.block_on(
                prometheus::prometheus_reads_every_dashboard_series_and_the_alert_rules(),
            ),
            LEASES => {
                rt.block_on(leases::consumers_lease_distinct_healthy_proxies_until_they_end())
            }
            EXISTING => {
                rt.block_on(existing::existing_proxies_are_probed_and_published_never_made())
            }
            _ => {
                rt.block_on(healthy_is_reset_on_replacement_and_earned_again_by_the_new_instance())
            }
        }
        println!("test {name} ... ok");
    }
    ExitCode::SUCCESS
}

/// An entry with `proxy.credentials_file`: the health probe sends the
/// file's credentials (basic auth), re-read every round, to a proxy that
/// answers 407 without the right ones — so `Healthy` follows the file.
async fn the_probe_authenticates_with_the_entrys_credentials_file() {
    let world = World::new().await;
    let client = &world.client;
    // base64("egress:Qx7rightpw"), computed apart from the code under test.
    let responder = instant::responder_requiring("ZWdyZXNzOlF4N3JpZ2h0cHc=").await;
    let file = world.dir.path().join("proxy-credentials");
    std::fs::write(&file, "egress:Qx7rightpw\n").unwrap();
    world.use_credentials_file(&file);
    let ns = world.namespace("auth");
    let api = instant::proxies(client, &ns);
    instant::create_proxies(&api, &ns, &world.entry, 1).await;
    let operator = world
        .operator(
            &ns,
            responder,
            &["--probe-interval", "1s", "--log", "info,kube=warn"],
        )
        .await;
    instant::wait_all(&api, 1, WITHIN, "Healthy", instant::healthy).await;

    // A wrong password in the file: the proxy answers 407, and after the
    // hysteresis the verdict says so.
    std::fs::write(&file, "egress:Zz9wrongpw\n").unwrap();
    let rejected = |v: &serde_json::Value| {
        healthy_condition(v).is_some_and(|h| {
            h["status"] == "False"
                && h["reason"] == "ProbeRejected"
                && h["message"].as_str().unwrap_or("").contains("407")
        })
    };
    instant::wait_all(
        &api,
        1,
        Duration::from_secs(60),
        "ProbeRejected (407)",
        rejected,
    )
    .await;
    let log = operator.log();
    assert!(
        !log.contains("Zz9wrongpw") && !log.contains("Qx7rightpw") && !log.contains("ZWdyZXNz"),
        "a password reached the log"
    );

    // Fixed: healthy again, without a restart.
    std::fs::write(&file, "egress:Qx7rightpw\n").unwrap();
    instant::wait_all(
        &api,
        1,
        Duration::from_secs(60),
        "Healthy",
        instant::healthy,
    )
    .await;

    instant::delete_all(&api).await;
    instant::wait_gone(&api, WITHIN).await;
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// A Proxy with the longest name Kubernetes allows (253 characters) gets
/// its Events: kube's Recorder names an Event `<object>.<nanoseconds>`,
/// past 253 for names over 236, and the API server refuses those.
async fn the_longest_proxy_name_gets_its_events() {
    let world = World::new().await;
    let client = &world.client;
    let responder = instant::responder().await;
    let ns = world.namespace("long");
    let api = instant::proxies(client, &ns);
    // 253 characters in labels of at most 63 (a DNS subdomain).
    let name = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61)
    );
    assert_eq!(name.len(), 253);
    instant::create_proxy(&api, &ns, &world.entry, &name).await;
    let operator = world
        .operator(&ns, responder, &["--log", "info,kube=warn"])
        .await;
    instant::wait_all(&api, 1, WITHIN, "Running", instant::running).await;
    let created = created_events_of(client, &ns, 1).await;
    assert_eq!(created.get(&name), Some(&1), "{created:?}");
    assert!(
        !operator.log().contains("event not recorded"),
        "an Event was refused"
    );
    instant::delete_all(&api).await;
    instant::wait_gone(&api, WITHIN).await;
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// The instance a verdict must name (`providerID#replacements@ip:port`).
fn current_instance(p: &serde_json::Value) -> Option<String> {
    let s = &p["status"];
    Some(format!(
        "{}#{}@{}:{}",
        s["providerID"].as_str()?,
        s["replacements"].as_u64().unwrap_or(0),
        s["ip"].as_str()?,
        s["port"].as_u64()?
    ))
}

fn healthy_condition(p: &serde_json::Value) -> Option<serde_json::Value> {
    p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Healthy")
        .cloned()
}

async fn healthy_is_reset_on_replacement_and_earned_again_by_the_new_instance() {
    use futures::TryStreamExt;
    use kube::runtime::{WatchStreamExt, watcher};

    let world = World::new().await;
    let client = &world.client;
    let responder = instant::responder().await;
    let ns = world.namespace("health");
    let api = instant::proxies(client, &ns);
    instant::create_proxies(&api, &ns, &world.entry, 1).await;
    let operator = world
        .operator(
            &ns,
            responder,
            &["--probe-interval", "1s", "--log", "info,kube=warn"],
        )
        .await;
    instant::wait_all(&api, 1, WITHIN, "Healthy", instant::healthy).await;
    let before = api.list(&Default::default()).await.unwrap().items.remove(0);
    let before = serde_json::to_value(&before).unwrap();
    let name = before["metadata"]["name"].as_str().unwrap().to_owned();
    let old = current_instance(&before).unwrap();
    assert_eq!(before["status"]["probedInstance"], old.as_str());
    let listed_healthy = |body: &str| {
        serde_json::from_str::<serde_json::Value>(body).unwrap()["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == name.as_str())
    };
    let query = format!("/proxies?namespace={ns}&healthy=true");
    assert!(listed_healthy(&operator.get(&query).await));

    // Fail the instance; a change to the Proxy makes the operator look now
    // rather than at its next 60 s poll. The replacement gets the same name
    // and address (the instant provider, like kvm2, names it after the
    // Proxy).
    let instance = before["status"]["providerID"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let mut seen: Vec<serde_json::Value> = Vec::new();
    let watch = watcher(
        api.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .applied_objects();
    let mut watch = Box::pin(watch);
    world.fail(&instance);
    let failed_at = std::time::SystemTime::now();
    api.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({
            "metadata": {"annotations": {"test/poke": "1"}}
        })),
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + WITHIN;
    let mut discovery_while_stale = Vec::new();
    let after = loop {
        let next = tokio::time::timeout_at(deadline, watch.try_next())
            .await
            .expect("healthy again within the bound")
            .unwrap()
            .expect("the watch goes on");
        let v = serde_json::to_value(&next).unwrap();
        let stale = v["status"]["replacements"].as_u64().unwrap_or(0) >= 1
            && v["status"]["probedInstance"] == old.as_str();
        if stale && listed_healthy(&operator.get(&query).await) {
            discovery_while_stale.push(v["status"].clone());
        }
        seen.push(v.clone());
        let replaced = v["status"]["replacements"].as_u64().unwrap_or(0) >= 1;
        if replaced
            && instant::healthy(&v)
            && v["status"]["probedInstance"].as_str() == current_instance(&v).as_deref()
        {
            break v;
        }
    };
    drop(watch);
    let summary: Vec<String> = seen
        .iter()
        .map(|v| {
            let h = healthy_condition(v).unwrap_or_default();
            format!(
                "{} r{} {}/{} {}",
                v["status"]["phase"].as_str().unwrap_or("-"),
                v["status"]["replacements"].as_u64().unwrap_or(0),
                h["status"].as_str().unwrap_or("-"),
                h["reason"].as_str().unwrap_or("-"),
                v["status"]["probedInstance"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    // The old verdict was reset before the new instance earned one.
    assert!(
        seen.iter().any(|v| {
            healthy_condition(v).is_some_and(|h| {
                h["status"] == "Unknown"
                    && ["NotServing", "InstanceReplaced"]
                        .contains(&h["reason"].as_str().unwrap_or(""))
            })
        }),
        "Healthy was never reset across the replacement: {summary:#?}"
    );
    assert!(
        discovery_while_stale.is_empty(),
        "discovery listed the replaced instance's verdict as healthy: {discovery_while_stale:?}"
    );
    // The new verdict is the new instance's, and newer than the failure.
    let new = current_instance(&after).unwrap();
    assert_ne!(new, old, "{summary:#?}");
    assert_eq!(after["status"]["probedInstance"], new.as_str());
    let since = healthy_condition(&after).unwrap()["lastTransitionTime"]
        .as_str()
        .unwrap()
        .to_owned();
    let since: std::time::SystemTime = humantime_rfc3339(&since);
    assert!(
        since + Duration::from_secs(1) >= failed_at,
        "Healthy=True since {since:?}, before the failure at {failed_at:?}"
    );
    println!("health across a replacement: {summary:#?}");

    instant::delete_all(&api).await;
    instant::wait_gone(&api, WITHIN).await;
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// `2026-12-05T11:06:22Z` as a time (the API server's second precision).
fn humantime_rfc3339(s: &str) -> std::time::SystemTime {
    let t: k8s_openapi::jiff::Timestamp = s.parse().unwrap();
    std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(t.as_second()).unwrap())
}

async fn proxies_reach_running_in_three_writes_and_then_write_nothing() {
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
    let created = created_events_of(client, &ns, PROXIES).await;
    // The health engine writes status too (Healthy), maybe already: the
    // reconciler's status writes are the operator's own count; finalizers
    // and Events the API server's.
    let to_running = delta(&writes(client).await, &before);
    let status_writes = operator
        .metric("egress_proxies_operator_status_writes_total{writer=\"reconciler\"}")
        .await as u64;
    // Events are counted in the namespace (an Event object, and each repeat
    // of it, is one write): the API server's own count of Event writes also
    // holds the node's components' (kubelet, scheduler, controller-manager,
    // which `cargo xtask test` runs for the kubernetes provider's Pods).
    let others: u64 =
        to_running.get("proxies PATCH").copied().unwrap_or(0) + event_writes(client, &ns).await;
    println!(
        "writes to Running: reconciler status {status_writes}; API server: {}",
        show(&to_running)
    );
    assert!(
        to_running.get("proxies/status APPLY").copied().unwrap_or(0) >= status_writes,
        "the API server saw fewer status writes than the operator counted"
    );
    // A Create that answers within the pass's wait is announced by no
    // `Creating` status of its own: one status write per Proxy.
    assert_eq!(
        status_writes,
        PROXIES as u64,
        "not one reconciler status write per Proxy to Running: {}",
        show(&to_running)
    );
    assert!(
        status_writes + others <= 3 * PROXIES as u64,
        "more than 3 writes per Proxy to Running: {status_writes} status + {}",
        show(&to_running)
    );
    // The client's own count of its requests agrees: at least a status
    // apply (PATCH) per Proxy answered 200, and the watches run.
    let patched = operator
        .metric_sum(
            "egress_proxies_operator_api_requests_total",
            &["verb=\"PATCH\"", "code=\"200\""],
        )
        .await;
    assert!(patched >= PROXIES as f64, "{patched} PATCHes answered 200");
    let watches = operator
        .metric_sum(
            "egress_proxies_operator_api_requests_total",
            &["verb=\"WATCH\""],
        )
        .await;
    assert!(watches >= 1.0, "no watch request counted");
    let repeated: Vec<_> = created.iter().filter(|(_, c)| **c != 1).collect();
    assert!(repeated.is_empty(), "Created more than once: {repeated:?}");
    assert_eq!(created.len(), PROXIES, "{created:?}");

    instant::wait_all(&api, PROXIES, WITHIN, "Healthy", instant::healthy).await;
    let settled = writes(client).await;
    let settled_events = event_writes(client, &ns).await;
    tokio::time::sleep(STEADY).await;
    let mut steady = delta(&writes(client).await, &settled);
    // The operator's Events, from its namespace (see above).
    steady.retain(|k, _| !k.starts_with("events "));
    let events = event_writes(client, &ns).await - settled_events;
    if events > 0 {
        steady.insert("events in the namespace".to_owned(), events);
    }
    assert_eq!(
        object_writes(&steady),
        0,
        "writes in {STEADY:?} of steady state: {}\noperator log: {}",
        show(&steady),
        operator.log_path().display()
    );

    // Deleting: each finalizer is released once. A pass queued before the
    // release, reading a cache that has not shown it, writes nothing.
    let before_delete = writes(client).await;
    instant::delete_all(&api).await;
    instant::wait_gone(&api, WITHIN).await;
    // The last passes queued by the deletions' own watch events.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deleting = delta(&writes(client).await, &before_delete);
    println!("writes to delete: {}", show(&deleting));
    assert_eq!(
        deleting.get("proxies PATCH 404"),
        None,
        "finalizer removals of Proxies already gone: {}",
        show(&deleting)
    );
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Event writes in `ns`: each Event object once, and each repeat of it
/// (its `count` beyond 1) once more.
async fn event_writes(client: &kube::Client, ns: &str) -> u64 {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|e| u64::try_from(e.count.unwrap_or(1).max(1)).unwrap_or(1))
        .sum()
}

/// Waits at most `within` until `done` holds, polling every 100 ms; how
/// long it took, or `None` when it never did.
async fn within<F: FnMut() -> bool>(within: Duration, mut done: F) -> Option<Duration> {
    let start = std::time::Instant::now();
    loop {
        if done() {
            return Some(start.elapsed());
        }
        if start.elapsed() > within {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `Created` Events per Proxy of `ns` (a repeat is a second Event object
/// or a series, count > 1).
async fn created_events(client: &kube::Client, ns: &str) -> BTreeMap<String, i32> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut created: BTreeMap<String, i32> = BTreeMap::new();
    for e in events.list(&ListParams::default()).await.unwrap().items {
        if e.reason.as_deref() == Some("Created") {
            let name = e.involved_object.name.clone().unwrap_or_default();
            *created.entry(name).or_default() += e.count.unwrap_or(1);
        }
    }
    created
}

/// [`created_events`] once `n` Proxies have one, or after 30 s.
async fn created_events_of(client: &kube::Client, ns: &str, n: usize) -> BTreeMap<String, i32> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let created = created_events(client, ns).await;
        if created.len() >= n || tokio::time::Instant::now() > deadline {
            return created;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn api_outages_neither_restart_the_operator_nor_create_twice() {
    const BEFORE: usize = 2;
    const OUTAGES: usize = 3;
    let world = World::new().await;
    let client = &world.client;
    let responder = instant::responder().await;
    let ns = world.namespace("outage");
    let api = instant::proxies(client, &ns);
    instant::create_proxies(&api, &ns, &world.entry, BEFORE).await;
    // The operator's only way to the API server; the test's own client
    // goes straight to it.
    let relay = testkit::relay::Relay::tcp(world.api_address()).await;
    let lease = format!("{}s", LEASE_DURATION.as_secs());
    // GC every second with no minimum age: a wrong sweep after an outage
    // would show as a second Create.
    let mut operator = world
        .operator_via(
            &relay,
            &ns,
            responder,
            &[
                // The test reads /metrics during the outages, when no
                // token can be reviewed (the API server is behind the
                // relay): this test is about leadership, not auth.
                "--http-auth",
                "none",
                "--lease-duration",
                &lease,
                "--gc-interval",
                "1s",
                "--gc-min-age",
                "1ms",
                "--log",
                "info,kube=warn",
            ],
        )
        .await;
    let pid = operator.pid();
    instant::wait_all(&api, BEFORE, WITHIN, "Running", instant::running).await;
    assert_eq!(
        operator.logged("leadership acquired"),
        1,
        "{}",
        operator.log()
    );

    let mut took = Vec::new();
    for i in 0..OUTAGES {
        // Settled first: an Event is best-effort, and one in flight when
        // the link goes is lost (its status write landed: not created
        // again).
        created_events_of(client, &ns, BEFORE + i).await;
        // Cut (refused, reset) twice, frozen (silent) once.
        let kind = if i == 1 { "freeze" } else { "cut" };
        if kind == "freeze" {
            relay.freeze();
        } else {
            relay.cut();
        }
        let down = std::time::Instant::now();
        // Lost by the end of the validity (4/5 of the duration after the
        // last renewal), its work ended, campaigning again.
        let lost = within(OUTAGE, || {
            operator.logged("leadership lost: leader-only work stopped; campaigning again") > i
                || operator.exited().is_some()
        })
        .await
        .unwrap_or_else(|| panic!("outage {i}: the Lease was never lost\n{}", operator.log()));
        if let Some(status) = operator.exited() {
            panic!(
                "outage {i}: the operator exited ({status}) {lost:?} into it instead of campaigning again\n{}",
                operator.log()
            );
        }
        assert_eq!(
            operator.metric("egress_proxies_operator_leader ").await,
            0.0,
            "outage {i}: the leader gauge"
        );
        // A Proxy made meanwhile waits for the next term.
        instant::create_proxy(&api, &ns, &world.entry, &format!("during-{i}")).await;
        tokio::time::sleep(OUTAGE.saturating_sub(down.elapsed())).await;
        assert!(
            operator.exited().is_none(),
            "outage {i}: the operator exited\n{}",
            operator.log()
        );
        relay.resume();
        let back = within(RELEAD_BOUND + Duration::from_secs(30), || {
            operator.logged("leadership acquired") > i + 1
        })
        .await
        .unwrap_or_else(|| panic!("outage {i}: never led again\n{}", operator.log()));
        println!(
            "outage {i} ({kind}, {OUTAGE:?}): lease lost {lost:?} into it; led again {back:?} after the link came back"
        );
        took.push(back);
        assert!(
            back <= RELEAD_BOUND,
            "outage {i}: led again only {back:?} after the link came back (bound {RELEAD_BOUND:?})"
        );
        assert!(
            operator.exited().is_none(),
            "outage {i}: the operator exited"
        );
        assert_eq!(operator.pid(), pid);
        assert_eq!(
            operator
                .metric("egress_proxies_operator_leadership_losses_total ")
                .await,
            (i + 1) as f64
        );
        assert_eq!(
            operator.metric("egress_proxies_operator_leader ").await,
            1.0
        );
        instant::wait_all(&api, BEFORE + i + 1, WITHIN, "Running", instant::running).await;
    }

    // Exactly one Create per Proxy: the provider was asked once each (it
    // lives in the same process across every term), and one `Created`
    // Event each.
    let proxies = BEFORE + OUTAGES;
    let creates = operator
        .metric_sum(
            "egress_proxies_provider_operations_total",
            &["operation=\"create\""],
        )
        .await;
    assert_eq!(creates, proxies as f64, "provider creates");
    let created = created_events_of(client, &ns, proxies).await;
    let repeated: Vec<_> = created.iter().filter(|(_, c)| **c != 1).collect();
    assert!(repeated.is_empty(), "Created more than once: {repeated:?}");
    assert_eq!(created.len(), proxies, "{created:?}");
    assert!(operator.exited().is_none(), "the operator exited");
    assert_eq!(operator.logged("starting"), 1, "the operator started again");
    println!("led again after each outage: {took:?} (bound {RELEAD_BOUND:?})");

    instant::delete_all(&api).await;
    instant::wait_gone(&api, WITHIN).await;
    drop(operator);
    drop(relay);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
