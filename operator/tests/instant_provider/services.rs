//! The Service sync on the real API server (1.20: Endpoints, no
//! EndpointSlices v1), with instances at distinct addresses of the
//! sandbox's local range: a pool's Service and a lone Proxy's are
//! selector-less and owned by them; their Endpoints are exactly the proxies
//! that are `Healthy`; a member whose Squid stops answering leaves its
//! pool's Endpoints within a probe round of its verdict and comes back
//! when it answers again; deleting the pool or the Proxy deletes its
//! Service and Endpoints.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::api::{Api, ListParams};
use serde_json::Value;

use crate::instant::{self, World};

const WITHIN: Duration = Duration::from_secs(120);
/// How long after a member's `Healthy` turned `False` its address may
/// still be in the Endpoints: the sync's debounce and one write, with
/// slack for a loaded machine.
const ENDPOINTS_LAG: Duration = Duration::from_secs(3);

async fn addresses(api: &Api<Endpoints>, name: &str) -> Option<BTreeSet<String>> {
    let ep = api.get_opt(name).await.unwrap()?;
    Some(
        ep.subsets
            .unwrap_or_default()
            .iter()
            .flat_map(|s| s.addresses.iter().flatten().map(|a| a.ip.clone()))
            .collect(),
    )
}

async fn until<T>(
    operator: &instant::Operator,
    what: &str,
    mut f: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + WITHIN;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "not {what} within {WITHIN:?}; operator log:\n{}",
            operator.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn healthy_condition(p: &Value) -> Option<&str> {
    p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Healthy")?["status"]
        .as_str()
}

pub async fn services_carry_exactly_the_healthy_proxies() {
    let mut world = World::new().await;
    world.use_local_range();
    let client = &world.client;
    let responder = instant::responder_on_all(world.dir.path()).await;
    let ns = world.namespace("svc");
    let proxies = instant::proxies(client, &ns);
    let pools = instant::pools(client, &ns);
    instant::create_proxy(&proxies, &ns, &world.entry, "solo").await;
    instant::create_pool(&pools, &ns, &world.entry, "egress", 3).await;
    let operator = world
        .operator(
            &ns,
            responder,
            &["--probe-interval", "1s", "--log", "info,kube=warn"],
        )
        .await;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), &ns);

    let all = until(&operator, "every proxy in its Endpoints", async || {
        let pool = addresses(&endpoints, "egress").await?;
        let solo = addresses(&endpoints, "solo").await?;
        (pool.len() == 3 && solo.len() == 1).then_some((pool, solo))
    })
    .await;
    // Exactly the proxies' own addresses, from the local range.
    let listed = proxies.list(&ListParams::default()).await.unwrap().items;
    let ip_of = |name: &str| -> String {
        let p = listed
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap();
        serde_json::to_value(p).unwrap()["status"]["ip"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let members: BTreeSet<String> = listed
        .iter()
        .filter(|p| p.metadata.name.as_deref() != Some("solo"))
        .map(|p| ip_of(p.metadata.name.as_deref().unwrap()))
        .collect();
    assert_eq!(all.0, members);
    assert_eq!(all.1, BTreeSet::from([ip_of("solo")]));
    assert!(
        members.iter().all(|ip| ip.starts_with("10.213.30.")),
        "{members:?}"
    );
    for (name, kind) in [("egress", "ProxyPool"), ("solo", "Proxy")] {
        let svc = services.get(name).await.unwrap();
        let spec = svc.spec.clone().unwrap();
        assert_eq!(spec.selector, None, "{name}: selector-less");
        let port = &spec.ports.unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some("proxy"), i32::from(responder.port()))
        );
        assert!(
            spec.cluster_ip
                .is_some_and(|ip| !ip.is_empty() && ip != "None")
        );
        assert_eq!(svc.metadata.owner_references.unwrap()[0].kind, kind);
    }

    // One member's Squid stops answering: its address leaves the pool's
    // Endpoints once its verdict is False, and returns with it.
    let member = listed
        .iter()
        .find(|p| p.metadata.name.as_deref() != Some("solo"))
        .unwrap();
    let name = member.metadata.name.clone().unwrap();
    let ip = ip_of(&name);
    world.deny(&ip, true);
    until(&operator, "the member's verdict False", async || {
        let p = serde_json::to_value(proxies.get(&name).await.ok()?).unwrap();
        (healthy_condition(&p) == Some("False")).then_some(())
    })
    .await;
    let verdict_seen = Instant::now();
    until(&operator, "the member out of the Endpoints", async || {
        let pool = addresses(&endpoints, "egress").await?;
        (!pool.contains(&ip)).then_some(())
    })
    .await;
    let lag = verdict_seen.elapsed();
    println!("endpoints followed the verdict after {lag:?}");
    assert!(lag <= ENDPOINTS_LAG, "{lag:?}");
    assert_eq!(addresses(&endpoints, "egress").await.unwrap().len(), 2);
    world.deny(&ip, false);
    until(&operator, "the member back in the Endpoints", async || {
        let pool = addresses(&endpoints, "egress").await?;
        pool.contains(&ip).then_some(())
    })
    .await;

    // The pool and the Proxy deleted: their Services and Endpoints go.
    pools.delete("egress", &Default::default()).await.unwrap();
    proxies.delete("solo", &Default::default()).await.unwrap();
    until(&operator, "the Services and Endpoints gone", async || {
        let left = services
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .len()
            + endpoints
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .len();
        (left == 0).then_some(())
    })
    .await;
    let writes = operator
        .metric("egress_proxies_operator_service_writes_total{object=\"endpoints\",outcome=\"ok\"}")
        .await;
    println!("endpoints writes: {writes}");
    assert!(instant::wait_gone(&proxies, WITHIN).await);
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// How long the refused-write test keeps the Proxy cache changing.
const CHURN: Duration = Duration::from_secs(12);

