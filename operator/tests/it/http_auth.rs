//! Discovery (`/proxies`) and `/metrics` need a bearer token, checked by
//! the real API server (TokenReview, SubjectAccessReview); `/healthz` and
//! `/readyz` stay open (issue 25 item 3).
//!
//! The operator binary runs under a ServiceAccount holding exactly deploy/'s
//! ClusterRole rules (`support/operator_account.rs`), watching every
//! namespace as a *follower*: its Lease (one of the test's own) is held by
//! a holder it cannot displace within the test, so it serves HTTP from its
//! watch cache and writes nothing. Each test has two namespaces of its own
//! whose Proxies the test itself makes `Running` (status by server-side
//! apply), so both are in the watch cache and discovery lists them.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testkit::names::random_hex;
use testkit::providers_yaml::{Host, ProvidersYaml};
use testkit::relay::Relay;
use testkit::{Descriptor, KubeService};

use crate::consumer::{Consumer, http_get};
use crate::operator_account::{Lease, OperatorAccount};
use crate::support::admin;

/// The Lease the followers wait on, held by [`HOLDER`] for an hour.
const LEASE: &str = "auth-hold";
const HOLDER: &str = "the-test";

/// Two namespaces with Proxies (`a`: two, `b`: one), the operator's
/// account and providers config.
struct World {
    kube: KubeService,
    a: String,
    b: String,
    account: OperatorAccount,
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl World {
    async fn new() -> World {
        let sandbox = Descriptor::require();
        let kube = sandbox
            .kube
            .clone()
            .expect("the sandbox descriptor has no `kube` section: restart the sandbox");
        let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");
        // Tests apply deploy/ concurrently (these, other binaries, other
        // worktrees): a conflict is retried.
        for attempt in 1.. {
            match kube.kubectl(&["apply", "-k", deploy]) {
                Ok(_) => break,
                Err(e) if attempt < 5 => {
                    eprintln!("kubectl apply -k deploy/ (attempt {attempt}): {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => panic!("{e}"),
            }
        }
        kube.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/proxies.egress-proxies.io",
        ])
        .unwrap();
        let client = admin(&kube).await;
        let id = &random_hex()[..10];
        let (a, b) = (format!("auth-a-{id}"), format!("auth-b-{id}"));
        for ns in [&a, &b] {
            kube.kubectl(&["create", "namespace", ns]).unwrap();
        }
        let account = OperatorAccount::new(&kube, &a, "operator", Lease::Own);
        hold_lease(&kube, &a, &account);
        for (ns, name) in [(&a, "p1"), (&a, "p2"), (&b, "q1")] {
            running_proxy(&client, ns, name).await;
        }
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("providers.yaml");
        // An entry the follower builds and never calls.
        let host = Host::never_dialled();
        let yaml = ProvidersYaml::sandbox(&sandbox, &format!("auth-{id}"))
            .hosts([host])
            .render();
        std::fs::write(&config, yaml).unwrap();
        World {
            kube,
            a,
            b,
            account,
            dir,
            config,
        }
    }

    /// The operator under `account` (this world's unless given), talking to
    /// the API server at `server` (the sandbox's unless given), logging at
    /// debug; `extra` flags last. Waits until it serves `/readyz`.
    async fn operator(
        &self,
        account: Option<&OperatorAccount>,
        server: Option<String>,
        extra: &[&str],
    ) -> Operator {
        let account = account.unwrap_or(&self.account);
        let mut kube = self.kube.clone();
        if let Some(server) = server {
            kube.server = server;
        }
        let tag = random_hex();
        let kubeconfig = self.dir.path().join(format!("operator-{tag}.kubeconfig"));
        let own_token = account.write_kubeconfig(&kube, &kubeconfig);
        let log = self.dir.path().join(format!("operator-{tag}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_operator"))
            .arg("run")
            .arg("--providers-config")
            .arg(&self.config)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--cluster-id", &format!("auth-{tag}")])
            .args(["--lease-namespace", &self.a, "--lease-name", LEASE])
            .args(["--http-addr", "127.0.0.1:0", "--log", "debug"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the operator starts");
        let mut op = Operator {
            child,
            log,
            addr: String::new(),
            secrets: std::sync::Mutex::new(vec![own_token]),
        };
        op.addr = wait_for("the HTTP address", Duration::from_secs(30), || {
            let addr = op
                .log()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["fields"]["message"] == "http listening")
                .and_then(|v| v["fields"]["addr"].as_str().map(str::to_owned));
            async move { addr }
        })
        .await;
        wait_for("/readyz", Duration::from_secs(30), || async {
            (op.get("/readyz", None).await.0 == 200).then_some(())
        })
        .await;
        op
    }

    fn reader_of_a(&self, name: &str) -> Consumer {
        Consumer::discovery_reader(&self.kube, &self.a, name)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // No namespace controller runs here: the Proxies go first.
        for ns in [&self.a, &self.b] {
            let _ = self
                .kube
                .kubectl(&["-n", ns, "delete", "proxies", "--all", "--wait=false"]);
            let _ = self
                .kube
                .kubectl(&["delete", "namespace", ns, "--wait=false"]);
        }
    }
}

/// A Lease in `ns` held by [`HOLDER`] for an hour, which `account` may only
/// read: its operator stays a follower.
fn hold_lease(kube: &KubeService, ns: &str, account: &OperatorAccount) {
    let yaml = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: {LEASE}\n  namespace: {ns}\nspec:\n  holderIdentity: {HOLDER}\n  leaseDurationSeconds: 3600\n  renewTime: \"2020-01-01T00:00:00.000000Z\"\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: read-{LEASE}\n  namespace: {ns}\nrules:\n  - apiGroups: [coordination.k8s.io]\n    resources: [leases]\n    resourceNames: [{LEASE}]\n    verbs: [get]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: read-{LEASE}\n  namespace: {ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: read-{LEASE}\nsubjects:\n  - kind: ServiceAccount\n    name: {}\n    namespace: {ns}\n",
        account.name
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), yaml).unwrap();
    kube.kubectl(&["apply", "-f", &file.path().to_string_lossy()])
        .unwrap();
}

