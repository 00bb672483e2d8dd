//! The operator over an instant provider, as a child process: shared by
//! `tests/instant_provider.rs`, `benches/operator.rs` and
//! `benches/discovery_auth.rs` (each re-runs its own binary as the
//! operator, so the operator's memory and API calls are its own). Its
//! includers declare `consumer.rs` and `operator_account.rs` too, as
//! `mod consumer` and `mod operator_account` at their roots.
//!
//! [`Instant`] answers every provider call at once from memory; its
//! instances point at [`responder`], a loopback CONNECT responder, so the
//! health engine probes for real. [`writes`] reads the API server's own
//! count of the writes it served.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use provider_api::{
    Checker, CreateRequest, Error, Identifier, Instance, InstanceState, ListedInstance, Placement,
    Provider, ProviderEntry, ProviderId, ProviderType, Registry, Tag, TargetStatus,
};
use serde_json::{Value, json};
use testkit::providers_yaml::{Host, Image, ProvidersYaml};
use testkit::relay::Relay;
use testkit::{Descriptor, KubeService};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::consumer::{Consumer, http_get};
use crate::operator_account::{Lease, OperatorAccount};

/// Set in the child's environment: run as the operator.
const CHILD: &str = "OPERATOR_INSTANT_CHILD";
/// The CONNECT responder the instances point at.
const RESPONDER: &str = "OPERATOR_INSTANT_RESPONDER";
/// A directory where a file named after an instance makes `get` report it
/// failed (until it is deleted): how a test fails an instance the child's
/// provider holds.
const FAIL_DIR: &str = "OPERATOR_INSTANT_FAIL_DIR";
/// Set in the child's environment: a /24 of local addresses (the
/// sandbox's `local_range`) to give each instance an address of its own.
const RANGE: &str = "OPERATOR_INSTANT_RANGE";
pub const OPERATOR_NS: &str = "egress-proxies-system";
pub const LEASE: &str = "egress-proxies-operator";

/// When this process is the child: runs the operator and returns its exit
/// status. Call first thing in `main`.
pub fn run_child_if_asked() -> Option<ExitCode> {
    std::env::var_os(CHILD).map(|_| operator::main(std::env::args_os(), instant_registry))
}

