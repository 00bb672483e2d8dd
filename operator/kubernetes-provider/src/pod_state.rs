//! A Pod's status read as an instance's state and address (pure).
//!
//! | Pod | state |
//! |---|---|
//! | being deleted | `Stopped` |
//! | `Pending`, or `Running` but not ready | `Provisioning` (address once the Pod has one) |
//! | a container waiting on an image that cannot be pulled, a config error or a crash loop | `Failed` (the reason) |
//! | `Running` and ready, with an IP | `Running` |
//! | `Succeeded` / `Failed` | `Failed` |
//! | `Unknown` or no status | `Unknown` |

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;
use provider_api::InstanceState;

/// Waiting reasons that will not clear by themselves.
const STUCK: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
];

/// The Pod's state and address.
pub fn read(pod: &Pod) -> (InstanceState, Option<IpAddr>) {
    let status = pod.status.as_ref();
    let ip = status
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse::<IpAddr>().ok());
    if pod.metadata.deletion_timestamp.is_some() {
        return (InstanceState::Stopped, ip);
    }
    let Some(status) = status else {
        return (InstanceState::Provisioning, None);
    };
    let waiting = status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
        .find_map(|w| {
            let reason = w.reason.as_deref()?;
            STUCK.contains(&reason).then(|| reason.to_owned())
        });
    if let Some(reason) = waiting {
        return (InstanceState::Failed { reason }, ip);
    }
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    match status.phase.as_deref() {
        Some("Pending") => (InstanceState::Provisioning, ip),
        Some("Running") if ready && ip.is_some() => (InstanceState::Running, ip),
        Some("Running") => (InstanceState::Provisioning, ip),
        Some(phase @ ("Succeeded" | "Failed")) => (
            InstanceState::Failed {
                reason: format!(
                    "Pod {}: {}",
                    phase.to_lowercase(),
                    status.reason.as_deref().unwrap_or("its container exited")
                ),
            },
            ip,
        ),
        _ => (InstanceState::Unknown, ip),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn states() {
        let table = [
            (serde_json::json!({}), "provisioning", None),
            (
                serde_json::json!({"status": {"phase": "Pending"}}),
                "provisioning",
                None,
            ),
            (
                serde_json::json!({"status": {"phase": "Running", "podIP": "10.213.9.5",
                    "conditions": [{"type": "Ready", "status": "False"}]}}),
                "provisioning",
                Some("10.213.9.5"),
            ),
            (
                serde_json::json!({"status": {"phase": "Running", "podIP": "10.213.9.5",
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
                "running",
                Some("10.213.9.5"),
            ),
            (
                serde_json::json!({"status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
                "provisioning",
                None,
            ),
            (
                serde_json::json!({"status": {"phase": "Pending", "containerStatuses": [{
                    "name": "squid", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "ErrImageNeverPull"}}}]}}),
                "failed",
                None,
            ),
            (
                serde_json::json!({"metadata": {"deletionTimestamp": "2026-12-06T00:00:00Z"},
                    "status": {"phase": "Running", "podIP": "10.213.9.5"}}),
                "stopped",
                Some("10.213.9.5"),
            ),
            (
                serde_json::json!({"status": {"phase": "Succeeded"}}),
                "failed",
                None,
            ),
            (
                serde_json::json!({"status": {"phase": "Unknown"}}),
                "unknown",
                None,
            ),
        ];
        for (json, state, ip) in table {
            let (s, got_ip) = read(&pod(json.clone()));
            assert_eq!(s.as_str(), state, "{json}");
            assert_eq!(got_ip.map(|i| i.to_string()).as_deref(), ip, "{json}");
        }
    }
}
