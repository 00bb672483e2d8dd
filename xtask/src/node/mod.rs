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
//! - Pods run on the host's network only: the node's address is
//!   [`NODE_IP`] on `lo` (the kubelet refuses 127/8), and there is no kube-proxy or cluster DNS. A CNI config (bridge +
//!   host-local) exists only because the kubelet reports the node ready
//!   when the runtime's network is configured.
//! - `restrict_oom_score_adj`: root on this machine cannot lower a
//!   process's OOM score, which runc otherwise does for every container.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sandbox_kit::Descriptor;
use sandbox_kit::kubeconfig::{self, Credentials};
use serde::{Deserialize, Serialize};

use crate::image::oci::{self, Layer};
use crate::sandbox;
use crate::sandbox::control_plane::{SERVICE_ACCOUNT_KEY, spawn_logged};
use crate::setup::kube_build::NODE;
use crate::util::{cmd, output, read};
use crate::util::{free_port, wait_until_within};
use sandbox_kit::pki::{self, CertPair, Usage};

/// The node's name (and the kubelet's identity).
pub const NODE_NAME: &str = "kvm2-sandbox-node";
/// The node's address: the kubelet refuses a loopback one (127/8), so the
/// node gets this one on `lo` ([`node_address`]): local to this machine, on
/// no network. Host-network pods have it as their IP.
pub const NODE_IP: &str = "10.213.8.1";
/// The pod sandbox image every pod starts with.
const PAUSE_IMAGE: &str = "localhost/kvm2-sandbox/pause:1";
const PAUSE_SOURCE: &str = include_str!("pause.c");
/// containerd's namespace for Kubernetes' containers.
const K8S_NS: &str = "k8s.io";
const READY: Duration = Duration::from_secs(120);
/// What the kubelet may change under /proc/sys (restored at `down`).
const SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];
/// Where the kubelet writes outside its root directory (removed at `down`
/// when it made them).
const KUBELET_OUTSIDE: &[&str] = &[
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/usr/libexec/kubernetes",
];
/// The cgroup the kubelet puts pods under, in every v1 hierarchy.
const KUBEPODS: &str = "kubepods";
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

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
    let record = node_dir.join("node.json");
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
    eprintln!("node: starting containerd, kubelet, controller-manager and scheduler");
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

/// containerd with a config, root, state and socket of its own.
fn start_containerd(node_dir: &Path, processes: &mut Vec<(String, u32)>) -> Result<PathBuf> {
    let base = node_dir.join("containerd");
    let cni = node_dir.join("cni");
    std::fs::create_dir_all(&cni)?;
    std::fs::write(cni.join("10-sandbox.conflist"), CNI_CONFLIST)?;
    let socket = base.join("containerd.sock");
    let config = base.join("config.toml");
    std::fs::create_dir_all(&base)?;
    std::fs::write(
        &config,
        format!(
            r#"version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
"#,
            root = base.join("root").display(),
            state = base.join("state").display(),
            socket = socket.display(),
            opt = base.join("opt").display(),
            cni = cni.display(),
        ),
    )?;
    let mut c = Command::new("/usr/bin/containerd");
    c.arg("--config").arg(&config);
    processes.push((
        "containerd".into(),
        spawn_logged(c, &node_dir.join("containerd.log"))?,
    ));
    wait_until_within("containerd", Duration::from_secs(30), || {
        Ok(output(ctr(&socket, &["version"]))?.status.success())
    })?;
    Ok(socket)
}

/// A CNI network the kubelet sees as configured; host-network pods never
/// use it (nothing in the sandbox runs other pods).
const CNI_CONFLIST: &str = r#"{
  "cniVersion": "0.4.0",
  "name": "kvm2-sandbox",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "kvm2-cni0",
      "isGateway": false,
      "ipMasq": false,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "10.213.9.0/24" }]] }
    }
  ]
}
"#;

/// The kubelet's configuration file (JSON is YAML).
fn kubelet_config(client_ca: &Path, serving: &CertPair, port: u16) -> Result<String> {
    let config = serde_json::json!({
        "kind": "KubeletConfiguration",
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "address": NODE_IP,
        "port": port,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "tlsCertFile": serving.cert,
        "tlsPrivateKeyFile": serving.key,
        "authentication": {
            "anonymous": { "enabled": false },
            "webhook": { "enabled": true },
            "x509": { "clientCAFile": client_ca },
        },
        "authorization": { "mode": "Webhook" },
        "cgroupDriver": "cgroupfs",
        "failSwapOn": false,
        "makeIPTablesUtilChains": false,
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "serializeImagePulls": false,
        // Imported images have no registry to come back from: never
        // collect them, and never evict for a full disk the host shares
        // with builds ("0%" turns a signal off; even 1% of a large, busy
        // disk evicted the operator's pod on a CI machine).
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "0%",
            "imagefs.available": "0%",
            "nodefs.inodesFree": "0%",
            "imagefs.inodesFree": "0%",
        },
        "enforceNodeAllocatable": ["pods"],
    });
    Ok(serde_json::to_string_pretty(&config)?)
}

