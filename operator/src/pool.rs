//! The ProxyPool controller (leader only): kube-runtime's `Controller` and
//! `finalizer` around `fleet::pool`'s plan.
//!
//! One pass: validate the spec, read the pool's members (Proxies it owns,
//! from the Proxy watch cache) and the entry's hosts (the monitor's latest
//! check, [`HostBook`]), ask `fleet` for the plan, make and delete members
//! (bounded concurrency; an existing name or an already deleted member is
//! success, so a pass that saw a stale cache repeats nothing harmful), then
//! write the status by server-side apply (field manager [`POOL_MANAGER`])
//! when it changed. Member changes trigger a pass (the controller watches
//! the Proxies it owns); a pass that is not `Complete` also looks again
//! after [`PROGRESS_POLL`].
//!
//! Deleting a pool deletes its members and keeps the pool (finalizer
//! [`fleet::pool::POOL_FINALIZER`]) until they are gone, instances
//! included (each member's own finalizer deletes its VM). A delete with
//! `propagationPolicy: Orphan` (the `orphan` finalizer) leaves them.

mod hosts;
mod issued;
mod members;

use provider_api::error::chain;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fleet::pool::{Member, POOL_FINALIZER, ProxyPoolStatus};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, Event as FinalizerEvent};
use kube::runtime::reflector;
use kube::{Api, Client, ResourceExt};

use crate::crd::{Proxy, ProxyPool};
use crate::metrics::OperatorMetrics;

pub use hosts::HostBook;
#[cfg(test)]
pub(crate) use hosts::tests as hosts_tests;
pub use issued::Issued;

/// The field manager of the pool controller's status writes.
pub const POOL_MANAGER: &str = "egress-operator-pool";
/// How soon a pool that is not `Complete` is looked at again (member
/// changes trigger passes too; this covers a cache that lagged the trigger).
const PROGRESS_POLL: Duration = Duration::from_secs(10);
/// How often a `Complete` pool is looked at again.
const STEADY_POLL: Duration = Duration::from_secs(300);
/// How soon a deleted pool looks again for members still going.
const DELETE_POLL: Duration = Duration::from_secs(2);
/// The finalizer the API server's garbage collector adds for
/// `propagationPolicy: Orphan`.
const ORPHAN_FINALIZER: &str = "orphan";

/// Everything a pool pass uses.
pub struct PoolCtx {
    /// The API client (the operator's own identity).
    pub client: Client,
    /// The Proxy watch cache (members are read from it).
    pub proxies: reflector::Store<Proxy>,
    /// The entries' hosts, from the monitor's latest checks.
    pub hosts: HostBook,
    /// Publishes the pool's Events (members made and deleted).
    pub recorder: kube::runtime::events::Recorder,
    /// Metrics.
    pub metrics: OperatorMetrics,
    /// The member writes this term made that the cache may not show yet.
    pub issued: Issued,
}

/// Why a pool pass failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object lacks a namespace, name or UID.
    #[error("ProxyPool object without {0}")]
    Incomplete(&'static str),
    /// Making or deleting members failed (the status says which).
    #[error("{0}")]
    Members(String),
    /// The status write failed.
    #[error("write status of ProxyPool {name}")]
    WriteStatus {
        /// The pool.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Members are still going; the finalizer stays.
    #[error("{0} members still being deleted")]
    DeletePending(usize),
}

/// The controller's reconcile function.
///
/// # Errors
/// A failed member or status write, or (so the finalizer stays) members
/// still being deleted.
pub async fn reconcile(
    pool: Arc<ProxyPool>,
    ctx: Arc<PoolCtx>,
) -> Result<Action, finalizer::Error<Error>> {
    let ns = pool
        .namespace()
        .ok_or(finalizer::Error::ApplyFailed(Error::Incomplete(
            "namespace",
        )))?;
    let api: Api<ProxyPool> = Api::namespaced(ctx.client.clone(), &ns);
    let result = finalizer::finalizer(&api, POOL_FINALIZER, pool, |event| async {
        match event {
            FinalizerEvent::Apply(p) => apply(&p, &ctx).await,
            FinalizerEvent::Cleanup(p) => cleanup(&p, &ctx).await,
        }
    })
    .await;
    ctx.metrics.pool_reconcile(match &result {
        Ok(_) => "ok",
        Err(finalizer::Error::CleanupFailed(Error::DeletePending(_))) => "pending",
        Err(_) => "error",
    });
    result
}

/// The controller's error policy: members still going are looked at again
/// soon; anything else after a backoff (a refused write is not retried in
/// a tight loop).
pub fn error_policy(
    pool: Arc<ProxyPool>,
    err: &finalizer::Error<Error>,
    _: Arc<PoolCtx>,
) -> Action {
    match err {
        finalizer::Error::CleanupFailed(Error::DeletePending(_)) => Action::requeue(DELETE_POLL),
        e => {
            tracing::warn!(
                pool = %format!("{}/{}", pool.namespace().unwrap_or_default(), pool.name_any()),
                error = %chain(e),
                "pool reconcile failed"
            );
            Action::requeue(PROGRESS_POLL)
        }
    }
}

/// The members of the pool with UID `uid`: Proxies in the cache it owns
/// as their controller.
fn members_of(ctx: &PoolCtx, ns: &str, uid: &str) -> Vec<Arc<Proxy>> {
    ctx.proxies
        .state()
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns)
                && p.owner_references()
                    .iter()
                    .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .collect()
}

