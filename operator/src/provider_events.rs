//! Providers' instance events turned into reconciles: a VM that crashed,
//! stopped or vanished on its host is looked at once, not at its Proxy's
//! next poll (60 s while it runs).
//!
//! ```text
//!  provider.instance_events() ─▶ Changed{id}   ─▶ the Proxy whose status.providerID is id
//!                              └▶ Resync{host} ─▶ every Proxy on that provider's host
//!                                                   └─▶ reconcile trigger (the controller's queue)
//! ```
//!
//! The reconcile's `get` is the truth; an event only brings it forward. A
//! trigger that finds the queue full is dropped (the queue already holds
//! work, and the poll remains). One forwarder per provider that reports
//! events runs per leadership term, owned by the term; `--provider-events
//! false` turns them off (poll only).

use std::sync::Arc;

use kube::runtime::reflector::{ObjectRef, Store};
use provider_api::{Identifier, InstanceEvent, InstanceEvents, ProviderId};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::crd::Proxy;
use crate::metrics::OperatorMetrics;

/// Forwards one provider's instance events to the controller.
pub struct Forwarder {
    /// The provider entry the events are from.
    pub provider: Identifier,
    /// Its running watch.
    pub events: InstanceEvents,
    /// The controller's Proxy cache.
    pub store: Store<Proxy>,
    /// The controller's reconcile trigger.
    pub trigger: mpsc::Sender<ObjectRef<Proxy>>,
    /// Counts events by kind.
    pub metrics: OperatorMetrics,
}

impl Forwarder {
    /// Runs until `cancel` or the watch ends; drops the watch on return.
    pub async fn run(mut self, cancel: CancellationToken) {
        loop {
            let Some(ev) = cancel.run_until_cancelled(self.events.next()).await else {
                return;
            };
            let Some(ev) = ev else {
                tracing::warn!(provider = %self.provider, "instance events ended; polling only");
                return;
            };
            let proxies = self.store.state();
            let hit = affected(&proxies, &self.provider, &ev);
            self.metrics.instance_event(match &ev {
                InstanceEvent::Changed { change, .. } => change.as_str(),
                InstanceEvent::Resync { .. } => "resync",
                _ => "other",
            });
            if hit.is_empty() {
                if matches!(ev, InstanceEvent::Changed { .. }) {
                    self.metrics.instance_event("unmatched");
                }
                continue;
            }
            tracing::debug!(provider = %self.provider, event = ?ev, proxies = hit.len(), "instance event");
            for objref in hit {
                // Full: the queue has work; the poll remains.
                let _ = self.trigger.try_send(objref);
            }
        }
    }
}

/// The Proxies `ev` (from provider `provider`) concerns.
pub fn affected(
    proxies: &[Arc<Proxy>],
    provider: &Identifier,
    ev: &InstanceEvent,
) -> Vec<ObjectRef<Proxy>> {
    let id_of = |p: &Proxy| {
        p.status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(|id| ProviderId::parse(id).ok())
    };
    proxies
        .iter()
        .filter(|p| match (ev, id_of(p)) {
            (InstanceEvent::Changed { id, .. }, Some(current)) => &current == id,
            (InstanceEvent::Resync { host }, Some(current)) => {
                current.provider() == provider && current.host() == host
            }
            _ => false,
        })
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::Change;

    fn proxy(name: &str, provider_id: Option<&str>) -> Arc<Proxy> {
        let spec = serde_json::from_value(serde_json::json!({"provider": "e1"})).unwrap();
        let mut p = Proxy::new(name, spec);
        p.metadata.namespace = Some("ns".into());
        p.status = Some(fleet::ProxyStatus {
            provider_id: provider_id.map(str::to_owned),
            ..Default::default()
        });
        Arc::new(p)
    }

    #[test]
    fn an_event_reaches_the_proxy_of_its_instance_and_a_resync_its_hosts() {
        let proxies = [
            proxy("a", Some("kvm2://e1/host1/ep-a")),
            proxy("b", Some("kvm2://e1/host2/ep-b")),
            proxy("c", Some("kvm2://e2/host1/ep-c")),
            proxy("d", None),
        ];
        let e1 = Identifier::parse("e1").unwrap();
        let names = |ev: &InstanceEvent| -> Vec<String> {
            affected(&proxies, &e1, ev)
                .into_iter()
                .map(|r| r.name)
                .collect()
        };
        let changed = |id: &str| InstanceEvent::Changed {
            id: ProviderId::parse(id).unwrap(),
            change: Change::Crashed,
        };
        assert_eq!(names(&changed("kvm2://e1/host1/ep-a")), ["a"]);
        assert!(names(&changed("kvm2://e1/host1/ep-zz")).is_empty());
        let resync = |host: &str| InstanceEvent::Resync {
            host: Identifier::parse(host).unwrap(),
        };
        // Only this provider's Proxies on that host (e2 has a host1 too).
        assert_eq!(names(&resync("host1")), ["a"]);
        assert_eq!(names(&resync("host2")), ["b"]);
        assert!(names(&resync("host3")).is_empty());
    }
}
