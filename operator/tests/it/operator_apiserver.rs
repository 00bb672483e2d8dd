//! The real operator binary against the sandbox's real kube-apiserver and
//! the real kvm2 provider (libvirtd over SSH, `domain_type: qemu`), running
//! under the ServiceAccount and RBAC that `kubectl apply -k deploy/`
//! installs — so a missing RBAC rule fails these tests.
//!
//! The guest image is a tiny blank disk: the VM runs but never boots an OS,
//! so a Proxy reaches `Provisioning` (running, no address), not `Running`.
//!
//! The tests share one Lease (deploy/'s Role names it), so they run one at a
//! time; each uses a namespace and a provider entry of its own.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testkit::kubectl::kubectl;
use testkit::names::random_hex;
use testkit::providers_yaml::{Host, Image, ProvidersYaml};
use testkit::virsh::Virsh;
use testkit::{Descriptor, KubeService};

use crate::consumer::{Consumer, http_get};
use crate::support::admin;

const OPERATOR_NS: &str = "egress-proxies-system";
const LEASE: &str = "egress-proxies-operator";
const SA: &str = "egress-proxies-operator";
const LEASE_SECS: u64 = 6;

/// One test at a time (runtime-agnostic, so each test's runtime can wait).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Polls `f` every 200 ms until it returns `Some`, for at most `within`.
async fn eventually<T, F, Fut>(what: &str, within: Duration, mut f: F) -> T
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
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A loopback HTTP server answering every GET with `body` after `delay`.
struct ImageServer {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ImageServer {
    fn start(body: Vec<u8>, delay: Duration) -> ImageServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let body = body.clone();
                std::thread::spawn(move || {
                    s.set_nonblocking(false).ok();
                    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    std::thread::sleep(delay);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = s.write_all(head.as_bytes());
                    let _ = s.write_all(&body);
                });
            }
        });
        ImageServer { port, stop }
    }
}

impl Drop for ImageServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(bytes)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// One test's world: a namespace, a provider entry, a providers config, the
/// operator's kubeconfig (ServiceAccount token), and clean-up of the
/// libvirt objects the entry made.
struct World {
    sandbox: Descriptor,
    kube: KubeService,
    ns: String,
    entry: String,
    dir: tempfile::TempDir,
    config: PathBuf,
    kubeconfig: PathBuf,
    /// A consumer of the operator's HTTP API: lists the namespace's
    /// Proxies, reads `/metrics` (deploy/samples/' RBAC).
    reader: Consumer,
    _image: Option<ImageServer>,
}

impl World {
    /// A world whose one image is a blank 1 MiB disk served after
    /// `image_delay` (domains start but never boot an OS).
    async fn new(image_delay: Duration) -> World {
        let body = vec![0u8; 1 << 20];
        let image = ImageServer::start(body.clone(), image_delay);
        let url = format!("http://127.0.0.1:{}/tiny.raw", image.port);
        let tiny = Image::new("tiny", url, sha256_hex(&body), "raw");
        World::build(|config, _| config.images([tiny]), Some(image)).await
    }

    /// [`World::new`]'s tiny image (no delay), with `more_hosts` after the
    /// sandbox's `host1`.
    async fn tiny_with(more_hosts: impl IntoIterator<Item = Host>) -> World {
        let body = vec![0u8; 1 << 20];
        let image = ImageServer::start(body.clone(), Duration::ZERO);
        let url = format!("http://127.0.0.1:{}/tiny.raw", image.port);
        let tiny = Image::new("tiny", url, sha256_hex(&body), "raw");
        let configure = |config: ProvidersYaml, _: &Descriptor| {
            more_hosts
                .into_iter()
                .fold(config, ProvidersYaml::with_host)
                .images([tiny])
        };
        World::build(configure, Some(image)).await
    }

    /// A world whose image is the real proxy guest the sandbox serves
    /// (cloud-init, qemu-guest-agent, Squid), with Squid open to the
    /// guest network; `more_hosts` follow the sandbox's `host1`.
    async fn with_guest(more_hosts: impl IntoIterator<Item = Host>) -> World {
        let configure = |config: ProvidersYaml, sandbox: &Descriptor| {
            more_hosts
                .into_iter()
                .fold(config, ProvidersYaml::with_host)
                .images([Image::guest(sandbox)])
                .machine_type(1, "512MiB", "4GiB")
                .proxy(3128, [sandbox.guest_net.cidr()])
        };
        World::build(configure, None).await
    }

    /// A world whose one entry is of type `kubernetes`: Pods in `pods`'s
    /// namespace, under its ServiceAccount (deploy/samples/' RBAC), the
    /// sandbox's Squid image.
    async fn with_pods(pods: &testkit::pods::PodsNamespace) -> World {
        let world = World::build(|config, _| config, None).await;
        let yaml = testkit::pods::providers_yaml(&world.entry, pods, "");
        std::fs::write(&world.config, yaml).unwrap();
        world
    }

    /// The namespace, the providers config (the sandbox as `host1`, with
    /// its libvirt socket, then what `configure` makes of it) and the
    /// operator's kubeconfig.
    async fn build(
        configure: impl FnOnce(ProvidersYaml, &Descriptor) -> ProvidersYaml,
        image: Option<ImageServer>,
    ) -> World {
        let sandbox = Descriptor::require();
        let kube = sandbox
            .kube
            .clone()
            .expect("the sandbox descriptor has no `kube` section: restart the sandbox");
        install(&kube).await;
        let id = &random_hex()[..10];
        let ns = format!("opt-{id}");
        kubectl(&kube, &["create", "namespace", &ns]);
        let entry = format!("kvm2-o{id}");
        let dir = tempfile::tempdir().unwrap();
        let host1 = Host::sandbox(&sandbox, "host1").with_socket(&sandbox.remote_socket);
        let yaml = configure(
            ProvidersYaml::sandbox(&sandbox, &entry).hosts([host1]),
            &sandbox,
        )
        .render();
        let config = dir.path().join("providers.yaml");
        std::fs::write(&config, yaml).unwrap();
        let kubeconfig = dir.path().join("operator.kubeconfig");
        write_operator_kubeconfig(&kube, &kubeconfig);
        let reader = Consumer::discovery_reader(&kube, &ns, "reader").with_metrics();
        World {
            sandbox,
            kube,
            ns,
            entry,
            dir,
            config,
            kubeconfig,
            reader,
            _image: image,
        }
    }

    /// Starts the operator binary (leader election on deploy/'s Lease).
    fn operator(&self, extra: &[&str]) -> Operator {
        self.operator_in(&self.ns, extra)
    }

    /// A second namespace of this world's (deleted with it).
    fn second_namespace(&self) -> String {
        let ns = format!("{}-b", self.ns);
        kubectl(&self.kube, &["create", "namespace", &ns]);
        ns
    }

    /// The operator limited to namespace `ns`.
    fn operator_in(&self, ns: &str, extra: &[&str]) -> Operator {
        self.operator_with_env(ns, extra, &[])
    }

    /// [`World::operator_in`] with environment variables `env` set.
    fn operator_with_env(&self, ns: &str, extra: &[&str], env: &[(&str, String)]) -> Operator {
        let log = self
            .dir
            .path()
            .join(format!("operator-{}.log", random_hex()));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_operator"))
            .arg("run")
            .arg("--providers-config")
            .arg(&self.config)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", ns])
            .args(["--lease-namespace", OPERATOR_NS, "--lease-name", LEASE])
            .args(["--lease-duration", &format!("{LEASE_SECS}s")])
            .args(["--http-addr", "127.0.0.1:0", "--reconcile-wait", "2s"])
            .args(["--check-interval", "2s", "--shutdown-timeout", "10s"])
            .args(["--log", "info,kube=warn"])
            .args(extra)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("the operator starts");
        Operator {
            child: Some(child),
            log,
        }
    }

    fn proxies(&self, client: &Client) -> Api<kube::api::DynamicObject> {
        self.proxies_in(client, &self.ns)
    }

