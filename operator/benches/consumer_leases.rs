//! `cargo bench -p operator --bench consumer_leases` (`cargo xtask bench
//! operator --bench consumer_leases`): consumer lease throughput against
//! the sandbox's real kube-apiserver.
//!
//! [`PROXIES`] Proxies (`LEASE_BENCH_PROXIES`) in one namespace, made
//! Running and Healthy by the operator over the instant provider
//! (`tests/support/instant.rs`). [`CONSUMERS`] consumers
//! (`LEASE_BENCH_CONSUMERS`), tasks sharing one ServiceAccount token with
//! deploy/samples/lease-consumer.yaml's Role, each in a loop for
//! [`WINDOW`] (`LEASE_BENCH_SECS`): `POST /leases?namespace=NS` and, when
//! granted, `DELETE` the lease at once (release); a `409 NoneFree` waits
//! [`NONE_FREE_PAUSE`] and asks again. Each request is a new connection.
//!
//! The peer, in the same run, is the API server's floor for the same race:
//! the same number of tasks (as the same ServiceAccount, so the API
//! server's priority and fairness treats both sides alike) over the same
//! number of proxies, each creating
//! the Lease of a proxy drawn at random directly (no operator, no HTTP hop,
//! no auth, no choice of a free one: a 409 is its `NoneFree`, with the same
//! pause) and deleting it at once: one write per grant and one per
//! release.
//!
//! Printed: grants per second and grant latency p50/p95 for both, the
//! ratios, the `NoneFree` answers per second, and the Lease writes per
//! grant counted by the API server (`apiserver_request_total`; 409s
//! included, as they are writes the server refused). Everything shares
//! this machine's cores; the ratios are the figures that travel.
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

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};
use testkit::bench::knob;

use consumer::{Consumer, http_request};
use instant::World;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

const PROXIES: usize = 50;
const CONSUMERS: usize = 100;
const WINDOW: Duration = Duration::from_secs(10);
const NONE_FREE_PAUSE: Duration = Duration::from_millis(50);
const BUDGET: Duration = Duration::from_secs(300);

fn main() -> ExitCode {
    instant::bench_main("consumer_leases", bench)
}

/// What one side measured.
#[derive(Default)]
struct Tally {
    grants: u64,
    none_free: u64,
    latencies: Vec<Duration>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.grants += other.grants;
        self.none_free += other.none_free;
        self.latencies.extend(other.latencies);
    }

    fn percentile(&mut self, p: f64) -> Duration {
        self.latencies.sort();
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies.get(i).copied().unwrap_or_default()
    }
}

