//! `cargo xtask bench operator --bench failover`: what a client of a pool
//! sees when one member's QEMU dies, with the provider's instance events
//! (libvirt lifecycle events) and without them (`--provider-events false`:
//! the operator then learns it from its probes or its `Running` poll), in
//! the same run.
//!
//! Each round: the real operator binary under deploy/'s RBAC, the sandbox's
//! host1, a ProxyPool of three real proxy guests (QEMU under TCG, Squid)
//! with the operator's default probe interval and thresholds; once all
//! three are `Healthy` and in the pool's Endpoints, a client on the node
//! loops CONNECTs to the upstream through the pool's cluster IP (kube-proxy
//! on the sandbox's node), one every [`CLIENT_EVERY`] with a
//! [`CLIENT_TIMEOUT`]; then one member's QEMU is killed. Measured from the
//! kill:
//! - **out of the endpoints**: until the pool's Endpoints no longer list
//!   the member's address;
//! - **client failures**: how many of the client's CONNECTs failed, and
//!   until when (the last failure's start);
//! - **replacement Healthy**: until the pool has three `Healthy` members
//!   again, the killed one replaced.
//!
//! Prints each round and the medians with ratios (poll-only / events).
//! Nothing is asserted. `FAILOVER_ROUNDS` (default 1) rounds of each,
//! interleaved. Needs the sandbox's node (`cargo xtask bench` starts it).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::print_stdout,
    clippy::print_stderr,
    dead_code
)]

#[path = "../tests/support/operator_account.rs"]
mod operator_account;

use std::net::SocketAddr;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use operator_account::{Lease, OperatorAccount};
use serde_json::json;
use testkit::Descriptor;
use testkit::bench::median;
use testkit::providers_yaml::{Host, Image, ProvidersYaml};

const OPERATOR_NS: &str = "egress-proxies-system";
const LEASE: &str = "egress-proxies-operator";
const MEMBERS: usize = 3;
const CLIENT_EVERY: Duration = Duration::from_millis(250);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Three guests booting under emulation, or one replacement.
const BOOT_BOUND: Duration = Duration::from_secs(900);

fn main() -> ExitCode {
    if testkit::bench::filtered_out("failover") {
        return ExitCode::SUCCESS;
    }
    let d = Descriptor::require();
    testkit::pods::require_node(&d);
    let rounds = testkit::bench::knob("FAILOVER_ROUNDS", 1) as usize;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let kube = d.kube.clone().unwrap();
        let client = admin(&kube).await;
        testkit::kubectl::install_deploy(&kube);
        let mut events = Vec::new();
        let mut poll = Vec::new();
        for r in 0..rounds {
            for with_events in [true, false] {
                let f = round(&d, &client, with_events).await;
                println!(
                    "round {r} {}: out of the endpoints {:.1} s; client: {} of {} CONNECTs failed, the last {:.1} s after the kill; replacement Healthy {:.1} s",
                    if with_events { "events" } else { "poll-only" },
                    f.out_of_endpoints.as_secs_f64(),
                    f.failures,
                    f.attempts,
                    f.last_failure.as_secs_f64(),
                    f.replaced.as_secs_f64(),
                );
                if with_events {
                    events.push(f);
                } else {
                    poll.push(f);
                }
            }
        }
        let med = |v: &[Figures], f: Field| median(&v.iter().map(f).collect::<Vec<_>>());
        println!("\nfailover of one of {MEMBERS} members (median of {rounds}):");
        println!("  {:<36} {:>10} {:>10} {:>8}", "", "events", "poll-only", "ratio");
        let rows: [(&str, Field); 4] = [
            ("out of the endpoints (s)", |f| f.out_of_endpoints.as_secs_f64()),
            ("client: failed CONNECTs", |f| f.failures as f64),
            ("client: last failure after (s)", |f| f.last_failure.as_secs_f64()),
            ("replacement Healthy (s)", |f| f.replaced.as_secs_f64()),
        ];
        for (name, f) in rows {
            let (e, p) = (med(&events, f), med(&poll, f));
            let ratio = if e > 0.0 { format!("{:.1}×", p / e) } else { "—".to_owned() };
            println!("  {name:<36} {e:>10.1} {p:>10.1} {ratio:>8}");
        }
    });
    ExitCode::SUCCESS
}