    /// A ProxyPool `name` of `replicas` members of this world's entry; the
    /// namespace's ProxyPools.
    async fn create_pool(
        &self,
        client: &Client,
        name: &str,
        replicas: usize,
    ) -> Api<kube::api::DynamicObject> {
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("egress-proxies.io", "v1alpha1", "ProxyPool"),
            "proxypools",
        );
        let pools = Api::namespaced_with(client.clone(), &self.ns, &resource);
        let pool: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "egress-proxies.io/v1alpha1",
            "kind": "ProxyPool",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"replicas": replicas, "template": {"spec": {"provider": self.entry}}}
        }))
        .unwrap();
        pools.create(&PostParams::default(), &pool).await.unwrap();
        pools
    }

    fn proxies_in(&self, client: &Client, ns: &str) -> Api<kube::api::DynamicObject> {
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("egress-proxies.io", "v1alpha1", "Proxy"),
            "proxies",
        );
        Api::namespaced_with(client.clone(), ns, &resource)
    }

    async fn create_proxy(&self, client: &Client, name: &str, spec: Value) -> String {
        self.create_proxy_in(client, &self.ns, name, spec).await
    }

    async fn create_proxy_in(&self, client: &Client, ns: &str, name: &str, spec: Value) -> String {
        let obj: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "egress-proxies.io/v1alpha1",
            "kind": "Proxy",
            "metadata": { "name": name, "namespace": ns },
            "spec": spec,
        }))
        .unwrap();
        let created = self
            .proxies_in(client, ns)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
        created.metadata.uid.unwrap()
    }

    fn virsh(&self, args: &[&str]) -> String {
        let out = Virsh::qemu(&self.sandbox).run(args);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn domains(&self) -> Vec<String> {
        self.virsh(&["list", "--all", "--name"])
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn domain_of(uid: &str) -> String {
        provider_api::name_from_uid(&provider_api::OwnerUid::parse(uid).unwrap()).to_string()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // Domains a failed test left (their disks name this entry).
        for domain in self.domains() {
            if self.virsh(&["dumpxml", &domain]).contains(&self.entry) {
                self.virsh(&["destroy", &domain]);
                self.virsh(&["undefine", &domain, "--nvram"]);
            }
        }
        // Volumes of this entry (per-VM volumes carry it; so does its base).
        let pool = self.sandbox.pool.name.clone();
        // virsh 11's vol-list has no --name: the first column, past the
        // two header lines.
        let listing = self.virsh(&["vol-list", &pool]);
        for vol in listing
            .lines()
            .skip(2)
            .filter_map(|l| l.split_whitespace().next())
        {
            if vol.contains(&self.entry) {
                self.virsh(&["vol-delete", "--pool", &pool, vol]);
            }
        }
        for ns in [self.ns.clone(), format!("{}-b", self.ns)] {
            let _ = self.kube.kubectl(&[
                "delete",
                "namespace",
                &ns,
                "--wait=false",
                "--ignore-not-found",
            ]);
        }
    }
}

/// The operator process; killed when dropped.
struct Operator {
    child: Option<Child>,
    log: PathBuf,
}

impl Operator {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails the test when the operator logged an ERROR line.
    fn assert_no_errors(&self) {
        let log = self.log();
        assert!(
            !log.contains("\"level\":\"ERROR\""),
            "errors logged:\n{log}"
        );
    }

    fn http_addr(&self) -> Option<String> {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["fields"]["message"] == "http listening")
            .and_then(|v| v["fields"]["addr"].as_str().map(str::to_owned))
    }

    async fn wait_leader(&self) {
        eventually(
            "the operator to lead",
            Duration::from_secs(4 * LEASE_SECS + 30),
            || async { self.log().contains("leadership acquired").then_some(()) },
        )
        .await;
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        let status = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(status.success());
    }

    /// Waits at most `within` for the process to exit.
    async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let child = self.child.as_mut().unwrap();
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the operator did not exit within {within:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- operator log ({}) ---\n{}",
                self.log.display(),
                self.log()
            );
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A kubeconfig with a token of deploy/'s ServiceAccount at `path` (a
/// token is bound to the ServiceAccount object: a reinstall needs a new
/// one).
fn write_operator_kubeconfig(kube: &KubeService, path: &std::path::Path) {
    let token = kubectl(
        kube,
        &["-n", OPERATOR_NS, "create", "token", SA, "--duration=1h"],
    );
    let user = format!("system:serviceaccount:{OPERATOR_NS}:{SA}");
    std::fs::write(path, kube.kubeconfig_with_token(&user, token.trim())).unwrap();
}

/// deploy/ installed as docs/operator.md says (idempotent).
async fn install(k: &KubeService) {
    testkit::kubectl::install_deploy(k);
}

/// Clears the Lease so the next test's operator need not wait it out.
async fn clear_lease(client: &Client) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), OPERATOR_NS);
    let _ = leases.delete(LEASE, &DeleteParams::default()).await;
}

/// Waits (up to `within`) until the Proxy `name` records its instance's
/// provider ID; returns the object.
async fn wait_instance(api: &Api<kube::api::DynamicObject>, name: &str, within: Duration) -> Value {
    eventually("the instance", within, || async {
        let o = serde_json::to_value(api.get(name).await.ok()?).unwrap();
        o["status"]["providerID"].is_string().then_some(o)
    })
    .await
}