/// A Service the API server refuses (a ResourceQuota allows none in its
/// namespace) is tried again
/// after doubling delays, not on every pass, though every change of the
/// Proxy cache makes a pass: over [`CHURN`] of changes every 100 ms, at
/// most 6 attempts (due at 0, 1, 3, 7 s and, jittered, up to 7.5 and 15 s
/// later), where a retry per pass made one per change.
pub async fn a_refused_service_write_is_retried_after_a_backoff() {
    let world = World::new().await;
    let client = &world.client;
    let responder = instant::responder().await;
    let ns = world.namespace("svc-refused");
    let proxies = instant::proxies(client, &ns);
    instant::create_proxy(&proxies, &ns, &world.entry, "solo").await;
    let quota = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        quota.path(),
        format!(
            "apiVersion: v1\nkind: ResourceQuota\nmetadata: {{name: no-services, namespace: {ns}}}\nspec: {{hard: {{services: \"0\"}}}}\n"
        ),
    )
    .unwrap();
    world
        .kube
        .kubectl(&["apply", "-f", &quota.path().to_string_lossy()])
        .unwrap();
    // No quota controller runs here to compute the quota's status, and a
    // quota without one is not enforced: write it as that controller would.
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> =
        Api::namespaced(client.clone(), &ns);
    let status =
        serde_json::json!({"status": {"hard": {"services": "0"}, "used": {"services": "0"}}});
    quotas
        .patch_status(
            "no-services",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .unwrap();
    // The quota admission reads quotas from the API server's own cache:
    // until it has this one, a Service is still admitted. Wait until one
    // is refused.
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let probe: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "quota-probe"},
        "spec": {"ports": [{"port": 3128}]}
    }))
    .unwrap();
    let deadline = Instant::now() + WITHIN;
    while services.create(&Default::default(), &probe).await.is_ok() {
        services
            .delete("quota-probe", &Default::default())
            .await
            .unwrap();
        assert!(
            Instant::now() < deadline,
            "the quota never refused a Service"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let operator = world
        .operator(&ns, responder, &["--log", "info,kube=warn"])
        .await;
    let refused = || {
        operator.metric_sum(
            "egress_proxies_operator_service_writes_total",
            &["object=\"service\"", "outcome=\"error\""],
        )
    };
    until(&operator, "a refused Service write", async || {
        (refused().await >= 1.0).then_some(())
    })
    .await;
    let started = Instant::now();
    let mut changes = 0u32;
    while started.elapsed() < CHURN {
        let patch =
            serde_json::json!({"metadata": {"annotations": {"churn": changes.to_string()}}});
        proxies
            .patch(
                "solo",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap();
        changes += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let attempts = refused().await;
    println!("{changes} changes in {CHURN:?}: {attempts} refused Service writes");
    assert!(
        (2.0..=6.0).contains(&attempts),
        "{attempts} attempts at a refused Service write over {changes} changes; operator log: {}",
        operator.log_path().display()
    );
    instant::delete_all(&proxies).await;
    instant::wait_gone(&proxies, WITHIN).await;
}
