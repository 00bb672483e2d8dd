//! The GC sweeper (leader only): each round lists every provider entry's
//! instances by this cluster's tag **first**, then takes a fresh paginated
//! LIST of Proxies (any failed page skips the round), asks
//! `fleet::gc::plan` what to delete, and deletes it — re-checking
//! leadership before each delete.

use provider_api::error::chain;
use std::time::{Duration, SystemTime};

use kube::api::ListParams;
use kube::{Api, Client};
use provider_api::{Error as ProviderError, Providers};
use tokio_util::sync::CancellationToken;

use crate::crd::Proxy;
use crate::leader::Leadership;
use crate::metrics::OperatorMetrics;

/// Proxies per LIST page.
const PAGE: u32 = 250;

/// The sweeper's settings and handles.
pub struct Sweeper {
    /// The API client.
    pub client: Client,
    /// The namespace watched, or all.
    pub namespace: Option<String>,
    /// The provider entries (instrumented).
    pub providers: Providers,
    /// This cluster's identity.
    pub cluster: fleet::ClusterIdentity,
    /// Minimum age and cap.
    pub policy: fleet::gc::GcPolicy,
    /// Interval between rounds.
    pub interval: Duration,
    /// Deadline of each provider call.
    pub call_timeout: Duration,
    /// Leadership, re-checked before each delete.
    pub leadership: Leadership,
    /// Metrics.
    pub metrics: OperatorMetrics,
}

impl Sweeper {
    /// Sweeps every interval (the first round after one interval) until
    /// `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        loop {
            let slept = cancel.run_until_cancelled(tokio::time::sleep(self.interval));
            if slept.await.is_none() {
                return;
            }
            if cancel
                .run_until_cancelled(self.round(&cancel))
                .await
                .is_none()
            {
                return;
            }
        }
    }

    /// One round.
    pub async fn round(&self, cancel: &CancellationToken) {
        let tag = self.cluster.tag();
        let listings = futures::future::join_all(self.providers.iter().map(|p| {
            let tag = tag.clone();
            async move {
                let result = tokio::time::timeout(self.call_timeout, p.list_by_tag(&tag))
                    .await
                    .unwrap_or_else(|_| {
                        Err(ProviderError::transient(format!(
                            "list_by_tag did not finish within {:?}",
                            self.call_timeout
                        )))
                    });
                fleet::gc::Listing {
                    provider: p.name().clone(),
                    result,
                }
            }
        }))
        .await;
        let live = self.live_proxies().await;
        let set = match &live {
            Some(v) => fleet::gc::LiveSet::Complete(v),
            None => fleet::gc::LiveSet::Partial,
        };
        let plan = fleet::gc::plan(
            set,
            &listings,
            &self.cluster,
            &self.policy,
            SystemTime::now(),
        );
        let verdict = plan.verdict.as_str();
        self.metrics.gc_round(verdict);
        tracing::info!(
            verdict,
            deletes = plan.deletes.len(),
            deferred = plan.deferred.len(),
            spared = plan.spared.len(),
            claimed = plan.claimed,
            "gc round planned"
        );
        for doomed in &plan.deletes {
            if cancel.is_cancelled() || !self.leadership.holds() {
                tracing::warn!(
                    "gc: leadership lost or shutting down; the rest of the round is dropped"
                );
                return;
            }
            let Some(provider) = self.providers.get(doomed.id.provider()) else {
                continue;
            };
            let why = match &doomed.why {
                fleet::gc::DoomReason::Orphan => "orphan".to_owned(),
                fleet::gc::DoomReason::Duplicate { kept } => format!("duplicate of {kept}"),
            };
            let result = tokio::time::timeout(self.call_timeout, provider.delete(&doomed.id)).await;
            match result {
                Ok(Ok(())) => {
                    self.metrics.gc_delete("ok");
                    tracing::info!(instance = %doomed.id, owner_uid = %doomed.owner_uid, why, age_s = doomed.age.as_secs(), "gc deleted an instance");
                }
                Ok(Err(e)) => {
                    self.metrics.gc_delete(e.class().as_str());
                    tracing::warn!(instance = %doomed.id, why, error = %chain(&e), "gc delete failed");
                }
                Err(_) => {
                    self.metrics.gc_delete("timeout");
                    tracing::warn!(instance = %doomed.id, why, "gc delete timed out");
                }
            }
        }
    }

    /// Every Proxy, page by page; `None` when any page fails.
    async fn live_proxies(&self) -> Option<Vec<fleet::gc::LiveProxy>> {
        let api: Api<Proxy> = match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(PAGE);
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = match tokio::time::timeout(self.call_timeout, api.list(&params)).await {
                Ok(Ok(page)) => page,
                Ok(Err(e)) => {
                    tracing::warn!(error = %chain(&e), "gc: Proxy LIST failed; round skipped");
                    return None;
                }
                Err(_) => {
                    tracing::warn!("gc: Proxy LIST timed out; round skipped");
                    return None;
                }
            };
            for p in &page.items {
                let uid = p.metadata.uid.clone().unwrap_or_default();
                let id = p.status.as_ref().and_then(|s| s.provider_id.as_deref());
                out.push(fleet::gc::LiveProxy::new(uid, id));
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Some(out);
            }
        }
    }
}

/// A client's namespace-or-all Proxy API (shared by the runner).
pub fn proxy_api(client: &Client, namespace: Option<&str>) -> Api<Proxy> {
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
