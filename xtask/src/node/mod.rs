//! The sandbox's node: what turns its API server into a one-node cluster
//! that runs pods, so the demo runs the operator as deploy/'s Deployment.
//!
//! ```text
//!  kube-apiserver (Node,RBAC) ◀── kube-controller-manager (tokens, ReplicaSets, GC, namespaces)
//!        ▲        ▲            ◀── kube-scheduler
//!        │        └──────────────── kubelet (node kvm2-sandbox-node, 10.213.8.1)
//!        │                            │ CRI
//!   host-network pods ◀── runc ◀── containerd (socket, root and state in node/)
//! ```
//!
//! [`ensure`] starts them on the running sandbox (the first time the demo
//! needs them; tests do not) and records them, so `sandbox down` stops them:
//! pods first ([`stop_pods`]), then the processes, then what the kubelet
//! leaves outside its root directory ([`clean_up`]) and the kernel settings
//! it changes (restored from the record).
//!
//! - Identities: each component has a client certificate from the sandbox
//!   CA (`system:kube-controller-manager`, `system:kube-scheduler`,
//!   `system:node:kvm2-sandbox-node` in `system:nodes`); the kubelet serves
//!   TLS with a certificate for its address and authorises callers through the
//!   API server (webhook), anonymous access off.
//! - Images come from no registry: [`crate::image::oci`] builds them and
//!   [`import`] loads them into containerd; pods name them `localhost/...`
//!   with `imagePullPolicy: Never`. The pod sandbox ("pause") image is a
//!   static binary built here.
//! - The node's address is [`NODE_IP`] on `lo` (the kubelet refuses
//!   127/8); there is no cluster DNS. kube-proxy routes Services' cluster
//!   IPs (10.96.0.0/16, through the pods' bridge) for clients on the node
//!   ([`kube_proxy`]); its rules go at `down` ([`iptables`]). The operator's pod
//!   runs on the host's network; other pods (the kubernetes provider's
//!   Squid) get addresses on the bridge `kvm2-cni0` (10.213.9.0/24, CNI
//!   bridge + host-local), which the host reaches and which has no way
//!   out.
//! - `restrict_oom_score_adj`: root on this machine cannot lower a
//!   process's OOM score, which runc otherwise does for every container.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sandbox_kit::Descriptor;
use sandbox_kit::kubeconfig::{self, Credentials};
use serde::{Deserialize, Serialize};

use crate::sandbox;
use crate::sandbox::control_plane::{SERVICE_ACCOUNT_KEY, spawn_logged};
use crate::setup::kube_build::NODE;
use crate::util::{cmd, output, read};
use crate::util::{free_port, wait_until_within};
use sandbox_kit::pki::{self, CertPair, Usage};

mod containerd;
pub mod iptables;
mod kube_proxy;
mod kubelet;

use containerd::{PAUSE_IMAGE, pause_image, start_containerd};
pub use containerd::{import, stop_pods};
pub use kubelet::clean_up;
use kubelet::{KUBELET_OUTSIDE, kubelet_config};

/// The node's name (and the kubelet's identity).
pub const NODE_NAME: &str = "kvm2-sandbox-node";
/// The node's address: the kubelet refuses a loopback one (127/8), so the
/// node gets this one on `lo` ([`node_address`]): local to this machine, on
/// no network. Host-network pods have it as their IP.
pub const NODE_IP: &str = "10.213.8.1";
const READY: Duration = Duration::from_secs(120);
/// What the kubelet may change under /proc/sys (restored at `down`).
const SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    // kube-proxy's iptables mode sets it (NodePorts on localhost).
    "net/ipv4/conf/all/route_localnet",
];

/// A running node, as `node/node.json` in the run directory records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Node {
    /// The Node object's name.
    pub name: String,
    /// containerd's socket (for `ctr --address`).
    pub containerd: PathBuf,
}

/// `cargo xtask sandbox node`: the sandbox (started when none is up, and
/// left up) and its node.
pub fn up() -> Result<()> {
    let d = Descriptor::load(&crate::sandbox::up(crate::sandbox::hosts::DEFAULT_HOSTS)?)?;
    let node = ensure(&d)?;
    println!(
        "node {} Ready (containerd at {})",
        node.name,
        node.containerd.display()
    );
    Ok(())
}

