//! Making and deleting a pool's members: the Proxy objects a plan names,
//! written with bounded concurrency; an Event on the pool says what was
//! done.

use provider_api::error::chain;

use fleet::pool::{NewMember, POOL_LABEL, Plan, TEMPLATE_LABEL, ValidPool};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};

use super::PoolCtx;
use crate::crd::{Proxy, ProxyPool, ProxySpec};

/// Member writes in flight at once (one pass of a large pool makes many).
const MEMBER_WRITES: usize = 16;
/// Member names listed in an Event note before "and N more".
const NAMES_IN_NOTE: usize = 10;

/// The Proxy object for `member` of `pool`: the template's labels and
/// annotations, the pool's two labels, the pool as its controlling owner,
/// and the Proxy controller's finalizer.
fn member_object(pool: &ProxyPool, valid: &ValidPool, member: &NewMember) -> Proxy {
    let template = &valid.spec.template.metadata;
    let mut labels = template.labels.clone();
    labels.insert(POOL_LABEL.to_owned(), valid.name.clone());
    labels.insert(TEMPLATE_LABEL.to_owned(), valid.template_hash.clone());
    let mut proxy = Proxy::new(
        &member.name,
        ProxySpec {
            inner: member.spec.clone(),
        },
    );
    proxy.metadata = ObjectMeta {
        name: Some(member.name.clone()),
        namespace: pool.namespace(),
        labels: Some(labels),
        annotations: (!template.annotations.is_empty()).then(|| template.annotations.clone()),
        // Blocking: a foreground delete of the pool waits for its members
        // (and so for their instances).
        owner_references: pool.controller_owner_ref(&()).map(|mut o| {
            o.block_owner_deletion = Some(true);
            vec![o]
        }),
        // The Proxy controller's own finalizer, set at birth: it would add
        // it in its first pass (one write per member saved).
        finalizers: Some(vec![crate::crd::FINALIZER.to_owned()]),
        ..ObjectMeta::default()
    };
    proxy
}

/// The member writes of one pass that the API server took.
#[derive(Debug, Default)]
pub(super) struct Done {
    /// Members made (or found made: the name existed).
    pub created: Vec<String>,
    /// Members deleted (or found gone).
    pub deleted: Vec<String>,
}

/// Makes and deletes what `plan` says; returns why something failed (the
/// first failure and how many), if anything did, and what was done.
pub(super) async fn carry_out(
    ctx: &PoolCtx,
    pool: &ProxyPool,
    valid: &ValidPool,
    plan: &Plan,
) -> (Option<String>, Done) {
    let ns = pool.namespace().unwrap_or_default();
    let api: Api<Proxy> = Api::namespaced(ctx.client.clone(), &ns);
    // Owned items: a stream over borrowed ones is not `Send` for every
    // lifetime, which the controller's future must be.
    let objects: Vec<(String, Proxy)> = plan
        .create
        .iter()
        .map(|m| (m.name.clone(), member_object(pool, valid, m)))
        .collect();
    let creates = futures::stream::iter(objects)
        .map(|(name, object)| {
            let api = api.clone();
            async move {
                // Named, so `managedFields` says who made the member.
                let params = PostParams {
                    field_manager: Some(super::POOL_MANAGER.to_owned()),
                    ..PostParams::default()
                };
                let r = api.create(&params, &object).await;
                (name, r.map(|_| ()))
            }
        })
        .buffer_unordered(MEMBER_WRITES)
        .collect::<Vec<_>>()
        .await;
    let mut failures = Vec::new();
    let mut created = Vec::new();
    let mut done = Done::default();
    for (name, r) in creates {
        match r {
            Ok(()) => {
                ctx.metrics.pool_member_write("create", "ok");
                done.created.push(name.clone());
                created.push(name);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                ctx.metrics.pool_member_write("create", "exists");
                done.created.push(name);
            }
            Err(e) => {
                ctx.metrics.pool_member_write("create", "error");
                failures.push(format!("create {name}: {}", chain(&e)));
            }
        }
    }
    let (deleted, gone, delete_failures) = delete(ctx, &ns, &plan.delete).await;
    done.deleted.extend(deleted.iter().chain(&gone).cloned());
    let created: Vec<&str> = created.iter().map(String::as_str).collect();
    let deleted: Vec<&str> = deleted.iter().map(String::as_str).collect();
    failures.extend(delete_failures);
    if !created.is_empty() {
        record(ctx, pool, "MembersCreated", "created", &created).await;
    }
    if !deleted.is_empty() {
        record(ctx, pool, "MembersDeleted", "deleted", &deleted).await;
    }
    (summary(failures), done)
}

