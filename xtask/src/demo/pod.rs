//! The operator as deploy/'s Deployment, on the sandbox's node.
//!
//! ```text
//!  cargo build --release -p operator ─▶ image (binary, its glibc, user 65532)
//!     ─▶ ctr import ─▶ kubectl create secret kvm2-ssh ─▶ kubectl apply -k overlay/
//!  overlay/ = deploy/ + the image, the run's providers config and flags,
//!             host network on a free loopback port, one replica
//! ```
//!
//! Everything else is deploy/'s own: the ServiceAccount and its RBAC, the
//! non-root user, the read-only root, no capabilities, the Secret mounted
//! 0400, the probes on `/healthz` and `/readyz`, the memory limit. The
//! overlay changes only what a single loopback node needs: the pod shares
//! the host's network (no kube-proxy, no CNI pod network), so the API
//! server is named by address (`KUBERNETES_SERVICE_HOST`), HTTP is served
//! on the node's address at a port that is free on this machine, and one replica runs (two would want
//! the same port). Guests are reached over the host's link to their bridge
//! (`guest_net::link_host`), as from a real host network.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::image::operator as operator_image;
use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::target::Target;
use super::world::OPERATOR_NS;
use crate::node::{self, Node};
use crate::util::free_port;
use crate::util::{cmd, read};

/// deploy/'s Deployment.
const DEPLOYMENT: &str = "egress-proxies-operator";
/// The image name deploy/ uses, which the overlay points at ours.
const IMAGE: &str = "egress-proxies-operator";
const LOCAL_IMAGE: &str = "localhost/egress-proxies-operator";
/// Where deploy/ mounts the SSH Secret.
const SSH_MOUNT: &str = "/etc/egress-proxies/kvm2-ssh";
const POD_READY: Duration = Duration::from_secs(180);

/// The operator's Deployment, scaled between 0 and 1 by the suite.
pub struct Deployment {
    admin: PathBuf,
    overlay: PathBuf,
    /// The pod running now (scaled to 1).
    pub pod: Option<String>,
}

impl Deployment {
    /// Builds and imports the image, writes the overlay into `dir`.
    pub fn prepare(
        target: &Target,
        node: &Node,
        dir: &Path,
        release_binary: &Path,
        deploy: &Path,
    ) -> Result<Deployment> {
        let tag = image(node, dir, release_binary)?;
        let overlay = dir.join("overlay");
        std::fs::create_dir_all(&overlay)?;
        let port = free_port()?;
        let api_port = target
            .api_server()
            .context("the operator's pod runs on the sandbox's API server only")?
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .context("the API server's URL has no port")?;
        std::fs::write(
            overlay.join("providers-config.yaml"),
            target.config_for_ssh_dir(SSH_MOUNT),
        )?;
        std::fs::write(
            overlay.join("kustomization.yaml"),
            kustomization(&relative_to_root(deploy, &overlay), &tag, port, api_port),
        )?;
        Ok(Deployment {
            admin: target.admin_kubeconfig.clone(),
            overlay,
            pod: None,
        })
    }

    /// `kubectl apply -k overlay/` (no pod yet: zero replicas), then the
    /// SSH Secret as docs/operator.md creates it.
    pub fn install(&self, target: &Target) -> Result<()> {
        self.kubectl(&["apply", "-k", &self.overlay.to_string_lossy()])?;
        let (key, known_hosts) = target.ssh_files();
        self.kubectl(&[
            "-n",
            OPERATOR_NS,
            "delete",
            "secret",
            "kvm2-ssh",
            "--ignore-not-found",
        ])?;
        self.kubectl(&[
            "-n",
            OPERATOR_NS,
            "create",
            "secret",
            "generic",
            "kvm2-ssh",
            &format!("--from-file=id_ed25519={key}"),
            &format!("--from-file=known_hosts={known_hosts}"),
        ])?;
        Ok(())
    }

    fn kubectl(&self, args: &[&str]) -> Result<String> {
        let mut c = cmd("kubectl", ["--kubeconfig"]);
        c.arg(&self.admin).args(args);
        read(c)
    }

