//! The Service sync (leader only): a selector-less Service per pool and per
//! Proxy that is not a pool member (`fleet::service::desired` decides),
//! whose endpoints are exactly the proxies behind it that are `Healthy` now.
//!
//! It wakes on every change the Proxy watch cache sees (the health
//! engine's `Healthy` writes among them, so endpoints follow a verdict
//! within one probe round) and every [`RESYNC`], computes what should
//! exist, and writes only what differs from what it last wrote this term:
//! the Service (server-side apply, field manager [`SERVICES_MANAGER`],
//! owned by its Proxy or pool), its `Endpoints` (which every API server
//! serves and kube-proxy reads where EndpointSlices are not used), and,
//! where the API server serves `discovery.k8s.io/v1`, its EndpointSlices
//! (the Endpoints then carry `endpointslice.kubernetes.io/skip-mirror`, so
//! the mirroring controller does not make a second set). A Service whose
//! owner is gone is deleted with its endpoints; at the start of a term,
//! and every [`SWEEP_EVERY`] passes, the Services this operator manages
//! are listed to find those left by an earlier term. A Service whose write
//! fails is tried again after a backoff ([`RETRY`], doubling up to
//! [`RETRY_CAP`]), not on every pass (`services/retries.rs`).

use provider_api::error::chain;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::service::{DesiredService, OwnerKind, PORT_NAME, ServicePool, ServiceProxy};
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::reflector;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::crd::{Proxy, ProxyPool};
use crate::metrics::OperatorMetrics;

mod retries;

use retries::Retries;

/// The field manager of the Service sync's writes.
pub const SERVICES_MANAGER: &str = "egress-operator-services";
/// The label marking the Services (and endpoints) this operator manages.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Its value.
const MANAGER: &str = "egress-proxies-operator";
/// EndpointSlices' own manager label and value.
const SLICE_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const SLICE_MANAGER: &str = "egress-proxies.io/operator";
/// The most endpoints in one EndpointSlice (Kubernetes' own limit).
const SLICE_MAX: usize = 1000;
/// A pass at least this often without changes.
const RESYNC: Duration = Duration::from_secs(30);
/// Changes arriving within this of each other are one pass.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// The managed Services are listed (to find stale ones) every this many
/// passes, and on the first.
const SWEEP_EVERY: u32 = 20;
/// One API call's bound.
const CALL_BOUND: Duration = Duration::from_secs(30);
/// The first delay before a failed Service write is tried again.
const RETRY: Duration = Duration::from_secs(1);
/// The longest.
const RETRY_CAP: Duration = Duration::from_secs(300);

/// The Service sync's settings and handles.
pub struct ServiceSync {
    /// The API client.
    pub client: Client,
    /// The Proxy watch cache.
    pub proxies: reflector::Store<Proxy>,
    /// The pool controller's cache.
    pub pools: reflector::Store<ProxyPool>,
    /// `--namespace`, if the operator is limited to one.
    pub namespace: Option<String>,
    /// Notified on every change of the Proxy watch cache.
    pub changed: Arc<Notify>,
    /// Metrics.
    pub metrics: OperatorMetrics,
}

