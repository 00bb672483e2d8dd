//! Health hysteresis: a proxy becomes `Healthy` after K consecutive
//! successful probes and loses it after M consecutive failures.
//!
//! Counters live in memory (the health engine's, per Proxy). A new leader
//! seeds each tracker from the `Healthy` condition already in the status,
//! so a rollout neither flaps a healthy proxy to Unknown nor promotes an
//! unhealthy one on its first lucky probe. The condition's reason and
//! message are fixed at each transition, so steady probing writes nothing.
//!
//! A verdict belongs to one instance at one address
//! ([`ProxyStatus::instance_endpoint`]), recorded beside it as
//! `probedInstance`. [`plan`] says what the engine does with a Proxy: probe
//! its current instance (seeding the tracker from the stored verdict only
//! when that verdict is about this instance), or reset `Healthy` to
//! `Unknown` at once — when the Proxy leaves `Running`, when its instance is
//! replaced, or when its address changes — so a verdict never outlives the
//! instance it describes.

use crate::probe::ProbeOutcome;
use crate::reason::Reason;
use crate::status::{
    Condition, ConditionStatus, ConditionType, ConditionUpdate, Phase, ProxyStatus,
};

/// What the health engine does with one Proxy (see [`plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthPlan {
    /// Probe the instance `endpoint` (`providerID#replacements@ip:port`) on the next
    /// round. `seed`: the stored verdict is about this instance, so a new
    /// tracker starts from it; otherwise from no verdict.
    Probe {
        /// The instance and address probed.
        endpoint: String,
        /// Whether to seed the tracker from the stored condition.
        seed: bool,
    },
    /// Write `Healthy` = `update` and `probedInstance` = `probed` now, before
    /// any probe: the stored verdict is about something that no longer is.
    Reset {
        /// The `Unknown` condition to write.
        update: ConditionUpdate,
        /// The instance the reset is about (`None`: not serving).
        probed: Option<String>,
    },
    /// Nothing to probe and nothing to write.
    Keep,
}

/// What to do with a Proxy whose status is `status`.
pub fn plan(status: &ProxyStatus) -> HealthPlan {
    let stored = status.condition(ConditionType::Healthy);
    let probed = status.probed_instance.as_deref();
    let Some(endpoint) = status.instance_endpoint() else {
        let settled = probed.is_none()
            && stored.is_none_or(|c| {
                c.status == ConditionStatus::Unknown && c.known_reason() == Some(Reason::NotServing)
            });
        if settled {
            return HealthPlan::Keep;
        }
        let phase = status.phase.map_or("not reconciled", Phase::as_str);
        let message = match (status.phase, status.ip) {
            (Some(Phase::Running), None) => "the proxy has no address; no verdict".to_owned(),
            _ => format!("the proxy is {phase}; no verdict"),
        };
        return HealthPlan::Reset {
            update: ConditionUpdate::new(
                ConditionStatus::Unknown,
                Reason::NotServing,
                message,
                None,
            ),
            probed: None,
        };
    };
    match probed {
        Some(p) if p == endpoint => HealthPlan::Probe {
            endpoint,
            seed: true,
        },
        // New, or reset while it did not serve: nothing to drop.
        None if stored.is_none_or(|c| c.status == ConditionStatus::Unknown) => HealthPlan::Probe {
            endpoint,
            seed: false,
        },
        _ => {
            let instance = |e: &str| e.rsplit_once('@').map(|(id, _)| id.to_owned());
            let (reason, message) = match probed {
                Some(p) if instance(p) == instance(&endpoint) => (
                    Reason::AddressChanged,
                    format!("the address changed ({p} → {endpoint}); probing again"),
                ),
                Some(p) => (
                    Reason::InstanceReplaced,
                    format!("the instance changed ({p} → {endpoint}); probing the new one"),
                ),
                None => (
                    Reason::InstanceReplaced,
                    format!("the stored verdict names no instance; probing {endpoint}"),
                ),
            };
            HealthPlan::Reset {
                update: ConditionUpdate::new(ConditionStatus::Unknown, reason, message, None),
                probed: Some(endpoint),
            }
        }
    }
}

