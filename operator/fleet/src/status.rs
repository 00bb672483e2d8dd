//! The `Proxy` status as plain serde data: [`ProxyStatus`], [`Phase`],
//! [`Condition`].
//!
//! Field names are the CRD's (camelCase, `providerID`); absent values are
//! omitted, so a server-side apply of a status releases the fields it no
//! longer sets. Two writers share the status: the reconciler owns every
//! field but the health engine's part — the `Healthy` condition and
//! `probedInstance`, the instance that verdict is about — (separate field
//! managers; [`ProxyStatus::without_health`] is the reconciler's part).
//!
//! `Healthy` describes the current instance only (invariant 14 in
//! ARCHITECTURE.md): [`ProxyStatus::is_healthy`] holds only while the
//! Proxy is `Running` and the verdict was earned by the instance and
//! address it has now ([`ProxyStatus::instance_endpoint`]).

use std::net::IpAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::reason::Reason;
use crate::spec::ProxySpec;
use crate::time::Timestamp;

/// What [`ProxyStatus::instance_endpoint`] names in place of a provider ID
/// for an existing proxy (`spec.existing`), which has none.
pub const EXISTING_INSTANCE: &str = "existing";

/// A `Proxy`'s status: what the operator observed and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxyStatus {
    /// The summary (printer column); absent before the first reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The instance's provider ID (`kvm2://entry/host/name`), recorded as
    /// soon as Create returns.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The host (target) the instance runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The proxy's address, once known (kept through the address grace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpAddr>,
    /// The port the proxy listens on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub port: Option<u16>,
    /// When the current instance was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    /// How many instances were made after the first (replacements of failed
    /// instances and re-creations of vanished ones).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replacements: u32,
    /// When the replacements inside the current cap window happened, oldest
    /// first (at most the cap's count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_replacements: Vec<Timestamp>,
    /// The `metadata.generation` last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The spec the instance was made from (the immutability reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_spec: Option<ProxySpec>,
    /// The instance and address the `Healthy` condition is about
    /// (`providerID#replacements@ip:port`), written by the health engine with it. A
    /// verdict about another instance or address is no verdict about the
    /// current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probed_instance: Option<String>,
    /// `Provisioned`, `Ready` (the reconciler's) and `Healthy` (the health
    /// engine's), keyed by type (a list-map, so each writer applies its
    /// own entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Drops the `default` schemars derives from a `#[serde(default)]` on a
/// status field: the operator always writes these fields, and a `default`
/// of `""` is refused by Kubernetes 1.20's CRD validation (kubectl's apply
/// turns it into `null`).
pub(crate) fn no_schema_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The summary of a `Proxy`'s state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// No instance yet (creating, or waiting for input or capacity).
    Pending,
    /// The instance exists and has no address yet.
    Provisioning,
    /// The instance runs and has an address.
    Running,
    /// The instance failed and the replacement cap holds it.
    Failed,
    /// The Proxy is being deleted.
    Deleting,
}

impl Phase {
    /// `Pending`, `Provisioning`, `Running`, `Failed`, `Deleting`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Provisioning => "Provisioning",
            Phase::Running => "Running",
            Phase::Failed => "Failed",
            Phase::Deleting => "Deleting",
        }
    }
}

/// The condition types of a `Proxy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionType {
    /// An instance exists and has an address (reconciler).
    Provisioned,
    /// The spec is realized and nothing is pending (reconciler).
    Ready,
    /// The CONNECT probe verdict, with hysteresis (health engine).
    Healthy,
}

impl ConditionType {
    /// `Provisioned`, `Ready`, `Healthy`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Provisioned => "Provisioned",
            ConditionType::Ready => "Ready",
            ConditionType::Healthy => "Healthy",
        }
    }
}

/// A condition's status, as Kubernetes spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known (yet).
    Unknown,
}

