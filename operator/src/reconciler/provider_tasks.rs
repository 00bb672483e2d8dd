//! The per-Proxy provider tasks: one provider call in flight per Proxy,
//! a semaphore over all of them, each under its deadline; a call that
//! outlives its reconcile triggers one when it ends, and a deletion pass
//! joins a Create in flight instead of cancelling it. Also the per-Proxy
//! step memory, the status last written and the failed-reconcile count.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument;

use kube::runtime::reflector::ObjectRef;
use prometheus_client::metrics::gauge::Gauge;
use provider_api::{Error as ProviderError, Identifier, Providers};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::task::TaskTracker;

use super::Timeouts;
use crate::crd::Proxy;

/// A deletion pass's join of the Proxy's Create in flight.
pub(super) enum Joined {
    /// No Create in flight.
    None,
    /// It ended with this outcome.
    Done(fleet::Outcome),
    /// It still runs (kept in flight).
    Running,
}

/// What a provider call is, to tell whether a call in flight is the one a
/// step asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CallKey {
    Create(Identifier),
    Get(String),
    Delete(String),
}

impl CallKey {
    fn of(call: &fleet::Call) -> CallKey {
        match call {
            fleet::Call::Create { provider, .. } => CallKey::Create(provider.clone()),
            fleet::Call::Get(id) => CallKey::Get(id.to_string()),
            fleet::Call::Delete(id) => CallKey::Delete(id.to_string()),
        }
    }
}

/// A spawned task, aborted when this is dropped (its owner is the slot).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct InFlight {
    key: CallKey,
    rx: oneshot::Receiver<fleet::Outcome>,
    /// Set when no reconcile waits for the outcome any more: the task then
    /// triggers a reconcile when it ends (a waiter that gets the outcome
    /// needs none, and one would loop).
    detached: Arc<AtomicBool>,
    _task: AbortOnDrop,
}

#[derive(Default)]
struct Slot {
    /// Consecutive failed reconciles (the error policy's backoff).
    errors: u32,
    memory: fleet::Memory,
    /// The reconciler's part of the status as last written.
    written: Option<fleet::ProxyStatus>,
    op: Option<InFlight>,
    /// The finalizer was released: the Proxy is gone or going without us.
    released: bool,
}

/// The per-Proxy provider tasks and step memory, keyed by the Proxy's UID.
/// Dropping it (or [`ProviderTasks::shutdown`]) aborts every task; its
/// [`tracker`](ProviderTasks::tracker) tells when they have all ended.
pub struct ProviderTasks {
    slots: Mutex<HashMap<String, Slot>>,
    permits: Arc<Semaphore>,
    trigger: mpsc::Sender<ObjectRef<Proxy>>,
    gauge: Gauge,
    tracker: TaskTracker,
}

/// Decrements the in-flight gauge however the task ends.
struct GaugeGuard(Gauge);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl ProviderTasks {
    /// Tasks bounded to `concurrency` calls in flight; each finished call
    /// sends its Proxy to `trigger` (dropped when the queue is full: the
    /// pending poll catches it).
    pub fn new(concurrency: usize, trigger: mpsc::Sender<ObjectRef<Proxy>>, gauge: Gauge) -> Self {
        ProviderTasks {
            slots: Mutex::new(HashMap::new()),
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            trigger,
            gauge,
            tracker: TaskTracker::new(),
        }
    }

