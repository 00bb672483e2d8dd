//! The health engine (leader only): every interval, a CONNECT probe
//! ([`probe`](crate::probe): the socket and clock around `fleet::Probe`)
//! through each running Proxy's current instance to its provider entry's
//! probe target (`proxy.probe_target` in the providers config, or
//! `--probe-target` for all);
//! `fleet::HealthTracker` turns K successes / M failures into the `Healthy`
//! condition, written with `probedInstance` (the instance it is about) by
//! server-side apply with its own field manager ([`HEALTH_MANAGER`]) only
//! when it changes. A new leader seeds each tracker from the stored
//! condition when it is about the same instance, so a rollout does not flap
//! it.
//!
//! Between rounds, every change the Proxy watch cache sees wakes the engine
//! for a reset pass over the Proxies that changed ([`ProxyChanges`]; all of
//! them when the engine starts and after a relist), no probes: a Proxy that
//! left `Running`, whose instance
//! was replaced or whose address changed gets `Healthy` = `Unknown` at once
//! (`fleet::health_plan`), so a verdict never outlives its instance
//! (invariant 14).

use provider_api::error::chain;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::crd::Proxy;
use crate::metrics::OperatorMetrics;
use crate::probe;
use crate::proxy_changes::ProxyChanges;

/// The field manager of the `Healthy` condition.
pub const HEALTH_MANAGER: &str = "egress-operator-health";

/// The engine's settings and handles.
pub struct Engine {
    /// The API client.
    pub client: Client,
    /// The Proxy watch cache.
    pub proxies: Store<Proxy>,
    /// What each probe CONNECTs to.
    pub targets: ProbeTargets,
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
    /// The Proxies the watch cache saw change (this engine is their one
    /// consumer).
    pub changed: Arc<ProxyChanges>,
}

/// What each provider entry's proxies are probed with.
#[derive(Debug, Clone, Default)]
pub struct ProbeTargets {
    /// Entry name → its `probe_target`.
    pub by_entry: HashMap<String, fleet::ProbeTarget>,
    /// `--probe-target`: one target for every entry.
    pub all: Option<fleet::ProbeTarget>,
    /// For existing proxies (`spec.existing`, no entry): the default probe
    /// target, unless `--probe-target` is set.
    pub existing: Option<fleet::ProbeTarget>,
    /// Entry name → its `proxy.credentials_file` (basic auth), re-read each
    /// round so a rotated Secret reaches the probes.
    pub credentials_files: HashMap<String, std::path::PathBuf>,
}

/// The largest credentials file read.
const MAX_CREDENTIALS_FILE: u64 = 4096;

/// Each entry's proxy credentials, read now; an entry whose file cannot be
/// read or parsed is probed without (its proxies answer 407, so `Healthy`
/// says what is wrong), with a warning that names the file, never its
/// contents.
async fn read_credentials(
    files: &HashMap<String, std::path::PathBuf>,
) -> HashMap<String, provider_api::ProxyCredentials> {
    use tokio::io::AsyncReadExt;
    let mut out = HashMap::new();
    for (entry, path) in files {
        let mut text = String::new();
        let read = match tokio::fs::File::open(path).await {
            Ok(f) => f
                .take(MAX_CREDENTIALS_FILE)
                .read_to_string(&mut text)
                .await
                .map(|_| ()),
            Err(e) => Err(e),
        };
        match read
            .map_err(|e| e.kind().to_string())
            .and_then(|()| provider_api::ProxyCredentials::parse(&text).map_err(|e| e.to_string()))
        {
            Ok(c) => {
                out.insert(entry.clone(), c);
            }
            Err(why) => tracing::warn!(
                entry = %entry,
                file = %path.display(),
                error = %why,
                "cannot use the proxy credentials; probing without"
            ),
        }
    }
    out
}

