//! [`TtlCache`]: a bounded map whose entries expire a fixed time after they
//! were inserted, with the clock a parameter (sans IO). The operator keeps
//! its TokenReview and SubjectAccessReview answers in two of them.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

/// A bounded map of answers, each valid for `ttl` after it was inserted.
///
/// * **Expiry**: an entry is returned only before `inserted + ttl`; a hit
///   never extends it (a revoked token or a removed grant stops working
///   within `ttl`).
/// * **Capacity** and **overflow policy**: at most `capacity` entries.
///   Inserting a new key into a full cache first drops every expired
///   entry, then, if it is still full, the oldest entry (the one that
///   would expire first). Nothing is ever refused, and a flood of new keys
///   only costs the hits the evicted entries would have given.
/// * **Disabled** when `ttl` or `capacity` is zero: every lookup misses and
///   nothing is stored.
///
/// Time is the caller's: each `now` is a monotonic clock reading expressed
/// as the time since an origin the caller keeps (the operator: when it made
/// the cache), so the cache reads no clock and is deterministic under test.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    ttl: Duration,
    capacity: usize,
    entries: HashMap<K, Entry<V>>,
    /// Keys in insertion (thus expiry) order, with the sequence number of
    /// the insertion; an element whose number no longer matches its entry
    /// is stale and skipped.
    order: VecDeque<(u64, K)>,
    next_seq: u64,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    expires: Duration,
    seq: u64,
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    /// A cache of at most `capacity` entries, each valid for `ttl`.
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        TtlCache {
            ttl,
            capacity,
            entries: HashMap::new(),
            order: VecDeque::new(),
            next_seq: 0,
        }
    }

    /// Whether the cache stores anything at all.
    pub fn is_enabled(&self) -> bool {
        !self.ttl.is_zero() && self.capacity > 0
    }

    /// The entries held (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value stored for `key`, if it has not expired at `now`.
    pub fn get(&self, key: &K, now: Duration) -> Option<V> {
        self.entries
            .get(key)
            .filter(|e| now < e.expires)
            .map(|e| e.value.clone())
    }

    /// Stores `value` for `key` from `now` (replacing what was there), by
    /// the overflow policy above.
    pub fn insert(&mut self, key: K, value: V, now: Duration) {
        if !self.is_enabled() {
            return;
        }
        self.drop_expired(now);
        if !self.entries.contains_key(&key) {
            while self.entries.len() >= self.capacity {
                if !self.evict_oldest() {
                    break;
                }
            }
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        let expires = now.saturating_add(self.ttl);
        self.entries.insert(
            key.clone(),
            Entry {
                value,
                expires,
                seq,
            },
        );
        self.order.push_back((seq, key));
        // Stale order elements (keys re-inserted before they were dropped)
        // are bounded too.
        if self.order.len() > self.capacity.saturating_mul(2) {
            let entries = &self.entries;
            self.order
                .retain(|(seq, key)| entries.get(key).is_some_and(|e| e.seq == *seq));
        }
    }

    /// Drops the entries expired at `now` (they are at the front).
    fn drop_expired(&mut self, now: Duration) {
        while let Some((seq, key)) = self.order.front() {
            match self.entries.get(key) {
                Some(e) if e.seq == *seq && now < e.expires => break,
                Some(e) if e.seq == *seq => {
                    self.entries.remove(key);
                }
                _ => {}
            }
            self.order.pop_front();
        }
    }

    /// Drops the oldest live entry; `false` when there was none.
    fn evict_oldest(&mut self) -> bool {
        while let Some((seq, key)) = self.order.pop_front() {
            if self.entries.get(&key).is_some_and(|e| e.seq == seq) {
                self.entries.remove(&key);
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    fn at(t0: Duration, secs: u64) -> Duration {
        t0 + Duration::from_secs(secs)
    }

    #[test]
    fn an_entry_lives_for_its_ttl_and_a_hit_does_not_extend_it() {
        let t0 = Duration::from_secs(1000);
        let mut c = TtlCache::new(TTL, 4);
        c.insert("a", 1, t0);
        assert_eq!(c.get(&"a", t0), Some(1));
        assert_eq!(c.get(&"a", at(t0, 9)), Some(1));
        assert_eq!(c.get(&"a", at(t0, 10)), None);
        assert_eq!(c.get(&"b", t0), None);
        // Re-inserted after expiry: a new lifetime.
        c.insert("a", 2, at(t0, 10));
        assert_eq!(c.get(&"a", at(t0, 19)), Some(2));
        assert_eq!(c.get(&"a", at(t0, 20)), None);
    }

    #[test]
    fn overflow_drops_expired_entries_first_then_the_oldest() {
        let t0 = Duration::from_secs(1000);
        let mut c = TtlCache::new(TTL, 3);
        c.insert("a", 1, t0);
        c.insert("b", 2, at(t0, 1));
        c.insert("c", 3, at(t0, 2));
        // Full, nothing expired: the oldest (a) goes.
        c.insert("d", 4, at(t0, 3));
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&"a", at(t0, 3)), None);
        for (k, v) in [("b", 2), ("c", 3), ("d", 4)] {
            assert_eq!(c.get(&k, at(t0, 3)), Some(v), "{k}");
        }
        // At 12 s b and c have expired: both dropped, d stays.
        c.insert("e", 5, at(t0, 12));
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(&"d", at(t0, 12)), Some(4));
        assert_eq!(c.get(&"e", at(t0, 12)), Some(5));
    }

    #[test]
    fn replacing_a_key_in_a_full_cache_evicts_nothing() {
        let t0 = Duration::from_secs(1000);
        let mut c = TtlCache::new(TTL, 2);
        c.insert("a", 1, t0);
        c.insert("b", 2, t0);
        c.insert("a", 3, at(t0, 1));
        assert_eq!(c.get(&"a", at(t0, 1)), Some(3));
        assert_eq!(c.get(&"b", at(t0, 1)), Some(2));
        // The replaced entry's order element is stale: the next eviction
        // takes b (now the oldest live entry), not the new a.
        c.insert("c", 4, at(t0, 2));
        assert_eq!(c.get(&"b", at(t0, 2)), None);
        assert_eq!(c.get(&"a", at(t0, 2)), Some(3));
        assert_eq!(c.get(&"c", at(t0, 2)), Some(4));
    }

    #[test]
    fn a_flood_stays_within_capacity() {
        let t0 = Duration::from_secs(1000);
        let mut c = TtlCache::new(TTL, 16);
        for i in 0..10_000u32 {
            c.insert(i % 40, i, t0);
            assert!(c.len() <= 16);
            assert!(c.order.len() <= 32, "{}", c.order.len());
        }
    }

    #[test]
    fn zero_ttl_or_capacity_disables_it() {
        let t0 = Duration::from_secs(1000);
        for mut c in [TtlCache::new(Duration::ZERO, 8), TtlCache::new(TTL, 0)] {
            assert!(!c.is_enabled());
            c.insert("a", 1, t0);
            assert_eq!(c.get(&"a", t0), None);
            assert!(c.is_empty());
        }
    }
}