/// A benchmark's `main` over the operator run as a child: the child runs
/// the operator; a run whose filter names another benchmark skips; else
/// `bench` runs to its end.
pub fn bench_main<F: std::future::Future<Output = ()>>(
    name: &str,
    bench: impl FnOnce() -> F,
) -> ExitCode {
    if let Some(code) = run_child_if_asked() {
        return code;
    }
    if testkit::bench::filtered_out(name) {
        return ExitCode::SUCCESS;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(bench());
    ExitCode::SUCCESS
}

/// Answers every call at once from memory: the operator's cost alone.
pub struct Instant {
    name: Identifier,
    /// The entry's hosts; an instance goes to the one its placement names,
    /// else the first.
    hosts: Vec<Identifier>,
    responder: SocketAddr,
    instances: Mutex<HashMap<ProviderId, (Instance, ListedInstance)>>,
    /// With a local range: each instance name's address in it.
    addresses: Option<Mutex<Addresses>>,
    fail_dir: Option<PathBuf>,
}

fn instant_registry() -> anyhow::Result<Registry> {
    let responder: SocketAddr = std::env::var(RESPONDER)?.parse()?;
    let fail_dir = std::env::var_os(FAIL_DIR).map(PathBuf::from);
    let range = match std::env::var(RANGE) {
        Ok(cidr) => Some(cidr.trim_end_matches("/24").parse()?),
        Err(_) => None,
    };
    Ok(registry_with(responder, fail_dir, range))
}

/// Addresses handed out from a /24: .1 to .254, one per instance name
/// (a replacement keeps its instance's).
struct Addresses {
    net: std::net::Ipv4Addr,
    given: HashMap<String, std::net::Ipv4Addr>,
}

impl Addresses {
    fn of(&mut self, instance: &str) -> std::net::IpAddr {
        let n = self.given.len();
        let [a, b, c, _] = self.net.octets();
        let ip = *self
            .given
            .entry(instance.to_owned())
            .or_insert_with(|| std::net::Ipv4Addr::new(a, b, c, 1 + (n % 254) as u8));
        std::net::IpAddr::V4(ip)
    }
}

/// A registry whose `kvm2` type builds an [`Instant`] pointing at `responder`.
pub fn registry_over(responder: SocketAddr) -> Registry {
    registry_failing(responder, None)
}

fn registry_failing(responder: SocketAddr, fail_dir: Option<PathBuf>) -> Registry {
    registry_with(responder, fail_dir, None)
}

fn registry_with(
    responder: SocketAddr,
    fail_dir: Option<PathBuf>,
    range: Option<std::net::Ipv4Addr>,
) -> Registry {
    let mut registry = Registry::new();
    registry
        .register(ProviderType::Kvm2, move |entry: &ProviderEntry| {
            let hosts = entry
                .kvm2()
                .map(|k| k.hosts.iter().map(|h| h.name.clone()).collect())
                .unwrap_or_default();
            Ok(Arc::new(Instant {
                name: entry.name.clone(),
                hosts,
                responder,
                instances: Mutex::new(HashMap::new()),
                addresses: range.map(|net| {
                    Mutex::new(Addresses {
                        net,
                        given: HashMap::new(),
                    })
                }),
                fail_dir: fail_dir.clone(),
            }) as Arc<dyn Provider>)
        })
        .unwrap();
    registry
}

impl Instant {
    /// The file whose presence fails instance `id`.
    fn fail_file(&self, id: &ProviderId) -> Option<PathBuf> {
        Some(self.fail_dir.as_ref()?.join(id.instance().as_str()))
    }
}

#[async_trait]
impl Provider for Instant {
    fn name(&self) -> &Identifier {
        &self.name
    }

    fn provider_type(&self) -> ProviderType {
        ProviderType::Kvm2
    }

    async fn create(&self, req: &CreateRequest) -> Result<Instance, Error> {
        let asked = match &req.placement {
            Placement::Prefer(h) | Placement::Require(h) => self.hosts.iter().find(|x| *x == h),
            _ => None,
        };
        let host = asked
            .or(self.hosts.first())
            .ok_or_else(|| Error::permanent("the entry has no hosts"))?;
        let id = ProviderId::new(
            ProviderType::Kvm2,
            self.name.clone(),
            host.clone(),
            req.instance_name(),
        );
        let ip = match &self.addresses {
            Some(a) => a.lock().unwrap().of(id.instance().as_str()),
            None => self.responder.ip(),
        };
        let mut instances = self.instances.lock().unwrap();
        let (instance, _) = instances.entry(id.clone()).or_insert_with(|| {
            let now = SystemTime::now();
            let instance = Instance::new(id.clone(), InstanceState::Running, Some(ip), Some(now))
                .with_proxy_port(self.responder.port());
            let listed =
                ListedInstance::new(id, req.owner_uid.clone(), req.tags.clone(), Some(now));
            (instance, listed)
        });
        Ok(instance.clone())
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, Error> {
        let instances = self.instances.lock().unwrap();
        let instance = instances
            .get(id)
            .map(|(i, _)| i.clone())
            .ok_or_else(|| Error::not_found(format!("{id}: no such instance")))?;
        if self.fail_file(id).is_some_and(|f| f.exists()) {
            return Ok(Instance::new(
                id.clone(),
                InstanceState::Failed {
                    reason: "failed by the test".into(),
                },
                None,
                instance.created_at,
            ));
        }
        Ok(instance)
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), Error> {
        self.instances.lock().unwrap().remove(id);
        if let Some(f) = self.fail_file(id) {
            let _ = std::fs::remove_file(f);
        }
        Ok(())
    }

    fn checker(&self) -> Option<&dyn Checker> {
        Some(self)
    }

    async fn list_by_tag(&self, tag: &Tag) -> Result<Vec<ListedInstance>, Error> {
        let instances = self.instances.lock().unwrap();
        Ok(instances
            .values()
            .filter(|(_, l)| l.tags.get(&tag.key) == Some(&tag.value))
            .map(|(_, l)| l.clone())
            .collect())
    }

    /// It fills nothing (the fills gauge still has its series).
    fn fills_in_flight(&self) -> Option<usize> {
        Some(0)
    }
}

/// Every host answers at once.
#[async_trait]
impl Checker for Instant {
    async fn check(&self, _timeout: Duration) -> Vec<TargetStatus> {
        self.hosts
            .iter()
            .map(|h| TargetStatus::reachable(h.clone(), Duration::from_millis(1), None))
            .collect()
    }
}

/// Answers every CONNECT with 200 (the instances' "Squid"); runs until the
/// runtime ends.
pub async fn responder() -> SocketAddr {
    responder_for(None).await
}

/// A responder that wants basic auth (`Proxy-Authorization: Basic
/// BASE64`), as Squid with `proxy.credentials_file` does: 407 without it or
/// with other credentials, 200 with them.
/// `base64` is `base64(user:password)`, computed by the caller.
pub async fn responder_requiring(base64: &str) -> SocketAddr {
    responder_for(Some(format!("Basic {base64}"))).await
}

/// A responder on every address of this machine, for instances with
/// addresses of the sandbox's local range: a connection to an address
/// for which `deny/<address>` exists in `dir` is closed at once (that
/// instance's Squid is down).
pub async fn responder_on_all(dir: &Path) -> SocketAddr {
    responder_at("0.0.0.0:0", None, Some(dir.join("deny"))).await
}

/// The responder; with `wanted`, the `Proxy-Authorization` value the
/// CONNECT must carry.
async fn responder_for(wanted: Option<String>) -> SocketAddr {
    responder_at("127.0.0.1:0", wanted, None).await
}

async fn responder_at(bind: &str, wanted: Option<String>, deny: Option<PathBuf>) -> SocketAddr {
    let wanted = Arc::new(wanted);
    let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                continue;
            };
            let denied = deny.as_ref().is_some_and(|d| {
                s.local_addr()
                    .is_ok_and(|a| d.join(a.ip().to_string()).exists())
            });
            if denied {
                continue;
            }
            let wanted = Arc::clone(&wanted);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 512];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf);
                let allowed = wanted.as_ref().as_ref().is_none_or(|w| {
                    head.lines().any(|l| {
                        l.split_once(':').is_some_and(|(name, value)| {
                            name.eq_ignore_ascii_case("proxy-authorization") && value.trim() == w
                        })
                    })
                });
                let answer: &[u8] = if allowed {
                    b"HTTP/1.1 200 Connection established\r\n\r\n"
                } else {
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"
                };
                let _ = s.write_all(answer).await;
            });
        }
    });
    addr
}

