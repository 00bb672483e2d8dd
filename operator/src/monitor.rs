//! The ProviderHealth monitor (leader only): every interval, each provider
//! entry's `checker().check(deadline)` — through the metrics and tracing
//! decorators — becomes the status of the cluster-scoped `ProviderHealth`
//! named after the entry, written by server-side apply (field manager
//! [`MONITOR_MANAGER`]) only on a material change. When a target recovers,
//! every Proxy is reconciled again (those waiting on their provider retry).

use provider_api::error::chain;
use std::time::{Duration, SystemTime};

use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use provider_api::{Provider, Providers};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::crd::ProviderHealth;
use crate::metrics::OperatorMetrics;

/// The field manager of the monitor's writes.
pub const MONITOR_MANAGER: &str = "egress-operator-monitor";

/// The monitor's settings and handles.
pub struct Monitor {
    /// The API client.
    pub client: Client,
    /// The provider entries (instrumented).
    pub providers: Providers,
    /// Interval between checks.
    pub interval: Duration,
    /// Deadline of one check.
    pub timeout: Duration,
    /// Receives `()` when a target recovered (bounded; a full queue already
    /// holds a pending bulk reconcile).
    pub recovered: mpsc::Sender<()>,
    /// Metrics.
    pub metrics: OperatorMetrics,
    /// Where each check's hosts go (for the pool controller's spread).
    pub hosts: crate::pool::HostBook,
}

impl Monitor {
    /// Checks every entry now and then every interval, until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        loop {
            let rounds = self.providers.iter().map(|p| self.check_one(&**p));
            let checked = cancel.run_until_cancelled(futures::future::join_all(rounds));
            if checked.await.is_none() {
                return;
            }
            let slept = cancel.run_until_cancelled(tokio::time::sleep(self.interval));
            if slept.await.is_none() {
                return;
            }
        }
    }

    async fn check_one(&self, provider: &dyn Provider) {
        let Some(checker) = provider.checker() else {
            return;
        };
        let name = provider.name().as_str();
        // The checker answers within its timeout; the outer bound is slack.
        let bound = self.timeout + Duration::from_secs(5);
        let Ok(statuses) = tokio::time::timeout(bound, checker.check(self.timeout)).await else {
            tracing::warn!(provider = name, "provider check overran its deadline");
            return;
        };
        let fresh = fleet::provider_health(&statuses, SystemTime::now());
        self.hosts.record(name, &fresh.targets);
        let api: Api<ProviderHealth> = Api::all(self.client.clone());
        let stored = match tokio::time::timeout(bound, api.get_opt(name)).await {
            Ok(Ok(obj)) => obj,
            Ok(Err(e)) => {
                tracing::warn!(provider = name, error = %chain(&e), "read ProviderHealth failed");
                return;
            }
            Err(_) => {
                tracing::warn!(provider = name, "read ProviderHealth timed out");
                return;
            }
        };
        let stored_status = stored.as_ref().and_then(|o| o.status.as_ref());
        if let Some(before) = stored_status
            && fresh.recovered_from(before)
        {
            tracing::info!(provider = name, ready = %fresh.ready, "provider recovered; reconciling Proxies");
            let _ = self.recovered.try_send(());
        }
        if !fresh.needs_write(stored_status) {
            return;
        }
        let params = PatchParams::apply(MONITOR_MANAGER).force();
        let body = serde_json::json!({
            "apiVersion": ProviderHealth::api_version(&()),
            "kind": ProviderHealth::kind(&()),
            "metadata": { "name": name },
            "spec": { "type": provider.provider_type().as_str() },
        });
        let write = async {
            if stored.is_none() {
                api.patch(name, &params, &Patch::Apply(body)).await?;
            }
            let status = serde_json::json!({
                "apiVersion": ProviderHealth::api_version(&()),
                "kind": ProviderHealth::kind(&()),
                "metadata": { "name": name },
                "status": fresh,
            });
            api.patch_status(name, &params, &Patch::Apply(status)).await
        };
        match tokio::time::timeout(bound, write).await {
            Ok(Ok(_)) => {
                self.metrics.status_write("monitor");
                tracing::info!(provider = name, ready = %fresh.ready, "provider health written");
            }
            Ok(Err(e)) => {
                tracing::warn!(provider = name, error = %chain(&e), "write ProviderHealth failed")
            }
            Err(_) => tracing::warn!(provider = name, "write ProviderHealth timed out"),
        }
    }
}
