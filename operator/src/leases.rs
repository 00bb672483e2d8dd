//! Consumer leases (`/leases`): grants, renewals and releases carried out
//! on `coordination.k8s.io` Leases in the operator's namespace, and the
//! sweeper that ends the leases of proxies that turned unhealthy or were
//! deleted. `fleet::consumer_lease` decides; this module reads and writes.
//!
//! ```text
//!  grant ─▶ held = live records in the Lease watch cache
//!        ─▶ consumer_lease::candidates(discovery view, held, seed) ── none ─▶ NoneFree
//!        ─▶ per candidate not claimed by another grant of this process: create
//!           its Lease, or update an ended one with the resourceVersion known
//!           ── 409 ─▶ read it fresh; busy ─▶ next candidate
//!  renew, release ─▶ the newest copy this process knows (local.rs: its own
//!           writes over the watch cache) ─▶ consumer_lease::judge ── stands ─▶
//!           update with that resourceVersion; anything else, or a 409 ─▶ GET,
//!           judge again ─▶ update | Ended(why)
//!  sweeper (leader) ─▶ consumer_lease::sweep each cached record ─▶ end | delete
//! ```
//!
//! Every write is conditional, so two consumers, or two replicas, never
//! both win one proxy; nothing is kept in memory, so leases survive an
//! operator restart and a leader change. Each request's API calls share
//! one deadline ([`CALL_BUDGET`]); running out answers `Unavailable`.

mod local;

use provider_api::error::chain;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fleet::consumer_lease::{
    self as cl, Ended, LeaseGrant, LeaseId, LeasePath, ProxyNow, Record, Renewal, Sweep,
};
use fleet::{DiscoveredProxy, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::crd::Proxy;
use crate::metrics::OperatorMetrics;

/// The longest the API calls of one lease request take together.
pub const CALL_BUDGET: Duration = Duration::from_secs(10);
/// How often the sweeper looks (it also runs when it starts).
pub const SWEEP_PERIOD: Duration = Duration::from_secs(5);
/// Reads and writes of one candidate before the grant moves on.
const TRIES_PER_CANDIDATE: usize = 3;
/// The field manager of consumer Lease writes (`managedFields`).
const LEASES_MANAGER: &str = "egress-operator-leases";

/// Why a lease request got no lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No healthy proxy in the namespace is free (`healthy`: how many are
    /// healthy at all).
    NoneFree {
        /// Healthy, dialable proxies in the namespace.
        healthy: usize,
    },
    /// The lease renewed or released had ended.
    Ended(Ended),
    /// The API server failed or did not answer in time.
    Unavailable(String),
}

/// The consumer leases of one process: where they are kept and what the
/// grants read.
#[derive(Clone)]
pub struct ConsumerLeases {
    api: Api<Lease>,
    namespace: String,
    cache: Store<Lease>,
    proxies: Store<Proxy>,
    metrics: OperatorMetrics,
    local: Arc<local::Local>,
}

/// The discovery view of a cached Proxy.
pub fn discovered(p: &Proxy) -> DiscoveredProxy {
    let status = p.status.clone().unwrap_or_default();
    DiscoveredProxy::new(
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default(),
        &p.spec.inner,
        &status,
    )
}

impl ConsumerLeases {
    /// Leases kept in `namespace` through `api` (namespaced there), with
    /// `cache` its watch cache of consumer Leases and `proxies` the Proxy
    /// watch cache.
    pub fn new(
        api: Api<Lease>,
        namespace: String,
        cache: Store<Lease>,
        proxies: Store<Proxy>,
        metrics: OperatorMetrics,
    ) -> Self {
        ConsumerLeases {
            api,
            namespace,
            cache,
            proxies,
            metrics,
            local: Arc::default(),
        }
    }

    /// Grants `user` a lease on a free healthy proxy in `namespace` for
    /// `ttl`.
    ///
    /// # Errors
    /// [`Failure::NoneFree`] when every healthy proxy there is held;
    /// [`Failure::Unavailable`] when the API server fails.
    pub async fn grant(
        &self,
        namespace: &str,
        user: &str,
        ttl: Duration,
    ) -> Result<LeaseGrant, Failure> {
        let outcome = bounded(self.try_grant(namespace, user, ttl)).await;
        self.count(&outcome, "granted");
        outcome
    }