/// The providers config of the instant entry `entry` (a kvm2 entry the
/// instant provider is built from; it dials nothing), with basic auth from
/// `credentials` when given.
fn config_yaml(
    sandbox: &Descriptor,
    entry: &str,
    credentials: Option<&Path>,
    hosts: usize,
) -> String {
    // Never dialled; the config wants each address:port once.
    let hosts = (1..=hosts).map(|i| Host {
        name: format!("h{i}"),
        port: 21 + u16::try_from(i).unwrap(),
        ..Host::never_dialled()
    });
    let image = Image::new(
        "img",
        "http://127.0.0.1:1/img.qcow2",
        "0".repeat(64),
        "qcow2",
    );
    let mut yaml = ProvidersYaml::sandbox(sandbox, entry)
        .hosts(hosts)
        .images([image])
        .machine_type(1, "512MiB", "2GiB");
    if let Some(path) = credentials {
        yaml = yaml.credentials_file(path);
    }
    yaml.render()
}

/// The sandbox's API server with deploy/ applied, a namespace of its own
/// and a providers config naming one entry for the instant provider.
pub struct World {
    pub kube: KubeService,
    pub client: Client,
    pub id: String,
    pub entry: String,
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    /// The sandbox's local range, once [`World::use_local_range`] chose it.
    pub local_range: Option<String>,
    /// Environment variables for the operators started from now on
    /// ([`World::set_operator_env`]).
    pub operator_env: Vec<(String, String)>,
}

