//! Instance events: libvirt's domain lifecycle events on each host's shared
//! connection, as [`provider_api::events`] asks.
//!
//! ```text
//!  per host (a task owned by the watch):
//!    shared connection ─▶ subscribe (all domains' lifecycle) ─▶ Resync{host}
//!      event ─▶ Changed{id, change}     events dropped ─▶ Resync{host}
//!    link ends ─▶ wait (1 s doubling to 30 s) ─▶ again: a new Resync covers
//!                 whatever changed while it was down
//! ```
//!
//! | libvirt event (detail) | change |
//! |---|---|
//! | Stopped (crashed, failed) · Crashed | `Crashed` |
//! | Stopped (other) | `Stopped` |
//! | Suspended · PmSuspended | `Suspended` |
//! | Started · Resumed | `Started` |
//! | Undefined | `Removed` |
//! | Shutdown (the guest is shutting down) | `Other` |
//! | Defined | none (the provider's own Create) |
//!
//! The instance ID is (this entry, the host, the domain's name); a domain
//! that is not this entry's still yields an event (the mark is not read:
//! the caller matches IDs it knows). Dropping the watch aborts its tasks,
//! which drops their subscriptions.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use libvirt_rpc::LifecycleEvent;
use libvirt_rpc::LifecycleEventKind;
use provider_api::events::{Change, InstanceEvent, InstanceEventSource, InstanceEvents};
use provider_api::{Error as ApiError, Identifier, ProviderId, ProviderType};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::provider::Inner;
use crate::libvirt::to_provider_error;

/// Events queued between the hosts' tasks and the caller.
const QUEUE: usize = 256;
/// Waits between a host's watches: from this, doubling…
const RETRY_MIN: Duration = Duration::from_secs(1);
/// …up to this.
const RETRY_MAX: Duration = Duration::from_secs(30);
/// A watch that lasted this long starts the next wait from [`RETRY_MIN`].
const STEADY: Duration = Duration::from_secs(60);

/// Starts a watch over every host of the entry; `None` outside a Tokio
/// runtime (nothing to run its tasks on).
pub(crate) fn watch(inner: &Arc<Inner>) -> Option<InstanceEvents> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let mut tasks = JoinSet::new();
    for host in inner.hosts.hosts() {
        tasks.spawn_on(
            watch_host(inner.clone(), host.clone(), tx.clone()),
            &runtime,
        );
    }
    Some(Box::new(Watch { rx, _tasks: tasks }))
}

/// The watch the caller holds: dropping it aborts the hosts' tasks.
struct Watch {
    rx: mpsc::Receiver<InstanceEvent>,
    _tasks: JoinSet<()>,
}

#[async_trait]
impl InstanceEventSource for Watch {
    async fn next(&mut self) -> Option<InstanceEvent> {
        self.rx.recv().await
    }
}

/// One host's watch, again and again until the caller is gone.
async fn watch_host(inner: Arc<Inner>, host: Identifier, tx: mpsc::Sender<InstanceEvent>) {
    let mut wait = RETRY_MIN;
    loop {
        let started = tokio::time::Instant::now();
        let ended = tokio::select! {
            r = watch_once(&inner, &host, &tx) => r,
            () = tx.closed() => return,
        };
        match ended {
            Ok(()) => tracing::debug!(%host, "lifecycle events ended with the link"),
            Err(e) => {
                tracing::debug!(%host, error = %provider_api::error::chain(&e), "lifecycle events unavailable")
            }
        }
        if started.elapsed() >= STEADY {
            wait = RETRY_MIN;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = tx.closed() => return,
        }
        wait = (wait * 2).min(RETRY_MAX);
    }
}