    async fn try_grant(
        &self,
        namespace: &str,
        user: &str,
        ttl: Duration,
    ) -> Result<LeaseGrant, Failure> {
        let id = new_id()?;
        let now = now_ms();
        // This process's own copies first; the cache's for the rest. Only
        // live leases cost an allocation (the Proxy's key).
        let mut held = BTreeSet::new();
        let mut mine = BTreeSet::new();
        self.local.each_fresh(|l| {
            mine.insert(l.name_any());
            held.extend(live_key(l, now));
        });
        for lease in self.cache.state() {
            if !lease
                .metadata
                .name
                .as_ref()
                .is_some_and(|n| mine.contains(n))
                && let Some(key) = live_key(&lease, now)
            {
                held.insert(key);
            }
        }
        let views = self.proxies.state();
        let healthy = views
            .iter()
            .map(|p| discovered(p))
            .filter(|p| p.namespace == namespace && p.healthy && p.address.is_some())
            .count();
        let seed = seed_of(&id);
        let candidates =
            cl::candidates(views.iter().map(|p| discovered(p)), namespace, &held, seed);
        for proxy in candidates {
            let Some(uid) = self.proxy_uid(&proxy.namespace, &proxy.name) else {
                continue;
            };
            // Another grant of this process is trying it: the next one.
            let Some(_claim) = self
                .local
                .claim(&format!("{}/{}", proxy.namespace, proxy.name))
            else {
                continue;
            };
            if let Some(grant) = self.take(&proxy, &uid, &id, user, ttl).await? {
                tracing::debug!(proxy = %format!("{}/{}", proxy.namespace, proxy.name), user, "consumer lease granted");
                return Ok(grant);
            }
        }
        Err(Failure::NoneFree { healthy })
    }