    /// Tracks every task spawned here, until its future is dropped (it
    /// returned or was aborted): close it and wait on it to know that no
    /// call of these tasks runs any more.
    pub fn tracker(&self) -> TaskTracker {
        self.tracker.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn memory(&self, uid: &str) -> fleet::Memory {
        self.lock()
            .get(uid)
            .map(|s| s.memory.clone())
            .unwrap_or_default()
    }

    pub(super) fn set_memory(&self, uid: &str, memory: fleet::Memory) {
        self.lock().entry(uid.to_owned()).or_default().memory = memory;
    }

    pub(super) fn written(&self, uid: &str) -> Option<fleet::ProxyStatus> {
        self.lock().get(uid).and_then(|s| s.written.clone())
    }

    pub(super) fn set_written(&self, uid: &str, status: fleet::ProxyStatus) {
        self.lock().entry(uid.to_owned()).or_default().written = Some(status);
    }

    /// Counts a failed reconcile of the Proxy `uid`; returns how many
    /// failed in a row.
    pub(super) fn failed(&self, uid: &str) -> u32 {
        let mut slots = self.lock();
        let slot = slots.entry(uid.to_owned()).or_default();
        slot.errors = slot.errors.saturating_add(1);
        slot.errors
    }

    /// A reconcile of the Proxy `uid` succeeded: the next failure starts
    /// the backoff afresh.
    pub(super) fn succeeded(&self, uid: &str) {
        if let Some(slot) = self.lock().get_mut(uid) {
            slot.errors = 0;
        }
    }

    /// Forgets a Proxy: its call in flight, if any, is cancelled.
    pub fn forget(&self, uid: &str) {
        let slot = self.lock().remove(uid);
        drop(slot);
    }

    /// Records that the Proxy `uid`'s finalizer was released: its call and
    /// memory are forgotten, and [`released`](Self::released) answers true
    /// until [`retain`](Self::retain) drops it (the cache no longer has it).
    pub(super) fn release(&self, uid: &str) {
        let old = self.lock().insert(
            uid.to_owned(),
            Slot {
                released: true,
                ..Slot::default()
            },
        );
        drop(old);
    }

    /// Whether the Proxy `uid`'s finalizer was released.
    pub(super) fn released(&self, uid: &str) -> bool {
        self.lock().get(uid).is_some_and(|s| s.released)
    }

    /// Forgets every Proxy whose UID `keep` refuses (objects gone without
    /// a final reconcile, e.g. a finalizer removed by hand).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<Slot> = {
            let mut slots = self.lock();
            let uids: Vec<String> = slots.keys().filter(|u| !keep(u)).cloned().collect();
            uids.iter().filter_map(|u| slots.remove(u)).collect()
        };
        drop(gone);
    }

    /// Aborts every task.
    pub fn shutdown(&self) {
        let all: Vec<Slot> = self.lock().drain().map(|(_, s)| s).collect();
        drop(all);
    }

    /// Joins the Create in flight for the Proxy `uid`, if any, waiting at
    /// most `wait` for its outcome; a Create still running stays in flight
    /// (the Proxy is triggered when it ends).
    pub(super) async fn join_create(&self, uid: &str, wait: Duration) -> Joined {
        let op = {
            let mut slots = self.lock();
            let Some(slot) = slots.get_mut(uid) else {
                return Joined::None;
            };
            match slot.op.take() {
                Some(op) if matches!(op.key, CallKey::Create(_)) => op,
                other => {
                    slot.op = other;
                    return Joined::None;
                }
            }
        };
        match self.await_outcome(uid, op, wait).await {
            Some(outcome) => Joined::Done(outcome),
            None => Joined::Running,
        }
    }

    /// Waits at most `wait` for `op`'s outcome; `None` (the call detached
    /// and kept in `uid`'s slot) when it is still running.
    async fn await_outcome(
        &self,
        uid: &str,
        mut op: InFlight,
        wait: Duration,
    ) -> Option<fleet::Outcome> {
        match tokio::time::timeout(wait, &mut op.rx).await {
            Ok(Ok(outcome)) => Some(outcome),
            Ok(Err(_)) => Some(lost_outcome(&op.key)),
            Err(_) => {
                op.detached.store(true, Ordering::SeqCst);
                // An outcome that arrived before the flag was set sent no
                // trigger: take it now.
                match op.rx.try_recv() {
                    Ok(outcome) => return Some(outcome),
                    Err(oneshot::error::TryRecvError::Closed) => {
                        return Some(lost_outcome(&op.key));
                    }
                    Err(oneshot::error::TryRecvError::Empty) => {}
                }
                self.lock().entry(uid.to_owned()).or_default().op = Some(op);
                None
            }
        }
    }

    /// Makes `call` for the Proxy `uid`, or joins the same call already in
    /// flight; waits at most `timeouts.reconcile_wait` for its outcome.
    /// `None`: still running (the Proxy is triggered when it ends).
    pub(super) async fn run(
        &self,
        providers: &Providers,
        uid: &str,
        objref: ObjectRef<Proxy>,
        call: fleet::Call,
        timeouts: Timeouts,
    ) -> Option<fleet::Outcome> {
        let key = CallKey::of(&call);
        let existing = self.lock().get_mut(uid).and_then(|s| s.op.take());
        let op = match existing {
            Some(op) if op.key == key => op,
            // Another call (e.g. a Get while deletion wants a Delete): the
            // old one is cancelled as it drops.
            _ => self.spawn(providers, key, objref, call, timeouts),
        };
        self.await_outcome(uid, op, timeouts.reconcile_wait).await
    }

    fn spawn(
        &self,
        providers: &Providers,
        key: CallKey,
        objref: ObjectRef<Proxy>,
        call: fleet::Call,
        timeouts: Timeouts,
    ) -> InFlight {
        let (tx, rx) = oneshot::channel();
        let detached = Arc::new(AtomicBool::new(false));
        let task_detached = detached.clone();
        let permits = self.permits.clone();
        let trigger = self.trigger.clone();
        let gauge = self.gauge.clone();
        let entry = match &call {
            fleet::Call::Create { provider, .. } => provider.clone(),
            fleet::Call::Get(id) | fleet::Call::Delete(id) => id.provider().clone(),
        };
        let provider = providers.get(&entry).cloned();
        // The reconcile that started the call is its span's parent, so a
        // trace follows it into the task (even past the reconcile's end,
        // when the call outlives `reconcile_wait`).
        let parent = tracing::Span::current();
        let task = self.tracker.spawn(
            async move {
                let Ok(_permit) = permits.acquire_owned().await else {
                    return;
                };
                gauge.inc();
                let _gauge = GaugeGuard(gauge);
                let outcome = match provider {
                    None => unknown_entry(call, &entry),
                    Some(p) => execute(&*p, call, timeouts).await,
                };
                let _ = tx.send(outcome);
                if task_detached.load(Ordering::SeqCst) {
                    // Bounded queue: when full, the pending poll picks this up.
                    let _ = trigger.try_send(objref);
                }
            }
            .instrument(parent),
        );
        InFlight {
            key,
            rx,
            detached,
            _task: AbortOnDrop(task),
        }
    }
}

