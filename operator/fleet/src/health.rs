//! Health hysteresis: a proxy becomes `Healthy` after K consecutive
//! successful probes and loses it after M consecutive failures.
//!
//! Counters live in memory (the health engine's, per Proxy). A new leader
//! seeds each tracker from the `Healthy` condition already in the status,
//! so a rollout neither flaps a healthy proxy to Unknown nor promotes an
//! unhealthy one on its first lucky probe. The condition's reason and
//! message are fixed at each transition, so steady probing writes nothing.
//!
//! A tracker belongs to one endpoint: when a Proxy's address changes (a
//! replacement), the health engine starts a fresh tracker
//! ([`HealthTracker::default`]) rather than carry the old instance's counters
//! over.

use crate::probe::ProbeOutcome;
use crate::reason::Reason;
use crate::status::{Condition, ConditionStatus, ConditionUpdate};

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
}