async fn bench() {
    let n = knob("LEASE_BENCH_PROXIES", PROXIES as u64) as usize;
    let consumers = knob("LEASE_BENCH_CONSUMERS", CONSUMERS as u64) as usize;
    let window = Duration::from_secs(knob("LEASE_BENCH_SECS", WINDOW.as_secs()));
    let world = World::new().await;
    let responder = instant::responder().await;
    println!(
        "consumer_leases bench: {consumers} consumers over {n} proxies, {} s per side, kube-apiserver {}",
        window.as_secs(),
        world.kube.version
    );
    let ns = world.namespace("bench-lease");
    let api = instant::proxies(&world.client, &ns);
    instant::create_proxies(&api, &ns, &world.entry, n).await;
    let operator = world
        .operator(&ns, responder, &["--log", "info,kube=warn"])
        .await;
    instant::wait_all(&api, n, BUDGET, "Healthy", instant::healthy).await;
    let addr = operator.http_addr();
    let leaser = Arc::new(Consumer::leaser(&world.kube, &ns, "bench-leaser"));

    // Ours.
    let before = instant::writes(&world.client).await;
    let deadline = Clock::now() + window;
    let started = Clock::now();
    let tasks: Vec<_> = (0..consumers)
        .map(|_| {
            let (addr, ns, leaser) = (addr.clone(), ns.clone(), leaser.clone());
            tokio::spawn(async move {
                let mut t = Tally::default();
                let grant = format!("/leases?namespace={ns}");
                while Clock::now() < deadline {
                    let asked = Clock::now();
                    let (code, body) =
                        http_request(&addr, "POST", &grant, Some(leaser.token())).await;
                    match code {
                        201 => {
                            t.latencies.push(asked.elapsed());
                            t.grants += 1;
                            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                            let path = v["path"].as_str().unwrap();
                            let (code, body) =
                                http_request(&addr, "DELETE", path, Some(leaser.token())).await;
                            assert_eq!(code, 204, "release: {body}");
                        }
                        409 => {
                            t.none_free += 1;
                            tokio::time::sleep(NONE_FREE_PAUSE).await;
                        }
                        _ => panic!("grant: {code} {body}"),
                    }
                }
                t
            })
        })
        .collect();
    let mut ours = Tally::default();
    for task in tasks {
        ours.merge(task.await.unwrap());
    }
    let ours_elapsed = started.elapsed();
    let after = instant::writes(&world.client).await;
    let d = instant::delta(&after, &before);
    let lease_writes: u64 = d
        .iter()
        .filter(|(k, _)| k.starts_with("leases POST") || k.starts_with("leases PUT"))
        .map(|(_, v)| v)
        .sum();

    // The peer: the same race without the operator: each task creates the
    // Lease of a proxy drawn at random (a 409 is its NoneFree: the same
    // pause, then again) and deletes it at once.
    // It runs as a ServiceAccount too (the operator does): the API server's
    // priority and fairness would exempt the sandbox's admin.
    let peer_client = service_account_client(&world, &ns, &leaser).await;
    let leases: Api<Lease> = Api::namespaced(peer_client, &ns);
    let deadline = Clock::now() + window;
    let started = Clock::now();
    let tasks: Vec<_> = (0..consumers)
        .map(|i| {
            let leases = leases.clone();
            tokio::spawn(async move {
                let mut t = Tally::default();
                let mut draw = u64::try_from(i)
                    .unwrap()
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    | 1;
                while Clock::now() < deadline {
                    // xorshift: a different proxy each attempt.
                    draw ^= draw << 13;
                    draw ^= draw >> 7;
                    draw ^= draw << 17;
                    let name = format!("direct-{}", draw % n as u64);
                    let lease = Lease {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            ..ObjectMeta::default()
                        },
                        spec: Some(LeaseSpec {
                            holder_identity: Some(format!("consumer-{i}")),
                            lease_duration_seconds: Some(60),
                            ..LeaseSpec::default()
                        }),
                    };
                    let asked = Clock::now();
                    match leases.create(&PostParams::default(), &lease).await {
                        Ok(_) => {
                            t.latencies.push(asked.elapsed());
                            t.grants += 1;
                            leases
                                .delete(&name, &DeleteParams::default())
                                .await
                                .unwrap();
                        }
                        Err(kube::Error::Api(s)) if s.code == 409 => {
                            t.none_free += 1;
                            tokio::time::sleep(NONE_FREE_PAUSE).await;
                        }
                        Err(e) => panic!("create: {e}"),
                    }
                }
                t
            })
        })
        .collect();
    let mut peer = Tally::default();
    for task in tasks {
        peer.merge(task.await.unwrap());
    }
    let peer_elapsed = started.elapsed();

    let rate = |t: &Tally, e: Duration| t.grants as f64 / e.as_secs_f64();
    let (ours_rate, peer_rate) = (rate(&ours, ours_elapsed), rate(&peer, peer_elapsed));
    let (ours_p50, ours_p95) = (ours.percentile(0.5), ours.percentile(0.95));
    let (peer_p50, peer_p95) = (peer.percentile(0.5), peer.percentile(0.95));
    println!("| | grants/s | p50 | p95 | NoneFree/s |");
    println!("|---|---|---|---|---|");
    println!(
        "| /leases (grant + release) | {ours_rate:.0} | {:.1} ms | {:.1} ms | {:.0} |",
        ms(ours_p50),
        ms(ours_p95),
        ours.none_free as f64 / ours_elapsed.as_secs_f64()
    );
    println!(
        "| direct Lease create + delete (peer) | {peer_rate:.0} | {:.1} ms | {:.1} ms | {:.0} |",
        ms(peer_p50),
        ms(peer_p95),
        peer.none_free as f64 / peer_elapsed.as_secs_f64()
    );
    println!(
        "ratios (ours / peer): grants/s {:.2}x, p50 {:.2}x, p95 {:.2}x",
        ours_rate / peer_rate,
        ms(ours_p50) / ms(peer_p50),
        ms(ours_p95) / ms(peer_p95)
    );
    println!(
        "Lease writes per grant (grant + release, 409s included): {:.2}; writes: {}",
        lease_writes as f64 / ours.grants.max(1) as f64,
        instant::show(&d)
    );
    // The operator releases the Proxies' finalizers, then stops.
    instant::delete_all(&api).await;
    instant::wait_gone(&api, BUDGET).await;
    // ... and its sweeper deletes their lease records (every 5 s).
    let records: Api<Lease> = Api::namespaced(world.client.clone(), "egress-proxies-system");
    let ours = |l: &Lease| {
        l.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(fleet::consumer_lease::PROXY_ANNOTATION))
            .is_some_and(|p| p.starts_with(&format!("{ns}/")))
    };
    let swept = Clock::now() + Duration::from_secs(30);
    while Clock::now() < swept {
        let list = kube::api::ListParams::default().labels(fleet::consumer_lease::LABEL);
        let left = records.list(&list).await.unwrap().items;
        if !left.iter().any(ours) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// A client of `who` (a ServiceAccount) allowed to create and delete
/// Leases in `ns`.
async fn service_account_client(world: &World, ns: &str, who: &Consumer) -> kube::Client {
    let name = who.user.rsplit(':').next().unwrap();
    let rbac = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: bench-direct-leases\n  namespace: {ns}\nrules:\n  - apiGroups: [coordination.k8s.io]\n    resources: [leases]\n    verbs: [create, delete]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: bench-direct-leases\n  namespace: {ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: bench-direct-leases\nsubjects:\n  - kind: ServiceAccount\n    name: {name}\n    namespace: {ns}\n"
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), rbac).unwrap();
    world
        .kube
        .kubectl(&["apply", "-f", &file.path().to_string_lossy()])
        .unwrap();
    let yaml = world.kube.kubeconfig_with_token(&who.user, who.token());
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
