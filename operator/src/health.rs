//! The health engine (leader only): every interval, a CONNECT probe
//! ([`probe`](crate::probe): the socket and clock around `fleet::Probe`) through each running Proxy to the configured target;
//! `fleet::HealthTracker` turns K successes / M failures into the `Healthy`
//! condition, written by server-side apply with its own field manager
//! ([`HEALTH_MANAGER`]) only when it changes. A new leader seeds each
//! tracker from the stored condition, so a rollout does not flap it.

use provider_api::error::chain;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::crd::Proxy;
use crate::metrics::OperatorMetrics;
use crate::probe;

/// The field manager of the `Healthy` condition.
pub const HEALTH_MANAGER: &str = "egress-operator-health";

/// The engine's settings and handles.
pub struct Engine {
    /// The API client.
    pub client: Client,
    /// The Proxy watch cache.
    pub proxies: Store<Proxy>,
    /// What each probe CONNECTs to.
    pub target: fleet::ProbeTarget,
    /// Where probe connections are opened (`--probe-netns`); this
    /// process's own namespace when `None`.
    pub netns: Option<crate::netns::Netns>,
    /// Interval between probes of each proxy.
    pub interval: Duration,
    /// Deadline of one probe.
    pub timeout: Duration,
    /// Probes in flight at once.
    pub concurrency: usize,
    /// K and M.
    pub hysteresis: fleet::Hysteresis,
    /// Metrics.
    pub metrics: OperatorMetrics,
}

impl Engine {
    /// Probes every interval until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let mut trackers: HashMap<String, fleet::HealthTracker> = HashMap::new();
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(self.interval) => {}
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = self.round(&mut trackers) => {}
            }
        }
    }

    async fn round(&self, trackers: &mut HashMap<String, fleet::HealthTracker>) {
        let running: Vec<(std::sync::Arc<Proxy>, SocketAddr)> = self
            .proxies
            .state()
            .into_iter()
            .filter_map(|p| {
                let s = &p.status.as_ref()?;
                if s.phase != Some(fleet::Phase::Running) {
                    return None;
                }
                let addr = SocketAddr::new(s.ip?, s.port?);
                Some((p, addr))
            })
            .collect();
        let results: Vec<_> = futures::stream::iter(running)
            .map(|(p, addr)| async move {
                let outcome = match &self.netns {
                    None => probe::probe(addr, &self.target, self.timeout).await,
                    Some(ns) => {
                        let connect = ns.connect(addr, self.timeout);
                        probe::probe_over(connect, addr, &self.target, self.timeout).await
                    }
                };
                (p, outcome)
            })
            .buffer_unordered(self.concurrency.max(1))
            .collect()
            .await;
        let mut seen = std::collections::HashSet::new();
        for (p, outcome) in results {
            let Some(uid) = p.metadata.uid.clone() else {
                continue;
            };
            seen.insert(uid.clone());
            let stored = p.status.clone().unwrap_or_default();
            let tracker = trackers.entry(uid).or_insert_with(|| {
                fleet::HealthTracker::seeded(stored.condition(fleet::ConditionType::Healthy))
            });
            tracker.observe(&outcome, &self.hysteresis);
            self.metrics.probe(match &outcome {
                fleet::ProbeOutcome::Healthy { .. } => "healthy",
                fleet::ProbeOutcome::Unhealthy(f) => f.kind.reason().as_str(),
            });
            let mut next = stored.clone();
            next.set_condition(
                fleet::ConditionType::Healthy,
                tracker.condition(),
                fleet::Timestamp::from_system_time(std::time::SystemTime::now()),
            );
            let (Some(new), old) = (
                next.condition(fleet::ConditionType::Healthy),
                stored.condition(fleet::ConditionType::Healthy),
            ) else {
                continue;
            };
            if old == Some(new) {
                continue;
            }
            if let Err(e) = self.write(&p, new).await {
                tracing::warn!(proxy = %p.name_any(), error = %chain(e.as_ref()), "write Healthy failed");
            }
        }
        trackers.retain(|uid, _| seen.contains(uid));
    }

    async fn write(&self, p: &Proxy, condition: &fleet::Condition) -> anyhow::Result<()> {
        let ns = p.namespace().unwrap_or_default();
        let name = p.name_any();
        let api: Api<Proxy> = Api::namespaced(self.client.clone(), &ns);
        let body = serde_json::json!({
            "apiVersion": Proxy::api_version(&()),
            "kind": Proxy::kind(&()),
            "metadata": { "name": name },
            "status": { "conditions": [condition] },
        });
        tokio::time::timeout(
            Duration::from_secs(10),
            api.patch_status(
                &name,
                &PatchParams::apply(HEALTH_MANAGER).force(),
                &Patch::Apply(body),
            ),
        )
        .await??;
        self.metrics.status_write("health");
        Ok(())
    }
}