/// Whether a probe round writes `Healthy` = `new` (and `probedInstance` =
/// `endpoint`) over the stored `old` and `probed`: when either changed —
/// except that "no verdict yet" is not written over a stored "no verdict"
/// (absent or `Unknown`): a reader would learn nothing, and a new Proxy's
/// first write is then its first verdict (one status write per Proxy
/// fewer; `probedInstance` is written with that verdict).
pub fn worth_writing(
    old: Option<&Condition>,
    new: &Condition,
    probed: Option<&str>,
    endpoint: &str,
) -> bool {
    let unknown = |c: &Condition| c.status == ConditionStatus::Unknown;
    if unknown(new) && old.is_none_or(unknown) {
        return false;
    }
    old != Some(new) || probed != Some(endpoint)
}

/// What the engine last wrote for one instance: the `Healthy` condition
/// and the `probedInstance` it wrote with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The condition written.
    pub condition: Condition,
    /// The instance it is about.
    pub probed: String,
}

/// The `Healthy` condition a probe round writes for `endpoint`, if any:
/// the tracker's `update` over what is stored — where `written` (this
/// engine's last write for the instance) stands in for the stored verdict,
/// which the watch cache may not show yet (a round can come before the
/// watch event of the last round's write, and would write it again).
pub fn verdict_to_write(
    stored: &ProxyStatus,
    written: Option<&Written>,
    update: ConditionUpdate,
    endpoint: &str,
    now: crate::time::Timestamp,
) -> Option<Condition> {
    let (old, probed) = match written {
        Some(w) => (Some(&w.condition), Some(w.probed.as_str())),
        None => (
            stored.condition(ConditionType::Healthy),
            stored.probed_instance.as_deref(),
        ),
    };
    // Only the one condition is built, not a copy of the whole status.
    let mut healthy: Vec<Condition> = old.into_iter().cloned().collect();
    crate::status::upsert_condition(
        &mut healthy,
        Condition::fresh(ConditionType::Healthy, update, now),
    );
    let new = healthy.pop()?;
    worth_writing(old, &new, probed, endpoint).then_some(new)
}

/// The thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hysteresis {
    /// Consecutive successes to become healthy (K, at least 1; 2 by
    /// default).
    pub promote_after: u32,
    /// Consecutive failures to become unhealthy (M, at least 1; 3 by
    /// default).
    pub demote_after: u32,
}

impl Default for Hysteresis {
    fn default() -> Self {
        Hysteresis {
            promote_after: 2,
            demote_after: 3,
        }
    }
}

/// One proxy's health verdict and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthTracker {
    verdict: Option<bool>,
    reason: Reason,
    message: String,
    successes: u32,
    failures: u32,
}

impl Default for HealthTracker {
    fn default() -> Self {
        HealthTracker {
            verdict: None,
            reason: Reason::AwaitingProbes,
            message: "no verdict yet".to_owned(),
            successes: 0,
            failures: 0,
        }
    }
}

impl HealthTracker {
    /// A tracker starting from the stored `Healthy` condition (`None`, or
    /// `Unknown`: no verdict yet). Counters start at zero, so the stored
    /// verdict holds until K successes or M failures overturn it.
    pub fn seeded(condition: Option<&Condition>) -> Self {
        let Some(c) = condition else {
            return HealthTracker::default();
        };
        let (verdict, fallback) = match c.status {
            ConditionStatus::True => (Some(true), Reason::ProbeSucceeded),
            ConditionStatus::False => (Some(false), Reason::ProbeRejected),
            ConditionStatus::Unknown => return HealthTracker::default(),
        };
        HealthTracker {
            verdict,
            reason: c.known_reason().unwrap_or(fallback),
            message: c.message.clone(),
            successes: 0,
            failures: 0,
        }
    }

    /// Counts one probe; returns whether the verdict changed.
    pub fn observe(&mut self, outcome: &ProbeOutcome, h: &Hysteresis) -> bool {
        match outcome {
            ProbeOutcome::Healthy { .. } => {
                self.failures = 0;
                self.successes = self.successes.saturating_add(1);
                if self.successes >= h.promote_after.max(1) && self.verdict != Some(true) {
                    self.verdict = Some(true);
                    self.reason = Reason::ProbeSucceeded;
                    self.message = format!("{} consecutive CONNECT probes passed", self.successes);
                    return true;
                }
            }
            ProbeOutcome::Unhealthy(failure) => {
                self.successes = 0;
                self.failures = self.failures.saturating_add(1);
                if self.failures >= h.demote_after.max(1) && self.verdict != Some(false) {
                    self.verdict = Some(false);
                    self.reason = failure.kind.reason();
                    self.message = format!(
                        "{} consecutive CONNECT probes failed; last: {}",
                        self.failures, failure.detail
                    );
                    return true;
                }
            }
        }
        false
    }