impl World {
    pub async fn new() -> World {
        let sandbox = Descriptor::require();
        let kube = sandbox
            .kube
            .clone()
            .expect("the sandbox descriptor has no `kube` section: restart the sandbox");
        let kc = Kubeconfig::read_from(&kube.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap();
        let client = Client::try_from(config).unwrap();
        testkit::kubectl::install_deploy(&kube);
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        let id = format!("{:x}", t.as_micros() & 0xff_ffff_ffff);
        let entry = format!("instant-{id}");
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("providers.yaml");
        std::fs::write(&config, config_yaml(&sandbox, &entry, None, 1)).unwrap();
        World {
            kube,
            client,
            id,
            entry,
            dir,
            config,
            local_range: None,
            operator_env: Vec::new(),
        }
    }

    /// Starts operators with `vars` set (replacing earlier ones), e.g.
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn set_operator_env(&mut self, vars: &[(&str, String)]) {
        self.operator_env = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
    }

    /// Where the operator child's provider looks for failed instances.
    pub fn fail_dir(&self) -> PathBuf {
        let dir = self.dir.path().join("fail");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Makes the operator child's provider report the instance named
    /// `instance` failed, until the operator deletes it.
    pub fn fail(&self, instance: &str) {
        std::fs::write(self.fail_dir().join(instance), "").unwrap();
    }

    /// The entry's proxies want basic auth with the credentials in `file`
    /// (`proxy.credentials_file`), for operators started from now on.
    pub fn use_credentials_file(&self, file: &Path) {
        let yaml = config_yaml(&Descriptor::require(), &self.entry, Some(file), 1);
        std::fs::write(&self.config, yaml).unwrap();
    }

    /// Gives instances of operators started from now on addresses of the
    /// sandbox's local range (serve them with [`responder_on_all`]).
    pub fn use_local_range(&mut self) {
        let sandbox = Descriptor::require();
        let range = sandbox
            .local_range
            .expect("the sandbox descriptor has no local_range: restart the sandbox");
        std::fs::create_dir_all(self.dir.path().join("deny")).unwrap();
        self.local_range = Some(range);
    }

    /// Makes the responder refuse connections to `ip` (or, with `false`,
    /// accept them again).
    pub fn deny(&self, ip: &str, denied: bool) {
        let file = self.dir.path().join("deny").join(ip);
        if denied {
            std::fs::write(file, "").unwrap();
        } else {
            std::fs::remove_file(file).unwrap();
        }
    }

    /// The entry has hosts `h1`..`hN` (all answer the check), for
    /// operators started from now on.
    pub fn use_hosts(&self, n: usize) {
        let yaml = config_yaml(&Descriptor::require(), &self.entry, None, n);
        std::fs::write(&self.config, yaml).unwrap();
    }

    /// A new namespace `PREFIX-ID`.
    pub fn namespace(&self, prefix: &str) -> String {
        let ns = format!("{prefix}-{}", self.id);
        self.kube.kubectl(&["create", "namespace", &ns]).unwrap();
        ns
    }

    /// The instant provider this world's config builds, in this process.
    pub fn provider(&self, responder: SocketAddr) -> Arc<dyn Provider> {
        let cfg = provider_api::ProvidersConfig::load(&self.config).unwrap();
        let built = registry_over(responder).build(&cfg).unwrap();
        built.iter().next().unwrap().clone()
    }

    /// Starts the operator over the instant provider on namespace `ns`,
    /// under a ServiceAccount of its own in `ns` holding deploy/'s
    /// ClusterRole rules and bound to deploy/'s Lease Role
    /// (`operator_account.rs`), leading on deploy/'s Lease (cleared first).
    /// `extra` flags follow the defaults. Its HTTP API is read as
    /// [`Operator::reader`]: a consumer listing the Proxies of `ns` and
    /// reading `/metrics` (deploy/samples/' RBAC).
    pub async fn operator(&self, ns: &str, responder: SocketAddr, extra: &[&str]) -> Operator {
        self.start_operator(ns, responder, &self.kube.server, extra)
            .await
    }

    /// [`operator`](Self::operator), reaching the API server only through
    /// `relay` (a [`testkit::relay::Relay`] forwarding to the API server's
    /// address): the outages the relay makes are this operator's alone.
    pub async fn operator_via(
        &self,
        relay: &Relay,
        ns: &str,
        responder: SocketAddr,
        extra: &[&str],
    ) -> Operator {
        // The server's certificate names 127.0.0.1, the relay's address.
        let server = format!("https://127.0.0.1:{}", relay.port());
        self.start_operator(ns, responder, &server, extra).await
    }

    /// The API server's `host:port`, for a relay in front of it.
    pub fn api_address(&self) -> String {
        let server = &self.kube.server;
        server
            .strip_prefix("https://")
            .unwrap_or(server)
            .trim_end_matches('/')
            .to_owned()
    }

    async fn start_operator(
        &self,
        ns: &str,
        responder: SocketAddr,
        server: &str,
        extra: &[&str],
    ) -> Operator {
        let _ = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
            self.client.clone(),
            OPERATOR_NS,
        )
        .delete(LEASE, &DeleteParams::default())
        .await;
        self.follower_via(ns, responder, server, extra)
    }

    /// As [`World::operator`], without clearing the Lease: while another
    /// replica leads, this one follows (serves HTTP from its watch cache).
    pub fn follower(&self, ns: &str, responder: SocketAddr, extra: &[&str]) -> Operator {
        self.follower_via(ns, responder, &self.kube.server, extra)
    }

    /// [`follower`](Self::follower), reaching the API server at `server`.
    fn follower_via(
        &self,
        ns: &str,
        responder: SocketAddr,
        server: &str,
        extra: &[&str],
    ) -> Operator {
        let tag = &testkit::names::random_hex()[..8];
        let account =
            OperatorAccount::new(&self.kube, ns, &format!("operator-{tag}"), Lease::Deploy);
        let kubeconfig = self.dir.path().join(format!("operator-{tag}.kubeconfig"));
        let via = KubeService {
            server: server.to_owned(),
            ..self.kube.clone()
        };
        account.write_kubeconfig(&via, &kubeconfig);
        let reader =
            Consumer::discovery_reader(&self.kube, ns, &format!("reader-{tag}")).with_metrics();
        let log = self.dir.path().join(format!("operator-{ns}-{tag}.log"));
        let cluster = format!("instant-{}", self.id);
        let mut command = Command::new(std::env::current_exe().unwrap());
        if let Some(range) = &self.local_range {
            command.env(RANGE, range);
        }
        command
            .envs(self.operator_env.iter().map(|(k, v)| (k, v)))
            .env(CHILD, "1")
            .env(RESPONDER, responder.to_string())
            .env(FAIL_DIR, self.fail_dir())
            .arg("run");
        // The probes' default target, unless the test names its own.
        if !extra.contains(&"--probe-target") {
            command.args(["--probe-target", "upstream.invalid:443"]);
        }
        let spawned = std::time::Instant::now();
        let child = command
            .arg("--providers-config")
            .arg(&self.config)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--namespace", ns, "--cluster-id", &cluster])
            .args(["--http-addr", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut operator = Operator {
            child,
            spawned,
            log,
            reader,
            _account: account,
        };
        // A refused command line ends the child at once: fail here with its
        // words, not minutes later in a wait for what it never does.
        std::thread::sleep(Duration::from_millis(300));
        if let Some(status) = operator.exited() {
            panic!(
                "the operator exited at start ({status}):\n{}",
                operator.log()
            );
        }
        operator
    }
}

/// The operator child; SIGTERM (then SIGKILL after 30 s) on drop, then its
/// account's cluster-scoped RBAC is removed.
pub struct Operator {
    child: Child,
    /// When the process was started (its account and kubeconfig made).
    pub spawned: std::time::Instant,
    log: PathBuf,
    /// Reads its HTTP API: lists the Proxies of its namespace, reads
    /// `/metrics`.
    pub reader: Consumer,
    _account: OperatorAccount,
}

impl Operator {
    /// `(VmRSS, VmHWM)` in KiB; zeros once the process is gone.
    pub fn rss_kib(&self) -> (u64, u64) {
        let path = format!("/proc/{}/status", self.child.id());
        let status = std::fs::read_to_string(path).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// The CPU time the process has used, in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        testkit::bench::cpu_seconds(self.child.id())
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Log lines whose message is `message`.
    pub fn logged(&self, message: &str) -> usize {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["fields"]["message"] == message)
            .count()
    }

    /// The child's process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child's exit status, once it exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// The HTTP address the operator logged (it must log at info).
    pub fn http_addr(&self) -> String {
        self.http_addr_opt()
            .expect("the operator logged its HTTP address (run it with --log info)")
    }

    /// The HTTP address, once the operator has logged it.
    pub fn http_addr_opt(&self) -> Option<String> {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["fields"]["message"] == "http listening")
            .and_then(|v| v["fields"]["addr"].as_str().map(str::to_owned))
    }

    /// The body of `GET path` on the operator's HTTP endpoint, as
    /// [`Operator::reader`]; panics unless it is 200.
    pub async fn get(&self, path: &str) -> String {
        let (code, body) = http_get(&self.http_addr(), path, Some(self.reader.token())).await;
        assert_eq!(code, 200, "GET {path}: {body}");
        body
    }

    /// The value of the sample `series` (name and labels as printed, e.g.
    /// `egress_proxies_operator_status_writes_total{writer="reconciler"}`) on the
    /// operator's `/metrics`; 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let body = self.get("/metrics").await;
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// The sum of the samples of `name` whose labels contain every one of
    /// `labels` (e.g. `operation="create"`).
    pub async fn metric_sum(&self, name: &str, labels: &[&str]) -> f64 {
        let body = self.get("/metrics").await;
        body.lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix('{'))
            .filter_map(|l| l.rsplit_once("} "))
            .filter(|(set, _)| labels.iter().all(|want| set.split(',').any(|l| l == *want)))
            .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
            .sum()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..300 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn proxies(client: &Client, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("egress-proxies.io", "v1alpha1", "Proxy"),
        "proxies",
    );
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// The ProxyPools of `ns`.
pub fn pools(client: &Client, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("egress-proxies.io", "v1alpha1", "ProxyPool"),
        "proxypools",
    );
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Creates the ProxyPool `name` in `ns`: `replicas` members on `entry`.
pub async fn create_pool(
    api: &Api<DynamicObject>,
    ns: &str,
    entry: &str,
    name: &str,
    replicas: usize,
) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "egress-proxies.io/v1alpha1",
        "kind": "ProxyPool",
        "metadata": { "name": name, "namespace": ns },
        "spec": { "replicas": replicas, "template": { "spec": { "provider": entry } } },
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

/// Creates Proxies `p0000`… in `ns` on `entry`, 32 at a time.
pub async fn create_proxies(api: &Api<DynamicObject>, ns: &str, entry: &str, n: usize) {
    futures::stream::iter(0..n)
        .map(|i| async move { create_proxy(api, ns, entry, &format!("p{i:04}")).await })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

/// Creates the Proxy `name` in `ns` on `entry`.
pub async fn create_proxy(api: &Api<DynamicObject>, ns: &str, entry: &str, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "egress-proxies.io/v1alpha1",
        "kind": "Proxy",
        "metadata": { "name": name, "namespace": ns },
        "spec": { "provider": entry },
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

/// Deletes every Proxy of `api` (no namespace controller runs here).
pub async fn delete_all(api: &Api<DynamicObject>) {
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
}

/// Waits at most `within` until `api` lists no Proxy; returns whether it
/// came to that.
pub async fn wait_gone(api: &Api<DynamicObject>, within: Duration) -> bool {
    tokio::time::timeout(within, async {
        loop {
            match api.list(&ListParams::default().limit(1)).await {
                Ok(l) if l.items.is_empty() => break,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await
    .is_ok()
}

/// Writes the API server has served on the operator's resources, by
/// `resource[/subresource] VERB` (with ` 404` appended for writes to objects that were gone), from its `apiserver_request_total`.
pub async fn writes(client: &Client) -> BTreeMap<String, u64> {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            let prefix = format!("{name}=\"");
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(prefix.as_str()))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let verb = label("verb");
        if !matches!(verb.as_str(), "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE") {
            continue;
        }
        let resource = label("resource");
        if !matches!(
            resource.as_str(),
            "proxies"
                | "proxypools"
                | "providerhealths"
                | "events"
                | "leases"
                | "services"
                | "endpoints"
                | "endpointslices"
        ) {
            continue;
        }
        let sub = label("subresource");
        let mut key = if sub.is_empty() {
            format!("{resource} {verb}")
        } else {
            format!("{resource}/{sub} {verb}")
        };
        // A write to an object that is gone is counted apart.
        if label("code") == "404" {
            key.push_str(" 404");
        }
        *out.entry(key).or_default() += value.parse::<f64>().unwrap_or(0.0) as u64;
    }
    out
}

/// `after - before`, entries that grew only.
pub fn delta(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// Writes on Proxies, ProviderHealths and Events (Lease renewals apart).
pub fn object_writes(d: &BTreeMap<String, u64>) -> u64 {
    d.iter()
        .filter(|(k, _)| !k.starts_with("leases"))
        .map(|(_, v)| v)
        .sum()
}

pub fn show(d: &BTreeMap<String, u64>) -> String {
    d.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Watches `api` (with `config`) until `seen` says it saw enough, at most
/// `within` (then panics, saying it was not `what`); returns when it did.
/// Watch errors are retried.
async fn watch_until(
    api: &Api<DynamicObject>,
    config: watcher::Config,
    within: Duration,
    what: &str,
    mut seen: impl FnMut(DynamicObject) -> bool,
) -> std::time::Instant {
    let mut stream = std::pin::pin!(watcher(api.clone(), config).applied_objects());
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.try_next()).await {
            Err(_) => panic!("{what} not within {within:?}"),
            Ok(Err(e)) => eprintln!("watch: {e} (retrying)"),
            Ok(Ok(None)) => panic!("the watch ended"),
            Ok(Ok(Some(obj))) => {
                if seen(obj) {
                    return std::time::Instant::now();
                }
            }
        }
    }
}

/// Waits at most `within` until `done` holds for `n` Proxies of `api`
/// (from a watch); returns when it did.
pub async fn wait_all(
    api: &Api<DynamicObject>,
    n: usize,
    within: Duration,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> std::time::Instant {
    let mut state: HashMap<String, bool> = HashMap::new();
    let config = watcher::Config::default();
    watch_until(api, config, within, &format!("every Proxy {what}"), |obj| {
        let value = serde_json::to_value(&obj).unwrap();
        state.insert(obj.metadata.name.clone().unwrap(), done(&value));
        state.len() >= n && state.values().all(|d| *d)
    })
    .await
}

/// Waits (at most `within`) until the ProxyPool `name` reports `n`
/// members, all `Ready` (`status.replicas` and `status.readyReplicas`), by
/// watching that one object: how a user sees a pool become ready, and an
/// observer that does not itself load the API server with every member's
/// events. Returns when it saw that.
pub async fn wait_pool_ready(
    api: &Api<DynamicObject>,
    name: &str,
    n: usize,
    within: Duration,
) -> std::time::Instant {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let what = format!("pool {name} {n} Ready");
    watch_until(api, config, within, &what, |obj| {
        let count = |field: &str| obj.data["status"][field].as_u64().unwrap_or(0);
        count("replicas") == n as u64 && count("readyReplicas") == n as u64
    })
    .await
}

pub fn running(v: &Value) -> bool {
    v["status"]["phase"] == "Running"
}

pub fn healthy(v: &Value) -> bool {
    v["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Healthy" && c["status"] == "True")
    })
}