impl ServiceSync {
    /// Syncs until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let ready = async {
            crate::store_ready::ready(&self.proxies).await;
            crate::store_ready::ready(&self.pools).await;
        };
        // Both caches complete first: an empty cache would look like every
        // owner gone.
        if cancel.run_until_cancelled(ready).await.is_none() {
            return;
        }
        let slices = cancel
            .run_until_cancelled(serves_endpoint_slices(&self.client))
            .await
            .unwrap_or(false);
        tracing::info!(endpoint_slices = slices, "service sync started");
        let mut state = State {
            applied: HashMap::new(),
            retries: Retries::new(fleet::Backoff::new(RETRY, RETRY_CAP)),
            slices,
        };
        let mut pass: u32 = 0;
        loop {
            let sweep = pass.is_multiple_of(SWEEP_EVERY);
            let work = self.pass(&mut state, sweep);
            if cancel.run_until_cancelled(work).await.is_none() {
                return;
            }
            pass = pass.wrapping_add(1);
            // The next pass: on a change, at the resync, or when a failed
            // write is due again, whichever comes first.
            let resync = state.retries.next_due().map_or(RESYNC, |due| {
                due.saturating_duration_since(Instant::now()).min(RESYNC)
            });
            let wait = async {
                tokio::select! {
                    () = self.changed.notified() => tokio::time::sleep(DEBOUNCE).await,
                    () = tokio::time::sleep(resync) => {}
                }
            };
            if cancel.run_until_cancelled(wait).await.is_none() {
                return;
            }
        }
    }

    /// One pass: what should exist, against what this term wrote.
    async fn pass(&self, state: &mut State, sweep: bool) {
        let proxies = self.proxies.state();
        let pools = self.pools.state();
        let statuses: Vec<fleet::ProxyStatus> = proxies
            .iter()
            .map(|p| p.status.clone().unwrap_or_default())
            .collect();
        let views: Vec<ServiceProxy<'_>> = proxies
            .iter()
            .zip(&statuses)
            .filter_map(|(p, status)| {
                Some(ServiceProxy {
                    namespace: p.metadata.namespace.as_deref()?,
                    name: p.metadata.name.as_deref()?,
                    uid: p.metadata.uid.as_deref()?,
                    pool: pool_of(p),
                    deleting: p.metadata.deletion_timestamp.is_some(),
                    status,
                })
            })
            .collect();
        let pool_views: Vec<ServicePool<'_>> = pools
            .iter()
            .filter_map(|p| {
                Some(ServicePool {
                    namespace: p.metadata.namespace.as_deref()?,
                    name: p.metadata.name.as_deref()?,
                    uid: p.metadata.uid.as_deref()?,
                    deleting: p.metadata.deletion_timestamp.is_some(),
                })
            })
            .collect();
        let desired = fleet::service::desired(&views, &pool_views);
        for (key, want) in &desired {
            if state.applied.get(key) == Some(want) || !state.retries.due(key, Instant::now()) {
                continue;
            }
            match self.apply(want, state.slices).await {
                Ok(()) => {
                    state.applied.insert(key.clone(), want.clone());
                    state.retries.forget(key);
                }
                Err(e) => {
                    let retry_in =
                        state
                            .retries
                            .failed(key, Instant::now(), crate::reconciler::jitter());
                    tracing::warn!(service = %format!("{}/{}", key.0, key.1), error = %e, ?retry_in, "service sync failed");
                }
            }
        }
        let gone: Vec<(String, String)> = state
            .applied
            .keys()
            .filter(|k| !desired.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            if !state.retries.due(&key, Instant::now()) {
                continue;
            }
            if self.delete(&key.0, &key.1, state.slices).await {
                state.applied.remove(&key);
                state.retries.forget(&key);
            } else {
                let retry_in =
                    state
                        .retries
                        .failed(&key, Instant::now(), crate::reconciler::jitter());
                tracing::warn!(service = %format!("{}/{}", key.0, key.1), ?retry_in, "deleting a service failed");
            }
        }
        // A key neither wanted nor written has nothing left to retry.
        let State {
            applied, retries, ..
        } = state;
        retries.retain(|k| desired.contains_key(k) || applied.contains_key(k));
        if sweep {
            self.sweep(&desired, state.slices).await;
        }
    }

    /// Writes `want`'s Service and endpoints (server-side apply: a write
    /// that changes nothing changes nothing on the server either).
    async fn apply(&self, want: &DesiredService, slices: bool) -> Result<(), CallError> {
        let (ns, name) = (want.namespace.as_str(), want.name.as_str());
        let params = PatchParams::apply(SERVICES_MANAGER).force();
        let services: Api<Service> = Api::namespaced(self.client.clone(), ns);
        let svc = bounded(services.patch(name, &params, &Patch::Apply(service_object(want))))
            .await
            .inspect_err(|_| self.metrics.service_write("service", "error"))?;
        self.metrics.service_write("service", "ok");
        let service_uid = svc.metadata.uid.unwrap_or_default();
        let endpoints: Api<Endpoints> = Api::namespaced(self.client.clone(), ns);
        let body = endpoints_object(want, &service_uid, slices);
        bounded(endpoints.patch(name, &params, &Patch::Apply(body)))
            .await
            .inspect_err(|_| self.metrics.service_write("endpoints", "error"))?;
        self.metrics.service_write("endpoints", "ok");
        if slices {
            self.apply_slices(want, &service_uid).await?;
        }
        Ok(())
    }

    async fn apply_slices(
        &self,
        want: &DesiredService,
        service_uid: &str,
    ) -> Result<(), CallError> {
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &want.namespace);
        let params = PatchParams::apply(SERVICES_MANAGER).force();
        let bodies = slice_objects(want, service_uid);
        for body in &bodies {
            let name = body["metadata"]["name"].as_str().unwrap_or_default();
            bounded(api.patch(name, &params, &Patch::Apply(body)))
                .await
                .inspect_err(|_| self.metrics.service_write("endpointslice", "error"))?;
            self.metrics.service_write("endpointslice", "ok");
        }
        let keep: Vec<&str> = bodies
            .iter()
            .filter_map(|b| b["metadata"]["name"].as_str())
            .collect();
        let existing = bounded(api.list(&slice_selector(&want.name))).await?;
        for old in existing.items {
            let old_name = old.name_any();
            if !keep.contains(&old_name.as_str()) {
                let _ = bounded(api.delete(&old_name, &DeleteParams::default())).await;
            }
        }
        Ok(())
    }

    /// Deletes a Service and its endpoints; whether all of it is gone.
    async fn delete(&self, ns: &str, name: &str, slices: bool) -> bool {
        let services: Api<Service> = Api::namespaced(self.client.clone(), ns);
        let endpoints: Api<Endpoints> = Api::namespaced(self.client.clone(), ns);
        let dp = DeleteParams::default();
        let mut ok = gone(bounded(services.delete(name, &dp)).await);
        ok &= gone(bounded(endpoints.delete(name, &dp)).await);
        if slices {
            let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
            ok &= bounded(api.delete_collection(&dp, &slice_selector(name)))
                .await
                .is_ok();
        }
        self.metrics
            .service_write("delete", if ok { "ok" } else { "error" });
        ok
    }

    /// Deletes the managed Services in scope that should not exist (left by
    /// an earlier term, or whose owner went while no term ran).
    async fn sweep(&self, desired: &BTreeMap<(String, String), DesiredService>, slices: bool) {
        let services: Api<Service> = match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let lp = ListParams::default().labels(&format!("{MANAGED_BY}={MANAGER}"));
        let listed = match bounded(services.list(&lp)).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "listing managed services failed");
                return;
            }
        };
        for svc in listed.items {
            let (Some(ns), Some(name)) =
                (svc.metadata.namespace.clone(), svc.metadata.name.clone())
            else {
                continue;
            };
            if !desired.contains_key(&(ns.clone(), name.clone())) {
                tracing::info!(service = %format!("{ns}/{name}"), "deleting a Service whose proxy or pool is gone");
                self.delete(&ns, &name, slices).await;
            }
        }
    }
}

