//! The Proxy controller: kube-runtime's `Controller` and `finalizer` around
//! `fleet::Reconciler::step`.
//!
//! One reconcile pass runs the step loop `fleet` documents: step, write the
//! status if the reconciler's part of it changed (server-side apply, field
//! manager [`RECONCILER_MANAGER`]), record the step's Events, then make the
//! call it asks for, requeue, wait for a change or release the finalizer.
//! The one exception: the `Creating` status a Create announces is written
//! only if the call outlives the pass's wait (`reconcile_wait`).
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
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, Event as FinalizerEvent};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use provider_api::{Identifier, Providers};
use tokio::sync::mpsc;

use crate::crd::{FINALIZER, Proxy};
use crate::metrics::OperatorMetrics;

mod provider_tasks;

use provider_tasks::Joined;
pub use provider_tasks::ProviderTasks;

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
    /// The Recorder's reporter, for the Events it cannot name (a Proxy
    /// name too long for its `<name>.<nanoseconds>` Event names).
    pub reporter: Reporter,
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
    let proxy_uid = proxy.metadata.uid.clone();
    let started = std::time::Instant::now();
    let deleting = proxy.metadata.deletion_timestamp.is_some();
    let had_finalizer = proxy.finalizers().iter().any(|f| f == FINALIZER);
    // A pass queued before this term released the finalizer, reading a
    // cache that has not shown the release yet: the Proxy is gone (or
    // going without us). Running the cleanup again would only write to it
    // (answered 404), once per deleted Proxy.
    if deleting
        && let Some(uid) = &proxy_uid
        && ctx.tasks.released(uid)
    {
        return Ok(Action::await_change());
    }
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
    if result.is_ok()
        && let Some(uid) = &proxy_uid
    {
        if deleting && had_finalizer {
            // The cleanup finished and `finalizer` removed ours.
            ctx.tasks.release(uid);
        } else {
            ctx.tasks.succeeded(uid);
        }
    }
    let outcome = match &result {
        Ok(_) => "ok",
        Err(finalizer::Error::CleanupFailed(Error::DeletePending(_))) => "pending",
        Err(_) => "error",
    };
    ctx.metrics.reconcile(outcome, started.elapsed());
    if let Err(e) = &result
        && let Some(class) = error_class(e)
    {
        ctx.metrics.reconcile_error(class);
    }
    result
}

/// Retries of a failed reconcile: 5 s doubling to 5 min, jittered, per
/// Proxy (a status write refused for good, or an API server shedding load,
/// must not get every Proxy's write every 5 s).
const ERROR_BACKOFF: fleet::Backoff =
    fleet::Backoff::new(Duration::from_secs(5), Duration::from_secs(300));

/// The controller's error policy: a pending deletion retries when the step
/// said; anything else after [`ERROR_BACKOFF`] for its failures in a row.
pub fn error_policy(proxy: Arc<Proxy>, err: &finalizer::Error<Error>, ctx: Arc<Ctx>) -> Action {
    match err {
        finalizer::Error::CleanupFailed(Error::DeletePending(d)) => Action::requeue(*d),
        // Gone while this pass worked on it (its finalizer was released by
        // an earlier pass the cache had not shown yet): nothing left to do.
        e if gone(e) => {
            tracing::debug!(proxy = %proxy.name_any(), "the Proxy is gone");
            Action::await_change()
        }
        e => {
            let failures = proxy
                .metadata
                .uid
                .as_deref()
                .map_or(1, |uid| ctx.tasks.failed(uid));
            let delay = ERROR_BACKOFF.delay(failures, jitter());
            tracing::warn!(
                proxy = %format!("{}/{}", proxy.namespace().unwrap_or_default(), proxy.name_any()),
                error = %chain(e),
                failures,
                retry_in = ?delay,
                "reconcile failed"
            );
            Action::requeue(delay)
        }
    }
}

/// What failed, for `reconcile_errors_total`: `None` for a deletion still
/// in progress (not a failure).
fn error_class(err: &finalizer::Error<Error>) -> Option<&'static str> {
    if gone(err) {
        return Some("gone");
    }
    Some(match err {
        finalizer::Error::CleanupFailed(Error::DeletePending(_)) => return None,
        finalizer::Error::AddFinalizer(_) => "add_finalizer",
        finalizer::Error::RemoveFinalizer(_) => "remove_finalizer",
        finalizer::Error::ApplyFailed(Error::WriteStatus { .. })
        | finalizer::Error::CleanupFailed(Error::WriteStatus { .. }) => "status_write",
        finalizer::Error::ApplyFailed(Error::Incomplete(_))
        | finalizer::Error::CleanupFailed(Error::Incomplete(_))
        | finalizer::Error::UnnamedObject => "incomplete",
        _ => "other",
    })
}