impl ConditionStatus {
    /// `True` or `False`.
    pub fn from_bool(b: bool) -> Self {
        if b {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

/// One condition, in the shape of Kubernetes' `metav1.Condition`.
///
/// `type` and `reason` are text, so conditions of types another writer
/// added survive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The type (`Provisioned`, `Ready`, `Healthy`).
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// Why, as one CamelCase word (docs/troubleshooting.md lists them).
    pub reason: String,
    /// Details for humans (no secrets).
    #[serde(default)]
    #[schemars(transform = crate::status::no_schema_default)]
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: Timestamp,
    /// The `metadata.generation` it was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition of type `t` as `update` says, changing at `now` (before
    /// [`upsert_condition`] keeps an unchanged status's transition time).
    pub(crate) fn fresh(t: ConditionType, update: ConditionUpdate, now: Timestamp) -> Condition {
        Condition {
            type_: t.as_str().to_owned(),
            status: update.status,
            reason: update.reason.as_str().to_owned(),
            message: update.message,
            last_transition_time: now,
            observed_generation: update.generation,
        }
    }

    /// The reason as a [`Reason`], if it is one this crate knows.
    pub fn known_reason(&self) -> Option<Reason> {
        Reason::parse(&self.reason)
    }
}

impl ProxyStatus {
    /// The condition of type `t`, if present.
    pub fn condition(&self, t: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == t.as_str())
    }

    /// The status of the condition of type `t` (`None` when absent).
    pub fn condition_status(&self, t: ConditionType) -> Option<ConditionStatus> {
        self.condition(t).map(|c| c.status)
    }

    /// The known reason of the condition of type `t`.
    pub fn condition_reason(&self, t: ConditionType) -> Option<Reason> {
        self.condition(t).and_then(Condition::known_reason)
    }

    /// The instance a health verdict would be about now,
    /// `providerID#replacements@ip:port`, while the Proxy is `Running` with
    /// an instance and an address; `None` otherwise (pending, provisioning,
    /// replacing, failed, deleting). The replacement count tells instances
    /// apart that a provider names alike (kvm2 names an instance after its
    /// Proxy, so a replacement keeps the provider ID and often the address).
    pub fn instance_endpoint(&self) -> Option<String> {
        if self.phase != Some(Phase::Running) {
            return None;
        }
        // An existing proxy (`spec.existing`) has no provider ID: the
        // address alone names what a verdict is about.
        let id = self.provider_id.as_deref().unwrap_or(EXISTING_INSTANCE);
        let (ip, port) = (self.ip?, self.port?);
        Some(format!(
            "{id}#{}@{}",
            self.replacements,
            std::net::SocketAddr::new(ip, port)
        ))
    }

    /// Whether the proxy is healthy now: `Healthy` is `True` **and** was
    /// earned by the instance and address the Proxy has now. A verdict left
    /// from an instance that was replaced, from an earlier address, or kept
    /// while the Proxy is no longer `Running` does not count.
    pub fn is_healthy(&self) -> bool {
        self.condition_status(ConditionType::Healthy) == Some(ConditionStatus::True)
            && self.instance_endpoint().is_some()
            && self.probed_instance == self.instance_endpoint()
    }

    /// The reconciler's part: everything but the health engine's `Healthy`
    /// condition and `probedInstance`.
    pub fn without_health(&self) -> ProxyStatus {
        let mut s = self.without_condition(ConditionType::Healthy);
        s.probed_instance = None;
        s
    }

    /// This status's own part joined with the health engine's part of
    /// `other` (how the reconciler's last write is joined with the cache).
    pub fn with_health_of(&self, other: &ProxyStatus) -> ProxyStatus {
        let mut s = self.with_condition_of(other, ConditionType::Healthy);
        s.probed_instance = other.probed_instance.clone();
        s
    }

    /// Sets the condition of type `t`. Its transition time becomes `now` only
    /// when its status changes (or it is new); reason, message and
    /// generation are updated in place, so setting the same values twice
    /// changes nothing.
    pub fn set_condition(&mut self, t: ConditionType, update: ConditionUpdate, now: Timestamp) {
        upsert_condition(&mut self.conditions, Condition::fresh(t, update, now));
    }

    /// A copy without the condition of type `t` (e.g. the reconciler's part
    /// of the status is `without_condition(ConditionType::Healthy)`).
    pub fn without_condition(&self, t: ConditionType) -> ProxyStatus {
        let mut s = self.clone();
        s.conditions.retain(|c| c.type_ != t.as_str());
        s
    }

    /// This status with its condition of type `t` taken from `other` (or
    /// none, when `other` has none): how a writer's own fields are joined
    /// with a condition another writer owns.
    pub fn with_condition_of(&self, other: &ProxyStatus, t: ConditionType) -> ProxyStatus {
        let mut s = self.without_condition(t);
        if let Some(c) = other.condition(t) {
            s.conditions.push(c.clone());
        }
        s
    }
}

/// Puts `fresh` into `conditions` in place of the condition of its type:
/// its `lastTransitionTime` is kept when the status did not change.
pub(crate) fn upsert_condition(conditions: &mut Vec<Condition>, fresh: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == fresh.type_) {
        Some(c) => {
            let since = if c.status == fresh.status {
                c.last_transition_time
            } else {
                fresh.last_transition_time
            };
            *c = Condition {
                last_transition_time: since,
                ..fresh
            };
        }
        None => conditions.push(fresh),
    }
}

/// The new value of a condition (see [`ProxyStatus::set_condition`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionUpdate {
    /// Whether it holds.
    pub status: ConditionStatus,
    /// Why.
    pub reason: Reason,
    /// Details for humans.
    pub message: String,
    /// The generation it was computed for.
    pub generation: Option<i64>,
}