/// The Proxy `ns/name`, `Running` with an instance and an address (its
/// status written here: no operator reconciles it).
async fn running_proxy(client: &Client, ns: &str, name: &str) {
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("egress-proxies.io", "v1alpha1", "Proxy"),
        "proxies",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "egress-proxies.io/v1alpha1",
        "kind": "Proxy",
        "metadata": { "name": name, "namespace": ns },
        "spec": { "provider": "elsewhere" },
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    let status = json!({
        "apiVersion": "egress-proxies.io/v1alpha1",
        "kind": "Proxy",
        "status": {
            "phase": "Running",
            "providerID": format!("kvm2://elsewhere/h1/{name}"),
            "host": "h1",
            "ip": "192.0.2.7",
            "port": 3128,
        },
    });
    api.patch_status(
        name,
        &PatchParams::apply("http-auth-test").force(),
        &Patch::Apply(status),
    )
    .await
    .unwrap();
}

/// Polls `f` every 100 ms until it returns `Some`, for at most `within`.
async fn wait_for<T, F, Fut>(what: &str, within: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The operator process; killed on drop. Fails the test when its log
/// holds any token the test used (`secrets`).
struct Operator {
    child: Child,
    log: PathBuf,
    addr: String,
    secrets: std::sync::Mutex<Vec<String>>,
}

impl Operator {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path` with `token` (remembered as a secret the log must not
    /// hold).
    async fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        if let Some(t) = token {
            let mut secrets = self.secrets.lock().unwrap();
            if !secrets.iter().any(|s| s == t) {
                secrets.push(t.to_owned());
            }
        }
        http_get(&self.addr, path, token).await
    }

    /// The namespace/name of each Proxy `path` lists in `namespaces`.
    async fn listed(&self, path: &str, token: &str, namespaces: &[&str]) -> Vec<String> {
        let (code, body) = self.get(path, Some(token)).await;
        assert_eq!(code, 200, "GET {path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| namespaces.contains(&p["namespace"].as_str().unwrap()))
            .map(|p| {
                format!(
                    "{}/{}",
                    p["namespace"].as_str().unwrap(),
                    p["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    fn assert_no_secret_logged(&self) {
        let log = self.log();
        assert!(
            log.contains("\"level\":\"DEBUG\""),
            "not logging at debug:\n{log}"
        );
        for (i, s) in self.secrets.lock().unwrap().iter().enumerate() {
            assert!(
                !log.contains(s.as_str()),
                "token #{i} is in the operator's log"
            );
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!("--- operator log ({}), last lines ---", self.log.display());
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_valid_token_discovery_and_metrics_answer_401_and_probes_stay_open() {
    let world = World::new().await;
    let op = world.operator(None, None, &[]).await;
    for path in ["/healthz", "/readyz"] {
        assert_eq!(op.get(path, None).await.0, 200, "{path}");
    }
    let garbage = format!("{}.{}", random_hex(), random_hex());
    for path in ["/proxies", "/proxies?namespace=x", "/metrics"] {
        let (code, body) = op.get(path, None).await;
        assert_eq!(code, 401, "{path} without a token: {body}");
        let (code, body) = op.get(path, Some(&garbage)).await;
        assert_eq!(code, 401, "{path} with a garbage token: {body}");
    }
    // A bad query is not even parsed for an anonymous caller.
    assert_eq!(op.get("/proxies?healthy=maybe", None).await.0, 401);
    // 401 says how to authenticate.
    let raw = raw_get(&op.addr, "/proxies").await;
    assert!(
        raw.contains("www-authenticate: Bearer realm=\"egress-proxies\""),
        "{raw}"
    );
    op.assert_no_secret_logged();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_without_rights_gets_403() {
    let world = World::new().await;
    let op = world.operator(None, None, &[]).await;
    let nobody = Consumer::without_rights(&world.kube, &world.a, "nobody");
    let ns_a = format!("/proxies?namespace={}", world.a);
    for path in ["/proxies", ns_a.as_str(), "/metrics"] {
        let (code, body) = op.get(path, Some(nobody.token())).await;
        assert_eq!(code, 403, "{path}: {body}");
    }
    op.assert_no_secret_logged();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_of_one_namespace_sees_only_that_namespace() {
    let world = World::new().await;
    let op = world.operator(None, None, &[]).await;
    let ours = [world.a.as_str(), world.b.as_str()];
    // The operator's own account may list Proxies everywhere: both
    // namespaces are in the watch cache.
    let everyone = world.account.token();
    let all = wait_for(
        "both namespaces in the cache",
        Duration::from_secs(30),
        || async {
            let l = op.listed("/proxies", &everyone, &ours).await;
            (l.len() == 3).then_some(l)
        },
    )
    .await;
    let (a, b) = (&world.a, &world.b);
    assert_eq!(
        all,
        [format!("{a}/p1"), format!("{a}/p2"), format!("{b}/q1")]
    );

    let reader = world.reader_of_a("reader");
    let expected = [format!("{a}/p1"), format!("{a}/p2")];
    assert_eq!(op.listed("/proxies", reader.token(), &ours).await, expected);
    let only_a = format!("/proxies?namespace={a}");
    assert_eq!(op.listed(&only_a, reader.token(), &ours).await, expected);
    let healthy = format!("/proxies?namespace={a}&healthy=false");
    assert_eq!(op.listed(&healthy, reader.token(), &ours).await, expected);
    let (code, body) = op
        .get(&format!("/proxies?namespace={b}"), Some(reader.token()))
        .await;
    assert_eq!(code, 403, "{body}");
    // An authenticated caller's bad query is a 400.
    assert_eq!(
        op.get("/proxies?healthy=maybe", Some(reader.token()))
            .await
            .0,
        400
    );
    // Discovery rights are not metrics rights.
    assert_eq!(op.get("/metrics", Some(reader.token())).await.0, 403);
    op.assert_no_secret_logged();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_get_on_the_metrics_url() {
    let world = World::new().await;
    let op = world.operator(None, None, &[]).await;
    let scraper = Consumer::without_rights(&world.kube, &world.a, "scraper").with_metrics();
    let (code, body) = op.get("/metrics", Some(scraper.token())).await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("egress_proxies_operator_http_auth_total{outcome=\"allowed\"}"),
        "{body}"
    );
    assert!(
        body.contains(
            "egress_proxies_operator_http_auth_reviews_total{review=\"token\",source=\"api\"}"
        ),
        "{body}"
    );
    // Metrics rights are not discovery rights.
    assert_eq!(op.get("/proxies", Some(scraper.token())).await.0, 403);
    op.assert_no_secret_logged();
}

/// Answers are reused for the cache's TTL, no longer: a removed grant stops
/// working within it, and at once without a cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_grant_stops_working_within_the_cache_ttl() {
    const TTL: Duration = Duration::from_secs(4);
    let world = World::new().await;
    let cached = world
        .operator(None, None, &["--http-auth-cache-ttl", "4s"])
        .await;
    let uncached = world
        .operator(None, None, &["--http-auth-cache-ttl", "0"])
        .await;
    let reader = world.reader_of_a("reader");
    let path = format!("/proxies?namespace={}", world.a);
    assert_eq!(cached.get(&path, Some(reader.token())).await.0, 200);
    let granted = Instant::now();
    assert_eq!(uncached.get(&path, Some(reader.token())).await.0, 200);
    world
        .kube
        .kubectl(&["-n", &world.a, "delete", "rolebinding", "reader-discovery"])
        .unwrap();
    // Without a cache: refused as soon as the API server's RBAC sees it.
    wait_for("the uncached refusal", Duration::from_secs(2), || async {
        (uncached.get(&path, Some(reader.token())).await.0 == 403).then_some(())
    })
    .await;
    // With one: still allowed from the cache, then refused within the TTL.
    assert_eq!(cached.get(&path, Some(reader.token())).await.0, 200);
    wait_for(
        "the cached refusal",
        TTL + Duration::from_secs(2),
        || async { (cached.get(&path, Some(reader.token())).await.0 == 403).then_some(()) },
    )
    .await;
    assert!(granted.elapsed() >= TTL - Duration::from_millis(500));
    cached.assert_no_secret_logged();
    uncached.assert_no_secret_logged();
}

/// A review the API server refuses (here: an account without deploy/'s
/// `tokenreviews` rule) is a 503, not a 401 or a 200, and the log says why
/// without the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_review_answers_503_and_the_token_is_never_logged() {
    let world = World::new().await;
    let rule = "  - apiGroups: [authentication.k8s.io]\n    resources: [tokenreviews]\n    verbs: [create]\n";
    let crippled =
        OperatorAccount::with_rules(&world.kube, &world.a, "crippled", Lease::Own, |r| {
            assert!(r.contains(rule), "deploy/'s ClusterRole lacks {rule:?}");
            r.replace(rule, "")
        });
    hold_lease(&world.kube, &world.a, &crippled);
    let op = world.operator(Some(&crippled), None, &[]).await;
    let reader = world.reader_of_a("reader");
    for path in ["/proxies", "/metrics"] {
        let (code, body) = op.get(path, Some(reader.token())).await;
        assert_eq!(code, 503, "{path}: {body}");
    }
    let log = op.log();
    assert!(
        log.contains("http auth: review failed") && log.contains("tokenreviews"),
        "{log}"
    );
    op.assert_no_secret_logged();
}

/// An API server that stops answering: the request's checks end at their
/// deadline with 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_past_its_deadline_answers_503() {
    let world = World::new().await;
    let upstream = world.kube.server.trim_start_matches("https://").to_owned();
    let relay = Relay::tcp(upstream).await;
    let server = format!("https://127.0.0.1:{}", relay.port());
    let op = world
        .operator(
            None,
            Some(server),
            &["--http-auth-timeout", "1s", "--http-auth-cache-ttl", "0"],
        )
        .await;
    let reader = world.reader_of_a("reader");
    let path = format!("/proxies?namespace={}", world.a);
    assert_eq!(op.get(&path, Some(reader.token())).await.0, 200);
    relay.freeze();
    let started = Instant::now();
    let (code, body) = op.get(&path, Some(reader.token())).await;
    let took = started.elapsed();
    assert_eq!(code, 503, "{body}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "answered after {took:?}"
    );
    assert!(op.log().contains("did not answer before the deadline"));
    op.assert_no_secret_logged();
}

/// The response head and body of `GET path` without a token.
async fn raw_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}

/// The YAML documents of `text` as JSON values.
fn yaml_docs(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter_map(|d| serde_saphyr::from_str::<Value>(d).ok())
        .filter(|v| !v.is_null())
        .collect()
}

fn deploy_file(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../deploy/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// docs/operator.md shows deploy/samples/' consumer RBAC as it is (without
/// the samples' comments), so a copy-paste from the docs is what the tests
/// grant.
#[test]
fn the_docs_show_the_consumer_samples_verbatim() {
    let doc = include_str!("../../../docs/operator.md");
    let client = deploy_file("samples/lease-client.sh");
    assert!(
        doc.contains(&format!("```sh\n{client}```")),
        "docs/operator.md lacks samples/lease-client.sh as it is"
    );
    for sample in [
        "samples/discovery-reader.yaml",
        "samples/metrics-reader.yaml",
        "samples/lease-consumer.yaml",
    ] {
        let text = deploy_file(sample);
        let body: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            doc.contains(&body),
            "docs/operator.md lacks {sample} as it is:\n{body}"
        );
    }
}

/// deploy/'s NetworkPolicy selects the Deployment's pods and admits a port
/// their container has; the Deployment's probes are the open paths; the
/// ClusterRole grants the reviews exactly `create`.
#[test]
fn deploy_admits_the_http_port_and_grants_the_reviews() {
    let policy = &yaml_docs(&deploy_file("operator/networkpolicy.yaml"))[0];
    let deployment = &yaml_docs(&deploy_file("operator/deployment.yaml"))[0];
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&pod_labels[k], v, "the NetworkPolicy selects {k}={v}");
    }
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let port = &policy["spec"]["ingress"][0]["ports"][0]["port"];
    assert!(
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| &p["name"] == port),
        "the container has no port {port}"
    );
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    let kustomization = deploy_file("kustomization.yaml");
    assert!(kustomization.contains("- operator/networkpolicy.yaml"));

    let role = &yaml_docs(&deploy_file("operator/rbac.yaml"))[0];
    assert_eq!(role["kind"], "ClusterRole");
    let rules = role["rules"].as_array().unwrap();
    for (group, resource) in [
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ] {
        let granting: Vec<&Value> = rules
            .iter()
            .filter(|r| {
                r["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == resource)
            })
            .collect();
        assert_eq!(granting.len(), 1, "{resource}: {granting:?}");
        assert_eq!(granting[0]["apiGroups"], json!([group]));
        assert_eq!(granting[0]["verbs"], json!(["create"]), "{resource}");
    }
}