/// What this term wrote.
struct State {
    applied: HashMap<(String, String), DesiredService>,
    /// The Services whose last write failed.
    retries: Retries<(String, String)>,
    slices: bool,
}

/// The pool a Proxy is a member of (its controlling owner, a ProxyPool).
fn pool_of(p: &Proxy) -> Option<&str> {
    p.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == "ProxyPool" && o.controller == Some(true))
        .map(|o| o.name.as_str())
}

/// A failed API call: the API server's status code, if it answered, and
/// what went wrong (it names the request, never a secret).
#[derive(Debug)]
struct CallError {
    code: Option<u16>,
    text: String,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Deleted, or already gone.
fn gone<T>(r: Result<T, CallError>) -> bool {
    match r {
        Ok(_) => true,
        Err(e) => e.code == Some(404),
    }
}

/// Runs an API call under [`CALL_BOUND`].
async fn bounded<T>(
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(CALL_BOUND, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(kube::Error::Api(e))) => Err(CallError {
            code: Some(e.code),
            text: format!("{} ({})", e.message, e.code),
        }),
        Ok(Err(e)) => Err(CallError {
            code: None,
            text: chain(&e),
        }),
        Err(_) => Err(CallError {
            code: None,
            text: format!("no answer within {CALL_BOUND:?}"),
        }),
    }
}

/// Whether the API server serves `discovery.k8s.io/v1` (Kubernetes 1.21+).
async fn serves_endpoint_slices(client: &Client) -> bool {
    match bounded(client.list_api_groups()).await {
        Ok(groups) => groups
            .groups
            .iter()
            .any(|g| g.name == "discovery.k8s.io" && g.versions.iter().any(|v| v.version == "v1")),
        Err(e) => {
            tracing::warn!(error = %e, "API discovery failed; writing Endpoints only");
            false
        }
    }
}

fn slice_selector(service: &str) -> ListParams {
    ListParams::default().labels(&format!(
        "kubernetes.io/service-name={service},{SLICE_MANAGED_BY}={SLICE_MANAGER}"
    ))
}

fn owner_ref(want: &DesiredService) -> Value {
    let kind = match want.owner_kind {
        OwnerKind::Proxy => "Proxy",
        OwnerKind::ProxyPool => "ProxyPool",
    };
    json!({
        "apiVersion": format!("{}/v1alpha1", crate::crd::GROUP),
        "kind": kind,
        "name": want.name,
        "uid": want.owner_uid,
    })
}

/// The Service: selector-less, ClusterIP, one TCP port named `proxy`.
fn service_object(want: &DesiredService) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": want.name,
            "namespace": want.namespace,
            "labels": { MANAGED_BY: MANAGER },
            "ownerReferences": [owner_ref(want)],
        },
        "spec": {
            "type": "ClusterIP",
            "ports": [{"name": PORT_NAME, "port": want.port, "targetPort": want.port, "protocol": "TCP"}],
        },
    })
}