impl ConditionUpdate {
    /// An update from its parts.
    pub fn new(
        status: ConditionStatus,
        reason: Reason,
        message: impl Into<String>,
        generation: Option<i64>,
    ) -> Self {
        ConditionUpdate {
            status,
            reason,
            message: message.into(),
            generation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_unix_seconds(secs)
    }

    fn up(status: ConditionStatus, reason: Reason, msg: &str) -> ConditionUpdate {
        ConditionUpdate::new(status, reason, msg, Some(1))
    }

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let mut s = ProxyStatus::default();
        s.set_condition(
            ConditionType::Ready,
            up(ConditionStatus::False, Reason::Creating, "a"),
            t(10),
        );
        s.set_condition(
            ConditionType::Ready,
            up(ConditionStatus::False, Reason::Provisioning, "b"),
            t(20),
        );
        let c = s.condition(ConditionType::Ready).unwrap();
        assert_eq!(
            (c.last_transition_time, c.reason.as_str()),
            (t(10), "Provisioning")
        );
        s.set_condition(
            ConditionType::Ready,
            up(ConditionStatus::True, Reason::Running, ""),
            t(30),
        );
        assert_eq!(
            s.condition(ConditionType::Ready)
                .unwrap()
                .last_transition_time,
            t(30)
        );
        assert_eq!(s.conditions.len(), 1);
    }

    #[test]
    fn setting_the_same_values_changes_nothing() {
        let mut s = ProxyStatus::default();
        let u = up(ConditionStatus::True, Reason::Running, "ok");
        s.set_condition(ConditionType::Provisioned, u.clone(), t(1));
        let before = s.clone();
        s.set_condition(ConditionType::Provisioned, u, t(99));
        assert_eq!(s, before);
    }

    #[test]
    fn healthy_is_read_from_its_condition_and_split_off() {
        let mut s = ProxyStatus {
            phase: Some(Phase::Running),
            provider_id: Some("kvm2://e/h/vm".into()),
            ip: Some("10.0.0.5".parse().unwrap()),
            port: Some(3128),
            ..ProxyStatus::default()
        };
        s.probed_instance = s.instance_endpoint();
        assert_eq!(
            s.probed_instance.as_deref(),
            Some("kvm2://e/h/vm#0@10.0.0.5:3128")
        );
        assert!(!s.is_healthy());
        s.set_condition(
            ConditionType::Healthy,
            up(ConditionStatus::True, Reason::ProbeSucceeded, ""),
            t(1),
        );
        s.set_condition(
            ConditionType::Ready,
            up(ConditionStatus::True, Reason::Running, ""),
            t(1),
        );
        assert!(s.is_healthy());
        let r = s.without_health();
        assert_eq!(r.conditions.len(), 1);
        assert_eq!(r.probed_instance, None);
        assert!(!r.is_healthy());
        let joined = r.with_health_of(&s);
        assert!(joined.is_healthy());
        assert_eq!(joined.probed_instance, s.probed_instance);
        assert_eq!(
            r.condition_reason(ConditionType::Ready),
            Some(Reason::Running)
        );
    }

    #[test]
    fn wire_form_matches_the_crd() {
        let mut s = ProxyStatus {
            phase: Some(Phase::Running),
            provider_id: Some("kvm2://e/h/ep-1".into()),
            ip: Some("10.0.0.5".parse().unwrap()),
            port: Some(3128),
            ..ProxyStatus::default()
        };
        s.set_condition(
            ConditionType::Ready,
            up(ConditionStatus::True, Reason::Running, ""),
            t(0),
        );
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "phase": "Running",
                "providerID": "kvm2://e/h/ep-1",
                "ip": "10.0.0.5",
                "port": 3128,
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "Running", "message": "",
                    "lastTransitionTime": "1970-01-01T00:00:00Z", "observedGeneration": 1
                }]
            })
        );
        let back: ProxyStatus = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
        let empty: ProxyStatus = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, ProxyStatus::default());
    }

    #[test]
    fn the_schema_matches_the_wire_form() {
        let schema = serde_json::to_value(schemars::schema_for!(ProxyStatus)).unwrap();
        let props = &schema["properties"];
        assert!(props.get("providerID").is_some(), "{schema}");
        assert_eq!(props["createdAt"]["format"], "date-time");
        assert_eq!(props["conditions"]["x-kubernetes-list-type"], "map");
        assert_eq!(
            props["conditions"]["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"])
        );
        let condition = &schema["$defs"]["Condition"];
        let required = condition["required"].as_array().unwrap();
        for field in ["type", "status", "reason", "lastTransitionTime"] {
            assert!(
                required.contains(&serde_json::json!(field)),
                "{field}: {condition}"
            );
        }
        assert_eq!(
            condition["properties"]["lastTransitionTime"]["format"],
            "date-time"
        );
        assert!(
            schema.get("required").is_none(),
            "every status field is optional"
        );
    }

    #[test]
    fn foreign_condition_types_survive_a_round_trip() {
        let json = r#"{"conditions":[{"type":"Custom","status":"False","reason":"Whatever",
            "lastTransitionTime":"2025-01-01T00:00:00Z"}]}"#;
        let s: ProxyStatus = serde_json::from_str(json).unwrap();
        assert_eq!(s.conditions[0].type_, "Custom");
        assert_eq!(s.conditions[0].known_reason(), None);
        assert_eq!(s.condition(ConditionType::Ready), None);
    }
}
