//! [`Issued`]: the member writes the pool controller made that its cache
//! may not show yet.
//!
//! The Proxy watch cache lags the controller's own writes. A pass on a
//! lagging view would count a member it just deleted as live and `Healthy`,
//! and could pick another victim: two passes together could take the pool
//! below `replicas - maxUnavailable`. So each pass overlays what this term
//! wrote: members it made count (not yet `Ready`), members it deleted are
//! counted as being deleted, until the cache shows them so.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use fleet::pool::{Member, Plan, ValidPool};

use super::members::Done;

/// Writes per pool (by UID) not yet seen in the cache.
#[derive(Debug, Default)]
pub struct Issued {
    pools: Mutex<HashMap<String, Writes>>,
}

#[derive(Debug, Default)]
struct Writes {
    created: BTreeMap<String, Member>,
    deleted: BTreeSet<String>,
}

impl Issued {
    /// `cached` (the pool's members as the cache has them) with this
    /// term's writes laid over; writes the cache now shows are forgotten.
    pub fn overlay(&self, pool_uid: &str, mut cached: Vec<Member>) -> Vec<Member> {
        // A poisoned lock means a pass panicked between two whole-value
        // updates: the table is still consistent.
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        let Some(w) = pools.get_mut(pool_uid) else {
            return cached;
        };
        let seen: BTreeMap<&str, bool> = cached
            .iter()
            .map(|m| (m.name.as_str(), m.deleting))
            .collect();
        w.created
            .retain(|name, _| !seen.contains_key(name.as_str()));
        w.deleted
            .retain(|name| seen.get(name.as_str()).is_some_and(|deleting| !deleting));
        for m in &mut cached {
            if w.deleted.contains(&m.name) {
                m.deleting = true;
            }
        }
        cached.extend(w.created.values().cloned());
        cached
    }

    /// Remembers what a pass of `pool` did.
    pub(super) fn record(&self, pool_uid: &str, pool: &ValidPool, plan: &Plan, done: &Done) {
        if done.created.is_empty() && done.deleted.is_empty() {
            return;
        }
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        let w = pools.entry(pool_uid.to_owned()).or_default();
        for m in plan
            .create
            .iter()
            .filter(|m| done.created.contains(&m.name))
        {
            w.created.insert(
                m.name.clone(),
                Member {
                    name: m.name.clone(),
                    template_hash: Some(pool.template_hash.clone()),
                    host: m.spec.placement.host.clone(),
                    ready: false,
                    healthy: false,
                    deleting: false,
                },
            );
        }
        for name in &done.deleted {
            w.created.remove(name);
            w.deleted.insert(name.clone());
        }
    }

    /// Forgets a pool (it is gone).
    pub fn forget(&self, pool_uid: &str) {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        pools.remove(pool_uid);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn pool(replicas: u32, unavailable: u32) -> ValidPool {
        let mut spec: fleet::pool::ProxyPoolSpec = serde_json::from_value(serde_json::json!({
            "template": {"spec": {"provider": "kvm2-home"}}
        }))
        .unwrap();
        spec.replicas = replicas;
        spec.strategy.max_unavailable = unavailable;
        spec.validate("egress").unwrap()
    }

    fn healthy(name: &str, hash: &str) -> Member {
        Member {
            name: name.into(),
            template_hash: Some(hash.into()),
            host: None,
            ready: true,
            healthy: true,
            deleting: false,
        }
    }

    /// A roll seen through a cache that lags the deletions: between the
    /// two passes an old member's `Ready` flips (still `Healthy`), which
    /// moves it to the front of the victim order. Without the overlay the
    /// second pass deletes it too, and the pool drops below
    /// replicas - maxUnavailable.
    #[test]
    fn a_lagging_cache_never_takes_the_pool_below_its_floor() {
        let old = pool(3, 1);
        let mut spec = old.spec.clone();
        spec.template.spec.image = Some("new".into());
        let new = spec.validate("egress").unwrap();
        let mut cached: Vec<Member> = (0..3)
            .map(|i| {
                healthy(
                    &format!("egress-{}-{i}", old.template_hash),
                    &old.template_hash,
                )
            })
            .collect();
        cached.push(healthy(
            &format!("egress-{}-0", new.template_hash),
            &new.template_hash,
        ));
        let issued = Issued::default();
        let mut gone: BTreeSet<String> = BTreeSet::new();
        for pass in 0..2 {
            if pass == 1 {
                cached[0].ready = false;
            }
            let view = issued.overlay("uid", cached.clone());
            let plan = new.plan(&view, None);
            gone.extend(plan.delete.iter().cloned());
            let done = Done {
                created: plan.create.iter().map(|m| m.name.clone()).collect(),
                deleted: plan.delete.clone(),
            };
            issued.record("uid", &new, &plan, &done);
        }
        let healthy_left = cached.iter().filter(|m| !gone.contains(&m.name)).count();
        assert_eq!(healthy_left, 2, "deleted: {gone:?}");
        // Once the cache shows the deletions, they are forgotten.
        for m in &mut cached {
            m.deleting = gone.contains(&m.name);
        }
        let view = issued.overlay("uid", cached.clone());
        assert_eq!(view[..cached.len()], cached[..]);
        assert!(
            view[cached.len()..].iter().all(|m| !m.ready && !m.deleting),
            "only the members made, not yet in the cache, are added"
        );
        assert!(issued.pools.lock().unwrap()["uid"].deleted.is_empty());
    }
}