/// Lets the Proxy `name` go without its instance (the abandon annotation,
/// then delete): the instance becomes an orphan.
async fn abandon(api: Api<kube::api::DynamicObject>, name: &'static str) {
    let patch = json!({"metadata": {"annotations": {
        "egress-proxies.io/abandon-instance": "true"
    }}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    delete_and_wait(&api, name, Duration::from_secs(60)).await;
}

/// Deletes the Proxy `name` and waits (up to `within`) until it is gone:
/// the finalizer holds it until its instance is deleted.
async fn delete_and_wait(api: &Api<kube::api::DynamicObject>, name: &str, within: Duration) {
    api.delete(name, &DeleteParams::default()).await.unwrap();
    eventually("the Proxy to go", within, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
}

fn condition<'a>(obj: &'a Value, t: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

async fn events(client: &Client, ns: &str) -> Vec<(String, String)> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_is_made_reported_and_deleted_under_deploys_rbac() {
    let _serial = SERIAL.lock().await;
    let world = World::new(Duration::ZERO).await;
    let client = admin(&world.kube).await;
    // cloud-init from a Secret: exercises the `secrets: get` rule.
    kubectl(
        &world.kube,
        &[
            "-n",
            &world.ns,
            "create",
            "secret",
            "generic",
            "ci",
            "--from-literal=user-data=#cloud-config\n",
        ],
    );
    // No --cluster-id: the identity is kube-system's UID (its RBAC rule).
    let op = world.operator(&[]);
    op.wait_leader().await;
    let uid = world
        .create_proxy(
            &client,
            "p1",
            json!({"provider": world.entry, "cloudInit": {"name": "ci"}}),
        )
        .await;
    let api = world.proxies(&client);
    let obj = eventually(
        "the instance to be made and reported",
        Duration::from_secs(120),
        || async {
            let o = serde_json::to_value(api.get("p1").await.ok()?).unwrap();
            (o["status"]["phase"] == "Provisioning" && o["status"]["providerID"].is_string())
                .then_some(o)
        },
    )
    .await;
    let domain = World::domain_of(&uid);
    assert_eq!(
        obj["status"]["providerID"],
        format!("kvm2://{}/host1/{domain}", world.entry)
    );
    assert_eq!(obj["status"]["host"], "host1");
    assert_eq!(obj["status"]["port"], 3128);
    assert_eq!(
        condition(&obj, "Provisioned").unwrap()["reason"],
        "Provisioning"
    );
    assert_eq!(
        obj["metadata"]["finalizers"][0],
        "egress-proxies.io/instance"
    );
    let managers: Vec<&str> = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["subresource"] == "status" || m["fieldsV1"]["f:status"].is_object())
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(
        managers.contains(&"egress-operator-reconciler"),
        "{managers:?}"
    );
    assert!(world.domains().contains(&domain), "{:?}", world.domains());

    let evs = eventually("a Created event", Duration::from_secs(30), || async {
        let e = events(&client, &world.ns).await;
        e.iter().any(|(r, _)| r == "Created").then_some(e)
    })
    .await;
    assert!(
        evs.iter().all(|(_, n)| !n.contains("cloud-config")),
        "{evs:?}"
    );

    // ProviderHealth by the monitor (1/1), discovery and metrics over HTTP.
    let ph: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("egress-proxies.io", "v1alpha1", "ProviderHealth"),
            "providerhealths",
        ),
    );
    eventually("ProviderHealth 1/1", Duration::from_secs(60), || async {
        let o = serde_json::to_value(ph.get(&world.entry).await.ok()?).unwrap();
        (o["status"]["ready"] == "1/1").then_some(())
    })
    .await;
    let addr = op.http_addr().expect("the operator logs its HTTP address");
    let (code, body) = http_get(
        &addr,
        &format!("/proxies?namespace={}", world.ns),
        Some(world.reader.token()),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // Still Provisioning (the blank disk boots nothing): no address a
    // client could dial, so discovery lists nothing yet (a_real_proxy_guest…
    // sees one listed once Running).
    let d: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(d["count"], 0, "{d}");
    // Under deploy/'s RBAC the operator reviews tokens: none is 401.
    assert_eq!(
        http_get(&addr, &format!("/proxies?namespace={}", world.ns), None)
            .await
            .0,
        401
    );
    assert_eq!(
        http_get(&addr, "/proxies?healthy=maybe", Some(world.reader.token()))
            .await
            .0,
        400
    );
    assert_eq!(http_get(&addr, "/readyz", None).await.0, 200);
    let (_, metrics) = http_get(&addr, "/metrics", Some(world.reader.token())).await;
    // Every metric the Grafana dashboard plots exists.
    let dashboard = include_str!("../../../deploy/grafana/operator-dashboard.json");
    for name in [
        "egress_proxies_operator_leader",
        "egress_proxies_operator_leadership_losses_total",
        "egress_proxies_operator_reconciles_total",
        "egress_proxies_provider_operations_total",
        "egress_proxies_provider_operation_duration_seconds_bucket",
        "egress_proxies_operator_provider_tasks",
        "egress_proxies_operator_status_writes_total",
        "egress_proxies_provider_check_targets_total",
        "egress_proxies_operator_events_total",
        "egress_proxies_operator_proxies",
        "egress_proxies_operator_reconcile_duration_seconds_bucket",
        "egress_proxies_operator_host_reachable",
    ] {
        assert!(dashboard.contains(name), "dashboard lacks {name}");
        assert!(metrics.contains(name), "/metrics lacks {name}:\n{metrics}");
    }

    // Deletion: the finalizer holds the object until the instance is gone.
    delete_and_wait(&api, "p1", Duration::from_secs(90)).await;
    assert!(
        !world.domains().contains(&domain),
        "domain {domain} outlived its Proxy"
    );
    let evs = events(&client, &world.ns).await;
    assert!(evs.iter().any(|(r, _)| r == "Deleted"), "{evs:?}");
    op.assert_no_errors();
    drop(op);
    clear_lease(&client).await;
}

/// The operator drives a real proxy guest (cloud-init, qemu-guest-agent,
/// Squid) to Running, its health engine's CONNECT probes — opened inside
/// the guest network namespace — make it `Healthy=True`, discovery lists it
/// healthy, and deleting the Proxy removes the VM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_proxy_guest_runs_and_becomes_healthy() {
    let _serial = SERIAL.lock().await;
    let world = World::with_guest([]).await;
    let client = admin(&world.kube).await;
    let net = &world.sandbox.guest_net;
    let target = net.upstream.to_string();
    let op = world.operator(&[
        "--cluster-id",
        "cluster-guest",
        "--probe-target",
        &target,
        "--probe-netns",
        &net.netns,
        "--probe-interval",
        "2s",
    ]);
    op.wait_leader().await;
    let uid = world
        .create_proxy(&client, "p1", json!({"provider": world.entry}))
        .await;
    let domain = World::domain_of(&uid);
    let api = world.proxies(&client);
    let obj = eventually("Running and Healthy", Duration::from_secs(420), || async {
        let o = serde_json::to_value(api.get("p1").await.ok()?).unwrap();
        let healthy = condition(&o, "Healthy")?["status"] == "True";
        (o["status"]["phase"] == "Running" && healthy).then_some(o)
    })
    .await;
    let ip: std::net::Ipv4Addr = obj["status"]["ip"].as_str().unwrap().parse().unwrap();
    let leases = net.leases().unwrap();
    assert!(
        leases.iter().any(|l| l.ip == ip),
        "{ip} is not a DHCP lease: {leases:?}"
    );
    assert_eq!(obj["status"]["port"], 3128);
    let addr = op.http_addr().unwrap();
    let (code, body) = http_get(&addr, "/proxies?healthy=true", Some(world.reader.token())).await;
    assert_eq!(code, 200, "{body}");
    let listed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listed["count"], 1, "{body}");
    assert_eq!(
        listed["proxies"][0]["address"],
        format!("{ip}:3128"),
        "{body}"
    );

    // Its QEMU killed: libvirt's lifecycle event reaches the operator,
    // which reconciles the Proxy at once — well before the next poll of a
    // running proxy (60 s) — and starts replacing it.
    let pid = std::fs::read_to_string(format!("/run/libvirt/qemu/{domain}.pid")).unwrap();
    let killed_at = std::time::Instant::now();
    assert!(
        Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .unwrap()
            .success()
    );
    eventually(
        "the crash seen before the running poll",
        Duration::from_secs(30),
        || async {
            let o = serde_json::to_value(api.get("p1").await.ok()?).unwrap();
            (o["status"]["phase"] != "Running").then_some(())
        },
    )
    .await;
    eprintln!("crash seen by the operator after {:?}", killed_at.elapsed());
    let crashed = metric(
        &addr,
        world.reader.token(),
        "egress_proxies_operator_instance_events_total{outcome=\"crashed\"}",
    )
    .await;
    assert!(crashed >= Some(1.0), "{crashed:?}");

    delete_and_wait(&api, "p1", Duration::from_secs(120)).await;
    assert!(!world.domains().contains(&domain));
    op.assert_no_errors();
    drop(op);
    clear_lease(&client).await;
}

/// The `kubernetes` provider under the real binary: a Proxy naming a
/// kubernetes entry becomes a Pod on the sandbox's node (the Squid image
/// built from Debian's packages), reaches `Running`, and turns `Healthy`
/// by the operator's real CONNECT through Squid in the Pod to an upstream
/// on the pods' gateway; the entry's host reports reachable; deleting the
/// Proxy deletes the Pod.
#[tokio::test(flavor = "multi_thread")]
async fn a_pod_proxy_becomes_healthy_through_squid() {
    let _serial = SERIAL.lock().await;
    let d = Descriptor::require();
    testkit::pods::require_node(&d);
    let kube = d.kube.clone().unwrap();
    let pods =
        testkit::pods::PodsNamespace::new(&kube, &format!("opt-pods-{}", &random_hex()[..8]));
    let upstream = testkit::pods::Upstream::get();
    let world = World::with_pods(&pods).await;
    let client = admin(&world.kube).await;
    let op = world.operator(&["--cluster-id", "cluster-pods", "--probe-interval", "2s"]);
    op.wait_leader().await;
    let uid = world
        .create_proxy(&client, "p1", json!({"provider": world.entry}))
        .await;
    let api = world.proxies(&client);
    let obj = eventually("Running and Healthy", Duration::from_secs(180), || async {
        let o = serde_json::to_value(api.get("p1").await.ok()?).unwrap();
        let healthy = condition(&o, "Healthy")?["status"] == "True";
        (o["status"]["phase"] == "Running" && healthy).then_some(o)
    })
    .await;
    let ip = obj["status"]["ip"].as_str().unwrap();
    assert!(ip.starts_with("10.213.9."), "{ip}");
    assert_eq!(obj["status"]["port"], 3128);
    assert_eq!(
        obj["status"]["providerID"],
        format!(
            "kubernetes://{}/{}/{}",
            world.entry,
            pods.name,
            provider_api::name_from_uid(&provider_api::OwnerUid::parse(&uid).unwrap())
        )
    );
    assert!(
        upstream.accepted() >= 1,
        "the probes reached the upstream through Squid"
    );
    let pod = kubectl(
        &kube,
        &[
            "-n",
            &pods.name,
            "get",
            "pods",
            "-o",
            "jsonpath={.items[*].metadata.labels}",
        ],
    );
    assert!(pod.contains(&uid), "{pod}");

    // The entry's one target, its namespace, is reachable.
    let health = eventually("ProviderHealth", Duration::from_secs(30), || async {
        let text = kube
            .kubectl(&["get", "providerhealths", &world.entry, "-o", "json"])
            .ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        (v["status"]["targets"][0]["reachable"] == true).then_some(v)
    })
    .await;
    assert_eq!(
        health["status"]["targets"][0]["name"],
        pods.name.as_str(),
        "{health}"
    );

    delete_and_wait(&api, "p1", Duration::from_secs(60)).await;
    eventually("the Pod gone", Duration::from_secs(60), || async {
        let names = kube
            .kubectl(&["-n", &pods.name, "get", "pods", "-o", "name"])
            .ok()?;
        names.trim().is_empty().then_some(())
    })
    .await;
    op.assert_no_errors();
    drop(op);
    clear_lease(&client).await;
}

