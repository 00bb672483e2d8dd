//! [`ProxyChanges`]: which Proxies the watch cache saw change since its
//! consumer last looked, so a pass over "what changed" costs the changes,
//! not the fleet (the health engine's reset pass: one pass per change over
//! a thousand Proxies was a third of the operator's CPU while a pool of
//! 1,000 filled).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::Notify;

use crate::crd::Proxy;

/// The Proxies changed since the last [`take`](Self::take), and a wake-up
/// for the one consumer.
#[derive(Debug)]
pub struct ProxyChanges {
    pending: Mutex<Pending>,
    notify: Notify,
}

#[derive(Debug)]
enum Pending {
    /// These, by reference (applied or deleted).
    Some(HashSet<ObjectRef<Proxy>>),
    /// Every Proxy: nothing seen yet, or the cache was listed again.
    All,
}

impl Default for ProxyChanges {
    /// Everything pending: the first pass looks at every Proxy.
    fn default() -> Self {
        Self {
            pending: Mutex::new(Pending::All),
            notify: Notify::new(),
        }
    }
}

impl ProxyChanges {
    /// A new handle, everything pending.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records what a watch event changed (after the reflector stored it).
    pub fn record(&self, event: &watcher::Event<Proxy>) {
        match event {
            watcher::Event::Apply(p) => {
                if let Pending::Some(set) = &mut *self.lock() {
                    set.insert(ObjectRef::from_obj(p));
                }
            }
            // Nothing to look at in a Proxy that is gone; forgetting it
            // keeps the record no larger than the fleet where nothing
            // takes it (a replica that does not lead).
            watcher::Event::Delete(p) => {
                if let Pending::Some(set) = &mut *self.lock() {
                    set.remove(&ObjectRef::from_obj(p));
                }
                return;
            }
            // A (re)list replaces the cache: every Proxy may differ.
            watcher::Event::InitDone => *self.lock() = Pending::All,
            watcher::Event::Init | watcher::Event::InitApply(_) => return,
        }
        self.notify.notify_one();
    }

    /// Marks every Proxy changed and wakes the consumer (a new consumer's
    /// first pass).
    pub fn mark_all(&self) {
        *self.lock() = Pending::All;
        self.notify.notify_one();
    }

    /// Waits until something is recorded after the last `take` (at once
    /// when it already was).
    pub async fn changed(&self) {
        self.notify.notified().await;
    }

    /// The changed Proxies still in `store` (deleted ones are gone from
    /// it), and clears the record.
    pub fn take(&self, store: &Store<Proxy>) -> Vec<Arc<Proxy>> {
        let taken = std::mem::replace(&mut *self.lock(), Pending::Some(HashSet::new()));
        match taken {
            Pending::All => store.state(),
            Pending::Some(refs) => refs.iter().filter_map(|r| store.get(r)).collect(),
        }
    }

    #[cfg(test)]
    fn pending_len(&self) -> usize {
        match &*self.lock() {
            Pending::Some(set) => set.len(),
            Pending::All => usize::MAX,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // The set stays valid whatever a panicking holder did.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ProxySpec;
    use kube::runtime::reflector::store::Writer;

    fn proxy(name: &str) -> Proxy {
        let spec: ProxySpec = serde_json::from_value(serde_json::json!({"provider": "p"})).unwrap();
        let mut p = Proxy::new(name, spec);
        p.metadata.namespace = Some("ns".into());
        p
    }

    fn names(v: &[Arc<Proxy>]) -> Vec<String> {
        let mut n: Vec<String> = v.iter().filter_map(|p| p.metadata.name.clone()).collect();
        n.sort();
        n
    }

    #[test]
    fn a_pass_sees_every_proxy_first_then_only_the_changed_ones() {
        let mut writer = Writer::<Proxy>::default();
        let store = writer.as_reader();
        for n in ["a", "b", "c"] {
            writer.apply_watcher_event(&watcher::Event::Apply(proxy(n)));
        }
        let changes = ProxyChanges::default();
        assert_eq!(
            names(&changes.take(&store)),
            ["a", "b", "c"],
            "first pass: all"
        );
        assert!(changes.take(&store).is_empty(), "nothing changed since");

        changes.record(&watcher::Event::Apply(proxy("b")));
        changes.record(&watcher::Event::Apply(proxy("b")));
        assert_eq!(names(&changes.take(&store)), ["b"], "once, however often");

        changes.record(&watcher::Event::Apply(proxy("c")));
        let gone = watcher::Event::Delete(proxy("c"));
        writer.apply_watcher_event(&gone);
        changes.record(&gone);
        assert!(
            changes.take(&store).is_empty(),
            "a deleted Proxy is not looked at"
        );
        // Nor kept: a replica that never takes holds no more than its fleet.
        for i in 0..100 {
            changes.record(&watcher::Event::Apply(proxy(&format!("gone-{i}"))));
            changes.record(&watcher::Event::Delete(proxy(&format!("gone-{i}"))));
        }
        assert_eq!(changes.pending_len(), 0);

        changes.record(&watcher::Event::InitApply(proxy("a")));
        assert!(
            changes.take(&store).is_empty(),
            "a relist counts at its end"
        );
        changes.record(&watcher::Event::InitDone);
        assert_eq!(
            names(&changes.take(&store)),
            ["a", "b"],
            "after a relist: all"
        );

        changes.mark_all();
        assert_eq!(names(&changes.take(&store)), ["a", "b"]);
    }

    #[tokio::test]
    async fn a_change_recorded_before_the_wait_is_not_missed() {
        let changes = ProxyChanges::default();
        changes.record(&watcher::Event::Apply(proxy("a")));
        tokio::time::timeout(std::time::Duration::from_secs(5), changes.changed())
            .await
            .expect("the recorded change wakes the consumer");
    }
}
