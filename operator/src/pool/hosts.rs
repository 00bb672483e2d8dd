//! [`HostBook`]: each provider entry's hosts as its latest check saw them,
//! shared by the monitor (writer) and the pool controller (reader).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use fleet::pool::HostState;
use tokio::time::Instant;

/// How long after start a pool waits for its entry's first check before
/// placing members without knowing the hosts.
const FIRST_CHECK_WAIT: Duration = Duration::from_secs(30);
/// The longest one pass waits for it (then it looks again later, so a
/// pass never holds a reconcile slot, or a shutdown, for long).
const PASS_WAIT: Duration = Duration::from_secs(5);

/// Each entry's hosts from its latest check (cheap to clone; one shared
/// table).
#[derive(Clone, Debug)]
pub struct HostBook {
    table: Arc<RwLock<BTreeMap<String, Vec<HostState>>>>,
    /// Entries whose provider has a checker (the others never get hosts).
    checked: Arc<BTreeSet<String>>,
    started: Instant,
    /// Bumped by every check recorded: wakes the passes waiting for one.
    recorded: Arc<tokio::sync::watch::Sender<u64>>,
}

impl HostBook {
    /// An empty book for entries `checked` (those with a checker).
    pub fn new(checked: impl IntoIterator<Item = String>) -> Self {
        HostBook {
            table: Arc::default(),
            checked: Arc::new(checked.into_iter().collect()),
            started: Instant::now(),
            recorded: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Records `entry`'s check: each target, ready when it answered.
    pub fn record(&self, entry: &str, targets: &[fleet::TargetHealth]) {
        let hosts = targets
            .iter()
            .map(|t| HostState {
                name: t.name.clone(),
                ready: t.reachable,
            })
            .collect();
        // A poisoned lock only means a writer panicked mid-insert of a
        // whole value: the map is still consistent.
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        table.insert(entry.to_owned(), hosts);
        drop(table);
        self.recorded.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// `entry`'s hosts, once checked.
    pub fn get(&self, entry: &str) -> Option<Vec<HostState>> {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        table.get(entry).cloned()
    }

    /// Every checked entry's hosts.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<HostState>> {
        self.table.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether a pool of `entry` should wait for its first check: the entry
    /// is checked, has not been yet, and the wait has not run out.
    pub fn should_wait(&self, entry: &str) -> bool {
        self.checked.contains(entry)
            && self.get(entry).is_none()
            && self.started.elapsed() < FIRST_CHECK_WAIT
    }

    /// Waits while a pool of `entry` [should wait](Self::should_wait), at
    /// most [`PASS_WAIT`]: returns the moment the first check is recorded.
    /// Whether the pool may go on (false: look again later).
    pub async fn first_check(&self, entry: &str) -> bool {
        let mut recorded = self.recorded.subscribe();
        let deadline = (self.started + FIRST_CHECK_WAIT).min(Instant::now() + PASS_WAIT);
        while self.should_wait(entry) {
            match tokio::time::timeout_at(deadline, recorded.changed()).await {
                Ok(Ok(())) => {}
                // The wait for this pass ran out (the book lives as long as
                // its holders, so the sender is never dropped first).
                Ok(Err(_)) | Err(_) => return !self.should_wait(entry),
            }
        }
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A checked host (tests here and of the fleet gauges).
    pub(crate) fn target(name: &str, reachable: bool) -> fleet::TargetHealth {
        fleet::TargetHealth {
            name: name.into(),
            reachable,
            latency_ms: None,
            version: None,
            reason: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn pools_wait_for_the_first_check_of_checked_entries_only() {
        let book = HostBook::new(["kvm2-home".to_owned()]);
        assert!(book.should_wait("kvm2-home"));
        assert!(!book.should_wait("other"), "never checked: no wait");
        book.record(
            "kvm2-home",
            &[target("host1", true), target("host2", false)],
        );
        assert!(!book.should_wait("kvm2-home"));
        let hosts = book.get("kvm2-home").unwrap_or_default();
        assert_eq!(
            hosts
                .iter()
                .map(|h| (h.name.as_str(), h.ready))
                .collect::<Vec<_>>(),
            [("host1", true), ("host2", false)]
        );
        let mut late = HostBook::new(["kvm2-home".to_owned()]);
        late.started = Instant::now()
            .checked_sub(FIRST_CHECK_WAIT)
            .unwrap_or_else(Instant::now);
        assert!(!late.should_wait("kvm2-home"), "the wait is bounded");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_pass_goes_on_the_moment_the_first_check_lands() {
        let book = HostBook::new(["kvm2-home".to_owned()]);
        let started = Instant::now();
        let waiter = tokio::spawn({
            let book = book.clone();
            async move { book.first_check("kvm2-home").await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        book.record("kvm2-home", &[target("host1", true)]);
        assert!(waiter.await.unwrap_or(false), "may go on");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "woke {:?} after start, not at the record",
            started.elapsed()
        );
        assert!(book.first_check("other").await, "never checked: no wait");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_waits_at_most_its_bound() {
        let book = HostBook::new(["kvm2-home".to_owned()]);
        let started = Instant::now();
        assert!(
            !book.first_check("kvm2-home").await,
            "no check yet: look again"
        );
        assert_eq!(started.elapsed(), PASS_WAIT);
    }
}
