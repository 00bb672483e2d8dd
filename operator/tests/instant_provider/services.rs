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
        .metric("operator_service_writes_total{object=\"endpoints\",outcome=\"ok\"}")
        .await;
    println!("endpoints writes: {writes}");
    assert!(instant::wait_gone(&proxies, WITHIN).await);
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
