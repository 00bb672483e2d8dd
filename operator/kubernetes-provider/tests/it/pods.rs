//! Create, Get, Delete, ListByTag and Check on real Pods.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kubernetes_provider::KubernetesProvider;
use provider_api::{
    CheckReason, CreateRequest, ErrorClass, Identifier, Instance, InstanceState, ObjectName,
    OwnerUid, Provider, ProviderId, ProvidersConfig, Tag, TagValue, name_from_uid,
};
use testkit::pods::{PodsNamespace, Upstream, connect_status, providers_yaml, require_node};
use testkit::{Descriptor, kubectl::kubectl, names};

pub(crate) fn provider(ns: &PodsNamespace, extra_proxy: &str) -> KubernetesProvider {
    let yaml = providers_yaml("pods", ns, extra_proxy);
    let config = ProvidersConfig::from_yaml_str(&yaml).unwrap();
    KubernetesProvider::new(&config.providers[0]).unwrap()
}

pub(crate) fn request(uid: &OwnerUid) -> CreateRequest {
    let mut req = CreateRequest::new(
        uid.clone(),
        ObjectName::parse("proxy-a").unwrap(),
        Identifier::parse("team-a").unwrap(),
    );
    req.tags.insert(
        Identifier::parse("cluster").unwrap(),
        TagValue::parse("sandbox").unwrap(),
    );
    req
}

pub(crate) fn uid() -> OwnerUid {
    OwnerUid::parse(&format!("{}-uid", names::random_hex())).unwrap()
}