async fn execute(
    p: &dyn provider_api::Provider,
    call: fleet::Call,
    timeouts: Timeouts,
) -> fleet::Outcome {
    let expired = |what: &str, d: Duration| {
        ProviderError::transient(format!(
            "{what} did not finish within its deadline of {d:?}"
        ))
    };
    match call {
        fleet::Call::Create { request, .. } => {
            let d = timeouts.create;
            fleet::Outcome::Created(
                tokio::time::timeout(d, p.create(&request))
                    .await
                    .unwrap_or_else(|_| Err(expired("create", d))),
            )
        }
        fleet::Call::Get(id) => {
            let d = timeouts.call;
            fleet::Outcome::Got(
                tokio::time::timeout(d, p.get(&id))
                    .await
                    .unwrap_or_else(|_| Err(expired("get", d))),
            )
        }
        fleet::Call::Delete(id) => {
            let d = timeouts.call;
            fleet::Outcome::Deleted(
                tokio::time::timeout(d, p.delete(&id))
                    .await
                    .unwrap_or_else(|_| Err(expired("delete", d))),
            )
        }
    }
}

fn unknown_entry(call: fleet::Call, entry: &Identifier) -> fleet::Outcome {
    let e =
        || ProviderError::permanent(format!("no provider entry {entry} in the providers config"));
    match call {
        fleet::Call::Create { .. } => fleet::Outcome::Created(Err(e())),
        fleet::Call::Get(_) => fleet::Outcome::Got(Err(e())),
        fleet::Call::Delete(_) => fleet::Outcome::Deleted(Err(e())),
    }
}

fn lost_outcome(key: &CallKey) -> fleet::Outcome {
    let e = ProviderError::transient("the provider call's task ended without an answer");
    match key {
        CallKey::Create(_) => fleet::Outcome::Created(Err(e)),
        CallKey::Get(_) => fleet::Outcome::Got(Err(e)),
        CallKey::Delete(_) => fleet::Outcome::Deleted(Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn failed_reconciles_back_off_per_proxy_and_a_success_starts_afresh() {
        let (tx, _rx) = mpsc::channel(1);
        let tasks = ProviderTasks::new(1, tx, Gauge::default());
        let delay =
            |uid: &str| super::super::ERROR_BACKOFF.delay(tasks.failed(uid), fleet::Jitter::NONE);
        let secs: Vec<u64> = (0..8).map(|_| delay("a").as_secs()).collect();
        assert_eq!(secs, [5, 10, 20, 40, 80, 160, 300, 300]);
        // Another Proxy's failures are its own.
        assert_eq!(delay("b"), Duration::from_secs(5));
        tasks.succeeded("a");
        assert_eq!(delay("a"), Duration::from_secs(5));
        // Jitter shortens a delay by at most half.
        let jittered = super::super::ERROR_BACKOFF.delay(3, fleet::Jitter::MAX);
        assert_eq!(jittered, Duration::from_secs(10));
    }
}
