//! Consumer leases (`/leases`) on the real API server, over five healthy
//! existing proxies (the responder at addresses of the sandbox's local
//! range, each probed for real):
//!
//! - 20 consumers (two ServiceAccounts holding deploy/samples/'s lease
//!   Role, ten requests each), half of them asking a second replica, race
//!   for 5 proxies: exactly 5 get a lease, each on another proxy, and 15
//!   get `409 NoneFree`;
//! - a caller without the `lease` verb (even one that may read discovery)
//!   gets 403; a lease is renewed only by the user who holds it;
//! - a released lease is 410 `Lost` and its proxy is granted again;
//! - a lease not renewed within its TTL is 410 `Expired`, and its proxy is
//!   granted to the next consumer;
//! - a leased proxy that turns unhealthy ends its lease (410
//!   `ProxyUnhealthy` on the holder's renewal), and a deleted one too (410
//!   `ProxyGone`);
//! - leases survive an operator restart: a new process renews them;
//! - deploy/samples/lease-client.sh takes a lease, renews it past its TTL
//!   and releases it on SIGTERM;
//! - once their Proxies are deleted, the records are deleted.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::consumer::{Consumer, http_request};
use crate::instant::{self, World};

const WITHIN: Duration = Duration::from_secs(120);
const PROXIES: usize = 5;
const CONSUMERS: usize = 20;

/// `METHOD path` as `who`: the code and the body as JSON (`Null` when
/// empty).
async fn call(addr: &str, method: &str, path: &str, who: &Consumer) -> (u16, Value) {
    let (code, body) = http_request(addr, method, path, Some(who.token())).await;
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {body}"))
    };
    (code, json)
}

fn lease_path(grant: &Value) -> String {
    grant["path"].as_str().unwrap().to_owned()
}

fn proxy_of(grant: &Value) -> String {
    grant["proxy"]["name"].as_str().unwrap().to_owned()
}

