//! Callers of the operator's HTTP API, as a cluster's consumers would be:
//! ServiceAccounts with the RBAC of `deploy/samples/discovery-reader.yaml`
//! (list Proxies in one namespace), `deploy/samples/lease-consumer.yaml`
//! (lease Proxies in one namespace) and `deploy/samples/metrics-reader.yaml`
//! (get `/metrics`), rendered for a test's own namespace and names, with
//! tokens from the API server (`kubectl create token`, TokenRequest).
//!
//! Shared by `tests/it` (`#[path]`), `tests/instant_provider.rs` and the
//! benchmarks; whoever includes it declares it `mod consumer` at its root.

// Each includer uses a part of it.
#![allow(dead_code)]

use std::time::Duration;

use testkit::KubeService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DISCOVERY_SAMPLE: &str = include_str!("../../../deploy/samples/discovery-reader.yaml");
const METRICS_SAMPLE: &str = include_str!("../../../deploy/samples/metrics-reader.yaml");
const LEASE_SAMPLE: &str = include_str!("../../../deploy/samples/lease-consumer.yaml");

/// A ServiceAccount and its token; the cluster-scoped objects it made
/// (the metrics grant) are deleted on drop.
pub struct Consumer {
    kube: KubeService,
    /// `system:serviceaccount:NS:NAME`.
    pub user: String,
    token: String,
    cluster_objects: Vec<String>,
}

impl Consumer {
    /// The ServiceAccount `name` in `ns` with the discovery sample's Role:
    /// `list` on the Proxies of `ns`.
    pub fn discovery_reader(kube: &KubeService, ns: &str, name: &str) -> Consumer {
        let yaml = DISCOVERY_SAMPLE
            .replace("namespace: team-a", &format!("namespace: {ns}"))
            .replace("proxy-consumer", name);
        apply(kube, &yaml);
        Consumer::with_token(kube, ns, name)
    }

    /// The ServiceAccount `name` in `ns` with the lease sample's Role:
    /// `lease` on the Proxies of `ns`.
    pub fn leaser(kube: &KubeService, ns: &str, name: &str) -> Consumer {
        let yaml = LEASE_SAMPLE
            .replace("namespace: team-a", &format!("namespace: {ns}"))
            .replace("proxy-leaser", name);
        apply(kube, &yaml);
        Consumer::with_token(kube, ns, name)
    }

    /// The ServiceAccount `name` in `ns`, with no rights at all.
    pub fn without_rights(kube: &KubeService, ns: &str, name: &str) -> Consumer {
        apply(
            kube,
            &format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: {ns}\n"
            ),
        );
        Consumer::with_token(kube, ns, name)
    }

    /// Also grants it the metrics sample's `get /metrics` (a ClusterRole and
    /// ClusterRoleBinding named for it, deleted on drop).
    pub fn with_metrics(mut self) -> Consumer {
        let (ns, name) = self
            .user
            .strip_prefix("system:serviceaccount:")
            .and_then(|s| s.split_once(':'))
            .map(|(n, s)| (n.to_owned(), s.to_owned()))
            .unwrap();
        let role = format!("egress-proxies-metrics-reader-{ns}-{name}");
        let binding = format!("egress-proxies-metrics-{ns}-{name}");
        let yaml = METRICS_SAMPLE
            .replace("egress-proxies-metrics-reader", &role)
            .replace("prometheus-egress-proxies-metrics", &binding)
            .replace("name: prometheus", &format!("name: {name}"))
            .replace("namespace: monitoring", &format!("namespace: {ns}"));
        apply(&self.kube, &yaml);
        self.cluster_objects
            .push(format!("clusterrolebinding/{binding}"));
        self.cluster_objects.push(format!("clusterrole/{role}"));
        self
    }

    fn with_token(kube: &KubeService, ns: &str, name: &str) -> Consumer {
        let token = kube
            .kubectl(&["-n", ns, "create", "token", name, "--duration=1h"])
            .unwrap();
        Consumer {
            kube: kube.clone(),
            user: format!("system:serviceaccount:{ns}:{name}"),
            token: token.trim().to_owned(),
            cluster_objects: Vec::new(),
        }
    }

    /// Its bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        for object in &self.cluster_objects {
            let _ = self
                .kube
                .kubectl(&["delete", object, "--ignore-not-found", "--wait=false"]);
        }
    }
}

/// `kubectl apply -f` of `yaml`.
fn apply(kube: &KubeService, yaml: &str) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), yaml).unwrap();
    kube.kubectl(&["apply", "-f", &file.path().to_string_lossy()])
        .unwrap();
}

/// `GET path` on `addr` (with `Authorization: Bearer token` when given):
/// the status code and the body. Bounded to 10 s.
pub async fn http_get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    http_request(addr, "GET", path, token).await
}

/// `METHOD path` (no body) on `addr`, as [`http_get`].
pub async fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let length = if method == "GET" {
            ""
        } else {
            "Content-Length: 0\r\n"
        };
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: operator\r\nConnection: close\r\n{length}{auth}\r\n"
        );
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    };
    let response = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {path} on {addr}: no answer within 10 s"));
    let code = response
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: not an HTTP response: {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}