    /// Takes `proxy` for `id` if no live lease holds it: `None` when one
    /// does (or a racer won it).
    async fn take(
        &self,
        proxy: &DiscoveredProxy,
        uid: &str,
        id: &LeaseId,
        user: &str,
        ttl: Duration,
    ) -> Result<Option<LeaseGrant>, Failure> {
        let key = format!("{}/{}", proxy.namespace, proxy.name);
        let name = cl::lease_name(&proxy.namespace, &proxy.name);
        let mut current = self.known(&name);
        for _ in 0..TRIES_PER_CANDIDATE {
            let (now, now_time) = (now_ms(), MicroTime(k8s_openapi::jiff::Timestamp::now()));
            let written = match current.take() {
                None => {
                    let lease = Lease {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            namespace: Some(self.namespace.clone()),
                            labels: Some(BTreeMap::from([(cl::LABEL.into(), "true".into())])),
                            annotations: Some(annotations(&key, uid, user, None)),
                            ..ObjectMeta::default()
                        },
                        spec: Some(spec_for(id, ttl, now_time.clone(), Some(now_time), 0)),
                    };
                    self.api.create(&write_params(), &lease).await
                }
                Some(existing) => {
                    let r = record(&existing);
                    if r.proxy.as_deref() != Some(key.as_str()) || r.is_live(now) {
                        return Ok(None);
                    }
                    // The lease before, if any, expired: its holder learns so.
                    let ended = match (&r.holder, &r.ended) {
                        (Some(old), _) => Some(Record::ended_annotation(old, Ended::Expired)),
                        (None, Some((old, why))) => Some(Record::ended_annotation(old, *why)),
                        (None, None) => None,
                    };
                    let old = existing.spec.clone().unwrap_or_default();
                    let transitions = old.lease_transitions.unwrap_or(0).saturating_add(1);
                    let mut lease = existing;
                    lease.metadata.annotations = Some(annotations(&key, uid, user, ended));
                    lease.spec = Some(spec_for(
                        id,
                        ttl,
                        now_time.clone(),
                        Some(now_time),
                        transitions,
                    ));
                    self.api.replace(&name, &write_params(), &lease).await
                }
            };
            match written {
                Ok(lease) => {
                    self.local.remember(&lease);
                    return Ok(Some(self.grant_of(proxy.clone(), id, &lease)));
                }
                // A racer created or changed it: read what is there now.
                Err(e) if conflict(&e) => current = self.read(&name).await?,
                Err(e) => return Err(unavailable("write a consumer Lease", &e)),
            }
        }
        Ok(None)
    }

    /// Renews the lease `path` names for `user`, for `ttl` from now.
    ///
    /// # Errors
    /// [`Failure::Ended`] with the reason when the lease had ended (the
    /// holder asks again); [`Failure::Unavailable`] when the API server
    /// fails.
    pub async fn renew(
        &self,
        path: &LeasePath,
        user: &str,
        ttl: Duration,
    ) -> Result<LeaseGrant, Failure> {
        let outcome = bounded(async {
            let (lease, proxy) = self
                .rewrite(path, user, ["renew", "renewed"], |spec| {
                    spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
                    spec.lease_duration_seconds = Some(ttl_secs(ttl));
                })
                .await?;
            Ok(self.grant_of(proxy, &path.id, &lease))
        })
        .await;
        self.count(&outcome, "renewed");
        outcome
    }

    /// Releases the lease `path` names, held by `user`.
    ///
    /// # Errors
    /// [`Failure::Ended`] when it had ended already (nothing to release);
    /// [`Failure::Unavailable`] when the API server fails.
    pub async fn release(&self, path: &LeasePath, user: &str) -> Result<(), Failure> {
        let outcome = bounded(async {
            self.rewrite(path, user, ["release", "released"], |spec| {
                spec.holder_identity = None;
            })
            .await
            .map(|_| ())
        })
        .await;
        self.count(&outcome, "released");
        outcome
    }

    /// Changes the spec of the lease `path` names, held by `user`, with
    /// `change` and writes it (`verb`: what is done, and done, for the
    /// messages): the lease judged first ([`Failure::Ended`] when it has
    /// ended), judged again from a fresh read when a racer (the sweeper,
    /// another replica) changed it since.
    async fn rewrite(
        &self,
        path: &LeasePath,
        user: &str,
        [verb, done]: [&str; 2],
        change: impl Fn(&mut LeaseSpec),
    ) -> Result<(Lease, DiscoveredProxy), Failure> {
        for attempt in 0..TRIES_PER_CANDIDATE {
            let (mut lease, proxy) = self.judged(path, user, attempt > 0).await?;
            let mut spec = lease.spec.clone().unwrap_or_default();
            change(&mut spec);
            lease.spec = Some(spec);
            let name = lease.name_any();
            match self.api.replace(&name, &write_params(), &lease).await {
                Ok(lease) => {
                    self.local.remember(&lease);
                    return Ok((lease, proxy));
                }
                Err(e) if conflict(&e) => {}
                Err(e) => return Err(unavailable(&format!("{verb} a consumer Lease"), &e)),
            }
        }
        Err(Failure::Unavailable(format!(
            "the lease kept changing while it was {done}; retry"
        )))
    }

    /// The Lease `path` names and its proxy, if the lease stands; else why
    /// not (recording the end when the proxy's state ends it now). Unless
    /// `fresh`, the newest copy this process knows is judged first: a
    /// lease it shows standing is proven by the conditional write that
    /// follows; anything else is judged again on a fresh read, never
    /// answered from a copy that may lag.
    async fn judged(
        &self,
        path: &LeasePath,
        user: &str,
        fresh: bool,
    ) -> Result<(Lease, DiscoveredProxy), Failure> {
        let name = cl::lease_name(&path.namespace, &path.proxy);
        let key = format!("{}/{}", path.namespace, path.proxy);
        let cached = self.live_proxy(&path.namespace, &path.proxy);
        let view = cached.as_deref().map(discovered);
        let now = proxy_now(cached.as_deref(), view.as_ref());
        if !fresh
            && let Some(lease) = self.known(&name)
            && cl::judge(Some(&record(&lease)), &key, &path.id, user, now, now_ms())
                == Renewal::Stands
            && let Some(view) = &view
        {
            return Ok((lease, view.clone()));
        }
        let lease = self.read(&name).await?;
        let record = lease.as_ref().map(record);
        match cl::judge(record.as_ref(), &key, &path.id, user, now, now_ms()) {
            Renewal::Stands => match (lease, view) {
                (Some(lease), Some(view)) => Ok((lease, view)),
                _ => Err(Failure::Ended(Ended::Lost)),
            },
            Renewal::Ended { why, write } => {
                if let (true, Some(lease)) = (write, lease) {
                    // Best effort: the sweeper ends it otherwise.
                    let _ = self.end(lease, &path.id, why).await;
                }
                Err(Failure::Ended(why))
            }
        }
    }

    /// The newest copy of the Lease `name` this process knows: its own
    /// write or read within `local::FRESH`, else the watch cache's.
    fn known(&self, name: &str) -> Option<Lease> {
        self.local.get(name).or_else(|| {
            self.cache
                .get(&ObjectRef::new(name).within(&self.namespace))
                .map(|l| (*l).clone())
        })
    }

    /// The Lease `name` as the API server has it now.
    async fn read(&self, name: &str) -> Result<Option<Lease>, Failure> {
        let lease = self
            .api
            .get_opt(name)
            .await
            .map_err(|e| unavailable("read a consumer Lease", &e))?;
        match &lease {
            Some(l) => self.local.remember(l),
            None => self.local.forget(name),
        }
        Ok(lease)
    }

    /// Ends the live lease `id` in `lease` for `why` (a conditional update).
    async fn end(&self, mut lease: Lease, id: &LeaseId, why: Ended) -> Result<(), kube::Error> {
        let mut spec = lease.spec.clone().unwrap_or_default();
        spec.holder_identity = None;
        lease.spec = Some(spec);
        lease
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                cl::ENDED_ANNOTATION.into(),
                Record::ended_annotation(id, why),
            );
        let name = lease.name_any();
        let lease = self.api.replace(&name, &write_params(), &lease).await?;
        self.local.remember(&lease);
        Ok(())
    }

    /// One sweep over the cached consumer Leases of `scope` (a namespace, or
    /// all): ends the leases of unhealthy proxies and deletes the records of
    /// deleted Proxies. Returns the writes made.
    pub async fn sweep_once(&self, scope: Option<&str>) -> usize {
        let now = now_ms();
        let mut writes = 0;
        for lease in self.cache.state() {
            let r = record(&lease);
            let Some((ns, name)) = r.proxy.as_deref().and_then(|k| k.split_once('/')) else {
                continue;
            };
            if scope.is_some_and(|s| s != ns) {
                continue;
            }
            let cached = self.live_proxy(ns, name);
            let view = cached.as_deref().map(discovered);
            let now_proxy = proxy_now(cached.as_deref(), view.as_ref());

            let done = match cl::sweep(&r, now_proxy, now) {
                Sweep::Keep => continue,
                Sweep::End(why) => match &r.holder {
                    Some(id) => self.end((*lease).clone(), id, why).await,
                    None => continue,
                },
                Sweep::Delete => {
                    let dp = DeleteParams {
                        preconditions: Some(Preconditions {
                            uid: lease.metadata.uid.clone(),
                            resource_version: lease.metadata.resource_version.clone(),
                        }),
                        ..DeleteParams::default()
                    };
                    self.local.forget(&lease.name_any());
                    self.api.delete(&lease.name_any(), &dp).await.map(drop)
                }
            };
            writes += 1;
            match done {
                Ok(()) => tracing::debug!(proxy = %format!("{ns}/{name}"), "consumer lease swept"),
                // Changed or gone since the cache saw it: the next sweep
                // judges what is there.
                Err(e) if conflict(&e) || crate::gone::is_not_found(&e) => {}
                Err(e) => tracing::warn!(error = %chain(&e), "consumer lease sweep"),
            }
        }
        writes
    }

    /// Sweeps every [`SWEEP_PERIOD`] until `cancel` fires, once both watch
    /// caches have synced (a cache not yet filled would read as every Proxy
    /// deleted).
    pub async fn sweeper(self, scope: Option<String>, cancel: CancellationToken) {
        let synced = async {
            crate::store_ready::ready(&self.proxies).await;
            crate::store_ready::ready(&self.cache).await;
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = synced => {}
        }
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = self.sweep_once(scope.as_deref()) => {}
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(SWEEP_PERIOD) => {}
            }
        }
    }

    fn proxy_uid(&self, namespace: &str, name: &str) -> Option<String> {
        self.live_proxy(namespace, name)
            .and_then(|p| p.metadata.uid.clone())
    }

    /// The cached Proxy `namespace/name`, unless it is being deleted (a
    /// Proxy on its way out counts as gone).
    fn live_proxy(&self, namespace: &str, name: &str) -> Option<Arc<Proxy>> {
        self.proxies
            .get(&ObjectRef::new(name).within(namespace))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
    }

    fn grant_of(&self, proxy: DiscoveredProxy, id: &LeaseId, lease: &Lease) -> LeaseGrant {
        let spec = lease.spec.clone().unwrap_or_default();
        let ttl = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
        let renewed_ms = spec
            .renew_time
            .map_or_else(now_ms, |t| t.0.as_millisecond());
        let expires = Timestamp::from_unix_seconds(
            renewed_ms
                .saturating_add(i64::try_from(ttl).unwrap_or(0).saturating_mul(1000))
                .div_euclid(1000),
        );
        LeaseGrant {
            id: id.as_str().to_owned(),
            path: LeasePath::render(&proxy.namespace, &proxy.name, id),
            proxy,
            ttl_seconds: ttl,
            expires_at: expires.to_string(),
        }
    }

    fn count<T>(&self, outcome: &Result<T, Failure>, ok: &'static str) {
        self.metrics.consumer_lease(match outcome {
            Ok(_) => ok,
            Err(Failure::NoneFree { .. }) => "none_free",
            Err(Failure::Ended(_)) => "ended",
            Err(Failure::Unavailable(_)) => "unavailable",
        });
    }
}