/// Whether the pass failed only because the Proxy no longer exists.
fn gone(err: &finalizer::Error<Error>) -> bool {
    match err {
        finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => {
            crate::gone::is_not_found(e)
        }
        finalizer::Error::ApplyFailed(Error::WriteStatus { source, .. })
        | finalizer::Error::CleanupFailed(Error::WriteStatus { source, .. }) => {
            crate::gone::is_not_found(source)
        }
        _ => false,
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
        pool_member: p
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && o.kind == "ProxyPool"),
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
        let changed = mine != written.without_health();
        // The status a Create announces (`Creating`) is written only if the
        // call outlives this pass's wait: a create that answers within it
        // goes straight to its result, one status write instead of two.
        // Nothing depends on the announcement: the instance's name is the
        // Proxy's, so a Create repeated after a crash finds it.
        let deferred =
            changed && matches!(step.next, fleet::Next::Call(fleet::Call::Create { .. }));
        if changed && !deferred {
            write_status(ctx, &meta.namespace, &meta.name, &mine).await?;
            ctx.tasks.set_written(&meta.uid, mine.clone());
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
                    None => {
                        if deferred {
                            write_status(ctx, &meta.namespace, &meta.name, &mine).await?;
                            ctx.tasks.set_written(&meta.uid, mine);
                        }
                        return Ok(Drive::Requeue(PENDING_POLL));
                    }
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
pub(crate) fn jitter() -> fleet::Jitter {
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
    crate::status_apply::apply_status(&api, name, RECONCILER_MANAGER, status)
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
    let published = if recorder_names_fit(&p.name_any()) {
        ctx.recorder.publish(&ev, &p.object_ref(&())).await
    } else {
        publish_named(ctx, p, &ev).await
    };
    match published {
        Ok(()) => ctx.metrics.event(event.reason.as_str()),
        Err(e) => tracing::warn!(
            proxy = %format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()),
            reason = event.reason.as_str(),
            error = %chain(&e),
            "event not recorded"
        ),
    }
}

/// The longest object name (a DNS subdomain).
const MAX_NAME: usize = 253;
/// kube's Recorder names an Event `<object>.<nanoseconds, hex>` (16 hex
/// digits until 2262): the object's name must leave room for them.
fn recorder_names_fit(object: &str) -> bool {
    object.len() + 1 + 16 <= MAX_NAME
}

/// An Event name for `object` at `nanos`: the object's name cut to fit
/// (a valid name: never ending in `-` or `.`), then `.` and the hex time.
fn short_event_name(object: &str, nanos: u128) -> String {
    let suffix = format!(".{nanos:x}");
    let room = MAX_NAME.saturating_sub(suffix.len());
    // Object names are ASCII (DNS subdomains); `get` keeps this total.
    let cut = object.get(..room.min(object.len())).unwrap_or("");
    format!("{}{suffix}", cut.trim_end_matches(['-', '.']))
}

/// Creates the Event the Recorder would, under a name that fits (a Proxy
/// name longer than 236 characters); such Events are not merged into
/// series.
async fn publish_named(ctx: &Ctx, p: &Proxy, ev: &KubeEvent) -> Result<(), kube::Error> {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    let now = k8s_openapi::jiff::Timestamp::now();
    let nanos = u128::try_from(now.as_nanosecond()).unwrap_or(0);
    let namespace = p.namespace().unwrap_or_default();
    let event = K8sEvent {
        action: Some(ev.action.clone()),
        reason: Some(ev.reason.clone()),
        note: ev.note.clone(),
        event_time: Some(MicroTime(now)),
        regarding: Some(p.object_ref(&())),
        reporting_controller: Some(ctx.reporter.controller.clone()),
        reporting_instance: Some(
            ctx.reporter
                .instance
                .clone()
                .unwrap_or_else(|| ctx.reporter.controller.clone()),
        ),
        type_: Some(
            match ev.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
        ),
        metadata: ObjectMeta {
            namespace: Some(namespace.clone()),
            name: Some(short_event_name(&p.name_any(), nanos)),
            ..ObjectMeta::default()
        },
        ..K8sEvent::default()
    };
    let api: Api<K8sEvent> = Api::namespaced(ctx.client.clone(), &namespace);
    api.create(&kube::api::PostParams::default(), &event)
        .await
        .map(|_| ())
}

/// A stream of a receiver's items (ends when every sender is gone).
pub fn receiver_stream<T: Send + 'static>(
    rx: mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_proxy_names_get_event_names_that_fit() {
        let nanos = 0x1999_9999_9999_9999_u128;
        assert!(recorder_names_fit(&"a".repeat(236)));
        assert!(!recorder_names_fit(&"a".repeat(237)));
        for len in [237, 240, 253] {
            let name = short_event_name(&"a".repeat(len), nanos);
            assert_eq!(name.len(), 253, "{len}");
            assert!(name.ends_with(".1999999999999999"), "{name}");
        }
        // Never a label ending in '-' or '.' before the suffix.
        let object = format!("{}-{}", "a".repeat(235), "b".repeat(17));
        let name = short_event_name(&object, nanos);
        assert!(
            name.starts_with(&"a".repeat(235)) && !name.contains("-."),
            "{name}"
        );
        assert_eq!(short_event_name("p1", 255), "p1.ff");
    }

    use crate::gone::api_error as api;

    #[test]
    fn a_proxy_gone_under_a_pass_is_not_a_failure() {
        let write = |code| Error::WriteStatus {
            name: "p".into(),
            source: api(code),
        };
        assert!(gone(&finalizer::Error::RemoveFinalizer(api(404))));
        assert!(gone(&finalizer::Error::AddFinalizer(api(404))));
        assert!(gone(&finalizer::Error::ApplyFailed(write(404))));
        assert!(gone(&finalizer::Error::CleanupFailed(write(404))));
        assert!(!gone(&finalizer::Error::RemoveFinalizer(api(409))));
        assert!(!gone(&finalizer::Error::ApplyFailed(write(500))));
        assert!(!gone(&finalizer::Error::CleanupFailed(
            Error::DeletePending(Duration::from_secs(1))
        )));
        assert_eq!(
            error_class(&finalizer::Error::RemoveFinalizer(api(404))),
            Some("gone")
        );
        assert_eq!(
            error_class(&finalizer::Error::RemoveFinalizer(api(409))),
            Some("remove_finalizer")
        );
        assert_eq!(
            error_class(&finalizer::Error::ApplyFailed(write(500))),
            Some("status_write")
        );
        assert_eq!(
            error_class(&finalizer::Error::CleanupFailed(Error::DeletePending(
                Duration::from_secs(1)
            ))),
            None
        );
    }
}