impl ProbeTargets {
    /// The target for proxies of `entry` — `""` for existing proxies —
    /// (`None`: an entry the config does not name; the reconciler reports
    /// it).
    pub fn of(&self, entry: &str) -> Option<&fleet::ProbeTarget> {
        let own = if entry.is_empty() {
            self.existing.as_ref()
        } else {
            self.by_entry.get(entry)
        };
        self.all.as_ref().or(own)
    }
}

/// One Proxy's tracker, and the instance it counts probes of.
struct Tracked {
    endpoint: String,
    tracker: fleet::HealthTracker,
    /// What this engine last wrote about the instance: the stored verdict,
    /// whether or not the watch cache shows it yet.
    written: Option<fleet::HealthWritten>,
}

impl Engine {
    /// Probes every interval, and resets stale verdicts whenever the cache
    /// changes, until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let mut trackers: HashMap<String, Tracked> = HashMap::new();
        let mut next_round = tokio::time::Instant::now() + self.interval;
        // A new leader's first pass resets what went stale before it.
        self.changed.mark_all();
        loop {
            let woke = cancel.run_until_cancelled(async {
                tokio::select! {
                    () = tokio::time::sleep_until(next_round) => true,
                    () = self.changed.changed() => false,
                }
            });
            let Some(round_due) = woke.await else {
                return;
            };
            let work = if round_due {
                next_round = tokio::time::Instant::now() + self.interval;
                cancel.run_until_cancelled(self.round(&mut trackers)).await
            } else {
                cancel.run_until_cancelled(self.resets(&mut trackers)).await
            };
            if work.is_none() {
                return;
            }
        }
    }

    /// Writes the resets the changed Proxies call for (no probes). A reset
    /// whose write fails is written by the next round, which plans every
    /// Proxy.
    async fn resets(&self, trackers: &mut HashMap<String, Tracked>) {
        let none = fleet::ProxyStatus::default();
        for p in self.changed.take(&self.proxies) {
            let status = p.status.as_ref().unwrap_or(&none);
            if let fleet::HealthPlan::Reset { update, probed } = fleet::health_plan(status) {
                self.reset(&p, status, update, probed, trackers).await;
            }
        }
    }

    async fn reset(
        &self,
        p: &Proxy,
        stored: &fleet::ProxyStatus,
        update: fleet::ConditionUpdate,
        probed: Option<String>,
        trackers: &mut HashMap<String, Tracked>,
    ) {
        if let Some(uid) = &p.metadata.uid {
            trackers.remove(uid);
        }
        let mut next = stored.clone();
        next.set_condition(
            fleet::ConditionType::Healthy,
            update,
            fleet::Timestamp::from_system_time(std::time::SystemTime::now()),
        );
        let Some(condition) = next.condition(fleet::ConditionType::Healthy) else {
            return;
        };
        tracing::info!(proxy = %p.name_any(), reason = %condition.reason, "Healthy reset");
        if let Err(e) = self.write(p, condition, probed.as_deref()).await {
            write_failed(p, "reset", &e);
        }
    }

    async fn round(&self, trackers: &mut HashMap<String, Tracked>) {
        let credentials = read_credentials(&self.targets.credentials_files).await;
        let mut running: Vec<(Arc<Proxy>, fleet::Probe, String, bool)> = Vec::new();
        for p in self.proxies.state() {
            let status = p.status.clone().unwrap_or_default();
            match fleet::health_plan(&status) {
                fleet::HealthPlan::Probe { endpoint, seed } => {
                    let (Some(ip), Some(port)) = (status.ip, status.port) else {
                        continue;
                    };
                    let entry = &p.spec.inner.provider;
                    let Some(target) = self.targets.of(entry) else {
                        continue;
                    };
                    let mut probe =
                        fleet::Probe::new(SocketAddr::new(ip, port), target, self.timeout);
                    if let Some(c) = credentials.get(entry) {
                        probe = probe.with_basic_auth(c.user(), c.password().expose_secret());
                    }
                    running.push((p, probe, endpoint, seed));
                }
                fleet::HealthPlan::Reset { update, probed } => {
                    self.reset(&p, &status, update, probed, trackers).await;
                }
                fleet::HealthPlan::Keep => {}
            }
        }
        let results: Vec<_> = futures::stream::iter(running)
            .map(|(p, probe, endpoint, seed)| async move {
                let addr = probe.proxy();
                let started = std::time::Instant::now();
                let outcome = match &self.netns {
                    None => probe::run(tokio::net::TcpStream::connect(addr), probe).await,
                    Some(ns) => {
                        let connect = ns.connect(addr, self.timeout);
                        probe::run(connect, probe).await
                    }
                };
                (p, endpoint, seed, outcome, started.elapsed())
            })
            .buffer_unordered(self.concurrency.max(1))
            .collect()
            .await;
        let mut seen = std::collections::HashSet::new();
        for (p, endpoint, seed, outcome, took) in results {
            let Some(uid) = p.metadata.uid.clone() else {
                continue;
            };
            seen.insert(uid.clone());
            let stored = p.status.clone().unwrap_or_default();
            let fresh = || Tracked {
                written: None,
                endpoint: endpoint.clone(),
                tracker: if seed {
                    fleet::HealthTracker::seeded(stored.condition(fleet::ConditionType::Healthy))
                } else {
                    fleet::HealthTracker::default()
                },
            };
            let tracked = trackers.entry(uid).or_insert_with(fresh);
            if tracked.endpoint != endpoint {
                // Another instance or address: its counters start over.
                *tracked = fresh();
            }
            tracked.tracker.observe(&outcome, &self.hysteresis);
            let word = match &outcome {
                fleet::ProbeOutcome::Healthy { .. } => "healthy",
                fleet::ProbeOutcome::Unhealthy(f) => f.kind.reason().as_str(),
            };
            self.metrics.probe(word, took);
            let Some(new) = fleet::health_verdict_to_write(
                &stored,
                tracked.written.as_ref(),
                tracked.tracker.condition(),
                &endpoint,
                fleet::Timestamp::from_system_time(std::time::SystemTime::now()),
            ) else {
                continue;
            };
            match self.write(&p, &new, Some(&endpoint)).await {
                Ok(()) => {
                    tracked.written = Some(fleet::HealthWritten {
                        condition: new,
                        probed: endpoint,
                    });
                }
                Err(e) => write_failed(&p, "verdict", &e),
            }
        }
        trackers.retain(|uid, _| seen.contains(uid));
    }

    /// Applies the engine's part of the status: `Healthy` and the instance
    /// it is about (`probed`: `None` releases `probedInstance`).
    async fn write(
        &self,
        p: &Proxy,
        condition: &fleet::Condition,
        probed: Option<&str>,
    ) -> anyhow::Result<()> {
        let ns = p.namespace().unwrap_or_default();
        let name = p.name_any();
        let api: Api<Proxy> = Api::namespaced(self.client.clone(), &ns);
        let mut status = serde_json::json!({ "conditions": [condition] });
        if let Some(probed) = probed {
            status["probedInstance"] = serde_json::json!(probed);
        }
        tokio::time::timeout(
            Duration::from_secs(10),
            crate::status_apply::apply_status(&api, &name, HEALTH_MANAGER, &status),
        )
        .await??;
        self.metrics.status_write("health");
        Ok(())
    }
}

/// Logs a failed write of `Healthy` (`what`: a `verdict` or a `reset`): at
/// debug when the Proxy was deleted since the cache showed it (a routine
/// race), as a warning otherwise.
fn write_failed(p: &Proxy, what: &str, e: &anyhow::Error) {
    if e.downcast_ref().is_some_and(crate::gone::is_not_found) {
        tracing::debug!(proxy = %p.name_any(), what, "writing Healthy: the Proxy is gone");
    } else {
        tracing::warn!(proxy = %p.name_any(), what, error = %chain(e.as_ref()), "writing Healthy failed");
    }
}