/// Polls Get until `done` holds (2 minutes at most: the first Pod on a
/// fresh node waits for its image to be unpacked).
async fn wait_for(
    p: &KubernetesProvider,
    id: &ProviderId,
    done: impl Fn(&Result<Instance, provider_api::Error>) -> bool,
) -> Result<Instance, provider_api::Error> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = p.get(id).await;
        if done(&got) {
            return got;
        }
        assert!(Instant::now() < deadline, "gave up waiting; last: {got:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_serves_connect_under_the_same_rules_as_a_vm() {
    let d = Descriptor::require();
    require_node(&d);
    let kube = d.kube.clone().unwrap();
    let ns = PodsNamespace::new(&kube, &names::unique("pods-serve"));
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    std::fs::write(&credentials, "egress:pod-s3cret\n").unwrap();
    let p = provider(
        &ns,
        &format!("        credentials_file: {}\n", credentials.display()),
    );
    let upstream = Upstream::get();

    let owner = uid();
    let created = p.create(&request(&owner)).await.unwrap();
    assert_eq!(
        created.id.to_string(),
        format!("kubernetes://pods/{}/{}", ns.name, name_from_uid(&owner))
    );
    let running = wait_for(
        &p,
        &created.id,
        |r| matches!(r, Ok(i) if i.state == InstanceState::Running),
    )
    .await
    .unwrap();
    let ip = running.ip.unwrap();
    assert!(ip.to_string().starts_with("10.213.9."), "{ip}");
    assert_eq!(running.proxy_port, Some(3128));
    let proxy = SocketAddr::new(ip, 3128);

    // The rules of every proxy we run (provider_api::squid).
    let target = upstream.address();
    let before = upstream.accepted();
    assert_eq!(
        connect_status(proxy, &target, None),
        Some(407),
        "no credentials"
    );
    assert_eq!(
        connect_status(proxy, &target, Some("egress:wrong")),
        Some(407),
        "wrong password"
    );
    assert_eq!(
        connect_status(proxy, &target, Some("egress:pod-s3cret")),
        Some(200),
        "the allowed destination, authenticated"
    );
    // Squid connected upstream (the listener's thread counts it soon after).
    let counted = Instant::now() + Duration::from_secs(5);
    while upstream.accepted() == before && Instant::now() < counted {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        upstream.accepted(),
        before + 1,
        "Squid connected upstream once"
    );
    let gateway_80 = target.replace(":443", ":80");
    assert_eq!(
        connect_status(proxy, &gateway_80, Some("egress:pod-s3cret")),
        Some(403),
        "CONNECT to a port other than 443"
    );
    assert_eq!(
        connect_status(proxy, "10.213.9.2:443", Some("egress:pod-s3cret")),
        Some(403),
        "an internal destination not allowed"
    );
    assert_eq!(
        connect_status(proxy, "169.254.169.254:443", Some("egress:pod-s3cret")),
        Some(403),
        "cloud metadata"
    );

    // Create again for the same owner: the same Pod, nothing new.
    let again = p.create(&request(&owner)).await.unwrap();
    assert_eq!(again.id, created.id);
    let listed = kubectl(&kube, &["-n", &ns.name, "get", "pods", "-o", "name"]);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    // The password is only in the Secret, hashed.
    let secret = kubectl(
        &kube,
        &[
            "-n",
            &ns.name,
            "get",
            "secret",
            created.id.instance().as_str(),
            "-o",
            "jsonpath={.data.passwd}",
        ],
    );
    assert!(!secret.is_empty());
    let pod_yaml = kubectl(
        &kube,
        &[
            "-n",
            &ns.name,
            "get",
            "pod",
            created.id.instance().as_str(),
            "-o",
            "yaml",
        ],
    );
    assert!(!pod_yaml.contains("pod-s3cret"));

    // The GC's view.
    let listed = p.list_by_tag(&Tag::managed()).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, created.id);
    assert_eq!(listed[0].owner_uid, owner);
    assert_eq!(
        listed[0]
            .tags
            .get(&Identifier::parse("cluster").unwrap())
            .map(|v| v.as_str()),
        Some("sandbox")
    );

    // Delete: the Pod and its Secret go; a second delete is a no-op.
    p.delete(&created.id).await.unwrap();
    let gone = wait_for(
        &p,
        &created.id,
        |r| matches!(r, Err(e) if e.class() == ErrorClass::NotFound),
    )
    .await;
    assert!(gone.is_err());
    let secrets = kubectl(&kube, &["-n", &ns.name, "get", "secrets", "-o", "name"]);
    assert!(
        !secrets.contains(created.id.instance().as_str()),
        "{secrets}"
    );
    p.delete(&created.id).await.unwrap();
    assert!(p.list_by_tag(&Tag::managed()).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_without_our_mark_is_never_adopted_or_deleted() {
    let d = Descriptor::require();
    require_node(&d);
    let kube = d.kube.clone().unwrap();
    let ns = PodsNamespace::new(&kube, &names::unique("pods-foreign"));
    let p = provider(&ns, "");
    let owner = uid();
    let name = name_from_uid(&owner);
    // Someone else's Pod under the name our instance would take (it need
    // not run: the image does not exist).
    kubectl(
        &kube,
        &[
            "-n",
            &ns.name,
            "run",
            name.as_str(),
            "--image=localhost/egress-proxies/missing:1",
            "--restart=Never",
            "--labels=egress-proxies.io/provider=pods",
        ],
    );
    let err = p.create(&request(&owner)).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err}");
    assert!(err.to_string().contains("not ours"), "{err}");
    let id = ProviderId::parse(&format!("kubernetes://pods/{}/{name}", ns.name)).unwrap();
    assert_eq!(p.get(&id).await.unwrap_err().class(), ErrorClass::Permanent);
    assert_eq!(
        p.delete(&id).await.unwrap_err().class(),
        ErrorClass::Permanent
    );
    assert!(p.list_by_tag(&Tag::managed()).await.unwrap().is_empty());
    // Still there, untouched.
    kubectl(&kube, &["-n", &ns.name, "get", "pod", name.as_str()]);
    // IDs of another entry or namespace are refused before any call.
    for other in ["kubernetes://other/x/ep-1", "kvm2://pods/host1/ep-1"] {
        let other = ProviderId::parse(other).unwrap();
        assert_eq!(
            p.get(&other).await.unwrap_err().class(),
            ErrorClass::Permanent
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_no_node_has_fails_the_instance() {
    let d = Descriptor::require();
    require_node(&d);
    let kube = d.kube.clone().unwrap();
    let ns = PodsNamespace::new(&kube, &names::unique("pods-image"));
    let p = provider(&ns, "");
    let mut req = request(&uid());
    req.image = Some(Identifier::parse("missing").unwrap());
    let created = p.create(&req).await.unwrap();
    let failed = wait_for(
        &p,
        &created.id,
        |r| matches!(r, Ok(i) if matches!(i.state, InstanceState::Failed { .. })),
    )
    .await
    .unwrap();
    let InstanceState::Failed { reason } = failed.state else {
        unreachable!()
    };
    assert!(reason.contains("Image"), "{reason}");
    // An unknown image key is the caller's mistake, refused before any call.
    let mut req = request(&uid());
    req.image = Some(Identifier::parse("envoy").unwrap());
    assert_eq!(
        p.create(&req).await.unwrap_err().class(),
        ErrorClass::Permanent
    );
    p.delete(&created.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_checker_reports_the_namespace_and_refused_rights() {
    let d = Descriptor::require();
    require_node(&d);
    let kube = d.kube.clone().unwrap();
    let ns = PodsNamespace::new(&kube, &names::unique("pods-check"));
    let p = provider(&ns, "");
    let status = p.checker().unwrap().check(Duration::from_secs(10)).await;
    assert_eq!(status.len(), 1);
    assert!(status[0].reachable, "{status:?}");
    assert_eq!(status[0].target.as_str(), ns.name);
    assert!(
        status[0]
            .version
            .as_deref()
            .unwrap_or("")
            .starts_with("v1."),
        "{status:?}"
    );

    // The same credentials on a namespace where they hold no Role.
    let elsewhere = PodsNamespace::new(&kube, &names::unique("pods-check-other"));
    let yaml = providers_yaml("pods", &elsewhere, "").replace(
        &elsewhere.kubeconfig.display().to_string(),
        &ns.kubeconfig.display().to_string(),
    );
    let config = ProvidersConfig::from_yaml_str(&yaml).unwrap();
    let refused = KubernetesProvider::new(&config.providers[0]).unwrap();
    let status = refused
        .checker()
        .unwrap()
        .check(Duration::from_secs(10))
        .await;
    assert_eq!(status[0].reason, CheckReason::AuthFailed, "{status:?}");
    let err = refused.create(&request(&uid())).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err}");

    // A kubeconfig that is not there: Permanent, naming the file.
    let yaml = providers_yaml("pods", &ns, "").replace(
        &ns.kubeconfig.display().to_string(),
        "/nonexistent/kubeconfig",
    );
    let config = ProvidersConfig::from_yaml_str(&yaml).unwrap();
    let missing = KubernetesProvider::new(&config.providers[0]).unwrap();
    let err = missing.create(&request(&uid())).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert!(
        format!("{err}").contains("/nonexistent/kubeconfig"),
        "{err}"
    );
}

/// deploy/'s NetworkPolicy sample for the Pods' namespace, applied as
/// shipped (its namespace substituted): the API server takes it, its Pod
/// selector picks exactly the provider's Pods (not another Pod of the
/// namespace), its port is the one their container names, and the
/// operator's Pods it admits are labelled as deploy/'s Deployment labels
/// them. Enforcing it is the network plugin's (the sandbox's bridge
/// plugin enforces none).
#[tokio::test(flavor = "multi_thread")]
async fn the_network_policy_sample_admits_to_exactly_the_providers_pods_on_their_proxy_port() {
    const SAMPLE: &str =
        include_str!("../../../../deploy/samples/kubernetes-provider-networkpolicy.yaml");
    const DEPLOYMENT: &str = include_str!("../../../../deploy/operator/deployment.yaml");
    let d = Descriptor::require();
    require_node(&d);
    let kube = d.kube.clone().unwrap();
    let ns = PodsNamespace::new(&kube, &names::unique("pods-policy"));
    let p = provider(&ns, "");
    let owner = uid();
    p.create(&request(&owner)).await.unwrap();
    let ours = format!("pod/{}", name_from_uid(&owner));
    // Someone else's Pod in the same namespace (whether it runs is beside
    // the point: the selector is what is tested).
    let container = |field: &str| {
        let path = format!("jsonpath={{.spec.containers[0].{field}}}");
        kubectl(&kube, &["-n", &ns.name, "get", &ours, "-o", &path])
    };
    let image = container("image");
    kubectl(
        &kube,
        &[
            "-n",
            &ns.name,
            "run",
            "someone-else",
            "--image",
            &image,
            "--image-pull-policy=Never",
            "--restart=Never",
        ],
    );

    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("policy.yaml");
    let yaml = SAMPLE.replace(
        "  namespace: egress-pods\n",
        &format!("  namespace: {}\n", ns.name),
    );
    assert_ne!(yaml, SAMPLE, "the sample names its namespace");
    std::fs::write(&manifest, yaml).unwrap();
    kubectl(&kube, &["apply", "-f", &manifest.to_string_lossy()]);
    let stored: serde_json::Value = serde_json::from_str(&kubectl(
        &kube,
        &[
            "-n",
            &ns.name,
            "get",
            "networkpolicy",
            "egress-proxies-pods",
            "-o",
            "json",
        ],
    ))
    .unwrap();
    let spec = &stored["spec"];

    // The selector, as the API server stored it, in kubectl's words.
    let mut terms: Vec<String> = Vec::new();
    for e in spec["podSelector"]["matchExpressions"].as_array().unwrap() {
        assert_eq!(e["operator"], "Exists", "{e}");
        terms.push(e["key"].as_str().unwrap().to_owned());
    }
    if let Some(labels) = spec["podSelector"]["matchLabels"].as_object() {
        terms.extend(
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap())),
        );
    }
    let selected = kubectl(
        &kube,
        &[
            "-n",
            &ns.name,
            "get",
            "pods",
            "-l",
            &terms.join(","),
            "-o",
            "name",
        ],
    );
    assert_eq!(selected.trim(), ours, "the policy's Pods");
    let everyone = kubectl(&kube, &["-n", &ns.name, "get", "pods", "-o", "name"]);
    assert_eq!(everyone.lines().count(), 2, "{everyone}");

    // Ingress: the proxy port by the name the Pod's container gives it.
    let rule = &spec["ingress"][0];
    assert_eq!(spec["ingress"].as_array().unwrap().len(), 1, "{spec}");
    assert_eq!(rule["ports"].as_array().unwrap().len(), 1, "{rule}");
    let port = &rule["ports"][0]["port"];
    let port = port
        .as_str()
        .unwrap_or_else(|| panic!("the port by its container's name, not {port}"));
    let ports: serde_json::Value = serde_json::from_str(&container("ports")).unwrap();
    assert!(
        ports
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == port && p["containerPort"] == 3128),
        "port {port} among {ports}"
    );

    // From: the operator's Pods, as deploy/ labels them, and consumers'
    // namespaces; nobody else.
    let from = rule["from"].as_array().unwrap();
    assert_eq!(from.len(), 2, "{rule}");
    let operator_pods = from[0]["podSelector"]["matchLabels"].as_object().unwrap();
    for (k, v) in operator_pods {
        let label = format!("{k}: {}", v.as_str().unwrap());
        assert!(
            DEPLOYMENT.contains(&format!("      labels:\n        {label}\n")),
            "deploy/'s operator Pods lack {label}"
        );
    }
    assert_eq!(
        from[0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "egress-proxies-system"
    );
    assert_eq!(
        from[1]["namespaceSelector"]["matchLabels"]["egress-proxies.io/consumer"],
        "true"
    );
    assert!(from[1].get("podSelector").is_none(), "{rule}");
}