/// Issue 26 item 4, its stretch: kube-proxy (built from the same source,
/// running on the sandbox's node) routes a pool's Service. A ProxyPool of
/// two Pods (the kubernetes entry, real Squid) becomes Healthy; a client on
/// the node sends CONNECTs to the pool's cluster IP and each reaches the
/// upstream through a member's Squid — both members' access logs show
/// them. Deleting the pool deletes its Service.
#[tokio::test(flavor = "multi_thread")]
async fn a_pools_cluster_ip_reaches_its_members_squid_through_kube_proxy() {
    let _serial = SERIAL.lock().await;
    let d = Descriptor::require();
    testkit::pods::require_node(&d);
    let kube = d.kube.clone().unwrap();
    let pods = testkit::pods::PodsNamespace::new(&kube, &format!("opt-vip-{}", &random_hex()[..8]));
    let upstream = testkit::pods::Upstream::get();
    let world = World::with_pods(&pods).await;
    let client = admin(&world.kube).await;
    let op = world.operator(&["--cluster-id", "cluster-vip", "--probe-interval", "2s"]);
    op.wait_leader().await;
    let pools = world.create_pool(&client, "egress", 2).await;
    eventually("both members Healthy", Duration::from_secs(240), || async {
        let p = serde_json::to_value(pools.get("egress").await.ok()?).unwrap();
        (p["status"]["healthyReplicas"] == 2).then_some(())
    })
    .await;
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), &world.ns);
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(client.clone(), &world.ns);
    eventually(
        "the pool's Endpoints hold both members",
        Duration::from_secs(30),
        || async {
            let e = endpoints.get("egress").await.ok()?;
            let n: usize = e
                .subsets
                .unwrap_or_default()
                .iter()
                .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
                .sum();
            (n == 2).then_some(())
        },
    )
    .await;
    let service = services.get("egress").await.unwrap();
    let spec = service.spec.unwrap();
    let vip: std::net::IpAddr = spec.cluster_ip.as_deref().unwrap().parse().unwrap();
    let port = u16::try_from(spec.ports.unwrap()[0].port).unwrap();
    let vip = std::net::SocketAddr::new(vip, port);
    let target = upstream.address();

    // The members' Squid log every CONNECT, the operator's probes' too
    // (one per member per probe round): what the loop adds is counted.
    let names = kubectl(&kube, &["-n", &pods.name, "get", "pods", "-o", "name"]);
    let names: Vec<String> = names.split_whitespace().map(str::to_owned).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let served = |pod: &str| {
        kubectl(&kube, &["-n", &pods.name, "logs", pod])
            .matches(&format!("CONNECT {target}"))
            .count()
    };
    let before: Vec<usize> = names.iter().map(|p| served(p)).collect();
    let accepted = upstream.accepted();
    const CONNECTS: usize = 24;
    let started = Instant::now();
    for i in 0..CONNECTS {
        let status = tokio::task::spawn_blocking({
            let target = target.clone();
            move || testkit::pods::connect_status(vip, &target, None)
        })
        .await
        .unwrap();
        assert_eq!(status, Some(200), "CONNECT {i} through {vip}");
    }
    let took = started.elapsed();
    // Squid answers 200 once its connection to the upstream is made; the
    // upstream's accept loop may count it a moment later.
    let deadline = Instant::now() + Duration::from_secs(10);
    while upstream.accepted() < accepted + CONNECTS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        upstream.accepted() >= accepted + CONNECTS,
        "{CONNECTS} CONNECTs answered 200, but the upstream accepted {} since (10 s later)",
        upstream.accepted() - accepted
    );
    // Squid logs a tunnel when it closes, so the logs may trail a moment:
    // read them until they show it (15 s at most). Each probe round (2 s
    // apart) adds at most one line per member while the loop and this
    // wait run. kube-proxy spreads over both endpoints: each CONNECT picks
    // one of two at random, so a member with no more than the probes'
    // share (all but a few of 24 on the other) is a one-in-a-million draw.
    let deadline = Instant::now() + Duration::from_secs(15);
    let (added, probes) = loop {
        let added: Vec<usize> = names
            .iter()
            .zip(&before)
            .map(|(p, b)| served(p) - b)
            .collect();
        let probes = usize::try_from(started.elapsed().as_secs() / 2).unwrap() + 2;
        let shown = added.iter().sum::<usize>() >= CONNECTS && added.iter().all(|n| *n > probes);
        if shown || Instant::now() >= deadline {
            break (added, probes);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        added.iter().sum::<usize>() >= CONNECTS,
        "{added:?}: the members' logs show every CONNECT"
    );
    for (pod, n) in names.iter().zip(&added) {
        assert!(
            *n > probes,
            "{pod} logged {n} CONNECTs in {took:?} ({added:?}, probes at most {probes}): not one through {vip}?"
        );
    }

    pools
        .delete("egress", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the pool and its Service gone",
        Duration::from_secs(120),
        || async {
            let gone = pools.get_opt("egress").await.ok()?.is_none()
                && services.get_opt("egress").await.ok()?.is_none();
            gone.then_some(())
        },
    )
    .await;
    op.assert_no_errors();
    drop(op);
    clear_lease(&client).await;
}

/// Invariant 1, the controller's half: a host that swallows connections and never
/// answers (frozen) fails only its own Proxy — `ProviderUnavailable` after
/// its Creates time out — while a Proxy on the other host is created during
/// the frozen host's first Create (provider calls run in per-Proxy tasks,
/// not one after another) and reaches Running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_host_fails_only_its_own_proxy() {
    let _serial = SERIAL.lock().await;
    // The frozen host: accepts TCP, never sends a byte.
    let swallow = testkit::silent::Silent::start().await;
    let sandbox = Descriptor::require();
    let frozen = Host {
        pool: "never-reached".into(),
        ..Host::sandbox(&sandbox, "frozen").at_loopback_port(swallow.port())
    };
    let world = World::with_guest([frozen]).await;
    let client = admin(&world.kube).await;
    let op = world.operator(&["--cluster-id", "cluster-h1", "--create-timeout", "90s"]);
    op.wait_leader().await;
    let on = |host: &str| json!({"provider": world.entry, "placement": {"host": host, "policy": "Require"}});
    world.create_proxy(&client, "stuck", on("frozen")).await;
    let uid = world.create_proxy(&client, "fine", on("host1")).await;
    let api = world.proxies(&client);
    // Both Creates are in flight at once: the frozen host's dial (20 s
    // budget) never holds up the other's (sampled until it has an instance).
    let addr = op.http_addr().unwrap();
    let most_in_flight = std::sync::atomic::AtomicU64::new(0);
    eventually(
        "the other host's instance",
        Duration::from_secs(120),
        || async {
            let (_, metrics) = http_get(&addr, "/metrics", Some(world.reader.token())).await;
            let now = metrics
                .lines()
                .find_map(|l| l.strip_prefix("egress_proxies_operator_provider_tasks "))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            most_in_flight.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
            let o = serde_json::to_value(api.get("fine").await.ok()?).unwrap();
            o["status"]["providerID"].is_string().then_some(())
        },
    )
    .await;
    let most = most_in_flight.into_inner();
    assert!(
        most >= 2,
        "the other host's Create waited for the frozen host's (at most {most} in flight)"
    );
    eventually(
        "the other host's Proxy to run",
        Duration::from_secs(300),
        || async {
            let o = serde_json::to_value(api.get("fine").await.ok()?).unwrap();
            (o["status"]["phase"] == "Running").then_some(())
        },
    )
    .await;
    let stuck = serde_json::to_value(api.get("stuck").await.unwrap()).unwrap();
    assert_ne!(stuck["status"]["phase"], "Running", "{stuck}");
    assert!(stuck["status"]["providerID"].is_null(), "{stuck}");
    eventually(
        "the frozen host's Proxy to fail",
        Duration::from_secs(300),
        || async {
            let o = serde_json::to_value(api.get("stuck").await.ok()?).unwrap();
            (condition(&o, "Ready")?["reason"] == "ProviderUnavailable").then_some(())
        },
    )
    .await;
    delete_and_wait(&api, "stuck", Duration::from_secs(90)).await;
    delete_and_wait(&api, "fine", Duration::from_secs(90)).await;
    assert!(!world.domains().contains(&World::domain_of(&uid)));
    drop(op);
    drop(swallow);
    clear_lease(&client).await;
}

