//! [`ReplaceCap`]: at most so many instance replacements per sliding window
//! (an hour by default), so a proxy whose instances keep failing does not
//! churn the hypervisor.

use std::time::Duration;

use crate::time::Timestamp;

/// At most `max` replacements within any `window`.
///
/// The replacement times live in the status (`recentReplacements`), so a new
/// leader keeps counting where the old one stopped. Times in the future (a
/// clock that went back) count as inside the window.
///
/// ```
/// use std::time::Duration;
/// use fleet::{CapVerdict, ReplaceCap, Timestamp};
/// let cap = ReplaceCap::new(2, Duration::from_secs(3600));
/// let t = Timestamp::from_unix_seconds;
/// assert_eq!(cap.check(&[t(0)], t(100)), CapVerdict::Allowed);
/// assert_eq!(
///     cap.check(&[t(0), t(50)], t(100)),
///     CapVerdict::Held { until: Some(t(3600)) }
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplaceCap {
    max: u32,
    window: Duration,
}

/// Whether a replacement may happen now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapVerdict {
    /// Below the cap.
    Allowed,
    /// At the cap until `until` (never, with a cap of zero).
    Held {
        /// When the oldest counted replacement leaves the window.
        until: Option<Timestamp>,
    },
}

impl ReplaceCap {
    /// `max` replacements per `window`.
    pub fn new(max: u32, window: Duration) -> Self {
        ReplaceCap { max, window }
    }

    /// The most replacements per window.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// The window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The times of `recent` still inside the window at `now`, oldest first,
    /// at most `max` of them (the newest).
    pub fn prune(&self, recent: &[Timestamp], now: Timestamp) -> Vec<Timestamp> {
        let mut inside: Vec<Timestamp> = recent
            .iter()
            .copied()
            .filter(|t| now.since(*t) < self.window)
            .collect();
        inside.sort();
        let max = usize::try_from(self.max).unwrap_or(usize::MAX);
        let excess = inside.len().saturating_sub(max);
        inside.drain(..excess);
        inside
    }

    /// Whether a replacement may happen at `now`, given earlier ones.
    pub fn check(&self, recent: &[Timestamp], now: Timestamp) -> CapVerdict {
        if self.max == 0 {
            return CapVerdict::Held { until: None };
        }
        let inside = self.prune(recent, now);
        if inside.len() < usize::try_from(self.max).unwrap_or(usize::MAX) {
            return CapVerdict::Allowed;
        }
        CapVerdict::Held {
            until: inside.first().map(|oldest| oldest.plus(self.window)),
        }
    }

    /// `recent` with a replacement at `now` added (pruned).
    pub fn record(&self, recent: &[Timestamp], now: Timestamp) -> Vec<Timestamp> {
        let mut all = recent.to_vec();
        all.push(now);
        self.prune(&all, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_unix_seconds(s)
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn allows_up_to_max_per_window() {
        let cap = ReplaceCap::new(3, HOUR);
        let mut recent = Vec::new();
        for now in [0, 10, 20] {
            assert_eq!(cap.check(&recent, t(now)), CapVerdict::Allowed, "{now}");
            recent = cap.record(&recent, t(now));
        }
        assert_eq!(
            cap.check(&recent, t(30)),
            CapVerdict::Held {
                until: Some(t(3600))
            }
        );
        // The oldest leaves the window exactly one window after it happened.
        assert_eq!(
            cap.check(&recent, t(3599)),
            CapVerdict::Held {
                until: Some(t(3600))
            }
        );
        assert_eq!(cap.check(&recent, t(3600)), CapVerdict::Allowed);
    }

    #[test]
    fn prune_keeps_the_newest_inside_the_window() {
        let cap = ReplaceCap::new(2, HOUR);
        assert_eq!(
            cap.prune(&[t(50), t(0), t(4000), t(3000)], t(4000)),
            [t(3000), t(4000)]
        );
        assert_eq!(cap.prune(&[t(0)], t(3600)), []);
    }

    #[test]
    fn future_times_count() {
        let cap = ReplaceCap::new(1, HOUR);
        assert_eq!(
            cap.check(&[t(10_000)], t(0)),
            CapVerdict::Held {
                until: Some(t(13_600))
            }
        );
    }

    #[test]
    fn a_zero_cap_never_allows() {
        let cap = ReplaceCap::new(0, HOUR);
        assert_eq!(cap.check(&[], t(0)), CapVerdict::Held { until: None });
        assert_eq!(cap.record(&[], t(0)), []);
    }
}
