//! ProxyPool on the real API server, with the instant provider over three
//! hosts: a pool fills, spread evenly; `kubectl scale` (the scale
//! subresource) resizes it, still even; a template change rolls it, and
//! no list taken during the roll shows fewer than `replicas -
//! maxUnavailable` members `Healthy` or more than `replicas + maxSurge`
//! members; deleting the pool deletes its members.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::instant::{self, World};

/// Members of the test pool, then after scaling.
const REPLICAS: usize = 30;
const SCALED: usize = 12;
const SURGE: usize = 3;
const UNAVAILABLE: usize = 1;
const WITHIN: Duration = Duration::from_secs(180);

/// The pool once `done` holds for it (polled every 100 ms); on timeout the
/// panic shows its status and the operator's log.
async fn wait_pool(
    api: &Api<DynamicObject>,
    operator: &instant::Operator,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let name = "egress";
    let deadline = Instant::now() + WITHIN;
    loop {
        let pool = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
        if done(&pool) {
            return pool;
        }
        assert!(
            Instant::now() < deadline,
            "pool {name} not {what} within {WITHIN:?}: {}\noperator log:\n{}",
            pool["status"],
            operator.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every member current, `Healthy`, and as many as `n`; the status is of
/// the spec's generation.
fn complete(n: usize) -> impl Fn(&Value) -> bool {
    move |pool| {
        let s = &pool["status"];
        let n = n as u64;
        s["observedGeneration"] == pool["metadata"]["generation"]
            && s["replicas"].as_u64() == Some(n)
            && s["updatedReplicas"].as_u64() == Some(n)
            && s["healthyReplicas"].as_u64() == Some(n)
            && s["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Progressing" && c["reason"] == "Complete")
            })
    }
}

/// The pool's members that are not being deleted, as JSON.
async fn live_members(api: &Api<DynamicObject>) -> Vec<Value> {
    let list = api
        .list(&ListParams::default().labels("egress-proxies.io/pool=egress"))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| serde_json::to_value(p).unwrap())
        .collect()
}

fn is_healthy(member: &Value) -> bool {
    serde_json::from_value::<fleet::ProxyStatus>(member["status"].clone())
        .is_ok_and(|s| s.is_healthy())
}

fn per_host(members: &[Value]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for m in members {
        let host = m["status"]["host"].as_str().unwrap_or("(none)").to_owned();
        *out.entry(host).or_default() += 1;
    }
    out
}

