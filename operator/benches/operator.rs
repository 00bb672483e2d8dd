//! `cargo xtask bench operator`: the operator's own cost, with an instant
//! provider, against the sandbox's real kube-apiserver.
//!
//! The operator runs as a separate process (this benchmark binary re-run as
//! `operator::main` over a registry whose `kvm2` type builds [`Instant`], a
//! provider that answers every call at once from memory), under a
//! ServiceAccount holding deploy/'s RBAC rules, leading on deploy/'s Lease. Every instance it
//! makes points at a loopback CONNECT responder, so the health engine probes
//! for real and `Healthy` turns True.
//!
//! Measured, for [`PROXIES`] Proxies (`OPERATOR_BENCH_PROXIES`):
//! - **time to all Running**: from the operator process's start (its ServiceAccount
//!   and kubeconfig are made before the clock starts) to the last Proxy
//!   reporting `Running`, against the *peer*, a direct loop that calls the
//!   same provider for each Proxy and writes its status once (SSA), with the
//!   operator's concurrency (16, or `OPERATOR_BENCH_CONCURRENCY` for both)
//!   — the least any controller must do. Both
//!   start from [`PROXIES`] existing Proxies; the ratio is ours / peer.
//! - **API writes per Proxy to Running** and to Healthy, counted by the API
//!   server itself (`apiserver_request_total`, writes on Proxies, their
//!   status and Events; Lease renewals apart).
//! - **writes in steady state**: over [`STEADY`] (`OPERATOR_BENCH_STEADY_SECS`,
//!   default 300) once every Proxy is Healthy. Expected 0.
//! - **RSS**: the operator's resident memory at 1,000 Running Proxies and
//!   its peak (`VmHWM`); deploy/'s memory limit is taken from this.
//! - **a pool of as many members**: one ProxyPool of [`PROXIES`]
//!   replicas made for a running operator (once a pool of one is
//!   `Running`; how long that took after the operator's start is printed
//!   too), from the pool's creation to its status reporting every member
//!   `Ready` (then its members are checked `Running`, untimed;
//!   `OPERATOR_BENCH_POOL_WATCH=members` watches every member instead), against the
//!   same peer (goal ≤ 3×), and the API writes per member (the members'
//!   creation, the pool's status and Events, and its Service's endpoints
//!   among them), with the operator's, the API server's and etcd's CPU per
//!   member.
//!
//! The Proxy measurement runs with `--services false`: the peer writes no
//! Service, and the Service sync's writes are the pool measurement's.
//!
//! `OPERATOR_BENCH_ONLY=pool` measures only the pool against the peer,
//! `OPERATOR_BENCH_ROUNDS` (default 3) interleaved rounds, medians; and
//! against the same peer writing the status the operator reports
//! (creation time, observed generation, applied spec, two conditions), and
//! against **the pool's writes made directly** (no operator: each member
//! created as the pool controller creates it, then its status applied as
//! the reconciler applies it; what a pool costs the control plane at the
//! least, so pool / that is the operator's own overhead), with the API
//! server's and etcd's CPU per Proxy for each.
//!
//! `OPERATOR_BENCH_ONLY=writes` times only the pool's writes made
//! directly, in the shapes `OPERATOR_BENCH_WRITES_SHAPES` lists (each
//! leaving out parts of a member or its status; see `writes_rounds`): what
//! each part of the contract costs the control plane.
//!
//! `OPERATOR_BENCH_PPROF=DIR` saves the API server's CPU profile over each
//! timed phase (the sandbox started with
//! `KVM2_SANDBOX_APISERVER_PROFILING=1`; see `testkit::pprof`).
//!
//! Every timed phase starts once the control plane is quiet (see
//! `settle`). Nothing is asserted; the figures are printed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::print_stdout,
    clippy::print_stderr,
    dead_code
)]

#[path = "../tests/support/consumer.rs"]
mod consumer;
#[path = "../tests/support/instant.rs"]
mod instant;
#[path = "../tests/support/operator_account.rs"]
mod operator_account;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};
use testkit::bench::knob;

