//! The kubernetes provider's row: the operator's pod, with its own
//! ServiceAccount (in-cluster credentials, no kubeconfig) and
//! `deploy/samples/kubernetes-provider-rbac.yaml` applied as shipped, runs a
//! Proxy of the `kubernetes` entry as a Pod of the Squid image on the
//! node, which turns `Healthy` by the operator's CONNECT through it to an
//! upstream on the pods' gateway; deleting the Proxy deletes the Pod.

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sandbox_kit::node::POD_GATEWAY;

use super::world::{World, serving};
use crate::demo::report::Report;

/// The RBAC sample, applied as shipped (it names the namespace).
pub(super) const RBAC_SAMPLE: &str = "samples/kubernetes-provider-rbac.yaml";
/// The sample's namespace, where the entry's Pods go.
pub(super) const POD_NAMESPACE: &str = "egress-pods";
/// The upstream's port (Squid allows CONNECT to 443 only).
pub(super) const UPSTREAM_PORT: u16 = 443;
const NAME: &str = "demo-pod";
const WITHIN: Duration = Duration::from_secs(180);

/// A TCP listener on the pods' gateway that accepts and drops; stopped
/// and joined on drop.
pub(super) struct Upstream {
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Upstream {
    pub(super) fn start() -> Result<Upstream> {
        let listener = TcpListener::bind((POD_GATEWAY, UPSTREAM_PORT))
            .with_context(|| format!("bind {POD_GATEWAY}:{UPSTREAM_PORT}"))?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (s, a) = (stop.clone(), accepted.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok(_) => {
                        a.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        Ok(Upstream {
            stop,
            accepted,
            thread: Some(thread),
        })
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Applies the RBAC sample as shipped.
pub(super) fn install(w: &World, deploy: &Path) -> Result<()> {
    w.kubectl(&["apply", "-f", &deploy.join(RBAC_SAMPLE).to_string_lossy()])?;
    Ok(())
}

pub(super) fn pods_row(
    w: &World,
    entry: &str,
    upstream: &Upstream,
    report: &mut Report,
) -> Result<()> {
    const CHECK: &str = "kubernetes provider: a Proxy as a Pod (in-cluster, RBAC sample as shipped), Healthy through its Squid";
    let manifest = w.dir.join("pod-proxy.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: egress-proxies.io/v1alpha1\nkind: Proxy\nmetadata:\n  name: {NAME}\n  namespace: {}\nspec:\n  provider: {entry}\n",
            w.ns
        ),
    )?;
    let started = Instant::now();
    w.kubectl(&["apply", "-f", &manifest.to_string_lossy()])?;
    let mut last = serde_json::Value::Null;
    while started.elapsed() < WITHIN {
        last = w.proxy(NAME)?;
        if serving(&last) {
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    let to_healthy = started.elapsed();
    let ip = last["status"]["ip"].as_str().unwrap_or("-").to_owned();
    let provider_id = last["status"]["providerID"]
        .as_str()
        .unwrap_or("-")
        .to_owned();
    let healthy = serving(&last) && provider_id.starts_with("kubernetes://");
    let reached = upstream.accepted.load(Ordering::SeqCst);
    let deleted = Instant::now();
    w.kubectl(&["-n", &w.ns, "delete", "proxy", NAME, "--timeout=120s"])?;
    let mut pods_left = String::from("?");
    while deleted.elapsed() < Duration::from_secs(60) {
        pods_left = w.kubectl(&["-n", POD_NAMESPACE, "get", "pods", "-o", "name"])?;
        if pods_left.trim().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let gone = pods_left.trim().is_empty();
    report.row(
        CHECK,
        healthy && reached > 0 && gone,
        format!(
            "Healthy {:.0} s after apply at {ip}:3128 ({provider_id}); upstream reached {reached}×; Pod {} {:.1} s after delete",
            to_healthy.as_secs_f64(),
            if gone { "gone" } else { "LEFT" },
            deleted.elapsed().as_secs_f64()
        ),
    );
    Ok(())
}