/// The node of the running sandbox: started now unless it runs already.
pub fn ensure(sandbox: &Descriptor) -> Result<Node> {
    let dir = sandbox.state_dir.clone();
    let node_dir = dir.join("node");
    let record = sandbox_kit::node::record(&dir);
    if let Ok(text) = std::fs::read_to_string(&record) {
        // `sandbox::current()` already checked every recorded process runs.
        return Ok(serde_json::from_str(&text)?);
    }
    anyhow::ensure!(
        NODE.cached(),
        "the node's binaries are not built: run `cargo xtask setup`"
    );
    let kube = sandbox
        .kube
        .as_ref()
        .context("the sandbox has no API server")?;
    let started = Instant::now();
    eprintln!("node: starting containerd, kubelet, controller-manager, scheduler and kube-proxy");
    std::fs::create_dir_all(&node_dir)?;
    remember_host_state(&dir)?;
    let mut processes = Vec::new();
    let result = start(&dir, &node_dir, kube, &mut processes);
    // Recorded whatever happened: `down` stops what did start.
    sandbox::update_record(&dir, |r| r.processes.extend(processes))?;
    let node = result?;
    std::fs::write(&record, serde_json::to_string_pretty(&node)?)?;
    eprintln!("node: {} Ready in {:.1?}", node.name, started.elapsed());
    Ok(node)
}

/// Records the kernel settings and the directories outside the run
/// directory that the kubelet is about to change or create.
fn remember_host_state(dir: &Path) -> Result<()> {
    let mut sysctls = Vec::new();
    for name in SYSCTLS {
        let path = Path::new("/proc/sys").join(name);
        if let Ok(value) = std::fs::read_to_string(&path) {
            sysctls.push((path, value.trim().to_owned()));
        }
    }
    let fresh: Vec<PathBuf> = KUBELET_OUTSIDE
        .iter()
        .map(PathBuf::from)
        .filter(|p| !p.exists())
        .collect();
    sandbox::update_record(dir, |r| {
        r.sysctls.extend(sysctls);
        r.scratch.extend(fresh);
    })
}

