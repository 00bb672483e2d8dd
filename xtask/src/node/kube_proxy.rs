//! kube-proxy on the sandbox's node: what makes a Service's cluster IP
//! reach its endpoints from the node (the operator's pool Services among
//! them), as on a real cluster.
//!
//! - Mode `iptables` (Debian's iptables over nf_tables); its rules are
//!   `KUBE-` chains, removed at `down` ([`super::iptables`]) and checked by
//!   the leak check.
//! - The cluster IP range is routed to the pods' bridge
//!   ([`service_route`]): a connection to a cluster IP without endpoints
//!   never leaves this machine; one with endpoints is masqueraded to the
//!   address of the link its endpoint is on (a Pod's Squid on the pods'
//!   bridge, a guest's on the host's link to the guest network), whose
//!   Squid allows its own network as clients.
//! - Nothing host-wide it would change is left changed: no conntrack
//!   table sizes or timeouts (all 0 = untouched), no OOM score, NodePorts
//!   only on the node's own address; `route_localnet`, which the iptables
//!   mode always sets, is restored at `down` (the node's [`super::SYSCTLS`]).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use sandbox_kit::node::{POD_BRIDGE, POD_GATEWAY};

use super::{NODE_IP, NODE_NAME};
use crate::sandbox::control_plane::{SERVICE_RANGE, spawn_logged};
use crate::setup::kube_build::NODE;
use crate::util::{cmd, free_port, output, read, wait_until_within};

/// How long kube-proxy gets to write its first rules.
const FIRST_SYNC: Duration = Duration::from_secs(60);

/// Starts kube-proxy with the identity in `kubeconfig` (`system:kube-proxy`,
/// which the API server's bootstrap policy binds to `system:node-proxier`)
/// and waits until its rules are in place.
pub(super) fn start(
    node_dir: &Path,
    kubeconfig: &Path,
    processes: &mut Vec<(String, u32)>,
) -> Result<()> {
    service_route()?;
    let config = node_dir.join("kube-proxy-config.json");
    std::fs::write(
        &config,
        configuration(kubeconfig, free_port()?, free_port()?)?,
    )?;
    let mut proxy = Command::new(NODE.path("kube-proxy"));
    proxy.arg(format!("--config={}", config.display()));
    let log = node_dir.join("kube-proxy.log");
    processes.push(("kube-proxy".into(), spawn_logged(proxy, &log)?));
    wait_until_within("kube-proxy's first rules", FIRST_SYNC, || {
        std::thread::sleep(Duration::from_millis(200));
        Ok(super::iptables::chains()
            .iter()
            .any(|c| c == "iptables-save nat KUBE-SERVICES"))
    })
    .with_context(|| format!("see {}", log.display()))
}

/// The cluster IP range through the pods' bridge, from its address
/// (idempotent; the route goes with the bridge at `down`).
fn service_route() -> Result<()> {
    let present = read(cmd("ip", ["route", "show", SERVICE_RANGE]))?;
    if !present.trim().is_empty() {
        return Ok(());
    }
    let out = output(cmd(
        "ip",
        [
            "route",
            "add",
            SERVICE_RANGE,
            "dev",
            POD_BRIDGE,
            "src",
            POD_GATEWAY,
        ],
    ))?;
    anyhow::ensure!(
        out.status.success(),
        "cannot route {SERVICE_RANGE} to {POD_BRIDGE}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// kube-proxy's configuration file (JSON is YAML).
fn configuration(kubeconfig: &Path, healthz: u16, metrics: u16) -> Result<String> {
    let config = serde_json::json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": { "kubeconfig": kubeconfig },
        "hostnameOverride": NODE_NAME,
        "bindAddress": NODE_IP,
        "healthzBindAddress": format!("127.0.0.1:{healthz}"),
        "metricsBindAddress": format!("127.0.0.1:{metrics}"),
        "mode": "iptables",
        // Every connection to a cluster IP leaves from the address of the
        // link its endpoint is on (the pods' bridge, or the host's link to
        // the guests' network), so the endpoint can answer it and its
        // Squid sees a client of its own network.
        "clusterCIDR": "",
        "nodePortAddresses": [format!("{NODE_IP}/32")],
        "oomScoreAdj": 0,
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": { "masqueradeAll": true, "minSyncPeriod": "0s", "syncPeriod": "30s" },
    });
    Ok(serde_json::to_string_pretty(&config)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube-proxy changes host-wide conntrack settings and its own OOM
    /// score unless told not to, and opens NodePorts on every address.
    #[test]
    fn kube_proxy_leaves_host_settings_alone() {
        let config: serde_json::Value =
            serde_json::from_str(&configuration(Path::new("/k"), 1, 2).unwrap()).unwrap();
        assert_eq!(config["conntrack"]["maxPerCore"], 0);
        assert_eq!(config["conntrack"]["tcpEstablishedTimeout"], "0s");
        assert_eq!(config["conntrack"]["tcpCloseWaitTimeout"], "0s");
        assert_eq!(config["oomScoreAdj"], 0);
        assert_eq!(config["nodePortAddresses"][0], format!("{NODE_IP}/32"));
        assert_eq!(config["healthzBindAddress"], "127.0.0.1:1");
    }
}
