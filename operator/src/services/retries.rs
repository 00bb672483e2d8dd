//! Which Services' writes failed, and when each may be tried again.
//!
//! A write the API server refuses (a full cluster-IP range, a namespace
//! being deleted) would otherwise be repeated on every pass, and a pass
//! follows every change of the Proxy cache: a storm of failing writes
//! under churn. Each failing Service waits [`fleet::Backoff`] delays
//! instead, whatever changes meanwhile; a success forgets it.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use fleet::{Backoff, Jitter};

/// The failing keys and when each is due.
#[derive(Debug)]
pub(super) struct Retries<K> {
    backoff: Backoff,
    failing: HashMap<K, Failing>,
}

#[derive(Debug)]
struct Failing {
    failures: u32,
    due: Instant,
}

impl<K: Eq + Hash + Clone> Retries<K> {
    pub(super) fn new(backoff: Backoff) -> Self {
        Retries {
            backoff,
            failing: HashMap::new(),
        }
    }

    /// Whether `key` may be written at `now` (it is not failing, or its
    /// delay is over).
    pub(super) fn due(&self, key: &K, now: Instant) -> bool {
        self.failing.get(key).is_none_or(|f| f.due <= now)
    }

    /// Records a failed write of `key` at `now`; the delay until it is due.
    pub(super) fn failed(&mut self, key: &K, now: Instant, jitter: Jitter) -> Duration {
        let f = self.failing.entry(key.clone()).or_insert(Failing {
            failures: 0,
            due: now,
        });
        f.failures = f.failures.saturating_add(1);
        let delay = self.backoff.delay(f.failures, jitter);
        f.due = now + delay;
        delay
    }

    /// Forgets `key` (written, or no longer wanted).
    pub(super) fn forget(&mut self, key: &K) {
        self.failing.remove(key);
    }

    /// Keeps only the keys `keep` holds for.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.failing.retain(|k, _| keep(k));
    }

    /// The earliest time a failing key is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.failing.values().map(|f| f.due).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_failing_key_waits_doubling_delays_and_a_success_forgets_it() {
        let mut r = Retries::new(Backoff::new(S(1), S(8)));
        let t0 = Instant::now();
        assert!(r.due(&"a", t0));
        assert_eq!(r.next_due(), None);
        assert_eq!(r.failed(&"a", t0, Jitter::NONE), S(1));
        assert!(!r.due(&"a", t0));
        assert!(r.due(&"b", t0), "another key is not held back");
        assert!(r.due(&"a", t0 + S(1)));
        let delays: Vec<_> = (0..5).map(|_| r.failed(&"a", t0, Jitter::NONE)).collect();
        assert_eq!(delays, [S(2), S(4), S(8), S(8), S(8)]);
        assert_eq!(r.next_due(), Some(t0 + S(8)));
        r.forget(&"a");
        assert!(r.due(&"a", t0));
        assert_eq!(
            r.failed(&"a", t0, Jitter::NONE),
            S(1),
            "counting starts again"
        );
    }

    #[test]
    fn next_due_is_the_earliest_and_retain_drops_keys() {
        let mut r = Retries::new(Backoff::new(S(1), S(60)));
        let t0 = Instant::now();
        r.failed(&"a", t0, Jitter::NONE);
        r.failed(&"a", t0, Jitter::NONE);
        r.failed(&"b", t0 + S(1), Jitter::MAX);
        assert_eq!(r.next_due(), Some(t0 + S(1) + Duration::from_millis(500)));
        r.retain(|k| *k == "a");
        assert_eq!(r.next_due(), Some(t0 + S(2)));
    }
}