pub async fn a_pool_fills_scales_rolls_and_deletes_its_members() {
    let world = World::new().await;
    world.use_hosts(3);
    let client = &world.client;
    let responder = instant::responder().await;
    let ns = world.namespace("pool");
    let proxies = instant::proxies(client, &ns);
    let api = instant::pools(client, &ns);
    let operator = world
        .operator(
            &ns,
            responder,
            &["--probe-interval", "1s", "--log", "info,kube=warn"],
        )
        .await;
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "egress-proxies.io/v1alpha1",
        "kind": "ProxyPool",
        "metadata": {"name": "egress", "namespace": ns},
        "spec": {
            "replicas": REPLICAS,
            "template": {
                "metadata": {"labels": {"rev": "1"}},
                "spec": {"provider": world.entry}
            },
            "strategy": {"maxSurge": SURGE, "maxUnavailable": UNAVAILABLE}
        }
    }))
    .unwrap();
    let started = Instant::now();
    api.create(&PostParams::default(), &pool).await.unwrap();

    // Fills, spread evenly over the three hosts.
    let filled = wait_pool(&api, &operator, "complete", complete(REPLICAS)).await;
    println!(
        "pool of {REPLICAS}: every member Healthy in {:?}",
        started.elapsed()
    );
    let members = live_members(&proxies).await;
    assert_eq!(members.len(), REPLICAS);
    let even = REPLICAS / 3;
    assert_eq!(
        per_host(&members),
        BTreeMap::from([
            ("h1".into(), even),
            ("h2".into(), even),
            ("h3".into(), even)
        ])
    );
    assert_eq!(filled["status"]["skew"], 0);
    // The fleet gauges say the same, from the leader's caches (which may
    // trail the status this test read by a watch event).
    for (name, labels, want) in [
        (
            "egress_proxies_operator_pool_replicas",
            vec!["pool=\"egress\"", "state=\"desired\""],
            REPLICAS,
        ),
        (
            "egress_proxies_operator_pool_replicas",
            vec!["pool=\"egress\"", "state=\"healthy\""],
            REPLICAS,
        ),
        (
            "egress_proxies_operator_proxies",
            vec!["phase=\"Running\"", "healthy=\"true\""],
            REPLICAS,
        ),
        // Three hosts, each reached by the latest check.
        ("egress_proxies_operator_host_reachable", vec![], 3),
    ] {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = operator.metric_sum(name, &labels).await;
            if got == want as f64 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name}{labels:?} = {got}, not {want}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Members are announced by the pool (`MembersCreated`), not each by a
    // `Created` Event of its own.
    let reasons = event_reasons(client, &ns).await;
    assert!(
        !reasons.iter().any(|(_, r)| r == "Created"),
        "a member recorded `Created`: {reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(k, r)| k == "ProxyPool" && r == "MembersCreated"),
        "{reasons:?}"
    );
    for m in &members {
        let owner = &m["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "ProxyPool");
        assert_eq!(owner["uid"], filled["metadata"]["uid"]);
        assert_eq!(owner["controller"], true);
        assert_eq!(m["metadata"]["labels"]["rev"], "1");
        // Who made the member is on record (not "unknown").
        let makers: Vec<&Value> = m["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["fieldsV1"]["f:spec"].is_object())
            .map(|e| &e["manager"])
            .collect();
        assert_eq!(makers, ["egress-operator-pool"], "{}", m["metadata"]);
    }

    // `kubectl scale` (the scale subresource).
    world
        .kube
        .kubectl(&[
            "scale",
            "proxypool",
            "egress",
            "-n",
            &ns,
            "--replicas",
            &SCALED.to_string(),
        ])
        .unwrap();
    wait_pool(&api, &operator, "scaled", complete(SCALED)).await;
    let scale = api.get_scale("egress").await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(SCALED as i32));
    let status = scale.status.unwrap();
    assert_eq!(status.replicas, SCALED as i32);
    assert_eq!(
        status.selector.as_deref(),
        Some("egress-proxies.io/pool=egress")
    );
    let even = SCALED / 3;
    assert_eq!(
        per_host(&live_members(&proxies).await),
        BTreeMap::from([
            ("h1".into(), even),
            ("h2".into(), even),
            ("h3".into(), even)
        ]),
        "scaling down keeps the spread"
    );

    // A template change rolls the pool within its bounds.
    let rolled_at = Instant::now();
    api.patch(
        "egress",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}})),
    )
    .await
    .unwrap();
    let done = complete(SCALED);
    let (mut lists, mut fewest_healthy, mut most_members) = (0, usize::MAX, 0);
    loop {
        let members = live_members(&proxies).await;
        let healthy = members.iter().filter(|m| is_healthy(m)).count();
        lists += 1;
        fewest_healthy = fewest_healthy.min(healthy);
        most_members = most_members.max(members.len());
        assert!(
            healthy + UNAVAILABLE >= SCALED,
            "{healthy} Healthy during the roll, at least {} required",
            SCALED - UNAVAILABLE
        );
        assert!(
            members.len() <= SCALED + SURGE,
            "{} members during the roll",
            members.len()
        );
        let pool = serde_json::to_value(api.get("egress").await.unwrap()).unwrap();
        if done(&pool) {
            break;
        }
        assert!(
            rolled_at.elapsed() < WITHIN,
            "the roll did not end: {}",
            pool["status"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "roll of {SCALED}: {:?}, {lists} lists, fewest Healthy {fewest_healthy}, most members {most_members}",
        rolled_at.elapsed()
    );
    let members = live_members(&proxies).await;
    assert!(
        members
            .iter()
            .all(|m| m["metadata"]["labels"]["rev"] == "2")
    );
    assert!(most_members > SCALED, "the roll surged");

    // Deleting the pool deletes its members (and their instances: each
    // member's finalizer) before the pool goes.
    api.delete("egress", &Default::default()).await.unwrap();
    assert!(instant::wait_gone(&proxies, WITHIN).await, "members left");
    let deadline = Instant::now() + WITHIN;
    while api.get_opt("egress").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the pool stayed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let created = operator
        .metric("egress_proxies_operator_pool_member_writes_total{op=\"create\",outcome=\"ok\"}")
        .await;
    println!("members made: {created}");
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// `(kind of the regarding object, reason)` of every Event in `ns`.
async fn event_reasons(client: &kube::Client, ns: &str) -> Vec<(String, String)> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), ns);
    events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| {
            (
                e.regarding.and_then(|r| r.kind).unwrap_or_default(),
                e.reason.unwrap_or_default(),
            )
        })
        .collect()
}