use futures::StreamExt;
use instant::{World, delta, object_writes, show, writes};
use kube::Client;
use kube::api::{ListParams, Patch, PatchParams};
use provider_api::{CreateRequest, Identifier, Provider};
use serde_json::json;
use testkit::bench::median;
use testkit::pprof::Profile;

const PROXIES: usize = 1000;
const STEADY: Duration = Duration::from_secs(300);
const CONCURRENCY: usize = 16;
const BUDGET: Duration = Duration::from_secs(1800);

fn main() -> ExitCode {
    instant::bench_main("operator", bench)
}

/// What the peer writes as each Proxy's status.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PeerStatus {
    /// Phase, provider ID, host, address, port: the least a controller
    /// must write (the peer).
    Thin,
    /// Also what the operator reports beside them: creation time, observed
    /// generation, the applied spec and two conditions.
    AsOurs,
}

/// The least a controller must do: one provider call and one status write
/// per Proxy, [`CONCURRENCY`] at a time.
async fn peer(
    client: &Client,
    ns: &str,
    provider: Arc<dyn Provider>,
    concurrency: usize,
    shape: PeerStatus,
) -> Duration {
    let api = instant::proxies(client, ns);
    let started = Clock::now();
    let list = api.list(&ListParams::default()).await.unwrap();
    futures::stream::iter(list.items)
        .map(|obj| {
            let api = api.clone();
            let provider = provider.clone();
            async move {
                let name = obj.metadata.name.clone().unwrap();
                let instance = create_instance(&*provider, &obj, ns).await;
                let spec = &obj.data["spec"];
                let message = running_message(&instance);
                let full = (shape == PeerStatus::AsOurs).then_some((spec, message.as_str()));
                let body = running_status(&name, &instance, full);
                api.patch_status(
                    &name,
                    &PatchParams::apply("bench-peer").force(),
                    &Patch::Apply(body),
                )
                .await
                .unwrap();
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<()>>()
        .await;
    started.elapsed()
}

/// `provider`'s instance for the Proxy `obj` of namespace `ns`.
async fn create_instance(
    provider: &dyn Provider,
    obj: &kube::api::DynamicObject,
    ns: &str,
) -> provider_api::Instance {
    let req = CreateRequest::new(
        provider_api::OwnerUid::parse(obj.metadata.uid.as_deref().unwrap()).unwrap(),
        provider_api::ObjectName::parse(obj.metadata.name.as_deref().unwrap()).unwrap(),
        Identifier::parse(ns).unwrap(),
    );
    provider.create(&req).await.unwrap()
}

/// What the reconciler says of a Running instance in its conditions.
fn running_message(instance: &provider_api::Instance) -> String {
    format!(
        "instance {} runs at {}:{}",
        instance.id,
        instance.ip.unwrap(),
        instance.proxy_port.unwrap()
    )
}

/// The status apply a peer sends for Proxy `name` running `instance`:
/// phase, provider ID, host and address; with `full` (the spec applied,
/// the conditions' message) also what the operator reports beside them:
/// creation time, observed generation, the applied spec, and `Provisioned`
/// and `Ready`.
fn running_status(
    name: &str,
    instance: &provider_api::Instance,
    full: Option<(&serde_json::Value, &str)>,
) -> serde_json::Value {
    let mut body = json!({
        "apiVersion": "egress-proxies.io/v1alpha1",
        "kind": "Proxy",
        "metadata": {"name": name},
        "status": {
            "phase": "Running",
            "providerID": instance.id.to_string(),
            "host": instance.host.as_str(),
            "ip": instance.ip,
            "port": instance.proxy_port,
        },
    });
    if let Some((spec, message)) = full {
        let now = "2026-12-06T10:00:00Z";
        let condition = |t: &str| {
            json!({"type": t, "status": "True", "reason": "Running",
                "message": message, "lastTransitionTime": now,
                "observedGeneration": 1})
        };
        let status = &mut body["status"];
        status["createdAt"] = json!(now);
        status["observedGeneration"] = json!(1);
        status["appliedSpec"] = spec.clone();
        status["conditions"] = json!([condition("Provisioned"), condition("Ready")]);
    }
    body
}

/// The pool's own writes without the operator: for each of `n` members,
/// [`CONCURRENCY`] × 2 at a time, create it as the pool controller does
/// (its labels, the pool as controlling owner, the finalizer, a placement;
/// under the pool's field manager), call the provider, and apply the
/// status the operator reports (under the reconciler's field manager).
/// Timed from the first create to the last status; what a pool costs the
/// control plane at the least.
async fn pool_peer(
    client: &Client,
    ns: &str,
    provider: Arc<dyn Provider>,
    concurrency: usize,
    entry: &str,
    n: usize,
    shape: &str,
) -> Duration {
    let api = instant::proxies(client, ns);
    let pools = instant::pools(client, ns);
    instant::create_pool(&pools, ns, entry, "bench", 0).await;
    let owner = pools.get("bench").await.unwrap();
    let uid = owner.metadata.uid.clone().unwrap();
    let without = |what: &str| shape.split(',').any(|s| s == what);
    let started = Clock::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let (api, provider, uid) = (api.clone(), provider.clone(), uid.clone());
            let without = &without;
            async move {
                let name = format!("bench-c88b5956-{i}");
                let member: kube::api::DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "egress-proxies.io/v1alpha1",
                    "kind": "Proxy",
                    "metadata": {
                        "name": name, "namespace": ns,
                        "labels": {"egress-proxies.io/pool": "bench",
                            "egress-proxies.io/pool-template": "c88b5956"},
                        "ownerReferences": [{"apiVersion": "egress-proxies.io/v1alpha1",
                            "kind": "ProxyPool", "name": "bench", "uid": uid,
                            "controller": true, "blockOwnerDeletion": true}],
                        "finalizers": ["egress-proxies.io/instance"],
                    },
                    "spec": {"provider": entry, "placement": {"host": "h1", "policy": "Prefer"}},
                }))
                .unwrap();
                let mut member = member;
                if without("owner") {
                    member.metadata.owner_references = None;
                }
                if without("labels") {
                    member.metadata.labels = None;
                }
                if without("finalizer") {
                    member.metadata.finalizers = None;
                }
                if without("placement") {
                    member.data["spec"] = json!({"provider": entry});
                }
                let params = kube::api::PostParams {
                    field_manager: Some("egress-operator-pool".into()),
                    ..Default::default()
                };
                let made = api.create(&params, &member).await.unwrap();
                let instance = create_instance(&*provider, &made, ns).await;
                let message = if without("message") {
                    "runs".to_owned()
                } else {
                    running_message(&instance)
                };
                let mut body =
                    running_status(&name, &instance, Some((&made.data["spec"], &message)));
                if without("applied") {
                    body["status"]
                        .as_object_mut()
                        .unwrap()
                        .remove("appliedSpec");
                }
                if without("provisioned") {
                    let conditions = body["status"]["conditions"].as_array_mut().unwrap();
                    conditions.retain(|c| c["type"] != "Provisioned");
                }
                if without("conditions") {
                    body["status"].as_object_mut().unwrap().remove("conditions");
                }
                api.patch_status(
                    &name,
                    &PatchParams::apply("egress-operator-reconciler").force(),
                    &Patch::Apply(body),
                )
                .await
                .unwrap();
            }
        })
        .buffer_unordered(2 * concurrency)
        .collect::<Vec<()>>()
        .await;
    started.elapsed()
}