/// What `fleet` needs to know of a member.
fn member_view(p: &Proxy) -> Member {
    let status = p.status.clone().unwrap_or_default();
    Member {
        name: p.name_any(),
        template_hash: p.labels().get(fleet::pool::TEMPLATE_LABEL).cloned(),
        host: status
            .host
            .clone()
            .or_else(|| p.spec.inner.placement.host.clone()),
        ready: status.condition_status(fleet::ConditionType::Ready)
            == Some(fleet::ConditionStatus::True),
        healthy: status.is_healthy(),
        deleting: p.metadata.deletion_timestamp.is_some(),
    }
}

async fn apply(pool: &ProxyPool, ctx: &PoolCtx) -> Result<Action, Error> {
    let ns = pool.namespace().ok_or(Error::Incomplete("namespace"))?;
    let name = pool
        .metadata
        .name
        .clone()
        .ok_or(Error::Incomplete("name"))?;
    let uid = pool.metadata.uid.clone().ok_or(Error::Incomplete("uid"))?;
    let generation = pool.metadata.generation;
    let before = pool.status.clone().unwrap_or_default();
    let now = fleet::Timestamp::from_system_time(SystemTime::now());
    let valid = match pool.spec.inner.validate(&name) {
        Ok(v) => v,
        Err(issues) => {
            let status = before.invalid(&issues, generation, now);
            write_status(ctx, &ns, &name, &before, &status).await?;
            return Ok(Action::await_change());
        }
    };
    let entry = valid.spec.template.spec.provider.clone();
    // The monitor's first check of this entry is moments away: wait for it
    // rather than place the first members blind.
    if !ctx.hosts.first_check(&entry).await {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let hosts = ctx.hosts.get(&entry);
    let members = members_of(ctx, &ns, &uid);
    let cached: Vec<Member> = members.iter().map(|p| member_view(p)).collect();
    // The cache can lag this controller's own writes: members it made are
    // counted, members it deleted are not counted as live (a lagging view
    // could otherwise pick further victims and go below the floor).
    let views = ctx.issued.overlay(&uid, cached);
    let plan = valid.plan(&views, hosts.as_deref());
    let (failure, done) = members::carry_out(ctx, pool, &valid, &plan).await;
    ctx.issued.record(&uid, &valid, &plan, &done);
    let status = before.observe(&valid, &plan, failure.as_deref(), generation, now);
    write_status(ctx, &ns, &name, &before, &status).await?;
    match failure {
        Some(why) => Err(Error::Members(why)),
        None if plan.progress == fleet::pool::Progress::Complete => {
            Ok(Action::requeue(STEADY_POLL))
        }
        None => Ok(Action::requeue(PROGRESS_POLL)),
    }
}

async fn cleanup(pool: &ProxyPool, ctx: &PoolCtx) -> Result<Action, Error> {
    if pool.finalizers().iter().any(|f| f == ORPHAN_FINALIZER) {
        tracing::info!(pool = %pool.name_any(), "pool deleted with its members orphaned");
        return Ok(Action::await_change());
    }
    let ns = pool.namespace().ok_or(Error::Incomplete("namespace"))?;
    let uid = pool.metadata.uid.clone().ok_or(Error::Incomplete("uid"))?;
    let members = members_of(ctx, &ns, &uid);
    if members.is_empty() {
        ctx.issued.forget(&uid);
        return Ok(Action::await_change());
    }
    let live: Vec<String> = members
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect();
    if let Some(why) = members::delete_all(ctx, &ns, &live).await {
        return Err(Error::Members(why));
    }
    Err(Error::DeletePending(members.len()))
}

async fn write_status(
    ctx: &PoolCtx,
    ns: &str,
    name: &str,
    before: &ProxyPoolStatus,
    status: &ProxyPoolStatus,
) -> Result<(), Error> {
    if status == before {
        return Ok(());
    }
    let api: Api<ProxyPool> = Api::namespaced(ctx.client.clone(), ns);
    crate::status_apply::apply_status(&api, name, POOL_MANAGER, status)
        .await
        .map_err(|source| Error::WriteStatus {
            name: format!("{ns}/{name}"),
            source,
        })?;
    ctx.metrics.status_write("pool");
    Ok(())
}
