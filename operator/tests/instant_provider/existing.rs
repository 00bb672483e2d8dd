//! Existing (unmanaged) proxies on the real API server, probed for real:
//! three Proxies name a Squid that serves, a Squid that refuses (403) and
//! a port that accepts and never answers, all at addresses of the sandbox's
//! local range. No provider is called for any; each is `Running` with
//! `Ready=True/Existing`; `Healthy` follows the real probe (`True`,
//! `False/ProbeDenied`, `False/ProbeTimeout`); discovery and the Services
//! publish only the serving one; deleting them releases them at once.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Endpoints;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use testkit::squid::{Policy, Squid};

use crate::instant::{self, World};

const WITHIN: Duration = Duration::from_secs(120);

fn healthy(p: &Value) -> Option<(String, String)> {
    let c = p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Healthy")?;
    Some((
        c["status"].as_str()?.to_owned(),
        c["reason"].as_str()?.to_owned(),
    ))
}

pub async fn existing_proxies_are_probed_and_published_never_made() {
    let mut world = World::new().await;
    world.use_local_range();
    let range = world.local_range.clone().unwrap();
    let at = |last: u8| -> std::net::IpAddr {
        let net: std::net::Ipv4Addr = range.trim_end_matches("/24").parse().unwrap();
        let [a, b, c, _] = net.octets();
        std::net::Ipv4Addr::new(a, b, c, last).into()
    };
    // The upstream the probes CONNECT to through each proxy.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = upstream.local_addr().unwrap().to_string();
    let _upstream = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = upstream.accept().await {
            held.push(s);
        }
    });
    let serving = Squid::start(at(41), Policy::AllowAll);
    let refusing = Squid::start(at(42), Policy::DenyAll);
    let silent = testkit::silent::Silent::start_on(at(43)).await;
    let silent_addr = std::net::SocketAddr::new(at(43), silent.port());

    let client = &world.client;
    let responder = instant::responder().await;
    let ns = world.namespace("existing");
    let proxies = instant::proxies(client, &ns);
    for (name, addr) in [
        ("serving", serving.addr()),
        ("refusing", refusing.addr()),
        ("silent", silent_addr),
    ] {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "egress-proxies.io/v1alpha1",
            "kind": "Proxy",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"existing": {"address": addr.ip().to_string(), "port": addr.port()}},
        }))
        .unwrap();
        proxies.create(&PostParams::default(), &obj).await.unwrap();
    }
    let operator = world
        .operator(
            &ns,
            responder,
            &[
                "--probe-target",
                &target,
                "--probe-interval",
                "1s",
                "--probe-timeout",
                "2s",
                "--log",
                "info,kube=warn",
            ],
        )
        .await;

    let want = [
        ("serving", ("True", "ProbeSucceeded")),
        ("refusing", ("False", "ProbeDenied")),
        ("silent", ("False", "ProbeTimeout")),
    ];
    let deadline = Instant::now() + WITHIN;
    loop {
        let mut seen = Vec::new();
        for (name, _) in want {
            let p = serde_json::to_value(proxies.get(name).await.unwrap()).unwrap();
            seen.push((name, healthy(&p)));
        }
        let done = seen
            .iter()
            .zip(want)
            .all(|((_, got), (_, (s, r)))| got.as_ref().is_some_and(|(gs, gr)| gs == s && gr == r));
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "verdicts {seen:?}, want {want:?}; squid logs:\n{}\n{}\noperator log:\n{}",
            serving.log(),
            refusing.log(),
            operator.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (name, _) in want {
        let p = serde_json::to_value(proxies.get(name).await.unwrap()).unwrap();
        assert_eq!(p["status"]["phase"], "Running", "{name}");
        assert!(p["status"]["providerID"].is_null(), "{name}: nothing made");
        let ready = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap()
            .clone();
        assert_eq!(
            (ready["status"].clone(), ready["reason"].clone()),
            (json!("True"), json!("Existing")),
            "{name}"
        );
    }
    for op in ["create", "get", "delete"] {
        let label = format!("operation=\"{op}\"");
        let calls = operator
            .metric_sum(
                "egress_proxies_provider_operations_total",
                &[label.as_str()],
            )
            .await;
        assert_eq!(calls, 0.0, "no {op} for existing proxies");
    }

    // Discovery and the Services publish only the serving one.
    let healthy_listed: Value = serde_json::from_str(
        &operator
            .get(&format!("/proxies?namespace={ns}&healthy=true"))
            .await,
    )
    .unwrap();
    let names: Vec<&str> = healthy_listed["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["serving"]);
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), &ns);
    let addresses = async |name: &str| -> Option<BTreeSet<String>> {
        let ep = endpoints.get_opt(name).await.ok()??;
        Some(
            ep.subsets
                .unwrap_or_default()
                .iter()
                .flat_map(|s| s.addresses.iter().flatten().map(|a| a.ip.clone()))
                .collect(),
        )
    };
    let deadline = Instant::now() + WITHIN;
    loop {
        let (s, r, q) = (
            addresses("serving").await,
            addresses("refusing").await,
            addresses("silent").await,
        );
        let want_serving = BTreeSet::from([at(41).to_string()]);
        if s.as_ref() == Some(&want_serving)
            && r.as_ref().is_some_and(BTreeSet::is_empty)
            && q.as_ref().is_some_and(BTreeSet::is_empty)
        {
            break;
        }
        assert!(Instant::now() < deadline, "endpoints {s:?} {r:?} {q:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    instant::delete_all(&proxies).await;
    assert!(
        instant::wait_gone(&proxies, Duration::from_secs(30)).await,
        "released at once"
    );
    drop(operator);
    drop((serving, refusing, silent));
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