/// Polls `check` every 500 ms until it holds, for at most [`WITHIN`].
async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + WITHIN;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn consumers_lease_distinct_healthy_proxies_until_they_end() {
    let mut world = World::new().await;
    world.use_local_range();
    let client = &world.client;
    let responder = instant::responder_on_all(world.dir.path()).await;
    let ns = world.namespace("leases");
    let proxies = instant::proxies(client, &ns);
    // Existing proxies (the responder, at addresses of the local range):
    // no provider state, so a restarted operator finds them as they were.
    let range = world.local_range.clone().unwrap();
    let net: std::net::Ipv4Addr = range.trim_end_matches("/24").parse().unwrap();
    let [a, b, c, _] = net.octets();
    for i in 0..PROXIES {
        let ip = std::net::Ipv4Addr::new(a, b, c, 61 + u8::try_from(i).unwrap());
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "egress-proxies.io/v1alpha1",
            "kind": "Proxy",
            "metadata": {"name": format!("p{i}"), "namespace": ns},
            "spec": {"existing": {"address": ip.to_string(), "port": responder.port()}},
        }))
        .unwrap();
        proxies.create(&PostParams::default(), &obj).await.unwrap();
    }
    let flags = ["--probe-interval", "1s", "--log", "info,kube=warn"];
    let mut operator = world.operator(&ns, responder, &flags).await;
    instant::wait_all(&proxies, PROXIES, WITHIN, "Healthy", instant::healthy).await;
    let addr = operator.http_addr();
    let alice = Consumer::leaser(&world.kube, &ns, "alice");
    let bob = Consumer::leaser(&world.kube, &ns, "bob");
    let nobody = Consumer::without_rights(&world.kube, &ns, "nobody");
    let grant = format!("/leases?namespace={ns}");
    // The race's leases outlive the test's steps; later ones are shorter.
    let long = format!("{grant}&ttl=600");

    // Rights: none, or discovery's `list` alone, are not `lease`.
    for who in [&nobody, &operator.reader] {
        let (code, body) = call(&addr, "POST", &grant, who).await;
        assert_eq!(code, 403, "{} leased: {body}", who.user);
        assert_eq!(body["reason"], "Forbidden");
    }
    let (code, body) = call(&addr, "POST", "/leases", &alice).await;
    assert_eq!((code, body["reason"].as_str()), (400, Some("BadRequest")));
    let (code, _) = call(&addr, "GET", &grant, &alice).await;
    assert_eq!(code, 405);

    // The race: 20 requests at once, 5 proxies, half of them to a second
    // replica (a follower serving from its own caches), so the two
    // processes' conditional writes decide, not one process's claims.
    let follower = world.follower(&ns, responder, &flags);
    let second = until("the follower serving", async || {
        let addr = follower.http_addr_opt()?;
        let (code, _) = call(&addr, "POST", "/leases", &alice).await;
        (code == 400).then_some(addr)
    })
    .await;
    let racers = (0..CONSUMERS).map(|i| {
        let who = if i.is_multiple_of(2) { &alice } else { &bob };
        let addr = if i % 4 < 2 { &addr } else { &second };
        let (addr, long) = (addr.clone(), long.clone());
        async move { (i, call(&addr, "POST", &long, who).await) }
    });
    let answers = futures::future::join_all(racers).await;
    let mut granted = Vec::new();
    let mut none_free = 0;
    for (i, (code, body)) in answers {
        match code {
            201 => granted.push((i, body)),
            409 => {
                assert_eq!(body["reason"], "NoneFree", "{body}");
                assert!(
                    body["error"].as_str().unwrap().contains("5 healthy"),
                    "{body}"
                );
                none_free += 1;
            }
            _ => panic!("racer {i}: {code} {body}"),
        }
    }
    let leased: BTreeSet<String> = granted.iter().map(|(_, g)| proxy_of(g)).collect();
    println!(
        "race: {} granted on {leased:?}, {none_free} NoneFree",
        granted.len()
    );
    assert_eq!(
        (granted.len(), leased.len(), none_free),
        (PROXIES, PROXIES, 15)
    );
    for (_, g) in &granted {
        assert_eq!(g["proxy"]["healthy"], true, "{g}");
        assert!(g["proxy"]["address"].as_str().is_some(), "{g}");
        assert_eq!(g["ttlSeconds"], 600, "{g}");
    }
    let holder = |i: usize| if i.is_multiple_of(2) { &alice } else { &bob };
    // Two of the winners (whoever of the two users won them).
    let (ai, a_grant) = granted[0].clone();
    let (bi, b_grant) = granted[1].clone();
    let (a_who, b_who) = (holder(ai), holder(bi));
    let stranger = if std::ptr::eq(a_who, &alice) {
        &bob
    } else {
        &alice
    };

    // Renewal: the holder only; another user's renewal is `Lost`.
    let (code, body) = call(&addr, "PUT", &lease_path(&a_grant), a_who).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(proxy_of(&body), proxy_of(&a_grant));
    let (code, body) = call(&addr, "PUT", &lease_path(&a_grant), stranger).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (410, Some("Lost")),
        "{body}"
    );

    // Leases are kept in the API server: a new operator process renews them.
    drop(follower);
    drop(operator);
    operator = world.operator(&ns, responder, &flags).await;
    let addr = operator.http_addr();
    until("the restarted operator serving", async || {
        let (code, body) = call(&addr, "PUT", &lease_path(&a_grant), a_who).await;
        assert!(matches!(code, 200 | 503), "{code} {body}");
        (code == 200).then_some(())
    })
    .await;
    let (code, body) = call(&addr, "POST", &grant, &bob).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (409, Some("NoneFree")),
        "{body}"
    );

    // Release: the proxy is free again; the released lease is `Lost`.
    let (code, body) = call(&addr, "DELETE", &lease_path(&b_grant), b_who).await;
    assert_eq!(code, 204, "{body}");
    let (code, body) = call(&addr, "PUT", &lease_path(&b_grant), b_who).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (410, Some("Lost")),
        "{body}"
    );
    // A short TTL, on the one free proxy.
    let (code, short) = call(&addr, "POST", &format!("{grant}&ttl=5"), &bob).await;
    assert_eq!(code, 201, "{short}");
    assert_eq!(proxy_of(&short), proxy_of(&b_grant));
    assert_eq!(short["ttlSeconds"], 5);

    // Expiry: not renewed within 5 s, it ends, and the proxy is granted again.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (code, next) = call(&addr, "POST", &format!("{grant}&ttl=30"), &alice).await;
    assert_eq!(code, 201, "{next}");
    assert_eq!(proxy_of(&next), proxy_of(&short));
    let (code, body) = call(&addr, "PUT", &lease_path(&short), &bob).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (410, Some("Expired")),
        "{body}"
    );

    // A leased Proxy deleted: its holder learns `ProxyGone`.
    proxies
        .delete(&proxy_of(&next), &Default::default())
        .await
        .unwrap();
    until("the deleted Proxy's lease ended", async || {
        let (code, body) = call(&addr, "PUT", &lease_path(&next), &alice).await;
        (code == 410).then(|| assert_eq!(body["reason"], "ProxyGone", "{body}"))
    })
    .await;

    // A leased proxy turns unhealthy: its lease ends, the holder learns why.
    let sick = proxy_of(&a_grant);
    let ip = a_grant["proxy"]["ip"].as_str().unwrap().to_owned();
    world.deny(&ip, true);
    until("the unhealthy proxy's lease ended", async || {
        let (code, body) = call(&addr, "PUT", &lease_path(&a_grant), a_who).await;
        (code == 410).then(|| assert_eq!(body["reason"], "ProxyUnhealthy", "{body}"))
    })
    .await;
    // Still unhealthy: nothing to grant (one deleted, one sick, three held).
    let (code, body) = call(&addr, "POST", &grant, &alice).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (409, Some("NoneFree")),
        "{body}"
    );
    assert!(
        body["error"].as_str().unwrap().contains("3 healthy"),
        "{body}"
    );
    world.deny(&ip, false);
    let again = until("the proxy healthy and granted again", async || {
        let (code, body) = call(&addr, "POST", &grant, &alice).await;
        (code == 201).then_some(body)
    })
    .await;
    assert_eq!(proxy_of(&again), sick);

    // deploy/samples/lease-client.sh holds a lease on the one free proxy
    // past its TTL (it renews), and releases it on SIGTERM.
    let (code, body) = call(&addr, "DELETE", &lease_path(&again), &alice).await;
    assert_eq!(code, 204, "{body}");
    let token_file = world.dir.path().join("alice.token");
    std::fs::write(&token_file, alice.token()).unwrap();
    let out = world.dir.path().join("egress-proxy");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/samples/lease-client.sh"
    );
    let client_sh = std::process::Command::new("sh")
        .arg(script)
        .env("OPERATOR", format!("http://{addr}"))
        .env("NAMESPACE", &ns)
        .env("TTL", "6")
        .env("TOKEN_FILE", &token_file)
        .env("OUT", &out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let address = until("the client's lease", async || {
        std::fs::read_to_string(&out).ok().filter(|a| !a.is_empty())
    })
    .await;
    assert_eq!(address.trim(), again["proxy"]["address"].as_str().unwrap());
    tokio::time::sleep(Duration::from_secs(9)).await;
    let (code, body) = call(&addr, "POST", &grant, &bob).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (409, Some("NoneFree")),
        "renewed: {body}"
    );
    let pid = client_sh.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let output = client_sh.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}: {said}", output.status);
    assert!(said.contains("leased "), "{said}");
    assert!(!out.exists(), "the address file outlived the lease");
    let (code, again) = call(&addr, "POST", &grant, &bob).await;
    assert_eq!(
        (code, proxy_of(&again)),
        (201, sick.clone()),
        "released: {again}"
    );

    let outcome =
        |v: &str| format!("egress_proxies_operator_consumer_leases_total{{outcome=\"{v}\"}}");
    assert!(operator.metric(&outcome("granted")).await >= 2.0);
    assert!(operator.metric(&outcome("ended")).await >= 3.0);
    assert!(operator.metric(&outcome("none_free")).await >= 2.0);

    // Every lease still held released, every Proxy deleted: the sweeper
    // deletes their records (the deleted one's once its TTL has passed).
    let mut held: Vec<(String, &Consumer)> = vec![(lease_path(&again), &bob)];
    for (i, g) in &granted {
        if proxy_of(g) != sick && proxy_of(g) != proxy_of(&b_grant) {
            held.push((lease_path(g), holder(*i)));
        }
    }
    assert_eq!(held.len(), 4);
    // The lease records of this test's Proxies (the operator's namespace
    // is shared).
    let records = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        client.clone(),
        "egress-proxies-system",
    );
    let ours = async || -> Option<Vec<k8s_openapi::api::coordination::v1::Lease>> {
        let all = records
            .list(&kube::api::ListParams::default().labels(fleet::consumer_lease::LABEL))
            .await
            .ok()?;
        let prefix = format!("{ns}/");
        Some(
            all.items
                .into_iter()
                .filter(|l| {
                    l.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(fleet::consumer_lease::PROXY_ANNOTATION))
                        .is_some_and(|p| p.starts_with(&prefix))
                })
                .collect(),
        )
    };
    // Who wrote the records is on record (not "unknown").
    let managers: std::collections::BTreeSet<String> = ours()
        .await
        .expect("the lease records listed")
        .iter()
        .flat_map(|l| l.metadata.managed_fields.iter().flatten())
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(
        managers,
        std::collections::BTreeSet::from(["egress-operator-leases".to_owned()])
    );
    for (path, who) in held {
        let (code, body) = call(&addr, "DELETE", &path, who).await;
        assert_eq!(code, 204, "{path}: {body}");
    }
    instant::delete_all(&proxies).await;
    instant::wait_gone(&proxies, WITHIN).await;
    until("the lease records swept", async || {
        ours().await?.is_empty().then_some(())
    })
    .await;
    drop(operator);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