/// A cached Proxy as a lease judges it.
fn proxy_now<'a>(proxy: Option<&'a Proxy>, view: Option<&DiscoveredProxy>) -> Option<ProxyNow<'a>> {
    Some(ProxyNow {
        uid: proxy?.metadata.uid.as_deref()?,
        healthy: view.is_some_and(|v| v.healthy && v.address.is_some()),
    })
}

/// The `namespace/name` of the Proxy a live lease in `lease` holds.
fn live_key(lease: &Lease, now_ms: i64) -> Option<String> {
    let spec = lease.spec.as_ref()?;
    let live = Record {
        holder: spec.holder_identity.as_deref().and_then(LeaseId::parse),
        renewed_ms: spec.renew_time.as_ref().map(|t| t.0.as_millisecond()),
        ttl_secs: spec.lease_duration_seconds,
        ..Record::default()
    }
    .is_live(now_ms);
    live.then(|| {
        lease
            .metadata
            .annotations
            .as_ref()?
            .get(cl::PROXY_ANNOTATION)
            .cloned()
    })
    .flatten()
}

/// What a stored consumer Lease says.
pub fn record(lease: &Lease) -> Record {
    let notes = lease.metadata.annotations.as_ref();
    let note = |k: &str| notes.and_then(|a| a.get(k)).cloned();
    let spec = lease.spec.as_ref();
    Record {
        proxy: note(cl::PROXY_ANNOTATION),
        proxy_uid: note(cl::PROXY_UID_ANNOTATION),
        holder: spec
            .and_then(|s| s.holder_identity.as_deref())
            .and_then(LeaseId::parse),
        user: note(cl::USER_ANNOTATION),
        renewed_ms: spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.as_millisecond()),
        ttl_secs: spec.and_then(|s| s.lease_duration_seconds),
        ended: note(cl::ENDED_ANNOTATION).and_then(|v| Record::parse_ended(&v)),
    }
}