/// Clears the finalizers [`pool_peer`]'s members carry (no operator runs
/// there) and deletes its pool; the members can then be deleted.
async fn pool_peer_clear(client: &Client, ns: &str) {
    let api = instant::proxies(client, ns);
    let pools = instant::pools(client, ns);
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            async move {
                let clear = json!({"metadata": {"finalizers": null}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(clear))
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
    pools.delete("bench", &Default::default()).await.unwrap();
}

async fn bench() {
    let n = knob("OPERATOR_BENCH_PROXIES", PROXIES as u64) as usize;
    let concurrency = knob("OPERATOR_BENCH_CONCURRENCY", CONCURRENCY as u64) as usize;
    let concurrency_flag = concurrency.to_string();
    let steady = Duration::from_secs(knob("OPERATOR_BENCH_STEADY_SECS", STEADY.as_secs()));
    let log_filter = std::env::var("OPERATOR_BENCH_LOG").unwrap_or_else(|_| "warn".into());
    let world = World::new().await;
    let client = &world.client;
    let responder = instant::responder().await;
    println!(
        "operator bench: {n} Proxies, instant provider, kube-apiserver {}, concurrency {concurrency} (OPERATOR_BENCH_CONCURRENCY)",
        world.kube.version
    );

    if std::env::var("OPERATOR_BENCH_ONLY").as_deref() == Ok("writes") {
        return writes_rounds(&world, responder, n, concurrency).await;
    }
    if std::env::var("OPERATOR_BENCH_ONLY").as_deref() == Ok("pool") {
        return pool_rounds(&world, responder, n, concurrency, &log_filter).await;
    }

    // Peer: the direct loop, on its own namespace, operator not running.
    let peer_ns = world.namespace("bench-peer");
    let peer_api = instant::proxies(client, &peer_ns);
    instant::create_proxies(&peer_api, &peer_ns, &world.entry, n).await;
    settle().await;
    let w0 = writes(client).await;
    let peer_time = peer(
        client,
        &peer_ns,
        world.provider(responder),
        concurrency,
        PeerStatus::Thin,
    )
    .await;
    let peer_writes = delta(&writes(client).await, &w0);
    instant::delete_all(&peer_api).await;
    println!(
        "peer: {n} Running in {:.2} s ({:.2} ms/Proxy); writes: {}",
        peer_time.as_secs_f64(),
        peer_time.as_secs_f64() * 1000.0 / n as f64,
        show(&peer_writes)
    );

    // Ours: the operator process over the same provider.
    let ns = world.namespace("bench-op");
    let api = instant::proxies(client, &ns);
    instant::create_proxies(&api, &ns, &world.entry, n).await;
    settle().await;
    let w1 = writes(client).await;
    let operator = world
        .operator(
            &ns,
            responder,
            &[
                "--log",
                &log_filter,
                "--services",
                "false",
                "--concurrency",
                &concurrency_flag,
            ],
        )
        .await;
    let all_running = instant::wait_all(&api, n, BUDGET, "Running", instant::running).await;
    let ours = all_running - operator.spawned;
    let (rss_running, _) = operator.rss_kib();
    let to_running = delta(&writes(client).await, &w1);
    println!(
        "ours: {n} Running in {:.2} s ({:.2} ms/Proxy) from the operator's start; RSS {} MiB",
        ours.as_secs_f64(),
        ours.as_secs_f64() * 1000.0 / n as f64,
        rss_running / 1024
    );
    println!("  writes to Running: {}", show(&to_running));
    let all_healthy = instant::wait_all(&api, n, BUDGET, "Healthy", instant::healthy).await;
    let to_healthy = delta(&writes(client).await, &w1);
    println!(
        "  all Healthy {:.2} s after all Running; writes to Healthy: {}",
        (all_healthy - all_running).as_secs_f64(),
        show(&to_healthy)
    );

    // Steady state.
    println!(
        "  steady state: watching writes for {} s …",
        steady.as_secs()
    );
    let w2 = writes(client).await;
    let mut peak_rss = 0;
    let until = Clock::now() + steady;
    while Clock::now() < until {
        tokio::time::sleep(Duration::from_secs(5)).await;
        peak_rss = peak_rss.max(operator.rss_kib().0);
    }
    let steady_writes = delta(&writes(client).await, &w2);
    let (rss_end, hwm) = operator.rss_kib();
    if rss_end == 0 {
        eprintln!("the operator is gone; log:\n{}", operator.log());
    }

    // Clean-up, timed: delete with the operator running (finalizers released).
    let deleting = Clock::now();
    instant::delete_all(&api).await;
    let gone = instant::wait_gone(&api, BUDGET).await;
    let deleted_in = deleting.elapsed();
    drop(operator);
    for ns in [&peer_ns, &ns] {
        let _ = world
            .kube
            .kubectl(&["delete", "namespace", ns, "--wait=false"]);
    }

    let (pool_time, pool_writes, _) = pool(
        &world,
        "bench-pool",
        responder,
        n,
        &log_filter,
        &concurrency_flag,
        &|| 0.0,
    )
    .await;

    let per = |w: &BTreeMap<String, u64>| object_writes(w) as f64 / n as f64;
    println!();
    println!("operator bench ({n} Proxies, instant provider)");
    println!("  {:<34} {:>12} {:>12} {:>8}", "", "ours", "peer", "ratio");
    println!(
        "  {:<34} {:>10.2} s {:>10.2} s {:>7.2}x",
        "time to all Running",
        ours.as_secs_f64(),
        peer_time.as_secs_f64(),
        ours.as_secs_f64() / peer_time.as_secs_f64()
    );
    println!(
        "  {:<34} {:>12.2} {:>12.2} {:>7.2}x",
        "API writes per Proxy to Running",
        per(&to_running),
        per(&peer_writes),
        per(&to_running) / per(&peer_writes)
    );
    println!(
        "  {:<34} {:>12.2}",
        "API writes per Proxy to Healthy",
        per(&to_healthy)
    );
    println!(
        "  {:<34} {:>12} ({})",
        format!("writes in {} s steady state", steady.as_secs()),
        object_writes(&steady_writes),
        show(&steady_writes)
    );
    println!(
        "  {:<34} {:>8} MiB at all Running, {} MiB after steady state, peak {} MiB",
        "operator RSS",
        rss_running / 1024,
        peak_rss.max(rss_end) / 1024,
        hwm / 1024
    );
    println!(
        "  {:<34} {:>10.2} s{}",
        "delete all (finalizers released)",
        deleted_in.as_secs_f64(),
        if gone { "" } else { " (not all gone!)" }
    );
    println!(
        "  {:<34} {:>10.2} s {:>10.2} s {:>7.2}x",
        "pool: all members Ready",
        pool_time.as_secs_f64(),
        peer_time.as_secs_f64(),
        pool_time.as_secs_f64() / peer_time.as_secs_f64()
    );
    println!(
        "  {:<34} {:>12.2} {:>12.2} {:>7.2}x",
        "pool: API writes per member",
        per(&pool_writes),
        per(&peer_writes),
        per(&pool_writes) / per(&peer_writes)
    );
    println!("  pool writes: {}", show(&pool_writes));
}

/// `OPERATOR_BENCH_ONLY=pool`: `OPERATOR_BENCH_ROUNDS` (default 3)
/// interleaved rounds of the peer and the pool; medians and their ratio.
async fn pool_rounds(
    world: &World,
    responder: std::net::SocketAddr,
    n: usize,
    concurrency: usize,
    log_filter: &str,
) {
    let rounds = knob("OPERATOR_BENCH_ROUNDS", 3) as usize;
    let client = &world.client;
    // The control plane's CPU (API server and etcd) over each phase.
    let server_cpu = control_plane_cpu();
    let (mut peers, mut fulls, mut directs, mut pools, mut writes_per) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        // The peer, then the same loop writing the status the operator
        // reports, each on Proxies of its own (their creation not timed).
        let timed_peer = async |tag: &str, shape: PeerStatus| {
            let ns = world.namespace(&format!("{tag}{r}"));
            let api = instant::proxies(client, &ns);
            let cpu0 = server_cpu();
            instant::create_proxies(&api, &ns, &world.entry, n).await;
            let create_cpu = server_cpu() - cpu0;
            settle().await;
            let cpu0 = server_cpu();
            let machine0 = testkit::bench::cpu_by_name();
            let profile = pprof(world, &format!("{tag}{r}"));
            let took = peer(client, &ns, world.provider(responder), concurrency, shape).await;
            let cpu = server_cpu() - cpu0;
            let machine = testkit::bench::cpu_spent(&machine0, &testkit::bench::cpu_by_name(), 8);
            println!("  the machine over {tag}: {machine}");
            if let Some(profile) = profile {
                profile.finish().await;
            }
            instant::delete_all(&api).await;
            let _ = world
                .kube
                .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
            (took, cpu, create_cpu)
        };
        let (peer_time, peer_cpu, create_cpu) = timed_peer("bench-peer", PeerStatus::Thin).await;
        let (full_time, full_cpu, _) = timed_peer("bench-peer-full", PeerStatus::AsOurs).await;
        // The pool's own writes, made directly: what the pool costs the
        // control plane at the least.
        let (writes_time, writes_cpu) = timed_pool_writes(
            world,
            responder,
            n,
            concurrency,
            &format!("bench-peer-writes{r}"),
            "",
            &server_cpu,
        )
        .await;
        let (pool_time, pool_writes, pool_cpu) = pool(
            world,
            &format!("bench-pool{r}"),
            responder,
            n,
            log_filter,
            &concurrency.to_string(),
            &server_cpu,
        )
        .await;
        let per = object_writes(&pool_writes) as f64 / n as f64;
        let ms = |cpu: f64| cpu * 1000.0 / n as f64;
        println!(
            "round {r}: peer {:.2} s, peer writing our status {:.2} s, the pool's writes made directly {:.2} s, \
             pool {:.2} s ({:.2}x, {:.2}x, {:.2}x), {per:.2} writes per member; API server + etcd CPU per member \
             to Running: peer {:.2} ms, peer writing our status {:.2} ms, the pool's writes {:.2} ms, pool {:.2} ms \
             (creating the peers' Proxies, not timed: {:.2} ms each)",
            peer_time.as_secs_f64(),
            full_time.as_secs_f64(),
            writes_time.as_secs_f64(),
            pool_time.as_secs_f64(),
            pool_time.as_secs_f64() / peer_time.as_secs_f64(),
            pool_time.as_secs_f64() / full_time.as_secs_f64(),
            pool_time.as_secs_f64() / writes_time.as_secs_f64(),
            ms(peer_cpu),
            ms(full_cpu),
            writes_cpu,
            ms(pool_cpu),
            ms(create_cpu),
        );
        peers.push(peer_time.as_secs_f64());
        fulls.push(full_time.as_secs_f64());
        directs.push(writes_time.as_secs_f64());
        pools.push(pool_time.as_secs_f64());
        writes_per.push(per);
    }
    let (peer, full, direct, pool) = (
        median(&peers),
        median(&fulls),
        median(&directs),
        median(&pools),
    );
    println!(
        "\npool of {n}, all members Ready (median of {rounds}): {pool:.2} s vs the peer's {peer:.2} s, {:.2}x \
         (vs the peer writing our status, {full:.2} s: {:.2}x; vs the pool's writes made directly, \
         {direct:.2} s: {:.2}x); {:.2} API writes per member",
        pool / peer,
        pool / full,
        pool / direct,
        median(&writes_per)
    );
}

/// `OPERATOR_BENCH_ONLY=writes`: the pool's writes made directly, in the
/// shapes `OPERATOR_BENCH_WRITES_SHAPES` names (`;`-separated; each a
/// `,`-separated list of what to leave out: `owner`, `labels`,
/// `finalizer`, `placement`, `message`, `applied`, `provisioned`,
/// `conditions`; empty is the pool's own), `OPERATOR_BENCH_ROUNDS`
/// interleaved rounds: time and the API server's and etcd's CPU per
/// member, medians.
async fn writes_rounds(
    world: &World,
    responder: std::net::SocketAddr,
    n: usize,
    concurrency: usize,
) {
    let rounds = knob("OPERATOR_BENCH_ROUNDS", 3) as usize;
    let shapes: Vec<String> = std::env::var("OPERATOR_BENCH_WRITES_SHAPES")
        .unwrap_or_default()
        .split(';')
        .map(str::to_owned)
        .collect();
    let server_cpu = control_plane_cpu();
    let mut figures: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); shapes.len()];
    for r in 0..rounds {
        for (i, shape) in shapes.iter().enumerate() {
            let (took, cpu) = timed_pool_writes(
                world,
                responder,
                n,
                concurrency,
                &format!("bench-writes{r}-{i}"),
                shape,
                &server_cpu,
            )
            .await;
            println!(
                "round {r}, without [{shape}]: {:.2} s, {cpu:.2} ms server CPU per member",
                took.as_secs_f64()
            );
            figures[i].0.push(took.as_secs_f64());
            figures[i].1.push(cpu);
        }
    }
    for (shape, (t, c)) in shapes.iter().zip(&figures) {
        println!(
            "without [{shape}]: {:.2} s, {:.2} ms per member (medians of {rounds})",
            median(t),
            median(c)
        );
    }
}

