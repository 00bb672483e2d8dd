//! The node's container runtime: containerd with its root and state in the
//! node's directory, images imported with `ctr` (no registry), the pause
//! image built here, and the pods' processes stopped at `sandbox down`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::kubelet::{CGROUP_ROOT, KUBEPODS};
use crate::image::oci::{self, Layer};
use crate::sandbox;
use crate::sandbox::control_plane::spawn_logged;
use crate::util::{cmd, output, read, wait_until_within};
use sandbox_kit::node::{POD_BRIDGE, POD_GATEWAY, POD_SUBNET};

/// The pod sandbox image every pod starts with.
pub(super) const PAUSE_IMAGE: &str = "localhost/kvm2-sandbox/pause:1";

pub(super) const PAUSE_SOURCE: &str = include_str!("pause.c");

/// containerd's namespace for Kubernetes' containers.
pub(super) const K8S_NS: &str = "k8s.io";

/// containerd with a config, root, state and socket of its own.
pub(super) fn start_containerd(
    node_dir: &Path,
    processes: &mut Vec<(String, u32)>,
) -> Result<PathBuf> {
    let base = node_dir.join("containerd");
    let cni = node_dir.join("cni");
    std::fs::create_dir_all(&cni)?;
    std::fs::write(
        cni.join("10-sandbox.conflist"),
        cni_conflist(&node_dir.join("cni-ipam")),
    )?;
    pod_bridge()?;
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
  # Pods' network namespaces are pinned under the state directory (not
  # /var/run/netns), so `down` finds and unmounts them with the rest.
  netns_mounts_under_state_dir = true
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

/// The pods' network: the bridge [`POD_BRIDGE`] with the gateway
/// [`POD_GATEWAY`] on this host, addresses from host-local IPAM (its state
/// in `ipam_dir`, inside the run directory). The host reaches every pod
/// at its own address, and a pod reaches the host at the gateway; nothing
/// is forwarded or masqueraded (pods have no way out: invariant 13's
/// rule for guests holds for pods too). Host-network pods (the operator's)
/// do not use it.
fn cni_conflist(ipam_dir: &Path) -> String {
    format!(
        r#"{{
  "cniVersion": "0.4.0",
  "name": "kvm2-sandbox",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "{POD_BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {{
        "type": "host-local",
        "dataDir": "{ipam}",
        "ranges": [[{{ "subnet": "{POD_SUBNET}", "gateway": "{POD_GATEWAY}" }}]],
        "routes": [{{ "dst": "{POD_GATEWAY}/32" }}]
      }}
    }}
  ]
}}
"#,
        ipam = ipam_dir.display()
    )
}

/// The bridge with the gateway address, up before any pod exists (tests
/// listen on the gateway address before a pod needs it).
fn pod_bridge() -> Result<()> {
    let exists = output(cmd("ip", ["link", "show", POD_BRIDGE]))?
        .status
        .success();
    if !exists {
        read(cmd("ip", ["link", "add", POD_BRIDGE, "type", "bridge"]))?;
    }
    let _ = output(cmd(
        "ip",
        [
            "address",
            "add",
            &format!("{POD_GATEWAY}/24"),
            "dev",
            POD_BRIDGE,
        ],
    ));
    read(cmd("ip", ["link", "set", POD_BRIDGE, "up"]))?;
    Ok(())
}

/// Removes the pods' bridge (at `down`, after the pods).
pub fn remove_pod_bridge() {
    if output(cmd("ip", ["link", "show", POD_BRIDGE])).is_ok_and(|o| o.status.success()) {
        let _ = output(cmd("ip", ["link", "delete", POD_BRIDGE]));
    }
}

/// `ctr --address SOCKET -n k8s.io ARGS`.
pub(super) fn ctr(socket: &Path, args: &[&str]) -> Command {
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
pub(super) fn pause_image(node_dir: &Path) -> Result<PathBuf> {
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
pub(super) fn pod_pids() -> Vec<u32> {
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
