//! The Proxy controller: kube-runtime's `Controller` and `finalizer` around
//! `fleet::Reconciler::step`.
//!
//! One reconcile pass runs the step loop `fleet` documents: step, write the
//! status if the reconciler's part of it changed (server-side apply, field
//! manager [`RECONCILER_MANAGER`]), record the step's Events, then make the
//! call it asks for, requeue, wait for a change or release the finalizer.
//!
//! Provider calls run in **per-Proxy tasks** ([`ProviderTasks`]), not in the
//! reconcile: a pass waits for its call at most `reconcile_wait`, then
//! returns and lets the call run on (under its own deadline); when the call
//! ends, its task triggers a reconcile of that Proxy, which picks the result
//! up. So a cold image fill that takes minutes is never restarted by a
//! reconcile timeout, never holds a reconcile slot (one frozen host does not
//! stall other Proxies), and deleting the Proxy cancels it. At most one call
//! per Proxy is in flight; calls in flight overall are bounded by a
//! semaphore.

use provider_api::error::chain;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder};
use kube::runtime::finalizer::{self, Event as FinalizerEvent};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use prometheus_client::metrics::gauge::Gauge;
use provider_api::{Error as ProviderError, Identifier, Providers};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::task::TaskTracker;

use crate::crd::{FINALIZER, Proxy};
use crate::metrics::OperatorMetrics;

/// The field manager of the reconciler's status writes.
pub const RECONCILER_MANAGER: &str = "egress-operator-reconciler";
/// How often a Proxy whose provider call is still running is looked at
/// again, in case the completion trigger was dropped (its queue was full).
const PENDING_POLL: Duration = Duration::from_secs(30);
/// The longest Event note (Kubernetes allows 1 kB).
const MAX_NOTE: usize = 1000;

/// Provider call deadlines.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// `create` (covers a cold base-image fill).
    pub create: Duration,
    /// `get` and `delete`.
    pub call: Duration,
    /// How long one pass waits for a call before letting it run on.
    pub reconcile_wait: Duration,
}

