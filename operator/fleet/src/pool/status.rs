//! The `ProxyPool` status as plain serde data ([`ProxyPoolStatus`]) and how
//! a plan becomes one ([`ProxyPoolStatus::observe`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::pool::POOL_LABEL;
use crate::pool::plan::{Plan, Progress};
use crate::pool::spec::ValidPool;
use crate::spec::SpecIssue;
use crate::status::{Condition, ConditionStatus, no_schema_default, upsert_condition};
use crate::time::Timestamp;

/// A `ProxyPool`'s status: its members counted, where they run, and three
/// conditions (`Available`, `Progressing`, `Spread`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxyPoolStatus {
    /// Members not being deleted (the scale subresource's
    /// `status.replicas`).
    #[serde(default)]
    #[schemars(transform = no_schema_default)]
    pub replicas: u32,
    /// Of those, `Ready`.
    #[serde(default)]
    #[schemars(transform = no_schema_default)]
    pub ready_replicas: u32,
    /// Of those, `Healthy` (for their current instance).
    #[serde(default)]
    #[schemars(transform = no_schema_default)]
    pub healthy_replicas: u32,
    /// Of those, made from the current template.
    #[serde(default)]
    #[schemars(transform = no_schema_default)]
    pub updated_replicas: u32,
    /// Members being deleted (their instances still exist).
    #[serde(default)]
    #[schemars(transform = no_schema_default)]
    pub terminating_replicas: u32,
    /// The `metadata.generation` last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The members' label selector, as text (the scale subresource's
    /// `labelSelectorPath`, what an autoscaler reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The current template's hash (the `egress-proxies.io/pool-template`
    /// label of its members, part of their names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_hash: Option<String>,
    /// Members per ready host of the entry (absent when the hosts are not
    /// known or the template pins a host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub hosts: Vec<HostMembers>,
    /// The largest difference in members between two ready hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew: Option<u32>,
    /// `Available`, `Progressing`, `Spread`, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// How many members run on one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HostMembers {
    /// The host (target) name.
    pub name: String,
    /// Members on it.
    pub members: u32,
}

/// Why a pool condition is what it is (the `reason` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolReason {
    /// `Available=True`: at least `replicas - maxUnavailable` members are
    /// `Healthy`.
    MinimumHealthy,
    /// `Available=False`: fewer are.
    BelowMinimumHealthy,
    /// `Progressing=True`: members of an older template remain.
    RollingOut,
    /// `Progressing=True`: fewer members than replicas.
    ScalingUp,
    /// `Progressing=True`: more members than replicas.
    ScalingDown,
    /// `Progressing=True`: the count is right, not every member is
    /// `Healthy` yet.
    WaitingForHealthy,
    /// `Progressing=True`: every member is current and `Healthy`.
    Complete,
    /// `Progressing=False`: the spec (or the pool's name) is refused; the
    /// message names each field. Members are left as they are.
    InvalidSpec,
    /// `Progressing=False`: making or deleting a member failed (the
    /// message has the API server's answer); retried with backoff.
    MemberWriteFailed,
    /// `Spread=True`: the skew is at most `maxSkew`.
    WithinMaxSkew,
    /// `Spread=False`: it is larger (new members go to the emptiest ready
    /// host; running members are not moved).
    SkewExceeded,
    /// `Spread=True`: the template pins a host.
    HostPinned,
    /// `Spread=Unknown`: the entry's hosts have not been checked yet.
    HostsUnknown,
}

impl PoolReason {
    /// Every reason (docs/troubleshooting.md has a row for each).
    pub const ALL: [PoolReason; 13] = [
        PoolReason::MinimumHealthy,
        PoolReason::BelowMinimumHealthy,
        PoolReason::RollingOut,
        PoolReason::ScalingUp,
        PoolReason::ScalingDown,
        PoolReason::WaitingForHealthy,
        PoolReason::Complete,
        PoolReason::InvalidSpec,
        PoolReason::MemberWriteFailed,
        PoolReason::WithinMaxSkew,
        PoolReason::SkewExceeded,
        PoolReason::HostPinned,
        PoolReason::HostsUnknown,
    ];

    /// The reason as written in the condition.
    pub fn as_str(self) -> &'static str {
        match self {
            PoolReason::MinimumHealthy => "MinimumHealthy",
            PoolReason::BelowMinimumHealthy => "BelowMinimumHealthy",
            PoolReason::RollingOut => "RollingOut",
            PoolReason::ScalingUp => "ScalingUp",
            PoolReason::ScalingDown => "ScalingDown",
            PoolReason::WaitingForHealthy => "WaitingForHealthy",
            PoolReason::Complete => "Complete",
            PoolReason::InvalidSpec => "InvalidSpec",
            PoolReason::MemberWriteFailed => "MemberWriteFailed",
            PoolReason::WithinMaxSkew => "WithinMaxSkew",
            PoolReason::SkewExceeded => "SkewExceeded",
            PoolReason::HostPinned => "HostPinned",
            PoolReason::HostsUnknown => "HostsUnknown",
        }
    }
}