/// The API server's and etcd's CPU so far, seconds.
fn control_plane_cpu() -> impl Fn() -> f64 {
    let servers: Vec<u32> = ["kube-apiserver", "etcd"]
        .iter()
        .flat_map(|c| testkit::bench::pids_named(c))
        .collect();
    move || {
        servers
            .iter()
            .map(|p| testkit::bench::cpu_seconds(*p))
            .sum()
    }
}

/// [`pool_peer`] in a namespace `tag-…` of its own, timed once the control
/// plane is quiet: its time and the control plane's CPU per member (ms);
/// its members are deleted after.
async fn timed_pool_writes(
    world: &World,
    responder: std::net::SocketAddr,
    n: usize,
    concurrency: usize,
    tag: &str,
    shape: &str,
    server_cpu: &dyn Fn() -> f64,
) -> (Duration, f64) {
    let client = &world.client;
    let ns = world.namespace(tag);
    settle().await;
    let cpu0 = server_cpu();
    let machine0 = testkit::bench::cpu_by_name();
    let profile = pprof(world, tag);
    let took = pool_peer(
        client,
        &ns,
        world.provider(responder),
        concurrency,
        &world.entry,
        n,
        shape,
    )
    .await;
    let cpu = (server_cpu() - cpu0) * 1000.0 / n as f64;
    let machine = testkit::bench::cpu_spent(&machine0, &testkit::bench::cpu_by_name(), 8);
    println!("  the machine over {tag} (the pool's writes made directly): {machine}");
    if let Some(profile) = profile {
        profile.finish().await;
    }
    pool_peer_clear(client, &ns).await;
    instant::delete_all(&instant::proxies(client, &ns)).await;
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    (took, cpu)
}