/// The GC sweeper against the real API server and kvm2: an instance whose
/// Proxy was let go (the abandon annotation) is swept as an orphan by its
/// own cluster's operator, while another cluster's orphan on the same
/// provider entry is never touched (the Go original's two-cluster hazard).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gc_sweeps_its_own_orphans_and_never_another_clusters() {
    let _serial = SERIAL.lock().await;
    let world = World::new(Duration::ZERO).await;
    let client = admin(&world.kube).await;
    let api = world.proxies(&client);
    let abandon = |name: &'static str| abandon(api.clone(), name);
    let instance_of = |name: &'static str| {
        let api = api.clone();
        async move {
            wait_instance(&api, name, Duration::from_secs(120)).await;
        }
    };

    // Another cluster's operator makes an instance, then lets its Proxy go.
    let other = world.operator(&["--cluster-id", "cluster-other"]);
    other.wait_leader().await;
    let theirs = World::domain_of(
        &world
            .create_proxy(&client, "theirs", json!({"provider": world.entry}))
            .await,
    );
    instance_of("theirs").await;
    abandon("theirs").await;
    drop(other);
    clear_lease(&client).await;

    // Ours sweeps every second with no minimum age.
    let op = world.operator(&[
        "--cluster-id",
        "cluster-gc",
        "--gc-interval",
        "1s",
        "--gc-min-age",
        "1ms",
    ]);
    op.wait_leader().await;
    let ours = World::domain_of(
        &world
            .create_proxy(&client, "ours", json!({"provider": world.entry}))
            .await,
    );
    instance_of("ours").await;
    // A live Proxy: with none, the GC's empty-set guard deletes nothing.
    world
        .create_proxy(&client, "keeper", json!({"provider": world.entry}))
        .await;
    instance_of("keeper").await;
    assert!(world.domains().contains(&ours));
    abandon("ours").await;
    eventually(
        "our orphan to be swept",
        Duration::from_secs(60),
        || async { (!world.domains().contains(&ours)).then_some(()) },
    )
    .await;
    // Several more rounds: the other cluster's orphan stays.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        world.domains().contains(&theirs),
        "another cluster's instance was swept"
    );
    assert!(op.log().contains("gc round planned"), "{}", op.log());
    delete_and_wait(&api, "keeper", Duration::from_secs(90)).await;
    op.assert_no_errors();
    drop(op);
    clear_lease(&client).await;
}