/// The pool's members' selector text for `pool`.
pub fn selector_of(pool: &str) -> String {
    format!("{POOL_LABEL}={pool}")
}

impl ProxyPoolStatus {
    /// The condition of type `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    fn set(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: PoolReason,
        message: String,
        generation: Option<i64>,
        now: Timestamp,
    ) {
        upsert_condition(
            &mut self.conditions,
            Condition {
                type_: type_.to_owned(),
                status,
                reason: reason.as_str().to_owned(),
                message,
                last_transition_time: now,
                observed_generation: generation,
            },
        );
    }

    /// This status after `plan` was made for `pool` at `generation`;
    /// `write_failure` is why making or deleting a member failed, if it did.
    pub fn observe(
        &self,
        pool: &ValidPool,
        plan: &Plan,
        write_failure: Option<&str>,
        generation: Option<i64>,
        now: Timestamp,
    ) -> ProxyPoolStatus {
        let c = plan.counts;
        let mut s = ProxyPoolStatus {
            replicas: c.members,
            ready_replicas: c.ready,
            healthy_replicas: c.healthy,
            updated_replicas: c.updated,
            terminating_replicas: c.terminating,
            observed_generation: generation,
            selector: Some(selector_of(&pool.name)),
            template_hash: Some(pool.template_hash.clone()),
            hosts: plan
                .spread
                .iter()
                .flatten()
                .map(|(name, members)| HostMembers {
                    name: name.clone(),
                    members: *members,
                })
                .collect(),
            skew: plan.skew(),
            conditions: self.conditions.clone(),
        };
        let r = pool.spec.replicas;
        let min_healthy = r.saturating_sub(pool.spec.strategy.max_unavailable);
        let (status, reason) = if c.healthy >= min_healthy {
            (ConditionStatus::True, PoolReason::MinimumHealthy)
        } else {
            (ConditionStatus::False, PoolReason::BelowMinimumHealthy)
        };
        s.set(
            "Available",
            status,
            reason,
            format!(
                "{} of {r} members Healthy; at least {min_healthy} required",
                c.healthy
            ),
            generation,
            now,
        );
        let (status, reason, message) = match (write_failure, plan.progress) {
            (Some(why), _) => (
                ConditionStatus::False,
                PoolReason::MemberWriteFailed,
                why.to_owned(),
            ),
            (None, p) => (
                ConditionStatus::True,
                match p {
                    Progress::RollingOut => PoolReason::RollingOut,
                    Progress::ScalingUp => PoolReason::ScalingUp,
                    Progress::ScalingDown => PoolReason::ScalingDown,
                    Progress::WaitingForHealthy => PoolReason::WaitingForHealthy,
                    Progress::Complete => PoolReason::Complete,
                },
                format!(
                    "{} members, {} from the current template, {} Healthy; {r} wanted",
                    c.members, c.updated, c.healthy
                ),
            ),
        };
        s.set("Progressing", status, reason, message, generation, now);
        let max_skew = pool.spec.spread.max_skew;
        let (status, reason, message) = match (plan.skew(), &plan.spread) {
            (Some(skew), Some(by_host)) => {
                let hosts = by_host
                    .iter()
                    .map(|(h, n)| format!("{h}={n}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                if skew <= max_skew {
                    (
                        ConditionStatus::True,
                        PoolReason::WithinMaxSkew,
                        format!("skew {skew} (max {max_skew}): {hosts}"),
                    )
                } else {
                    (
                        ConditionStatus::False,
                        PoolReason::SkewExceeded,
                        format!("skew {skew} exceeds {max_skew}: {hosts}"),
                    )
                }
            }
            _ if pool.spec.template.spec.placement.host.is_some() => (
                ConditionStatus::True,
                PoolReason::HostPinned,
                "the template asks for one host".to_owned(),
            ),
            _ => (
                ConditionStatus::Unknown,
                PoolReason::HostsUnknown,
                "the provider entry's hosts have not been checked yet (or none is ready)"
                    .to_owned(),
            ),
        };
        s.set("Spread", status, reason, message, generation, now);
        s
    }

    /// This status for a spec refused with `issues`: `Progressing=False`
    /// naming them; counts and the other conditions are kept.
    pub fn invalid(
        &self,
        issues: &[SpecIssue],
        generation: Option<i64>,
        now: Timestamp,
    ) -> ProxyPoolStatus {
        let mut s = self.clone();
        s.observed_generation = generation;
        let message = issues
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        s.set(
            "Progressing",
            ConditionStatus::False,
            PoolReason::InvalidSpec,
            message,
            generation,
            now,
        );
        s
    }
}