/// `ctr --address SOCKET -n k8s.io ARGS`.
fn ctr(socket: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("/usr/bin/ctr");
    c.arg("--address")
        .arg(socket)
        .args(["-n", K8S_NS])
        .args(args);
    c
}

/// Loads a docker-archive tarball into the node's containerd.
pub fn import(containerd: &Path, tarball: &Path) -> Result<()> {
    let mut c = ctr(containerd, &["images", "import"]);
    c.arg(tarball);
    read(c).with_context(|| format!("cannot import {}", tarball.display()))?;
    Ok(())
}

/// The pause image: a static binary that waits for a signal and reaps.
fn pause_image(node_dir: &Path) -> Result<PathBuf> {
    let work = node_dir.join("pause");
    std::fs::create_dir_all(&work)?;
    let source = work.join("pause.c");
    std::fs::write(&source, PAUSE_SOURCE)?;
    let binary = work.join("pause");
    read(cmd(
        "gcc",
        [
            "-static".as_ref(),
            "-Os".as_ref(),
            "-o".as_ref(),
            binary.as_os_str(),
            source.as_os_str(),
        ],
    ))
    .context("cannot build the pause binary (gcc -static)")?;
    let tarball = work.join("pause.tar");
    oci::build(
        &work.join("image"),
        PAUSE_IMAGE,
        &[Layer::File {
            from: binary,
            to: "pause".into(),
        }],
        &oci::Config {
            entrypoint: vec!["/pause".into()],
            cmd: Vec::new(),
            user: "65535:65535".into(),
            exposed_ports: Vec::new(),
        },
        &tarball,
    )?;
    Ok(tarball)
}

/// Stops every pod's processes and containerd's shims (the kubelet is
/// stopped first so it does not restart them). Called by `sandbox down`.
pub fn stop_pods(dir: &Path, record: &sandbox::Record) {
    if !dir.join("node").exists() {
        return;
    }
    for (name, pid) in &record.processes {
        if name == "kubelet" {
            crate::util::stop(name, *pid);
        }
    }
    let socket = dir.join("node/containerd/containerd.sock");
    // Shims of our containerd name its socket on their command line.
    let shims = output(cmd(
        "pgrep",
        [
            "-f",
            &format!("containerd-shim.*-address {}", socket.display()),
        ],
    ))
    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    .unwrap_or_default();
    for pid in pod_pids() {
        let _ = output(cmd("kill", ["-KILL", &pid.to_string()]));
    }
    for pid in shims.split_whitespace() {
        let _ = output(cmd("kill", ["-KILL", pid]));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pod_pids().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every process in a pod's cgroup (read from the `pids` hierarchy).
fn pod_pids() -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![Path::new(CGROUP_ROOT).join("pids").join(KUBEPODS)];
    while let Some(d) = stack.pop() {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        if let Ok(entries) = std::fs::read_dir(&d) {
            stack.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    out
}

/// Removes the kubelet's `kubepods` cgroups (deepest first) and the
/// mounts it left in its root directory. Called by `sandbox down` after
/// every process stopped.
pub fn clean_up(dir: &Path) {
    let node_dir = dir.join("node");
    if !node_dir.exists() {
        return;
    }
    if has_node_address() {
        let _ = output(cmd(
            "ip",
            ["address", "delete", &format!("{NODE_IP}/32"), "dev", "lo"],
        ));
    }
    // Secret and service-account volumes are tmpfs mounts under the root dir.
    let root = node_dir.join("kubelet");
    if let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") {
        let mut ours: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter(|m| m.starts_with(&*root.to_string_lossy()) || m.contains("/node/containerd/"))
            .collect();
        ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in ours {
            let _ = output(cmd("umount", ["-l", m]));
        }
    }
    let Ok(hierarchies) = std::fs::read_dir(CGROUP_ROOT) else {
        return;
    };
    for h in hierarchies.flatten() {
        let top = h.path().join(KUBEPODS);
        if top.exists() {
            remove_cgroup(&top);
        }
    }
}

fn remove_cgroup(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&e.path());
            }
        }
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        eprintln!("sandbox: cannot remove cgroup {}: {e}", dir.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The node shares the host's disk with builds: a disk signal that can
    /// fire evicts the operator's pod mid-demo (seen on a CI machine at 1%).
    #[test]
    fn the_kubelet_never_evicts_for_the_shared_disk() {
        let pair = CertPair {
            cert: "/c".into(),
            key: "/k".into(),
        };
        let config: serde_json::Value =
            serde_json::from_str(&kubelet_config(Path::new("/ca"), &pair, 1).unwrap()).unwrap();
        let hard = config["evictionHard"].as_object().unwrap();
        for signal in [
            "nodefs.available",
            "imagefs.available",
            "nodefs.inodesFree",
            "imagefs.inodesFree",
        ] {
            // Left out, a kubelet version may apply its default (10%, 15%).
            assert_eq!(hard[signal], "0%", "{signal} must be off");
        }
        assert_eq!(config["imageGCHighThresholdPercent"], 100);
    }
}