/// Deletes every member named; returns why something failed, if it did.
pub(super) async fn delete_all(ctx: &PoolCtx, ns: &str, names: &[String]) -> Option<String> {
    summary(delete(ctx, ns, names).await.2)
}

/// Deletes the members named; returns those this call deleted, those
/// already gone, and the failures.
async fn delete(
    ctx: &PoolCtx,
    ns: &str,
    names: &[String],
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let api: Api<Proxy> = Api::namespaced(ctx.client.clone(), ns);
    let results = futures::stream::iter(names.to_vec())
        .map(|name| {
            let api = api.clone();
            async move {
                let r = api.delete(&name, &DeleteParams::default()).await;
                (name, r)
            }
        })
        .buffer_unordered(MEMBER_WRITES)
        .collect::<Vec<_>>()
        .await;
    let (mut deleted, mut gone, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for (name, r) in results {
        match r {
            Ok(_) => {
                ctx.metrics.pool_member_write("delete", "ok");
                deleted.push(name);
            }
            Err(e) if crate::gone::is_not_found(&e) => {
                ctx.metrics.pool_member_write("delete", "gone");
                gone.push(name);
            }
            Err(e) => {
                ctx.metrics.pool_member_write("delete", "error");
                failures.push(format!("delete {name}: {}", chain(&e)));
            }
        }
    }
    (deleted, gone, failures)
}

/// The first failure, and how many more there were.
fn summary(failures: Vec<String>) -> Option<String> {
    let first = failures.first()?;
    Some(match failures.len() {
        1 => first.clone(),
        n => format!("{first} (and {} more failures)", n - 1),
    })
}

/// `created 3 members: a, b, c` (at most [`NAMES_IN_NOTE`] names).
fn note(verb: &str, names: &[&str]) -> String {
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    let shown = sorted
        .iter()
        .take(NAMES_IN_NOTE)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = names.len().saturating_sub(NAMES_IN_NOTE);
    let plural = if names.len() == 1 { "" } else { "s" };
    if more == 0 {
        format!("{verb} {} member{plural}: {shown}", names.len())
    } else {
        format!(
            "{verb} {} member{plural}: {shown} and {more} more",
            names.len()
        )
    }
}

async fn record(ctx: &PoolCtx, pool: &ProxyPool, reason: &str, verb: &str, names: &[&str]) {
    let event = Event {
        type_: EventType::Normal,
        reason: reason.to_owned(),
        note: Some(note(verb, names)),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    match ctx.recorder.publish(&event, &pool.object_ref(&())).await {
        Ok(()) => ctx.metrics.event(reason),
        Err(e) => {
            tracing::warn!(pool = %pool.name_any(), reason, error = %chain(&e), "event not recorded")
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn notes_name_at_most_ten_members() {
        assert_eq!(note("created", &["b", "a"]), "created 2 members: a, b");
        assert_eq!(note("deleted", &["a"]), "deleted 1 member: a");
        let many: Vec<String> = (10..25).map(|i| format!("m{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let n = note("created", &refs);
        assert!(n.ends_with("m19 and 5 more"), "{n}");
    }

    #[test]
    fn members_carry_the_template_metadata_and_the_pools_labels_and_owner() {
        let spec: fleet::pool::ProxyPoolSpec = serde_json::from_value(serde_json::json!({
            "template": {
                "metadata": {"labels": {"team": "a", POOL_LABEL: "spoofed"},
                             "annotations": {"note": "x"}},
                "spec": {"provider": "kvm2-home"}
            }
        }))
        .unwrap();
        let valid = spec.validate("egress").unwrap();
        let mut pool = ProxyPool::new("egress", crate::crd::ProxyPoolSpec { inner: spec });
        pool.metadata.namespace = Some("team-a".into());
        pool.metadata.uid = Some("uid-1".into());
        let plan = valid.plan(&[], None);
        let m = member_object(&pool, &valid, &plan.create[0]);
        let labels = m.metadata.labels.unwrap();
        assert_eq!(labels[POOL_LABEL], "egress", "the pool's label wins");
        assert_eq!(labels[TEMPLATE_LABEL], valid.template_hash);
        assert_eq!(labels["team"], "a");
        assert_eq!(m.metadata.annotations.unwrap()["note"], "x");
        assert_eq!(m.metadata.namespace.as_deref(), Some("team-a"));
        let owner = &m.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("ProxyPool", "uid-1", Some(true))
        );
        assert_eq!(owner.block_owner_deletion, Some(true));
        assert_eq!(
            m.metadata.finalizers.as_deref(),
            Some(&[crate::crd::FINALIZER.to_owned()][..])
        );
    }
}