fn annotations(
    key: &str,
    uid: &str,
    user: &str,
    ended: Option<String>,
) -> BTreeMap<String, String> {
    let mut a = BTreeMap::from([
        (cl::PROXY_ANNOTATION.into(), key.to_owned()),
        (cl::PROXY_UID_ANNOTATION.into(), uid.to_owned()),
        (cl::USER_ANNOTATION.into(), user.to_owned()),
    ]);
    if let Some(ended) = ended {
        a.insert(cl::ENDED_ANNOTATION.into(), ended);
    }
    a
}

fn spec_for(
    id: &LeaseId,
    ttl: Duration,
    acquired: MicroTime,
    renewed: Option<MicroTime>,
    transitions: i32,
) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(id.as_str().to_owned()),
        lease_duration_seconds: Some(ttl_secs(ttl)),
        acquire_time: Some(acquired),
        renew_time: renewed,
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

fn ttl_secs(ttl: Duration) -> i32 {
    // TTLs are bounded by `consumer_lease::MAX_TTL` (an hour).
    i32::try_from(ttl.as_secs()).unwrap_or(i32::MAX)
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The consumer leases' writes, under their own field manager.
fn write_params() -> PostParams {
    PostParams {
        field_manager: Some(LEASES_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

fn unavailable(what: &str, e: &kube::Error) -> Failure {
    tracing::warn!(error = %chain(e), "consumer leases: {what} failed");
    Failure::Unavailable(format!("could not {what}; retry"))
}

async fn bounded<T>(fut: impl Future<Output = Result<T, Failure>>) -> Result<T, Failure> {
    tokio::time::timeout(CALL_BUDGET, fut)
        .await
        .unwrap_or_else(|_| {
            Err(Failure::Unavailable(
                "the API server did not answer in time; retry".into(),
            ))
        })
}

fn new_id() -> Result<LeaseId, Failure> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        tracing::error!(error = %e, "consumer leases: no randomness");
        Failure::Unavailable("no randomness for a lease id".into())
    })?;
    Ok(LeaseId::from_random(bytes))
}

/// The candidates' tie-break seed: the lease id's first 8 bytes (random).
fn seed_of(id: &LeaseId) -> u64 {
    u64::from_str_radix(id.as_str().get(..16).unwrap_or("0"), 16).unwrap_or(0)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
