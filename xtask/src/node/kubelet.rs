//! The kubelet's configuration, and what it leaves outside its root
//! directory (removed at `sandbox down`).

use std::path::Path;

use anyhow::Result;
use sandbox_kit::pki::CertPair;

use super::{NODE_IP, has_node_address};
use crate::util::{cmd, output};

/// Where the kubelet writes outside its root directory (removed at `down`
/// when it made them).
pub(super) const KUBELET_OUTSIDE: &[&str] = &[
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/usr/libexec/kubernetes",
];

/// The cgroup the kubelet puts pods under, in every v1 hierarchy.
pub(super) const KUBEPODS: &str = "kubepods";

pub(super) const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The kubelet's configuration file (JSON is YAML).
pub(super) fn kubelet_config(client_ca: &Path, serving: &CertPair, port: u16) -> Result<String> {
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

/// Removes the kubelet's `kubepods` cgroups (deepest first) and the
/// mounts it left in its root directory. Called by `sandbox down` after
/// every process stopped.
pub fn clean_up(dir: &Path) {
    let node_dir = dir.join("node");
    if !node_dir.exists() {
        return;
    }
    // kube-proxy has stopped: its rules would otherwise come back.
    if let Err(e) = super::iptables::remove() {
        eprintln!("sandbox: {e:#}");
    }
    super::containerd::remove_pod_bridge();
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

pub(super) fn remove_cgroup(dir: &Path) {
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