    /// Scales to one replica and waits until its pod runs and is Ready.
    pub fn start(&mut self) -> Result<()> {
        self.kubectl(&[
            "-n",
            OPERATOR_NS,
            "scale",
            "deployment",
            DEPLOYMENT,
            "--replicas=1",
        ])?;
        let started = Instant::now();
        loop {
            let pods = self.pods()?;
            if let Some(p) = pods
                .iter()
                .find(|p| ready(p) && p["metadata"]["deletionTimestamp"].is_null())
            {
                let name = p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                self.pod = Some(name);
                return Ok(());
            }
            if started.elapsed() > POD_READY {
                let describe = self
                    .kubectl(&["-n", OPERATOR_NS, "describe", "pods", "-l", &selector()])
                    .unwrap_or_default();
                bail!(
                    "the operator's pod was not Ready within {} s:\n{describe}",
                    POD_READY.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Scales to zero; returns how long the pod took to go (SIGTERM, the
    /// operator's shutdown, the kubelet's clean-up).
    pub fn stop(&mut self) -> Result<Duration> {
        let Some(_pod) = self.pod.take() else {
            return Ok(Duration::ZERO);
        };
        let started = Instant::now();
        self.kubectl(&[
            "-n",
            OPERATOR_NS,
            "scale",
            "deployment",
            DEPLOYMENT,
            "--replicas=0",
        ])?;
        while !self.pods()?.is_empty() {
            if started.elapsed() > Duration::from_secs(60) {
                bail!("the operator's pod did not go within 60 s of scaling to 0");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(started.elapsed())
    }

    /// The current pod's log (its JSON lines).
    pub fn log(&self) -> String {
        match &self.pod {
            Some(pod) => self
                .kubectl(&["-n", OPERATOR_NS, "logs", pod])
                .unwrap_or_default(),
            None => String::new(),
        }
    }

    fn pods(&self) -> Result<Vec<Value>> {
        let list: Value = serde_json::from_str(&self.kubectl(&[
            "-n",
            OPERATOR_NS,
            "get",
            "pods",
            "-l",
            &selector(),
            "-o",
            "json",
        ])?)?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }
}

fn selector() -> String {
    format!("app.kubernetes.io/name={DEPLOYMENT}")
}

fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The operator's image ([`crate::image::operator`]) built from `binary`
/// and imported into the node. Returns the tag (the binary's digest, so a
/// new build rolls out).
fn image(node: &Node, dir: &Path, binary: &Path) -> Result<String> {
    let digest = operator_image::binary_digest(binary)?;
    let reference = format!("{LOCAL_IMAGE}:{digest}");
    let tarball = dir.join("operator-image.tar");
    println!("demo: building image {reference} and importing it into the node");
    operator_image::build(binary, &reference, &dir.join("image-work"), &tarball)?;
    node::import(&node.containerd, &tarball)?;
    Ok(digest)
}

/// `path` relative to `from` (both absolute): up to `/`, then down.
fn relative_to_root(path: &Path, from: &Path) -> String {
    let ups = from.components().count().saturating_sub(1);
    let down = path.strip_prefix("/").unwrap_or(path);
    format!("{}{}", "../".repeat(ups), down.display())
}

/// The overlay: deploy/ with the image, the run's providers config and
/// what a single loopback node needs (host network, the API server by
/// address, a free HTTP port, one replica at a time) — nothing else; a test
/// keeps the operator's arguments and environment deploy/'s.
fn kustomization(deploy: &str, tag: &str, port: u16, api_port: u16) -> String {
    let patch = serde_json::json!([
        { "op": "replace", "path": "/spec/replicas", "value": 0 },
        { "op": "add", "path": "/spec/template/spec/hostNetwork", "value": true },
        { "op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Never" },
        { "op": "replace", "path": "/spec/template/spec/containers/0/ports/0/containerPort", "value": port },
        { "op": "add", "path": "/spec/template/spec/containers/0/env/-",
          "value": { "name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1" } },
        { "op": "add", "path": "/spec/template/spec/containers/0/env/-",
          "value": { "name": "KUBERNETES_SERVICE_PORT", "value": api_port.to_string() } },
    ]);
    // JSON is YAML: no value here can break the file's syntax.
    let doc = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": OPERATOR_NS,
        "resources": [deploy],
        "images": [{ "name": IMAGE, "newName": LOCAL_IMAGE, "newTag": tag }],
        "configMapGenerator": [{
            "name": "providers-config",
            "behavior": "replace",
            "files": ["providers-config.yaml"],
        }],
        "patches": [
            {
                "target": { "kind": "Deployment", "name": DEPLOYMENT },
                "patch": patch.to_string(),
            },
            {
                // EGRESS_HTTP_ADDR: replaced by name, wherever deploy/ lists it.
                "target": { "kind": "Deployment", "name": DEPLOYMENT },
                "patch": serde_json::json!({
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": { "name": DEPLOYMENT },
                    "spec": { "template": { "spec": { "containers": [{
                        "name": "operator",
                        "env": [{ "name": "EGRESS_HTTP_ADDR", "value": format!("{}:{port}", node::NODE_IP) }],
                    }]}}},
                }).to_string(),
            },
        ],
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kubectl kustomize DIR`'s Deployment (the operator's).
    fn deployment(dir: &Path) -> Value {
        let out = read(cmd("kubectl", ["kustomize".as_ref(), dir.as_os_str()])).unwrap();
        out.split("\n---")
            .filter_map(|d| serde_saphyr::from_str::<Value>(d.trim_start_matches("---")).ok())
            .find(|d| d["kind"] == "Deployment")
            .expect("a Deployment")
    }

    fn container(d: &Value) -> &Value {
        &d["spec"]["template"]["spec"]["containers"][0]
    }

    fn env(d: &Value) -> Vec<(String, Value)> {
        container(d)["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap().to_owned(), e.clone()))
            .collect()
    }

    /// The demo runs deploy/ as shipped: its overlay changes the image, the
    /// providers config, and what a loopback node needs — never the
    /// operator's arguments, nor its environment but the API server's
    /// address and the HTTP port.
    #[test]
    fn the_demo_overlay_changes_only_what_a_loopback_node_needs() {
        let deploy = crate::util::workspace().join("deploy");
        let dir = tempfile::tempdir().unwrap();
        let overlay = dir.path().join("overlay");
        std::fs::create_dir_all(&overlay).unwrap();
        std::fs::write(overlay.join("providers-config.yaml"), "providers: []\n").unwrap();
        std::fs::write(
            overlay.join("kustomization.yaml"),
            kustomization(&relative_to_root(&deploy, &overlay), "t1", 18080, 6443),
        )
        .unwrap();
        let shipped = deployment(&deploy);
        let demo = deployment(&overlay);
        assert_eq!(
            container(&demo)["args"],
            container(&shipped)["args"],
            "the demo must run the operator with deploy/'s arguments"
        );
        let (shipped_env, demo_env) = (env(&shipped), env(&demo));
        let loopback = [
            "KUBERNETES_SERVICE_HOST",
            "KUBERNETES_SERVICE_PORT",
            "EGRESS_HTTP_ADDR",
        ];
        for (name, value) in &shipped_env {
            if !loopback.contains(&name.as_str()) {
                assert!(
                    demo_env.contains(&(name.clone(), value.clone())),
                    "the demo changed or dropped {name}"
                );
            }
        }
        for (name, _) in &demo_env {
            assert!(
                loopback.contains(&name.as_str()) || shipped_env.iter().any(|(n, _)| n == name),
                "the demo added {name}"
            );
        }
        assert_eq!(
            container(&demo)["image"],
            format!("{LOCAL_IMAGE}:t1"),
            "the image is the one change kustomize makes"
        );
        for field in [
            "volumeMounts",
            "securityContext",
            "resources",
            "livenessProbe",
            "readinessProbe",
        ] {
            assert_eq!(
                container(&demo)[field],
                container(&shipped)[field],
                "{field}"
            );
        }
        let (sd, dd) = (
            &shipped["spec"]["template"]["spec"],
            &demo["spec"]["template"]["spec"],
        );
        for field in ["serviceAccountName", "securityContext"] {
            assert_eq!(dd[field], sd[field], "{field}");
        }
        // The volumes, but for the generated config map's hash suffix (the
        // providers config is the overlay's to set).
        let volumes = |spec: &Value| {
            let mut v = spec["volumes"].clone();
            for vol in v.as_array_mut().unwrap() {
                if let Some(name) = vol["configMap"]["name"].as_str() {
                    let base = name.rsplit_once('-').map_or(name, |(b, _)| b).to_owned();
                    vol["configMap"]["name"] = Value::String(base);
                }
            }
            v
        };
        assert_eq!(volumes(dd), volumes(sd));
    }
}