/// Waits (at most 30 s) until the control plane is quiet (API server,
/// etcd, kube-controller-manager together under 0.2 of a core), so a
/// timed phase does not pay for the last one's tail.
async fn settle() {
    let quiet = testkit::bench::quiesce(
        &["kube-apiserver", "etcd", "kube-controller"],
        0.2,
        Duration::from_secs(30),
    )
    .await;
    if !quiet {
        println!("(the control plane was still busy after 30 s; timing anyway)");
    }
}

/// `OPERATOR_BENCH_PPROF=DIR`: the API server's CPU profile over `phase`
/// (one-second profiles, `DIR/PHASE-NNN.pb.gz`; read them together with
/// `go tool pprof -top DIR/PHASE-*`); the sandbox must have been started
/// with `KVM2_SANDBOX_APISERVER_PROFILING` set.
fn pprof(world: &World, phase: &str) -> Option<Profile> {
    let dir = std::env::var_os("OPERATOR_BENCH_PPROF")?;
    Some(Profile::start(
        &world.kube,
        std::path::Path::new(&dir),
        phase,
    ))
}

/// One ProxyPool of `n` replicas in a namespace of its own, made once the
/// operator runs there (a pool of one `Running` first): from the pool's
/// creation to its status reporting every member `Ready` (or, with
/// `OPERATOR_BENCH_POOL_WATCH=members`, to every member seen `Running`),
/// and the API writes and the control plane's CPU (`server_cpu`, seconds)
/// in between.
async fn pool(
    world: &World,
    namespace: &str,
    responder: std::net::SocketAddr,
    n: usize,
    log_filter: &str,
    concurrency: &str,
    server_cpu: &dyn Fn() -> f64,
) -> (Duration, BTreeMap<String, u64>, f64) {
    let client = &world.client;
    let ns = world.namespace(namespace);
    let proxies = instant::proxies(client, &ns);
    let pools = instant::pools(client, &ns);
    let operator = world
        .operator(
            &ns,
            responder,
            &["--log", log_filter, "--concurrency", concurrency],
        )
        .await;
    // Warm: a pool of one Running says the operator leads, its caches are
    // synced and its controllers run, as in a cluster where a pool is
    // made for an operator that is already there.
    instant::create_pool(&pools, &ns, &world.entry, "warm", 1).await;
    instant::wait_all(&proxies, 1, BUDGET, "Running", instant::running).await;
    let ready_in = operator.spawned.elapsed();
    let w = writes(client).await;
    let etcd_cpu = || -> f64 {
        testkit::bench::pids_named("etcd")
            .into_iter()
            .map(testkit::bench::cpu_seconds)
            .sum()
    };
    settle().await;
    let (cpu0, etcd0, operator0) = (server_cpu(), etcd_cpu(), operator.cpu_seconds());
    let machine0 = testkit::bench::cpu_by_name();
    let profile = pprof(world, namespace);
    let created = Clock::now();
    instant::create_pool(&pools, &ns, &world.entry, "bench", n).await;
    // The pool's own status says when all its members are Ready (one
    // object watched); `OPERATOR_BENCH_POOL_WATCH=members` watches every
    // member instead (an observer as costly as a second controller).
    let all_running = if std::env::var("OPERATOR_BENCH_POOL_WATCH").as_deref() == Ok("members") {
        instant::wait_all(&proxies, n + 1, BUDGET, "Running", instant::running).await
    } else {
        instant::wait_pool_ready(&pools, "bench", n, BUDGET).await
    };
    let cpu = server_cpu() - cpu0;
    let operator_cpu = operator.cpu_seconds() - operator0;
    let etcd = etcd_cpu() - etcd0;
    let machine = testkit::bench::cpu_spent(&machine0, &testkit::bench::cpu_by_name(), 8);
    if let Some(profile) = profile {
        profile.finish().await;
    }
    let took = all_running - created;
    let to_running = delta(&writes(client).await, &w);
    // What the pool said, checked against its members (not timed).
    let members = proxies.list(&ListParams::default()).await.unwrap();
    let running = members
        .items
        .iter()
        .filter(|p| instant::running(&serde_json::to_value(p).unwrap()))
        .count();
    assert_eq!(running, n + 1, "the pool said Ready, its members disagree");
    println!(
        "pool: {n} members Ready in {:.2} s from the pool's creation (the operator ready {:.2} s after its start); \
         CPU per member: operator {:.2} ms, etcd {:.2} ms",
        took.as_secs_f64(),
        ready_in.as_secs_f64(),
        operator_cpu * 1000.0 / n as f64,
        etcd * 1000.0 / n as f64
    );
    println!("  the machine over the pool: {machine}");
    for name in ["bench", "warm"] {
        pools.delete(name, &Default::default()).await.unwrap();
    }
    // The pool too: its finalizer goes after its members, and a pool left
    // with it would hold its namespace in `Terminating` for good.
    if !instant::wait_gone(&proxies, BUDGET).await || !instant::wait_gone(&pools, BUDGET).await {
        eprintln!(
            "pool or members not all gone; log: {}",
            operator.log_path().display()
        );
    }
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    (took, to_running, cpu)
}