/// A figure of a round, as a number.
type Field = fn(&Figures) -> f64;

/// One round's figures, from the kill.
struct Figures {
    out_of_endpoints: Duration,
    failures: usize,
    attempts: usize,
    last_failure: Duration,
    replaced: Duration,
}

async fn admin(k: &testkit::KubeService) -> Client {
    let kubeconfig = Kubeconfig::read_from(&k.kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// The operator child, killed on drop.
struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn round(d: &Descriptor, client: &Client, with_events: bool) -> Figures {
    let kube = d.kube.clone().unwrap();
    let id = &testkit::names::random_hex()[..8];
    let ns = format!("bench-fo-{id}");
    kube.kubectl(&["create", "namespace", &ns]).unwrap();
    let entry = format!("kvm2-fo{id}");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("providers.yaml");
    let host1 = Host::sandbox(d, "host1").with_socket(&d.remote_socket);
    std::fs::write(
        &config,
        ProvidersYaml::sandbox(d, &entry)
            .hosts([host1])
            .images([Image::guest(d)])
            .machine_type(1, "512MiB", "4GiB")
            .proxy(3128, [d.guest_net.cidr()])
            .render(),
    )
    .unwrap();
    let account = OperatorAccount::new(&kube, &ns, "operator", Lease::Deploy);
    let kubeconfig = dir.path().join("operator.kubeconfig");
    account.write_kubeconfig(&kube, &kubeconfig);
    let _ =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), OPERATOR_NS)
            .delete(LEASE, &DeleteParams::default())
            .await;
    let log = dir.path().join("operator.log");
    let target = d.guest_net.upstream.to_string();
    let operator = Operator(
        Command::new(env!("CARGO_BIN_EXE_operator"))
            .arg("run")
            .arg("--providers-config")
            .arg(&config)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "--namespace",
                &ns,
                "--cluster-id",
                &format!("bench-fo-{id}"),
            ])
            .args(["--http-addr", "127.0.0.1:0", "--probe-target", &target])
            .args(["--provider-events", &with_events.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );

    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("egress-proxies.io", "v1alpha1", "ProxyPool"),
        "proxypools",
    );
    let pools: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let proxies: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("egress-proxies.io", "v1alpha1", "Proxy"),
            "proxies",
        ),
    );
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "egress-proxies.io/v1alpha1",
        "kind": "ProxyPool",
        "metadata": {"name": "egress", "namespace": ns},
        "spec": {"replicas": MEMBERS, "template": {"spec": {"provider": entry}}}
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.unwrap();
    let healthy = |pools: Api<DynamicObject>| async move {
        let p = serde_json::to_value(pools.get("egress").await.ok()?).ok()?;
        (p["status"]["healthyReplicas"] == MEMBERS).then_some(())
    };
    wait("all members Healthy", BOOT_BOUND, &log, || {
        healthy(pools.clone())
    })
    .await;
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), &ns);
    let addresses = |endpoints: Api<Endpoints>| async move {
        let e = endpoints.get("egress").await.ok()?;
        Some(
            e.subsets
                .unwrap_or_default()
                .into_iter()
                .flat_map(|s| s.addresses.unwrap_or_default())
                .map(|a| a.ip)
                .collect::<Vec<String>>(),
        )
    };
    wait(
        "the Endpoints list every member",
        Duration::from_secs(60),
        &log,
        || async {
            addresses(endpoints.clone())
                .await
                .filter(|a| a.len() == MEMBERS)
        },
    )
    .await;
    let service = Api::<Service>::namespaced(client.clone(), &ns)
        .get("egress")
        .await
        .unwrap();
    let spec = service.spec.unwrap();
    let vip = SocketAddr::new(
        spec.cluster_ip.unwrap().parse().unwrap(),
        u16::try_from(spec.ports.unwrap()[0].port).unwrap(),
    );

    // The client: a CONNECT through the cluster IP every CLIENT_EVERY.
    let stop = Arc::new(AtomicBool::new(false));
    let client_loop = std::thread::spawn({
        let (stop, target) = (stop.clone(), target.clone());
        move || {
            let mut outcomes = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let ok = testkit::pods::connect_status_within(vip, &target, None, CLIENT_TIMEOUT)
                    == Some(200);
                outcomes.push((started, ok));
                std::thread::sleep(CLIENT_EVERY.saturating_sub(started.elapsed()));
            }
            outcomes
        }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;

    // The victim: the first member, its QEMU by its pid file.
    let member = proxies.list(&Default::default()).await.unwrap().items[0].clone();
    let member = serde_json::to_value(&member).unwrap();
    let victim_ip = member["status"]["ip"].as_str().unwrap().to_owned();
    let victim = member["metadata"]["name"].as_str().unwrap().to_owned();
    let replacements = member["status"]["replacements"].as_u64().unwrap_or(0);
    let provider_id = member["status"]["providerID"].as_str().unwrap();
    let domain = provider_id.rsplit('/').next().unwrap().to_owned();
    let pid = std::fs::read_to_string(format!("/run/libvirt/qemu/{domain}.pid"))
        .unwrap_or_else(|e| panic!("the pid of {domain}: {e}"));
    let killed = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .unwrap()
            .success()
    );
    wait(
        "the member out of the Endpoints",
        BOOT_BOUND,
        &log,
        || async {
            addresses(endpoints.clone())
                .await
                .filter(|a| !a.contains(&victim_ip))
        },
    )
    .await;
    let out_of_endpoints = killed.elapsed();
    wait("a replacement Healthy", BOOT_BOUND, &log, || async {
        let p = serde_json::to_value(pools.get("egress").await.ok()?).ok()?;
        // The replacement keeps the Proxy and its instance's name; its
        // status counts the replacement.
        let m = serde_json::to_value(proxies.get(&victim).await.ok()?).ok()?;
        let replaced = m["status"]["replacements"].as_u64().unwrap_or(0) > replacements;
        (replaced && p["status"]["healthyReplicas"] == MEMBERS).then_some(())
    })
    .await;
    let replaced = killed.elapsed();
    stop.store(true, Ordering::SeqCst);
    let outcomes = client_loop.join().unwrap();
    let after: Vec<&(Instant, bool)> = outcomes.iter().filter(|(t, _)| *t >= killed).collect();
    let failed: Vec<&&(Instant, bool)> = after.iter().filter(|(_, ok)| !ok).collect();
    let before_failures = outcomes.iter().filter(|(t, ok)| *t < killed && !ok).count();
    if before_failures > 0 {
        eprintln!("note: {before_failures} CONNECTs failed before the kill");
    }
    let figures = Figures {
        out_of_endpoints,
        failures: failed.len(),
        attempts: after.len(),
        last_failure: failed
            .last()
            .map_or(Duration::ZERO, |(t, _)| t.duration_since(killed)),
        replaced,
    };

    pools
        .delete("egress", &DeleteParams::default())
        .await
        .unwrap();
    wait("the pool gone", Duration::from_secs(300), &log, || async {
        pools.get_opt("egress").await.ok()?.is_none().then_some(())
    })
    .await;
    drop(operator);
    drop(account);
    let _ = kube.kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    figures
}

/// Polls `f` every 500 ms until it gives a value; panics with the
/// operator's log after `within`.
async fn wait<T, F, Fut>(what: &str, within: Duration, log: &std::path::Path, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() >= deadline {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "gave up waiting for {what}; the operator's log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
