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

/// Each entry's hosts from its latest check (cheap to clone; one shared
/// table).
#[derive(Clone, Debug)]
pub struct HostBook {
    table: Arc<RwLock<BTreeMap<String, Vec<HostState>>>>,
    /// Entries whose provider has a checker (the others never get hosts).
    checked: Arc<BTreeSet<String>>,
    started: Instant,
}

impl HostBook {
    /// An empty book for entries `checked` (those with a checker).
    pub fn new(checked: impl IntoIterator<Item = String>) -> Self {
        HostBook {
            table: Arc::default(),
            checked: Arc::new(checked.into_iter().collect()),
            started: Instant::now(),
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
    }

    /// `entry`'s hosts, once checked.
    pub fn get(&self, entry: &str) -> Option<Vec<HostState>> {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        table.get(entry).cloned()
    }

    /// Whether a pool of `entry` should wait for its first check: the entry
    /// is checked, has not been yet, and the wait has not run out.
    pub fn should_wait(&self, entry: &str) -> bool {
        self.checked.contains(entry)
            && self.get(entry).is_none()
            && self.started.elapsed() < FIRST_CHECK_WAIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str, reachable: bool) -> fleet::TargetHealth {
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
}