/// The Service's `Endpoints`: one subset per proxy port (an empty list
/// when no proxy is healthy), owned by the Service.
fn endpoints_object(want: &DesiredService, service_uid: &str, slices: bool) -> Value {
    let subsets: Vec<Value> = want
        .endpoints
        .iter()
        .map(|(port, ips)| {
            json!({
                "addresses": ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect::<Vec<_>>(),
                "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
            })
        })
        .collect();
    let mut labels = json!({ MANAGED_BY: MANAGER });
    if slices {
        labels["endpointslice.kubernetes.io/skip-mirror"] = json!("true");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": want.name,
            "namespace": want.namespace,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Service", "name": want.name, "uid": service_uid,
            }],
        },
        "subsets": subsets,
    })
}

/// The Service's EndpointSlices: per address family and proxy port, at
/// most [`SLICE_MAX`] endpoints each, named `<service>-<family>-<port>-<n>`.
fn slice_objects(want: &DesiredService, service_uid: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for (port, ips) in &want.endpoints {
        for (family, v4) in [("ipv4", true), ("ipv6", false)] {
            let of_family: Vec<&IpAddr> = ips.iter().filter(|ip| ip.is_ipv4() == v4).collect();
            for (n, chunk) in of_family.chunks(SLICE_MAX).enumerate() {
                out.push(json!({
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "name": format!("{}-{family}-{port}-{n}", want.name),
                        "namespace": want.namespace,
                        "labels": {
                            "kubernetes.io/service-name": want.name,
                            SLICE_MANAGED_BY: SLICE_MANAGER,
                        },
                        "ownerReferences": [{
                            "apiVersion": "v1", "kind": "Service", "name": want.name,
                            "uid": service_uid, "controller": true, "blockOwnerDeletion": true,
                        }],
                    },
                    "addressType": if v4 { "IPv4" } else { "IPv6" },
                    "endpoints": chunk.iter().map(|ip| json!({
                        "addresses": [ip.to_string()],
                        "conditions": {"ready": true, "serving": true, "terminating": false},
                    })).collect::<Vec<_>>(),
                    "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
                }));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn want(ips: &[&str]) -> DesiredService {
        DesiredService {
            namespace: "ns".into(),
            name: "egress".into(),
            owner_kind: OwnerKind::ProxyPool,
            owner_uid: "pool-uid".into(),
            port: 3128,
            endpoints: if ips.is_empty() {
                BTreeMap::new()
            } else {
                BTreeMap::from([(3128, ips.iter().map(|i| i.parse().unwrap()).collect())])
            },
        }
    }

    /// The objects parse as Kubernetes' own types (field names and shapes
    /// right), owned as documented.
    #[test]
    fn objects_are_what_kubernetes_expects() {
        let w = want(&["10.0.0.1", "10.0.0.2", "fd00::1"]);
        let svc: Service = serde_json::from_value(service_object(&w)).unwrap();
        let spec = svc.spec.unwrap();
        assert_eq!(spec.selector, None, "selector-less");
        assert_eq!(spec.ports.unwrap()[0].name.as_deref(), Some("proxy"));
        let owner = &svc.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ProxyPool", "pool-uid")
        );

        let ep: Endpoints = serde_json::from_value(endpoints_object(&w, "svc-uid", true)).unwrap();
        let subsets = ep.subsets.unwrap();
        assert_eq!(subsets.len(), 1);
        assert_eq!(subsets[0].addresses.as_ref().unwrap().len(), 3);
        assert_eq!(
            ep.metadata.labels.unwrap()["endpointslice.kubernetes.io/skip-mirror"],
            "true"
        );
        let empty: Endpoints =
            serde_json::from_value(endpoints_object(&want(&[]), "u", false)).unwrap();
        assert_eq!(
            empty.subsets,
            Some(Vec::new()),
            "an empty list clears the addresses"
        );

        let slices: Vec<EndpointSlice> = slice_objects(&w, "svc-uid")
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect();
        let shape: Vec<(String, String, usize)> = slices
            .iter()
            .map(|s| {
                (
                    s.metadata.name.clone().unwrap(),
                    s.address_type.clone(),
                    s.endpoints.len(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("egress-ipv4-3128-0".to_owned(), "IPv4".to_owned(), 2),
                ("egress-ipv6-3128-0".to_owned(), "IPv6".to_owned(), 1)
            ]
        );
    }

    #[test]
    fn large_services_are_cut_into_slices_of_a_thousand() {
        let ips: Vec<String> = (0..2500)
            .map(|i| format!("10.1.{}.{}", i / 250, i % 250))
            .collect();
        let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
        let slices = slice_objects(&want(&refs), "u");
        let sizes: Vec<usize> = slices
            .iter()
            .map(|s| s["endpoints"].as_array().unwrap().len())
            .collect();
        assert_eq!(sizes, [1000, 1000, 500]);
    }
}
