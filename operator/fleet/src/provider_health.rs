//! Provider health: a checker's per-target results → the status of the
//! `ProviderHealth` object of that provider entry.
//!
//! Writes happen on material change only: a latency that moves by less than
//! [`LATENCY_TOLERANCE`] (or by less than half) is not a change, so a steady
//! fleet of hosts produces no writes between checks.

use std::time::{Duration, SystemTime};

use provider_api::TargetStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// Latency changes smaller than this (or than half the stored latency) are
/// not worth a write.
pub const LATENCY_TOLERANCE: Duration = Duration::from_millis(100);

/// The status of one provider entry's `ProviderHealth` object: the last
/// material result of checking every target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderHealthStatus {
    /// `n/m`: reachable targets of all targets (printer column).
    pub ready: String,
    /// Reachable targets.
    pub ready_targets: u32,
    /// All targets.
    pub total_targets: u32,
    /// Each target, in config order, keyed by name (a list-map).
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[schemars(transform = crate::status::no_schema_default)]
    pub targets: Vec<TargetHealth>,
    /// When the check that produced this status (its last material change)
    /// ran.
    pub observed_at: Timestamp,
}

/// One target's (host's) health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetHealth {
    /// The host's name in the providers config.
    pub name: String,
    /// Whether it answered.
    pub reachable: bool,
    /// Round-trip time of the check, in milliseconds, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// The version it reported (libvirt's), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why (`Reachable`, `Timeout`, `ConnectFailed`, `AuthFailed`,
    /// `HostKeyRejected`, `DaemonError`, `Other`).
    pub reason: String,
    /// Details when unreachable (no secrets).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The status for `statuses` (one per target, as
/// [`Checker::check`](provider_api::Checker::check) returns them), checked
/// at `now`.
pub fn provider_health(statuses: &[TargetStatus], now: SystemTime) -> ProviderHealthStatus {
    let targets: Vec<TargetHealth> = statuses
        .iter()
        .map(|s| TargetHealth {
            name: s.target.to_string(),
            reachable: s.reachable,
            latency_ms: s
                .latency
                .map(|l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX)),
            version: s.version.clone(),
            reason: s.reason.as_str().to_owned(),
            message: s.message.clone(),
        })
        .collect();
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let ready_targets = count(targets.iter().filter(|t| t.reachable).count());
    let total_targets = count(targets.len());
    ProviderHealthStatus {
        ready: format!("{ready_targets}/{total_targets}"),
        ready_targets,
        total_targets,
        targets,
        observed_at: Timestamp::from(now),
    }
}

impl ProviderHealthStatus {
    /// Whether this status differs materially from the `stored` one (or
    /// nothing is stored): anything but the observation time and small
    /// latency moves.
    pub fn needs_write(&self, stored: Option<&ProviderHealthStatus>) -> bool {
        let Some(stored) = stored else {
            return true;
        };
        self.ready != stored.ready
            || self.ready_targets != stored.ready_targets
            || self.total_targets != stored.total_targets
            || self.targets.len() != stored.targets.len()
            || self
                .targets
                .iter()
                .zip(&stored.targets)
                .any(|(new, old)| target_differs(new, old))
    }

    /// Whether some target is reachable now that was not in `before` (or
    /// was not there): the moment to re-run Proxies waiting on this
    /// provider (see [`awaits_provider_recovery`](crate::awaits_provider_recovery)).
    pub fn recovered_from(&self, before: &ProviderHealthStatus) -> bool {
        self.targets.iter().filter(|t| t.reachable).any(|t| {
            !before
                .targets
                .iter()
                .any(|b| b.name == t.name && b.reachable)
        })
    }
}

fn target_differs(new: &TargetHealth, old: &TargetHealth) -> bool {
    new.name != old.name
        || new.reachable != old.reachable
        || new.version != old.version
        || new.reason != old.reason
        || new.message != old.message
        || latency_differs(new.latency_ms, old.latency_ms)
}

fn latency_differs(new: Option<u64>, old: Option<u64>) -> bool {
    match (new, old) {
        (Some(n), Some(o)) => {
            let tolerance = u64::try_from(LATENCY_TOLERANCE.as_millis())
                .unwrap_or(u64::MAX)
                .max(o / 2);
            n.abs_diff(o) > tolerance
        }
        (n, o) => n != o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::{CheckReason, Identifier};
    use std::time::UNIX_EPOCH;

    fn up(name: &str, ms: u64) -> TargetStatus {
        TargetStatus::reachable(
            Identifier::parse(name).unwrap(),
            Duration::from_millis(ms),
            Some("11.3.0".into()),
        )
    }

    fn down(name: &str, reason: CheckReason) -> TargetStatus {
        TargetStatus::unreachable(
            Identifier::parse(name).unwrap(),
            reason,
            "dial tcp: refused",
        )
    }

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn maps_each_target_and_counts_ready() {
        let s = provider_health(
            &[up("host1", 189), down("host2", CheckReason::AuthFailed)],
            at(0),
        );
        assert_eq!(s.ready, "1/2");
        assert_eq!((s.ready_targets, s.total_targets), (1, 2));
        assert_eq!(s.targets[0].latency_ms, Some(189));
        assert_eq!(s.targets[0].version.as_deref(), Some("11.3.0"));
        assert_eq!(s.targets[0].reason, "Reachable");
        assert_eq!(s.targets[1].reason, "AuthFailed");
        assert!(!s.targets[1].reachable);
        assert_eq!(s.targets[1].message, "dial tcp: refused");
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["targets"][0]["latencyMs"], 189);
        assert!(v["targets"][0].get("message").is_none());
        assert_eq!(v["observedAt"], "1970-01-01T00:00:00Z");
        assert_eq!(provider_health(&[], at(0)).ready, "0/0");
    }

    #[test]
    fn only_material_changes_need_a_write() {
        let base = provider_health(&[up("h1", 200), up("h2", 10)], at(0));
        assert!(base.needs_write(None));
        // Later, latency jitter within tolerance: no write.
        let jitter = provider_health(&[up("h1", 290), up("h2", 90)], at(60));
        assert!(!jitter.needs_write(Some(&base)));
        // A real latency change, a reachability change, a version change.
        let slow = provider_health(&[up("h1", 1000), up("h2", 10)], at(60));
        assert!(slow.needs_write(Some(&base)));
        let lost = provider_health(&[up("h1", 200), down("h2", CheckReason::Timeout)], at(60));
        assert!(lost.needs_write(Some(&base)));
        let mut upgraded = base.clone();
        upgraded.targets[0].version = Some("11.6.0".into());
        assert!(upgraded.needs_write(Some(&base)));
        let fewer = provider_health(&[up("h1", 200)], at(60));
        assert!(fewer.needs_write(Some(&base)));
    }

    #[test]
    fn recovery_is_a_target_becoming_reachable() {
        let down_all = provider_health(&[down("h1", CheckReason::Timeout)], at(0));
        let up_all = provider_health(&[up("h1", 5)], at(60));
        assert!(up_all.recovered_from(&down_all));
        assert!(!down_all.recovered_from(&up_all));
        assert!(!up_all.recovered_from(&up_all));
    }
}