    /// `Some(true)` healthy, `Some(false)` unhealthy, `None` no verdict yet.
    pub fn verdict(&self) -> Option<bool> {
        self.verdict
    }

    /// The `Healthy` condition to write (unchanged between transitions).
    pub fn condition(&self) -> ConditionUpdate {
        let status = match self.verdict {
            Some(v) => ConditionStatus::from_bool(v),
            None => ConditionStatus::Unknown,
        };
        ConditionUpdate::new(status, self.reason, self.message.clone(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{FailureKind, ProbeFailure};
    use crate::status::{ConditionType, ProxyStatus};
    use crate::time::Timestamp;
    use std::time::Duration;

    fn ok() -> ProbeOutcome {
        ProbeOutcome::Healthy {
            latency: Duration::from_millis(3),
        }
    }

    fn bad(kind: FailureKind) -> ProbeOutcome {
        ProbeOutcome::Unhealthy(ProbeFailure {
            kind,
            detail: "x".into(),
        })
    }

    /// Feeds `seq` ('+' success, '-' failure) and returns the verdict after
    /// each probe as a string ('?', 'H', 'U').
    fn run(t: &mut HealthTracker, h: &Hysteresis, seq: &str) -> String {
        seq.chars()
            .map(|c| {
                let o = if c == '+' {
                    ok()
                } else {
                    bad(FailureKind::Timeout)
                };
                t.observe(&o, h);
                match t.verdict() {
                    None => '?',
                    Some(true) => 'H',
                    Some(false) => 'U',
                }
            })
            .collect()
    }

    #[test]
    fn hysteresis_table() {
        let h = Hysteresis {
            promote_after: 2,
            demote_after: 3,
        };
        for (seq, verdicts) in [
            ("+", "?"),
            ("++", "?H"),
            ("+-+", "???"),
            ("++-", "?HH"),
            ("++--", "?HHH"),
            ("++---", "?HHHU"),
            ("++--+--", "?HHHHHH"),
            ("---", "??U"),
            ("---+", "??UU"),
            ("---++", "??UUH"),
            ("---+-+", "??UUUU"),
        ] {
            let mut t = HealthTracker::default();
            assert_eq!(run(&mut t, &h, seq), verdicts, "{seq}");
        }
    }

    #[test]
    fn thresholds_of_zero_act_as_one() {
        let h = Hysteresis {
            promote_after: 0,
            demote_after: 0,
        };
        let mut t = HealthTracker::default();
        assert_eq!(run(&mut t, &h, "+-+"), "HUH");
    }

    #[test]
    fn transitions_are_reported_once() {
        let h = Hysteresis::default();
        let mut t = HealthTracker::default();
        let changed: Vec<bool> = [ok(), ok(), ok()]
            .iter()
            .map(|o| t.observe(o, &h))
            .collect();
        assert_eq!(changed, [false, true, false]);
    }

    fn stored(t: &HealthTracker) -> ProxyStatus {
        let mut s = ProxyStatus::default();
        s.set_condition(
            ConditionType::Healthy,
            t.condition(),
            Timestamp::from_unix_seconds(0),
        );
        s
    }

    #[test]
    fn a_new_leader_seeded_from_the_condition_does_not_flap() {
        let h = Hysteresis::default();
        let mut old = HealthTracker::default();
        run(&mut old, &h, "++");
        let status = stored(&old);
        // New leader: the first failure (or two) keep the proxy healthy.
        let mut new = HealthTracker::seeded(status.condition(ConditionType::Healthy));
        assert_eq!(new.verdict(), Some(true));
        assert_eq!(run(&mut new, &h, "--"), "HH");
        // And the condition it would write is the stored one: no write.
        let mut again = status.clone();
        again.set_condition(
            ConditionType::Healthy,
            new.condition(),
            Timestamp::from_unix_seconds(99),
        );
        assert_eq!(again, status);
        // Unseeded, it would have dropped to Unknown at once.
        assert_eq!(HealthTracker::default().verdict(), None);
    }

    #[test]
    fn an_unhealthy_seed_needs_k_successes() {
        let h = Hysteresis::default();
        let mut old = HealthTracker::default();
        old.observe(&bad(FailureKind::Denied), &h);
        old.observe(&bad(FailureKind::Denied), &h);
        old.observe(&bad(FailureKind::Denied), &h);
        let status = stored(&old);
        let c = status.condition(ConditionType::Healthy).unwrap();
        assert_eq!(c.reason, "ProbeDenied");
        assert!(c.message.contains("3 consecutive"), "{}", c.message);
        let mut new = HealthTracker::seeded(Some(c));
        assert_eq!(run(&mut new, &h, "+"), "U");
        assert_eq!(run(&mut new, &h, "+"), "H");
    }

    fn running(id: &str, ip: &str) -> ProxyStatus {
        ProxyStatus {
            phase: Some(Phase::Running),
            provider_id: Some(id.into()),
            ip: Some(ip.parse().unwrap()),
            port: Some(3128),
            ..ProxyStatus::default()
        }
    }

    fn healthy(mut s: ProxyStatus) -> ProxyStatus {
        s.probed_instance = s.instance_endpoint();
        s.set_condition(
            ConditionType::Healthy,
            ConditionUpdate::new(ConditionStatus::True, Reason::ProbeSucceeded, "ok", None),
            Timestamp::from_unix_seconds(0),
        );
        s
    }

    fn reset_reason(p: &HealthPlan) -> Option<(Reason, Option<&str>)> {
        match p {
            HealthPlan::Reset { update, probed } => {
                assert_eq!(update.status, ConditionStatus::Unknown);
                Some((update.reason, probed.as_deref()))
            }
            _ => None,
        }
    }

    #[test]
    fn plan_table() {
        let a = healthy(running("kvm2://e/h/a", "10.0.0.7"));
        // The current instance's verdict: probe, seeded.
        assert_eq!(
            plan(&a),
            HealthPlan::Probe {
                endpoint: "kvm2://e/h/a#0@10.0.0.7:3128".into(),
                seed: true
            }
        );
        // A new Proxy: probe from no verdict, nothing to reset.
        assert_eq!(
            plan(&running("kvm2://e/h/a", "10.0.0.7")),
            HealthPlan::Probe {
                endpoint: "kvm2://e/h/a#0@10.0.0.7:3128".into(),
                seed: false
            }
        );
        // Replaced (the new instance got the same address).
        let mut replaced = a.clone();
        replaced.provider_id = Some("kvm2://e/h/b".into());
        assert_eq!(
            reset_reason(&plan(&replaced)),
            Some((
                Reason::InstanceReplaced,
                Some("kvm2://e/h/b#0@10.0.0.7:3128")
            ))
        );
        // Replaced under the same name and address (kvm2 names instances
        // after their Proxy): the replacement count tells them apart.
        let mut renamed_alike = a.clone();
        renamed_alike.replacements = 1;
        assert_eq!(
            reset_reason(&plan(&renamed_alike)),
            Some((
                Reason::InstanceReplaced,
                Some("kvm2://e/h/a#1@10.0.0.7:3128")
            ))
        );
        // Same instance, new address.
        let mut moved = a.clone();
        moved.ip = Some("10.0.0.8".parse().unwrap());
        assert_eq!(
            reset_reason(&plan(&moved)),
            Some((Reason::AddressChanged, Some("kvm2://e/h/a#0@10.0.0.8:3128")))
        );
        // Leaving Running, whatever the phase: reset, no instance.
        for phase in [
            Phase::Deleting,
            Phase::Pending,
            Phase::Provisioning,
            Phase::Failed,
        ] {
            let mut left = a.clone();
            left.phase = Some(phase);
            assert_eq!(
                reset_reason(&plan(&left)),
                Some((Reason::NotServing, None)),
                "{phase:?}"
            );
        }
        // Once reset, nothing more is written until it serves again.
        let mut settled = a.clone();
        settled.phase = Some(Phase::Deleting);
        settled.probed_instance = None;
        settled.set_condition(
            ConditionType::Healthy,
            ConditionUpdate::new(ConditionStatus::Unknown, Reason::NotServing, "", None),
            Timestamp::from_unix_seconds(5),
        );
        assert_eq!(plan(&settled), HealthPlan::Keep);
        assert_eq!(plan(&ProxyStatus::default()), HealthPlan::Keep);
        // Serving again after a reset while it did not serve: probe, with
        // nothing more to reset.
        let mut back = settled.clone();
        back.phase = Some(Phase::Running);
        assert!(matches!(plan(&back), HealthPlan::Probe { seed: false, .. }));
        // After a reset to the new instance: probe it, seeded from Unknown.
        let mut after = replaced.clone();
        after.probed_instance = after.instance_endpoint();
        assert!(matches!(plan(&after), HealthPlan::Probe { seed: true, .. }));
    }

    #[test]
    fn unknown_or_absent_seeds_start_fresh() {
        assert_eq!(HealthTracker::seeded(None), HealthTracker::default());
        let mut s = ProxyStatus::default();
        s.set_condition(
            ConditionType::Healthy,
            HealthTracker::default().condition(),
            Timestamp::from_unix_seconds(0),
        );
        let c = s.condition(ConditionType::Healthy);
        assert_eq!(c.unwrap().status, ConditionStatus::Unknown);
        assert_eq!(HealthTracker::seeded(c).verdict(), None);
    }

    fn verdict(status: ConditionStatus, reason: Reason) -> Condition {
        let mut st = ProxyStatus::default();
        st.set_condition(
            ConditionType::Healthy,
            ConditionUpdate::new(status, reason, "m".to_owned(), None),
            Timestamp::from_system_time(std::time::UNIX_EPOCH),
        );
        st.condition(ConditionType::Healthy).unwrap().clone()
    }

    /// A first probe's "no verdict yet" is not written over "no verdict"
    /// (absent, or an Unknown a reset wrote); a verdict always is, and so
    /// is the drop from a verdict, and a verdict now about another endpoint.
    #[test]
    fn only_what_a_reader_would_learn_is_written() {
        let awaiting = verdict(ConditionStatus::Unknown, Reason::AwaitingProbes);
        let replaced = verdict(ConditionStatus::Unknown, Reason::InstanceReplaced);
        let up = verdict(ConditionStatus::True, Reason::ProbeSucceeded);
        let down = verdict(ConditionStatus::False, Reason::ProbeTimeout);
        assert!(!worth_writing(None, &awaiting, None, "e"));
        assert!(!worth_writing(Some(&replaced), &awaiting, Some("e"), "e"));
        assert!(!worth_writing(Some(&awaiting), &awaiting, None, "e"));
        assert!(worth_writing(None, &up, None, "e"));
        assert!(worth_writing(Some(&awaiting), &up, Some("e"), "e"));
        assert!(worth_writing(Some(&up), &down, Some("e"), "e"));
        assert!(worth_writing(Some(&up), &awaiting, Some("e"), "e"));
        assert!(worth_writing(Some(&up), &up, Some("old"), "e"));
        assert!(!worth_writing(Some(&up), &up, Some("e"), "e"));
    }

    /// A round that comes before the cache shows the last round's write
    /// does not write the same verdict again (a CI run counted one such
    /// write in a steady state that must write nothing).
    #[test]
    fn a_verdict_written_but_not_yet_in_the_cache_is_not_written_again() {
        let t0 = Timestamp::from_system_time(std::time::SystemTime::UNIX_EPOCH);
        let t1 = Timestamp::from_system_time(
            std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(60),
        );
        let up = || {
            ConditionUpdate::new(
                ConditionStatus::True,
                Reason::ProbeSucceeded,
                "2 consecutive CONNECT probes passed",
                None,
            )
        };
        // The cache still shows no verdict: the first write is due.
        let stale = ProxyStatus::default();
        let first = verdict_to_write(&stale, None, up(), "e", t0).expect("a first verdict");
        let written = Written {
            condition: first,
            probed: "e".into(),
        };
        // The next round, the cache still stale: nothing to write.
        assert_eq!(
            verdict_to_write(&stale, Some(&written), up(), "e", t1),
            None
        );
        // A change of verdict is written, over what was written.
        let down = ConditionUpdate::new(
            ConditionStatus::False,
            Reason::ProbeRejected,
            "3 consecutive CONNECT probes failed; last: x",
            None,
        );
        let w = verdict_to_write(&stale, Some(&written), down, "e", t1).expect("a new verdict");
        assert_eq!(w.status, ConditionStatus::False);
        // Once the cache shows it, the same holds without the record.
        let mut caught_up = ProxyStatus::default();
        caught_up.conditions.push(written.condition.clone());
        caught_up.probed_instance = Some("e".into());
        assert_eq!(verdict_to_write(&caught_up, None, up(), "e", t1), None);
    }
}
