//! Pods on the sandbox's node for the `kubernetes` provider's tests: the
//! node required, a namespace of the test's own with
//! `deploy/samples/kubernetes-provider-rbac.yaml` bound to a ServiceAccount
//! of its own (and a kubeconfig with its token, as a remote cluster's
//! entry would mount), a providers config entry, and a TCP upstream on the
//! pods' gateway for CONNECTs to reach.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use sandbox_kit::node::{POD_GATEWAY, POD_SUBNET};
use sandbox_kit::{Descriptor, KubeService};

/// The RBAC sample every test applies as shipped (names substituted).
pub const RBAC_SAMPLE: &str = include_str!("../../../deploy/samples/kubernetes-provider-rbac.yaml");

/// The upstream's port: Squid allows CONNECT to 443 only.
pub const UPSTREAM_PORT: u16 = 443;

/// Panics unless the sandbox's node is up (`cargo xtask test` starts it).
pub fn require_node(d: &Descriptor) {
    assert!(
        sandbox_kit::node::record(&d.state_dir).exists(),
        "the sandbox has no node: run `cargo xtask sandbox node` (cargo xtask test starts it)"
    );
}

/// A namespace with the provider's RBAC, deleted (with its Pods) on drop.
pub struct PodsNamespace {
    kube: KubeService,
    /// The namespace.
    pub name: String,
    /// A kubeconfig holding the ServiceAccount's token (mode 0600).
    pub kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl PodsNamespace {
    /// A fresh namespace `name` with the sample's Role bound to the
    /// ServiceAccount `egress-pods-provider` there.
    ///
    /// # Panics
    /// When kubectl fails.
    pub fn new(kube: &KubeService, name: &str) -> PodsNamespace {
        let yaml = RBAC_SAMPLE.replace("egress-pods", name).replace(
            "    name: egress-proxies-operator\n    namespace: egress-proxies-system",
            &format!("    name: egress-pods-provider\n    namespace: {name}"),
        );
        assert!(yaml.contains(&format!("namespace: {name}\n")));
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("rbac.yaml");
        std::fs::write(&manifest, format!(
            "{yaml}---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: egress-pods-provider\n  namespace: {name}\n"
        ))
        .unwrap();
        kube.kubectl(&["apply", "-f", &manifest.to_string_lossy()])
            .unwrap();
        let token = kube
            .kubectl(&[
                "-n",
                name,
                "create",
                "token",
                "egress-pods-provider",
                "--duration=1h",
            ])
            .unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            kube.kubeconfig_with_token("egress-pods-provider", token.trim()),
        )
        .unwrap();
        PodsNamespace {
            kube: kube.clone(),
            name: name.to_owned(),
            kubeconfig,
            _dir: dir,
        }
    }
}

impl Drop for PodsNamespace {
    fn drop(&mut self) {
        let _ = self.kube.kubectl(&[
            "-n",
            &self.name,
            "delete",
            "pods",
            "--all",
            "--grace-period=0",
            "--force",
            "--wait=false",
        ]);
        let _ = self
            .kube
            .kubectl(&["delete", "namespace", &self.name, "--wait=false"]);
    }
}

/// A providers config of one `kubernetes` entry `entry` in `ns`: image
/// `squid` (the sandbox's Squid image) and `missing` (one no node has),
/// machine type `small`; proxies allow the pods' network as clients and
/// the gateway as a destination (the upstream), with `extra_proxy` lines
/// added to the `proxy` block (e.g. `credentials_file: ...`).
pub fn providers_yaml(entry: &str, ns: &PodsNamespace, extra_proxy: &str) -> String {
    format!(
        "providers:
  - name: {entry}
    type: kubernetes
    kubernetes:
      namespace: {namespace}
      kubeconfig_file: {kubeconfig}
      images:
        squid: {{reference: \"{image}\"}}
        missing: {{reference: \"localhost/egress-proxies/missing:1\"}}
      machine_types:
        small: {{cpu: 100m, memory: 96MiB}}
      proxy:
        allowed_clients: [{POD_SUBNET}]
        allowed_destinations: [{POD_GATEWAY}/32]
        probe_target: \"{POD_GATEWAY}:{UPSTREAM_PORT}\"
{extra_proxy}      defaults: {{machine_type: small, image: squid}}
",
        namespace = ns.name,
        kubeconfig = ns.kubeconfig.display(),
        image = sandbox_kit::squid_recipe::reference(),
    )
}

/// A TCP listener on the pods' gateway, port 443, shared by the whole
/// test process (one may bind it): it accepts and holds connections.
pub struct Upstream {
    accepted: AtomicUsize,
}

impl Upstream {
    /// The process's upstream, started on first use.
    ///
    /// # Panics
    /// When the address cannot be bound (the node's bridge is missing).
    pub fn get() -> &'static Upstream {
        static UPSTREAM: OnceLock<&'static Upstream> = OnceLock::new();
        UPSTREAM.get_or_init(|| {
            let listener = TcpListener::bind((POD_GATEWAY, UPSTREAM_PORT))
                .unwrap_or_else(|e| panic!("bind {POD_GATEWAY}:{UPSTREAM_PORT}: {e}"));
            let upstream: &'static Upstream = Box::leak(Box::new(Upstream {
                accepted: AtomicUsize::new(0),
            }));
            // Lives as long as the test process (the listener's owner).
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for conn in listener.incoming().flatten() {
                    upstream.accepted.fetch_add(1, Ordering::SeqCst);
                    held.push(conn);
                    if held.len() > 64 {
                        held.remove(0);
                    }
                }
            });
            upstream
        })
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// `host:port`.
    pub fn address(&self) -> String {
        format!("{POD_GATEWAY}:{UPSTREAM_PORT}")
    }
}

/// `CONNECT target` through the proxy at `proxy` (with basic credentials
/// `user:password` when given): the status code of the answer, or `None`
/// when the proxy did not answer with a status line within 10 s.
pub fn connect_status(
    proxy: std::net::SocketAddr,
    target: &str,
    auth: Option<&str>,
) -> Option<u16> {
    connect_status_within(proxy, target, auth, std::time::Duration::from_secs(10))
}

/// [`connect_status`] with `timeout` for the connection and for the answer.
pub fn connect_status_within(
    proxy: std::net::SocketAddr,
    target: &str,
    auth: Option<&str>,
    timeout: std::time::Duration,
) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&proxy, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(auth) = auth {
        request.push_str(&format!(
            "Proxy-Authorization: Basic {}\r\n",
            crate::bytes::base64(auth.as_bytes())
        ));
    }
    request.push_str("\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") && line.len() < 1024 {
        if s.read(&mut byte).ok()? == 0 {
            break;
        }
        line.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&line);
    line.split_whitespace().nth(1)?.parse().ok()
}