/// Everything a reconcile pass uses.
pub struct Ctx {
    /// The API client (the operator's own identity).
    pub client: Client,
    /// The reconcile step and its policy.
    pub reconciler: fleet::Reconciler,
    /// The provider entries (instrumented).
    pub providers: Providers,
    /// Their names.
    pub provider_names: BTreeSet<Identifier>,
    /// Publishes Events (events.k8s.io/v1).
    pub recorder: Recorder,
    /// The per-Proxy provider tasks.
    pub tasks: ProviderTasks,
    /// Metrics.
    pub metrics: OperatorMetrics,
    /// Deadlines.
    pub timeouts: Timeouts,
}

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object lacks a namespace, name or UID (the API server always sets
    /// them).
    #[error("Proxy object without {0}")]
    Incomplete(&'static str),
    /// The status write failed.
    #[error("write status of Proxy {name}")]
    WriteStatus {
        /// The Proxy.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deletion is not finished; the finalizer stays (not a failure: the
    /// error path is how `finalizer` keeps it).
    #[error("deletion pending; retry in {0:?}")]
    DeletePending(Duration),
}

/// A deletion pass's join of the Proxy's Create in flight.
enum Joined {
    /// No Create in flight.
    None,
    /// It ended with this outcome.
    Done(fleet::Outcome),
    /// It still runs (kept in flight).
    Running,
}

/// What the pass decided.
enum Drive {
    Requeue(Duration),
    Await,
    Release,
}

/// The controller's reconcile function.
///
/// # Errors
/// A failed status write, or (as an error, so the finalizer stays) a
/// deletion still in progress.
pub async fn reconcile(
    proxy: Arc<Proxy>,
    ctx: Arc<Ctx>,
) -> Result<Action, finalizer::Error<Error>> {
    let ns = proxy
        .namespace()
        .ok_or(finalizer::Error::ApplyFailed(Error::Incomplete(
            "namespace",
        )))?;
    let api: Api<Proxy> = Api::namespaced(ctx.client.clone(), &ns);
    let result = finalizer::finalizer(&api, FINALIZER, proxy, |event| async {
        match event {
            FinalizerEvent::Apply(p) => match drive(&p, &ctx).await? {
                Drive::Requeue(d) => Ok(Action::requeue(d)),
                Drive::Await | Drive::Release => Ok(Action::await_change()),
            },
            FinalizerEvent::Cleanup(p) => match drive(&p, &ctx).await? {
                Drive::Release => Ok(Action::await_change()),
                Drive::Requeue(d) => Err(Error::DeletePending(d)),
                Drive::Await => Err(Error::DeletePending(
                    ctx.reconciler.policy().permanent_retry,
                )),
            },
        }
    })
    .await;
    ctx.metrics.reconcile(match &result {
        Ok(_) => "ok",
        Err(finalizer::Error::CleanupFailed(Error::DeletePending(_))) => "pending",
        Err(_) => "error",
    });
    result
}

/// The controller's error policy: a pending deletion retries when the step
/// said; anything else after a short delay.
pub fn error_policy(proxy: Arc<Proxy>, err: &finalizer::Error<Error>, _: Arc<Ctx>) -> Action {
    match err {
        finalizer::Error::CleanupFailed(Error::DeletePending(d)) => Action::requeue(*d),
        e => {
            tracing::warn!(
                proxy = %format!("{}/{}", proxy.namespace().unwrap_or_default(), proxy.name_any()),
                error = %chain(e),
                "reconcile failed"
            );
            Action::requeue(Duration::from_secs(5))
        }
    }
}

/// One pass of the step loop.
async fn drive(p: &Proxy, ctx: &Ctx) -> Result<Drive, Error> {
    let meta = fleet::ProxyMeta {
        namespace: p.namespace().ok_or(Error::Incomplete("namespace"))?,
        name: p.metadata.name.clone().ok_or(Error::Incomplete("name"))?,
        uid: p.metadata.uid.clone().ok_or(Error::Incomplete("uid"))?,
        generation: p.metadata.generation.unwrap_or(0),
        deleting: p.metadata.deletion_timestamp.is_some(),
        abandon: p
            .annotations()
            .get(fleet::ABANDON_ANNOTATION)
            .is_some_and(|v| v == "true"),
    };
    let spec = &p.spec.inner;
    let objref = ObjectRef::from_obj(p);
    let cached = p.status.clone().unwrap_or_default();
    // The watch cache can lag this reconciler's own last write (a reconcile
    // triggered before that write's event arrived). Its fields are written
    // by it alone, so the status it last wrote wins over the cached copy: a
    // stale copy would repeat a Create and its Event. The health engine's
    // part (`Healthy`, `probedInstance`) is taken from the cache.
    let mut written = match ctx.tasks.written(&meta.uid) {
        Some(mine) => mine.with_health_of(&cached),
        None => cached,
    };
    let mut status = written.clone();
    let mut memory = ctx.tasks.memory(&meta.uid);
    // The step looks at the Secret only before a Create, but a Create can
    // follow any Get in the pass (replacement, vanished instance), so the
    // Secret named by the spec in force is read on every pass.
    // TODO(fleet): a step that asks for the Secret (e.g. `Next::ReadSecret`)
    // would spare the read on passes that only poll.
    let user_data = match ctx.reconciler.secret_to_read(spec, &status) {
        Some(r) if !meta.deleting => read_secret(&ctx.client, &meta.namespace, r).await,
        _ => fleet::UserDataRead::NotRequested,
    };
    let mut outcome = None;
    // Deleting with nothing recorded while a Create is in flight (the
    // first one, or a replacement's): its instance would be made after the
    // finalizer let go, an orphan whose volumes nothing lists. Join it
    // (bounded by --create-timeout, through the pending poll) and let the
    // step record and delete what it made.
    if meta.deleting && status.provider_id.is_none() {
        match ctx
            .tasks
            .join_create(&meta.uid, ctx.timeouts.reconcile_wait)
            .await
        {
            Joined::Done(o) => outcome = Some(o),
            Joined::Running => return Ok(Drive::Requeue(PENDING_POLL)),
            Joined::None => {}
        }
    }
    // One step per call and a last one; the bound only guards against a
    // step that never settles.
    for _ in 0..=fleet::MAX_CALLS_PER_PASS + 1 {
        let step = ctx.reconciler.step(fleet::StepInput {
            meta: &meta,
            spec,
            status: &status,
            memory: &memory,
            user_data: &user_data,
            providers: &ctx.provider_names,
            outcome: outcome.take(),
            now: SystemTime::now(),
            jitter: jitter(),
        });
        let mine = step.status.without_health();
        if mine != written.without_health() {
            write_status(ctx, &meta.namespace, &meta.name, &mine).await?;
            ctx.tasks.set_written(&meta.uid, mine);
            written = step.status.clone();
        }
        for event in &step.events {
            publish(ctx, p, event).await;
        }
        memory = step.memory;
        ctx.tasks.set_memory(&meta.uid, memory.clone());
        status = step.status;
        match step.next {
            fleet::Next::Call(call) => {
                let r = ctx
                    .tasks
                    .run(
                        &ctx.providers,
                        &meta.uid,
                        objref.clone(),
                        call,
                        ctx.timeouts,
                    )
                    .await;
                match r {
                    Some(o) => outcome = Some(o),
                    None => return Ok(Drive::Requeue(PENDING_POLL)),
                }
            }
            fleet::Next::Requeue(d) => return Ok(Drive::Requeue(d)),
            fleet::Next::AwaitChange => return Ok(Drive::Await),
            fleet::Next::Release => {
                ctx.tasks.forget(&meta.uid);
                return Ok(Drive::Release);
            }
        }
    }
    Ok(Drive::Requeue(Duration::from_secs(1)))
}

/// A jitter from the standard library's per-process random hasher keys.
fn jitter() -> fleet::Jitter {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    fleet::Jitter::from_per_mille(u32::try_from(h.finish() % 1001).unwrap_or(0))
}

async fn read_secret(client: &Client, ns: &str, r: &fleet::SecretRef) -> fleet::UserDataRead {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    match api.get_opt(&r.name).await {
        Ok(None) => fleet::UserDataRead::SecretNotFound,
        Ok(Some(secret)) => match secret.data.and_then(|mut d| d.remove(&r.key)) {
            Some(bytes) => fleet::UserDataRead::Found(bytes.0),
            None => fleet::UserDataRead::KeyNotFound,
        },
        // The API error names the request, never the data.
        Err(e) => fleet::UserDataRead::Unavailable(chain(&e)),
    }
}

async fn write_status(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    status: &fleet::ProxyStatus,
) -> Result<(), Error> {
    let api: Api<Proxy> = Api::namespaced(ctx.client.clone(), ns);
    let body = serde_json::json!({
        "apiVersion": Proxy::api_version(&()),
        "kind": Proxy::kind(&()),
        "metadata": { "name": name },
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(RECONCILER_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map_err(|source| Error::WriteStatus {
        name: format!("{ns}/{name}"),
        source,
    })?;
    ctx.metrics.status_write("reconciler");
    Ok(())
}

async fn publish(ctx: &Ctx, p: &Proxy, event: &fleet::Event) {
    let mut note = event.message.clone();
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
    }
    let ev = KubeEvent {
        type_: match event.kind {
            fleet::EventKind::Normal => EventType::Normal,
            fleet::EventKind::Warning => EventType::Warning,
        },
        reason: event.reason.as_str().to_owned(),
        note: Some(note),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    match ctx.recorder.publish(&ev, &p.object_ref(&())).await {
        Ok(()) => ctx.metrics.event(),
        Err(e) => tracing::warn!(
            proxy = %format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()),
            reason = event.reason.as_str(),
            error = %chain(&e),
            "event not recorded"
        ),
    }
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
    memory: fleet::Memory,
    /// The reconciler's part of the status as last written.
    written: Option<fleet::ProxyStatus>,
    op: Option<InFlight>,
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

    fn memory(&self, uid: &str) -> fleet::Memory {
        self.lock()
            .get(uid)
            .map(|s| s.memory.clone())
            .unwrap_or_default()
    }

    fn set_memory(&self, uid: &str, memory: fleet::Memory) {
        self.lock().entry(uid.to_owned()).or_default().memory = memory;
    }

    fn written(&self, uid: &str) -> Option<fleet::ProxyStatus> {
        self.lock().get(uid).and_then(|s| s.written.clone())
    }

    fn set_written(&self, uid: &str, status: fleet::ProxyStatus) {
        self.lock().entry(uid.to_owned()).or_default().written = Some(status);
    }

    /// Forgets a Proxy: its call in flight, if any, is cancelled.
    pub fn forget(&self, uid: &str) {
        let slot = self.lock().remove(uid);
        drop(slot);
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
    async fn join_create(&self, uid: &str, wait: Duration) -> Joined {
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
    async fn run(
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
        let task = self.tracker.spawn(async move {
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
        });
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

/// A stream of a receiver's items (ends when every sender is gone).
pub fn receiver_stream<T: Send + 'static>(
    rx: mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) })
}