fn start(
    dir: &Path,
    node_dir: &Path,
    kube: &sandbox_kit::KubeService,
    processes: &mut Vec<(String, u32)>,
) -> Result<Node> {
    let kube_dir = dir.join("kube");
    let ca = CertPair {
        cert: kube.ca_cert.clone(),
        key: kube.ca_key.clone(),
    };
    let kubeconfig_for = |name: &str, subject: &str| -> Result<PathBuf> {
        let pair = pki::issue(&ca, node_dir, name, subject, Usage::Client)?;
        let path = node_dir.join(format!("{name}.kubeconfig"));
        std::fs::write(
            &path,
            kubeconfig::render(
                &kube.server,
                &ca.cert,
                name,
                Credentials::ClientCert {
                    cert: &pair.cert,
                    key: &pair.key,
                },
            ),
        )?;
        Ok(path)
    };

    // Host-network pods reach the guests as from a host network.
    crate::sandbox::guest_net::link_host()?;
    node_address()?;
    let containerd = start_containerd(node_dir, processes)?;
    import(&containerd, &pause_image(node_dir)?)?;
    // The kubernetes provider's Pods run Squid from this image.
    import(&containerd, &crate::image::squid::ensure()?)?;

    let controller_manager =
        kubeconfig_for("controller-manager", "/CN=system:kube-controller-manager")?;
    let mut cm = Command::new(NODE.path("kube-controller-manager"));
    let sa_key = kube_dir.join(format!("{SERVICE_ACCOUNT_KEY}.key"));
    cm.arg(format!("--kubeconfig={}", controller_manager.display()))
        .arg(format!(
            "--authentication-kubeconfig={}",
            controller_manager.display()
        ))
        .arg(format!(
            "--authorization-kubeconfig={}",
            controller_manager.display()
        ))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={}", free_port()?))
        .arg("--port=0")
        .arg("--leader-elect=false")
        .arg("--use-service-account-credentials=true")
        .arg(format!(
            "--service-account-private-key-file={}",
            sa_key.display()
        ))
        .arg(format!("--root-ca-file={}", ca.cert.display()))
        .arg(format!("--cluster-signing-cert-file={}", ca.cert.display()))
        .arg(format!("--cluster-signing-key-file={}", ca.key.display()))
        .arg(format!(
            "--cert-dir={}",
            node_dir.join("cm-certs").display()
        ));
    processes.push((
        "kube-controller".into(),
        spawn_logged(cm, &node_dir.join("kube-controller-manager.log"))?,
    ));

    let scheduler = kubeconfig_for("scheduler", "/CN=system:kube-scheduler")?;
    let mut sched = Command::new(NODE.path("kube-scheduler"));
    sched
        .arg(format!("--kubeconfig={}", scheduler.display()))
        .arg(format!(
            "--authentication-kubeconfig={}",
            scheduler.display()
        ))
        .arg(format!(
            "--authorization-kubeconfig={}",
            scheduler.display()
        ))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={}", free_port()?))
        .arg("--port=0")
        .arg("--leader-elect=false")
        .arg(format!(
            "--cert-dir={}",
            node_dir.join("scheduler-certs").display()
        ));
    processes.push((
        "kube-scheduler".into(),
        spawn_logged(sched, &node_dir.join("kube-scheduler.log"))?,
    ));

    let kubelet_identity = kubeconfig_for(
        "kubelet",
        &format!("/O=system:nodes/CN=system:node:{NODE_NAME}"),
    )?;
    let serving = pki::issue(
        &ca,
        node_dir,
        "kubelet-serving",
        &format!("/CN={NODE_NAME}"),
        Usage::Server(&[
            &format!("IP:{NODE_IP}"),
            "IP:127.0.0.1",
            &format!("DNS:{NODE_NAME}"),
        ]),
    )?;
    let config = node_dir.join("kubelet-config.json");
    std::fs::write(&config, kubelet_config(&ca.cert, &serving, free_port()?)?)?;
    let mut kubelet = Command::new(NODE.path("kubelet"));
    kubelet
        .arg(format!("--config={}", config.display()))
        .arg(format!("--kubeconfig={}", kubelet_identity.display()))
        .arg("--container-runtime=remote")
        .arg(format!(
            "--container-runtime-endpoint=unix://{}",
            containerd.display()
        ))
        .arg(format!("--root-dir={}", node_dir.join("kubelet").display()))
        .arg(format!(
            "--cert-dir={}",
            node_dir.join("kubelet-certs").display()
        ))
        .arg(format!("--hostname-override={NODE_NAME}"))
        .arg(format!("--node-ip={NODE_IP}"))
        .arg(format!("--pod-infra-container-image={PAUSE_IMAGE}"))
        .arg("--v=1");
    processes.push((
        "kubelet".into(),
        spawn_logged(kubelet, &node_dir.join("kubelet.log"))?,
    ));

    let admin = &kube.kubeconfig;
    wait_until_within("the node to be Ready", READY, || {
        let out = output(cmd(
            "kubectl",
            [
                "--kubeconfig".as_ref(),
                admin.as_os_str(),
                "get".as_ref(),
                "node".as_ref(),
                NODE_NAME.as_ref(),
                "-o".as_ref(),
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}".as_ref(),
            ],
        ))?;
        if !out.status.success() {
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(out.status.success() && out.stdout == b"True")
    })
    .with_context(|| format!("see the logs in {}", node_dir.display()))?;
    let proxy_identity = kubeconfig_for("kube-proxy", "/CN=system:kube-proxy")?;
    kube_proxy::start(node_dir, &proxy_identity, processes)?;
    Ok(Node {
        name: NODE_NAME.into(),
        containerd,
    })
}

/// [`NODE_IP`] on `lo` (idempotent; [`clean_up`] removes it). No dummy
/// interface: this machine's kernel has no `dummy` driver.
fn node_address() -> Result<()> {
    if has_node_address() {
        return Ok(());
    }
    read(cmd(
        "ip",
        ["address", "add", &format!("{NODE_IP}/32"), "dev", "lo"],
    ))?;
    Ok(())
}

fn has_node_address() -> bool {
    read(cmd("ip", ["-br", "address", "show", "dev", "lo"]))
        .is_ok_and(|out| out.split_whitespace().any(|a| a == format!("{NODE_IP}/32")))
}