/// Subscribes on the host's shared connection and forwards its events
/// until the link ends (`Ok`) or the caller is gone (`Ok`, early).
async fn watch_once(
    inner: &Inner,
    host: &Identifier,
    tx: &mpsc::Sender<InstanceEvent>,
) -> Result<(), ApiError> {
    // The (re)subscription is an operation of its own in traces (its dial
    // included); the forwarding that follows is not (it lasts as long as
    // the link).
    let span = tracing::info_span!("provider.subscribe", provider = %inner.name, host = %host);
    // `_conn` holds the shared connection for as long as the watch runs.
    let (_conn, mut sub) = tracing::Instrument::instrument(
        async {
            let conn = inner.hosts.shared(host).await?;
            let sub = conn.client().subscribe_lifecycle(None).await.map_err(|e| {
                to_provider_error(format!("host {host}: subscribe to lifecycle events"), e)
            })?;
            Ok::<_, ApiError>((conn, sub))
        },
        span,
    )
    .await?;
    let resync = || InstanceEvent::Resync { host: host.clone() };
    // Whatever happened before the subscription is unknown to the caller.
    if tx.send(resync()).await.is_err() {
        return Ok(());
    }
    let mut missed = 0;
    while let Some(ev) = sub.recv().await {
        if sub.missed() > missed {
            missed = sub.missed();
            if tx.send(resync()).await.is_err() {
                return Ok(());
            }
        }
        if let Some(event) = instance_event(&inner.name, host, &ev)
            && tx.send(event).await.is_err()
        {
            return Ok(());
        }
    }
    Ok(())
}

/// The [`InstanceEvent`] for a lifecycle event; `None` for kinds that
/// change nothing a caller watches, and for names that are no instance's.
fn instance_event(
    entry: &Identifier,
    host: &Identifier,
    ev: &LifecycleEvent,
) -> Option<InstanceEvent> {
    /// `VIR_DOMAIN_EVENT_STOPPED_CRASHED`, `…_FAILED`.
    const STOPPED_CRASHED: i32 = 2;
    const STOPPED_FAILED: i32 = 5;
    let change = match ev.event {
        LifecycleEventKind::Stopped
            if ev.detail == STOPPED_CRASHED || ev.detail == STOPPED_FAILED =>
        {
            Change::Crashed
        }
        LifecycleEventKind::Crashed => Change::Crashed,
        LifecycleEventKind::Stopped => Change::Stopped,
        LifecycleEventKind::Suspended | LifecycleEventKind::PmSuspended => Change::Suspended,
        LifecycleEventKind::Started | LifecycleEventKind::Resumed => Change::Started,
        LifecycleEventKind::Undefined => Change::Removed,
        LifecycleEventKind::Shutdown => Change::Other,
        LifecycleEventKind::Defined => return None,
        // A kind newer than this code: something changed.
        _ => Change::Other,
    };
    let name = Identifier::parse(&ev.dom.name).ok()?;
    Some(InstanceEvent::Changed {
        id: ProviderId::new(ProviderType::Kvm2, entry.clone(), host.clone(), name),
        change,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, event: LifecycleEventKind, detail: i32) -> LifecycleEvent {
        LifecycleEvent {
            dom: libvirt_rpc::Domain {
                name: name.into(),
                uuid: [0; 16],
                id: 1,
            },
            event,
            detail,
        }
    }

    #[test]
    fn lifecycle_events_map_to_changes_of_the_named_instance() {
        let entry = Identifier::parse("kvm2-a").unwrap();
        let host = Identifier::parse("host2").unwrap();
        let change =
            |kind, detail| match instance_event(&entry, &host, &event("ep-1", kind, detail)) {
                Some(InstanceEvent::Changed { id, change }) => {
                    assert_eq!(id.to_string(), "kvm2://kvm2-a/host2/ep-1");
                    Some(change)
                }
                Some(other) => panic!("{other:?}"),
                None => None,
            };
        use LifecycleEventKind as K;
        assert_eq!(
            change(K::Stopped, 2),
            Some(Change::Crashed),
            "a killed QEMU"
        );
        assert_eq!(change(K::Stopped, 5), Some(Change::Crashed));
        assert_eq!(change(K::Crashed, 0), Some(Change::Crashed));
        assert_eq!(change(K::Stopped, 1), Some(Change::Stopped), "destroyed");
        assert_eq!(change(K::Suspended, 0), Some(Change::Suspended));
        assert_eq!(change(K::Resumed, 0), Some(Change::Started));
        assert_eq!(change(K::Undefined, 0), Some(Change::Removed));
        assert_eq!(change(K::Shutdown, 0), Some(Change::Other));
        assert_eq!(change(K::Unknown(42), 0), Some(Change::Other));
        assert_eq!(change(K::Defined, 0), None);
        // A name that is no identifier is no instance.
        assert!(instance_event(&entry, &host, &event("Not An Id", K::Stopped, 2)).is_none());
    }
}