/// Two operators, each limited to its namespace, one cluster identity, one
/// provider entry, an orphan in each namespace: each collects only its own
/// (a namespace-limited operator sees only its namespace's Proxies, so
/// another namespace's live instance looks orphaned to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_limited_operators_collect_only_their_own_namespaces_instances() {
    let _serial = SERIAL.lock().await;
    let world = World::new(Duration::ZERO).await;
    let client = admin(&world.kube).await;
    let (ns_a, ns_b) = (world.ns.clone(), world.second_namespace());
    let gc = [
        "--cluster-id",
        "cluster-shared",
        "--gc-interval",
        "1s",
        "--gc-min-age",
        "1ms",
    ];
    let abandon = |ns: String, name: &'static str| abandon(world.proxies_in(&client, &ns), name);
    // Namespace A: an orphan and a live Proxy, made by A's operator, whose
    // GC is slow (it must not sweep before B's turn).
    let a = world.operator_in(&ns_a, &["--cluster-id", "cluster-shared"]);
    a.wait_leader().await;
    let mut domains = std::collections::BTreeMap::new();
    for (ns, name) in [(&ns_a, "orphan-a"), (&ns_a, "keeper-a")] {
        let uid = world
            .create_proxy_in(&client, ns, name, json!({"provider": world.entry}))
            .await;
        wait_instance(
            &world.proxies_in(&client, ns),
            name,
            Duration::from_secs(120),
        )
        .await;
        domains.insert(name, World::domain_of(&uid));
    }
    abandon(ns_a.clone(), "orphan-a").await;
    drop(a);
    clear_lease(&client).await;

    // Namespace B's operator, sweeping every second: its orphan goes, A's
    // instances (an orphan and a live one it cannot see) stay.
    let b = world.operator_in(&ns_b, &gc);
    b.wait_leader().await;
    for name in ["orphan-b", "keeper-b"] {
        let uid = world
            .create_proxy_in(&client, &ns_b, name, json!({"provider": world.entry}))
            .await;
        wait_instance(
            &world.proxies_in(&client, &ns_b),
            name,
            Duration::from_secs(120),
        )
        .await;
        domains.insert(name, World::domain_of(&uid));
    }
    abandon(ns_b.clone(), "orphan-b").await;
    eventually(
        "B's orphan to be swept",
        Duration::from_secs(60),
        || async { (!world.domains().contains(&domains["orphan-b"])).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    for name in ["orphan-a", "keeper-a", "keeper-b"] {
        assert!(
            world.domains().contains(&domains[name]),
            "B's GC swept {name} ({})",
            domains[name]
        );
    }
    b.assert_no_errors();
    drop(b);
    clear_lease(&client).await;

    // A's operator, now sweeping: its orphan goes, B's live instance stays.
    let a = world.operator_in(&ns_a, &gc);
    a.wait_leader().await;
    eventually(
        "A's orphan to be swept",
        Duration::from_secs(60),
        || async { (!world.domains().contains(&domains["orphan-a"])).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    for name in ["keeper-a", "keeper-b"] {
        assert!(
            world.domains().contains(&domains[name]),
            "A's GC swept {name}"
        );
    }
    delete_and_wait(
        &world.proxies_in(&client, &ns_a),
        "keeper-a",
        Duration::from_secs(90),
    )
    .await;
    a.assert_no_errors();
    drop(a);
    clear_lease(&client).await;
    let b = world.operator_in(&ns_b, &["--cluster-id", "cluster-shared"]);
    b.wait_leader().await;
    delete_and_wait(
        &world.proxies_in(&client, &ns_b),
        "keeper-b",
        Duration::from_secs(90),
    )
    .await;
    drop(b);
    clear_lease(&client).await;
}

/// `kubectl delete -k deploy/` removes the operator and nothing else: the
/// CRDs, the Proxies (with their finalizers) and their instances stay;
/// applying deploy/ again and starting the operator adopts every Proxy —
/// same instance, nothing re-created, no `Created` Event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstalling_the_operator_keeps_proxies_and_a_reinstall_adopts_them() {
    let _serial = SERIAL.lock().await;
    let world = World::new(Duration::ZERO).await;
    let client = admin(&world.kube).await;
    let api = world.proxies(&client);
    let op = world.operator(&[]);
    op.wait_leader().await;
    let mut before = Vec::new();
    for name in ["p1", "p2"] {
        let uid = world
            .create_proxy(&client, name, json!({"provider": world.entry}))
            .await;
        let obj = wait_instance(&api, name, Duration::from_secs(120)).await;
        let domain = World::domain_of(&uid);
        let domain_uuid = world.virsh(&["domuuid", &domain]).trim().to_owned();
        before.push((name, obj, domain, domain_uuid));
    }
    let created_events = || async {
        events(&client, &world.ns)
            .await
            .into_iter()
            .filter(|(reason, _)| reason == "Created")
            .count()
    };
    let created = created_events().await;
    assert_eq!(created, 2);

    // Uninstall the operator as docs/operator.md says (the process goes
    // with its Deployment).
    drop(op);
    kubectl(
        &world.kube,
        &[
            "delete",
            "-k",
            &testkit::kubectl::deploy_dir().to_string_lossy(),
        ],
    );
    for crd in [
        "proxies.egress-proxies.io",
        "providerhealths.egress-proxies.io",
    ] {
        kubectl(&world.kube, &["get", "crd", crd]);
    }
    for (name, obj, domain, uuid) in &before {
        let now = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
        assert_eq!(now["metadata"]["deletionTimestamp"], Value::Null, "{name}");
        assert_eq!(now["status"]["providerID"], obj["status"]["providerID"]);
        assert_eq!(world.virsh(&["domuuid", domain]).trim(), uuid, "{name}");
    }

    // Reinstall: the same instances, adopted.
    install(&world.kube).await;
    write_operator_kubeconfig(&world.kube, &world.kubeconfig);
    let op = world.operator(&[]);
    op.wait_leader().await;
    // A few reconcile passes.
    tokio::time::sleep(Duration::from_secs(10)).await;
    for (name, obj, domain, uuid) in &before {
        let now = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
        for field in ["providerID", "createdAt", "ip", "host", "replacements"] {
            assert_eq!(
                now["status"][field], obj["status"][field],
                "{name}: {field}"
            );
        }
        assert_eq!(world.virsh(&["domuuid", domain]).trim(), uuid, "{name}");
    }
    assert_eq!(created_events().await, created, "a Proxy was made again");
    for (name, ..) in &before {
        delete_and_wait(&api, name, Duration::from_secs(90)).await;
    }
    op.assert_no_errors();
    drop(op);
    clear_lease(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_create_makes_no_second_instance() {
    let _serial = SERIAL.lock().await;
    // The image download takes 4 s: the first operator is killed inside it.
    let world = World::new(Duration::from_secs(4)).await;
    let client = admin(&world.kube).await;
    let mut first = world.operator(&["--cluster-id", "cluster-restart"]);
    first.wait_leader().await;
    let uid = world
        .create_proxy(&client, "p1", json!({"provider": world.entry}))
        .await;
    let domain = World::domain_of(&uid);
    eventually("the Create to start", Duration::from_secs(30), || async {
        first.log().contains("downloading base image").then_some(())
    })
    .await;
    first.signal("-KILL");
    first.wait_exit(Duration::from_secs(10)).await;
    // The lease is still held by the dead replica: the next one waits it
    // out, watches from scratch, and creates again (idempotent by owner).
    // The killed fill's lease on the host (kvm2's cross-process fencing)
    // is provably abandoned once its heartbeat is 120 s old, so the second
    // Create waits that long (a generous bound past it).
    let second = world.operator(&["--cluster-id", "cluster-restart"]);
    second.wait_leader().await;
    let api = world.proxies(&client);
    let obj = wait_instance(&api, "p1", Duration::from_secs(360)).await;
    assert!(
        obj["status"]["providerID"]
            .as_str()
            .unwrap()
            .ends_with(&domain)
    );
    let ours: Vec<String> = world
        .domains()
        .into_iter()
        .filter(|d| d == &domain)
        .collect();
    assert_eq!(ours.len(), 1);
    // Restarting again with the instance recorded: the watch restarts and
    // nothing is created (the create counter stays at zero).
    drop(second);
    clear_lease(&client).await;
    let third = world.operator(&["--cluster-id", "cluster-restart"]);
    third.wait_leader().await;
    let addr = eventually("the HTTP address", Duration::from_secs(10), || async {
        third.http_addr()
    })
    .await;
    eventually(
        "a poll of the recorded instance",
        Duration::from_secs(30),
        || async {
            let (_, m) = http_get(&addr, "/metrics", Some(world.reader.token())).await;
            m.contains("operation=\"get\",outcome=\"ok\"").then_some(())
        },
    )
    .await;
    let (_, m) = http_get(&addr, "/metrics", Some(world.reader.token())).await;
    assert!(
        !m.contains("operation=\"create\""),
        "a restart created again:\n{m}"
    );
    delete_and_wait(&api, "p1", Duration::from_secs(90)).await;
    assert!(!world.domains().contains(&domain));
    drop(third);
    clear_lease(&client).await;
}

/// Holds the Lease as `holder`, renewing it every second (a live replica),
/// until `stop` is set; the first write retries until it lands.
async fn hold_as(leases: &Api<Lease>, holder: &str, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        let mut lease = leases.get(LEASE).await.unwrap();
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(holder.to_owned());
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        match leases.replace(LEASE, &PostParams::default(), &lease).await {
            Ok(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            // The operator renewed in between: take it again at once.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("hold the lease: {e}"),
        }
    }
}

/// A sample of the operator's `/metrics`, e.g. `egress_proxies_operator_leader`, read
/// with `token`.
async fn metric(addr: &str, token: &str, series: &str) -> Option<f64> {
    let (_, body) = http_get(addr, "/metrics", Some(token)).await;
    body.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Losing the Lease stops all leader-only work at once but keeps the
/// process: while another replica holds the Lease nothing is done — a new
/// Proxy gets no finalizer, an orphaned instance is not swept by a GC
/// running every second — and once that replica lets the Lease lapse, the
/// same process leads again and does both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_lease_stops_work_keeps_the_process_and_leads_again() {
    let _serial = SERIAL.lock().await;
    let world = World::new(Duration::ZERO).await;
    let client = admin(&world.kube).await;
    // GC every second with no minimum age: only leadership stands between
    // it and an orphan.
    let gc = [
        "--cluster-id",
        "cluster-lease",
        "--gc-interval",
        "1s",
        "--gc-min-age",
        "1ms",
    ];
    let mut op = world.operator(&gc);
    op.wait_leader().await;
    let addr = op.http_addr().unwrap();
    let pid = op.child.as_ref().unwrap().id();
    let api = world.proxies(&client);
    // "keeper" keeps the live set non-empty (the GC's empty-set guard).
    world
        .create_proxy(&client, "keeper", json!({"provider": world.entry}))
        .await;
    let uid = world
        .create_proxy(&client, "p1", json!({"provider": world.entry}))
        .await;
    let orphan = World::domain_of(&uid);
    wait_instance(&api, "p1", Duration::from_secs(120)).await;
    wait_instance(&api, "keeper", Duration::from_secs(120)).await;

    // Another replica takes the Lease and keeps it.
    let leases: Api<Lease> = Api::namespaced(client.clone(), OPERATOR_NS);
    let stop = AtomicBool::new(false);
    let follower = async {
        eventually(
            "the lease to be lost",
            Duration::from_secs(2 * LEASE_SECS + 5),
            || async {
                op.log()
                    .contains("leadership lost: leader-only work stopped; campaigning again")
                    .then_some(())
            },
        )
        .await;
        assert_eq!(
            metric(
                &addr,
                world.reader.token(),
                "egress_proxies_operator_leader"
            )
            .await,
            Some(0.0)
        );
        assert_eq!(
            metric(
                &addr,
                world.reader.token(),
                "egress_proxies_operator_leadership_losses_total"
            )
            .await,
            Some(1.0)
        );
        // p1 goes without its finalizer's release (no leader to release
        // it): its instance is an orphan. p2 is new.
        api.delete("p1", &DeleteParams::default()).await.unwrap();
        let patch = json!({"metadata": {"finalizers": null}});
        api.patch("p1", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        world
            .create_proxy(&client, "p2", json!({"provider": world.entry}))
            .await;
        // Several GC intervals and reconcile chances: nothing happens.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let p2 = serde_json::to_value(api.get("p2").await.unwrap()).unwrap();
        assert!(p2["metadata"]["finalizers"].is_null(), "{p2}");
        assert!(p2["status"].is_null(), "{p2}");
        assert!(world.domains().contains(&orphan), "the orphan was swept");
        assert!(!op.log().contains("gc deleted"), "{}", op.log());
        assert!(op.child.as_mut().unwrap().try_wait().unwrap().is_none());
        stop.store(true, Ordering::SeqCst);
    };
    tokio::join!(hold_as(&leases, "another-replica", &stop), follower);

    // The other replica stopped renewing: after one lease duration of an
    // unchanged record, the same process leads again and catches up.
    eventually(
        "the operator to lead again",
        Duration::from_secs(LEASE_SECS + 2 * (LEASE_SECS / 3) + 5),
        || async { (op.log().matches("leadership acquired").count() == 2).then_some(()) },
    )
    .await;
    wait_instance(&api, "p2", Duration::from_secs(120)).await;
    eventually(
        "the orphan to be swept",
        Duration::from_secs(60),
        || async { (!world.domains().contains(&orphan)).then_some(()) },
    )
    .await;
    assert_eq!(
        metric(
            &addr,
            world.reader.token(),
            "egress_proxies_operator_leader"
        )
        .await,
        Some(1.0)
    );
    assert!(op.child.as_mut().unwrap().try_wait().unwrap().is_none());
    assert_eq!(op.child.as_ref().unwrap().id(), pid);
    delete_and_wait(&api, "p2", Duration::from_secs(90)).await;
    delete_and_wait(&api, "keeper", Duration::from_secs(90)).await;
    drop(op);
    clear_lease(&client).await;
}

/// SIGTERM while campaigning (another replica holds the Lease) exits 0 in
/// bounded time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_campaigning_exits_in_bounded_time() {
    let _serial = SERIAL.lock().await;
    let world = World::new(Duration::ZERO).await;
    let client = admin(&world.kube).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), OPERATOR_NS);
    // The Lease may be absent: create it for the other replica.
    let mut lease = Lease::default();
    lease.metadata.name = Some(LEASE.into());
    let _ = leases.create(&PostParams::default(), &lease).await;
    let stop = AtomicBool::new(false);
    let campaigner = async {
        eventually(
            "the other replica to hold",
            Duration::from_secs(10),
            || async {
                let holder = leases.get(LEASE).await.ok()?.spec?.holder_identity?;
                (holder == "another-replica").then_some(())
            },
        )
        .await;
        let mut op = world.operator(&["--cluster-id", "cluster-term"]);
        eventually("the HTTP address", Duration::from_secs(30), || async {
            op.http_addr()
        })
        .await;
        // A few campaign attempts.
        tokio::time::sleep(Duration::from_secs(LEASE_SECS / 3 * 2 + 1)).await;
        assert!(!op.log().contains("leadership acquired"), "{}", op.log());
        let started = Instant::now();
        op.signal("-TERM");
        let status = op.wait_exit(Duration::from_secs(5)).await;
        assert!(status.success(), "exit {status:?}; log:\n{}", op.log());
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(op.log().contains("shutting down while campaigning"));
        stop.store(true, Ordering::SeqCst);
    };
    tokio::join!(hold_as(&leases, "another-replica", &stop), campaigner);
    clear_lease(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_in_bounded_time_and_releases_the_lease() {
    let _serial = SERIAL.lock().await;
    let world = World::new(Duration::ZERO).await;
    let client = admin(&world.kube).await;
    let mut op = world.operator(&["--cluster-id", "cluster-term"]);
    op.wait_leader().await;
    let started = Instant::now();
    op.signal("-TERM");
    let status = op.wait_exit(Duration::from_secs(15)).await;
    assert!(status.success(), "exit {status:?}; log:\n{}", op.log());
    assert!(started.elapsed() < Duration::from_secs(15));
    let leases: Api<Lease> = Api::namespaced(client.clone(), OPERATOR_NS);
    let lease = leases.get(LEASE).await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity,
        None,
        "lease not released"
    );
    assert!(op.log().contains("lease released"));
    // Every log line is JSON with an RFC 3339 time.
    for line in op.log().lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"));
        let t = v["timestamp"].as_str().unwrap();
        assert!(t.ends_with('Z') && t.len() == 24, "{t}");
    }
    clear_lease(&client).await;
}

/// The sandbox's host 2 (`cargo xtask sandbox up` starts two hosts).
fn second_host(sandbox: &Descriptor) -> &testkit::HypervisorHost {
    assert!(
        sandbox.hosts.len() >= 2,
        "the sandbox has {} host(s); `cargo xtask sandbox up` starts 2",
        sandbox.hosts.len()
    );
    &sandbox.hosts[1]
}

/// Domains of this world's entry on a sandbox host other than host 1,
/// destroyed and undefined when dropped (a failed test leaves none).
struct HostDomains {
    virsh: Virsh,
    entry: String,
}

impl HostDomains {
    fn of(host: &testkit::HypervisorHost, entry: &str) -> Self {
        HostDomains {
            virsh: Virsh::new(host.virsh_uri(&host.libvirt.qemu_uri)),
            entry: entry.to_owned(),
        }
    }

    /// The entry's domains there.
    fn list(&self) -> Vec<String> {
        let out = self.virsh.run(&["list", "--all", "--name"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .filter(|d| {
                String::from_utf8_lossy(&self.virsh.run(&["dumpxml", d]).stdout)
                    .contains(&self.entry)
            })
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for HostDomains {
    fn drop(&mut self) {
        for d in self.list() {
            self.virsh.run(&["destroy", &d]);
            self.virsh.run(&["undefine", &d, "--nvram"]);
        }
    }
}

/// A ProxyPool of two real guests over the sandbox's two hypervisor hosts:
/// one member on each (spread from the monitor's view of the hosts), both
/// `Healthy` through Squid; deleting the pool deletes both members and
/// their domains on both hosts before the pool goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_real_guests_spreads_over_two_hosts_and_goes_with_its_members() {
    let _serial = SERIAL.lock().await;
    let sandbox = Descriptor::require();
    let second = second_host(&sandbox);
    let world = World::with_guest([Host::hypervisor(&sandbox, second)]).await;
    let on_first = HostDomains::of(&sandbox.hosts[0], &world.entry);
    let on_second = HostDomains::of(second, &world.entry);
    let client = admin(&world.kube).await;
    let net = &world.sandbox.guest_net;
    let target = net.upstream.to_string();
    let op = world.operator(&[
        "--probe-target",
        &target,
        "--probe-netns",
        &net.netns,
        "--probe-interval",
        "2s",
    ]);
    op.wait_leader().await;
    let pools = world.create_pool(&client, "egress", 2).await;
    let status = eventually("both members Healthy", Duration::from_secs(600), || async {
        let p = serde_json::to_value(pools.get("egress").await.ok()?).unwrap();
        (p["status"]["healthyReplicas"] == 2).then_some(p["status"].clone())
    })
    .await;
    assert_eq!(status["skew"], 0, "{status}");
    let hosts: Vec<(String, u64)> = status["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap().to_owned(),
                h["members"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        hosts,
        [("host1".to_owned(), 1), (second.name.clone(), 1)],
        "{status}"
    );
    let api = world.proxies(&client);
    let members = api.list(&Default::default()).await.unwrap().items;
    let mut on: Vec<String> = members
        .iter()
        .map(|m| {
            serde_json::to_value(m).unwrap()["status"]["host"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    on.sort();
    assert_eq!(on, ["host1".to_owned(), second.name.clone()]);
    assert_eq!(on_first.list().len(), 1, "one domain on host 1");
    assert_eq!(on_second.list().len(), 1, "one domain on {}", second.name);

    pools
        .delete("egress", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the pool gone", Duration::from_secs(180), || async {
        pools
            .get_opt("egress")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(on_first.list().is_empty(), "{:?}", on_first.list());
    assert!(on_second.list().is_empty(), "{:?}", on_second.list());
    op.assert_no_errors();
    drop(op);
    clear_lease(&client).await;
}

/// Brings a lost host back when dropped (thawed, booted), so a failing
/// test never leaves it frozen or stopped; waits (bounded) for its
/// libvirtd.
struct Revive<'a>(&'a testkit::HypervisorHost);

impl Revive<'_> {
    fn now(&self) {
        let _ = self.0.thaw();
        let _ = self.0.start();
        let virsh = Virsh::new(self.0.virsh_uri(&self.0.libvirt.qemu_uri));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !virsh.status(&["pool-list", "--name"]).0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Revive<'_> {
    fn drop(&mut self) {
        self.now();
    }
}

/// Issue 26 item 6: a host lost for longer than `--host-loss-grace` —
/// frozen (every process stopped, connections open and silent), then
/// stopped (power lost) — gets its Proxy made again on the other host;
/// when it returns, the GC deletes the old instance (a duplicate under the
/// Proxy's tag), so the Proxy never keeps two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hosts_proxy_is_made_again_elsewhere_and_the_old_instance_goes_on_return() {
    let _serial = SERIAL.lock().await;
    let sandbox = Descriptor::require();
    let second = second_host(&sandbox);
    let world = World::tiny_with([Host::hypervisor(&sandbox, second)]).await;
    let on_second = HostDomains::of(second, &world.entry);
    let client = admin(&world.kube).await;
    let op = world.operator(&[
        "--host-loss-grace",
        "10s",
        "--call-timeout",
        "5s",
        "--gc-interval",
        "5s",
        "--gc-min-age",
        "1s",
    ]);
    op.wait_leader().await;
    let api = world.proxies(&client);
    for (name, stopped) in [("frozen", false), ("stopped", true)] {
        let spec = json!({"provider": world.entry, "placement": {"host": second.name}});
        let uid = world.create_proxy(&client, name, spec).await;
        let domain = World::domain_of(&uid);
        let host_of = async |api: &Api<kube::api::DynamicObject>| {
            let o = serde_json::to_value(api.get(name).await.ok()?).unwrap();
            o["status"]["providerID"].as_str()?;
            o["status"]["host"].as_str().map(str::to_owned)
        };
        let first = eventually("an instance", Duration::from_secs(120), || host_of(&api)).await;
        assert_eq!(first, second.name, "{name}: placed on the preferred host");
        assert!(on_second.list().contains(&domain));

        let revive = Revive(second);
        if stopped {
            second.stop().unwrap();
        } else {
            second.freeze().unwrap();
        }
        let lost_at = Instant::now();
        eventually("made again on host1", Duration::from_secs(180), || async {
            (host_of(&api).await? == "host1").then_some(())
        })
        .await;
        eprintln!(
            "{name}: made again on host1 {:?} after the loss",
            lost_at.elapsed()
        );
        let lost: Vec<(String, String)> = events(&client, &world.ns)
            .await
            .into_iter()
            .filter(|(reason, note)| reason == "HostLost" && note.contains(&domain))
            .collect();
        assert_eq!(
            lost.len(),
            1,
            "{name}: one HostLost Event naming the old instance"
        );
        assert!(
            world.domains().contains(&domain),
            "the new instance on host1"
        );

        revive.now();
        eventually(
            "the old instance deleted once its host answers",
            Duration::from_secs(180),
            || async { (!on_second.list().contains(&domain)).then_some(()) },
        )
        .await;
        let now = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
        assert_eq!(now["status"]["host"], "host1", "{now}");
        delete_and_wait(&api, name, Duration::from_secs(90)).await;
        assert!(!world.domains().contains(&domain));
        drop(revive);
    }
    drop(op);
    clear_lease(&client).await;
}

/// Traces over OTLP (issue: observability item 4): the real binary with
/// `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a collector of the test's
/// own; its requests decoded by protoc with OpenTelemetry's official
/// definitions. A reconcile is one trace: kube-runtime's `reconciling
/// object` span, `provider.create` under it, libvirt procedures under that;
/// SSH dials sit inside some operation's trace; no attribute carries the
/// cloud-init user data or the SSH key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_is_one_trace_at_an_otlp_collector_and_carries_no_secret() {
    let _serial = SERIAL.lock().await;
    let world = World::new(Duration::ZERO).await;
    let client = admin(&world.kube).await;
    let receiver = crate::otlp_receiver::OtlpReceiver::start().await;
    const MARKER: &str = "trace-secret-7f3a9c";
    kubectl(
        &world.kube,
        &[
            "-n",
            &world.ns,
            "create",
            "secret",
            "generic",
            "ci",
            &format!("--from-literal=user-data=#cloud-config\n# {MARKER}\n"),
        ],
    );
    let op = world.operator_with_env(
        &world.ns,
        &[],
        &[
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{}", receiver.port),
            ),
            ("OTEL_SERVICE_NAME", "op-under-test".to_owned()),
        ],
    );
    op.wait_leader().await;
    world
        .create_proxy(
            &client,
            "traced",
            json!({"provider": world.entry, "cloudInit": {"name": "ci"}}),
        )
        .await;
    let api = world.proxies(&client);
    eventually(
        "the instance to be made",
        Duration::from_secs(120),
        || async {
            let o = serde_json::to_value(api.get("traced").await.ok()?).unwrap();
            o["status"]["providerID"].is_string().then_some(())
        },
    )
    .await;
    // Batches leave within a second of their first span.
    let spans = eventually(
        "a provider.create span with libvirt calls under it",
        Duration::from_secs(30),
        || async {
            let spans = receiver.spans();
            let create = spans.iter().find(|s| s.name == "provider.create")?;
            spans
                .iter()
                .any(|s| s.name == "libvirt" && s.trace_id == create.trace_id)
                .then_some(spans)
        },
    )
    .await;
    assert!(
        receiver.paths().iter().all(|p| p == "/v1/traces"),
        "{:?}",
        receiver.paths()
    );
    let by_id = |id: &str| spans.iter().find(|s| s.span_id == id);
    let create = spans.iter().find(|s| s.name == "provider.create").unwrap();
    // Its parent is the reconcile, the trace's root.
    let reconcile = create
        .parent_span_id
        .as_deref()
        .and_then(by_id)
        .unwrap_or_else(|| panic!("provider.create's parent was exported: {create:?}"));
    assert_eq!(reconcile.name, "reconciling object", "{reconcile:?}");
    assert_eq!(reconcile.trace_id, create.trace_id);
    assert!(
        reconcile
            .attributes
            .iter()
            .any(|(k, v)| k == "object.ref" && v.contains("traced")),
        "{reconcile:?}"
    );
    // Every libvirt call of that trace descends from provider.create.
    let descends = |span: &crate::otlp_receiver::DecodedSpan, ancestor: &str| {
        let mut at = span.parent_span_id.clone();
        while let Some(id) = at {
            if id == ancestor {
                return true;
            }
            at = by_id(&id).and_then(|p| p.parent_span_id.clone());
        }
        false
    };
    let calls: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "libvirt" && s.trace_id == create.trace_id)
        .collect();
    assert!(
        calls.iter().all(|c| descends(c, &create.span_id)),
        "{calls:?}"
    );
    assert!(
        calls.iter().any(|c| c
            .attributes
            .iter()
            .any(|(k, v)| k == "procedure" && v == "domain_define_xml_flags")),
        "{calls:?}"
    );
    // SSH dials happen inside an operation (never a trace of their own).
    let dials: Vec<_> = spans.iter().filter(|s| s.name == "ssh.dial").collect();
    assert!(!dials.is_empty(), "no ssh.dial span");
    assert!(
        dials.iter().all(|d| d.parent_span_id.is_some()),
        "{dials:?}"
    );
    // No secret anywhere in what was sent.
    let key = std::fs::read_to_string(&world.sandbox.ssh.key_path).unwrap();
    let key_line = key.lines().nth(1).unwrap();
    for text in receiver.decoded() {
        assert!(!text.contains(MARKER), "the user data reached a span");
        assert!(!text.contains(key_line), "the SSH key reached a span");
        assert!(
            text.contains(r#"string_value: "op-under-test""#),
            "service.name"
        );
    }
    // What was accepted is counted.
    let addr = op.http_addr().expect("the operator logs its HTTP address");
    let (_, metrics) = http_get(&addr, "/metrics", Some(world.reader.token())).await;
    assert!(
        metrics.lines().any(|l| l
            .strip_prefix("egress_proxies_operator_trace_spans_exported_total ")
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|v| v > 0.0)),
        "{metrics}"
    );
    drop(op);

    // A collector that is down: the operator works on, and counts what it
    // could not send.
    let dead = testkit::free_port();
    let op = world.operator_with_env(
        &world.ns,
        &[],
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{dead}"),
        )],
    );
    op.wait_leader().await;
    world
        .create_proxy(&client, "traced-2", json!({"provider": world.entry}))
        .await;
    eventually(
        "the second instance to be made",
        Duration::from_secs(120),
        || async {
            let o = serde_json::to_value(api.get("traced-2").await.ok()?).unwrap();
            o["status"]["providerID"].is_string().then_some(())
        },
    )
    .await;
    let addr = op.http_addr().expect("the operator logs its HTTP address");
    eventually(
        "failed exports to be counted",
        Duration::from_secs(30),
        || async {
            let (_, metrics) = http_get(&addr, "/metrics", Some(world.reader.token())).await;
            metrics
                .lines()
                .any(|l| {
                    l.strip_prefix(
                    "egress_proxies_operator_trace_spans_dropped_total{reason=\"export_failed\"} ",
                )
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v > 0.0)
                })
                .then_some(())
        },
    )
    .await;
    op.assert_no_errors();
}
