//! What this process knows of consumer Leases before its watch cache does:
//! the objects it wrote last (laid over the cache for [`FRESH`]), and the
//! proxies its grants are trying now ([`Claim`]). Concurrent grants of one
//! replica thus neither try the same proxy nor judge by a cache that has
//! not yet seen their own writes; only another replica's writes can still
//! conflict (and the conditional write catches those).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use tokio::time::Instant;

/// How long a written object is preferred to the watch cache's copy (the
/// cache shows a write within milliseconds; a replica that wrote nothing
/// for this long reads the cache again).
pub const FRESH: Duration = Duration::from_secs(5);

/// This process's overlay and claims.
#[derive(Default)]
pub struct Local {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    written: HashMap<String, (Lease, Instant)>,
    claimed: HashSet<String>,
}

impl Local {
    /// Keeps `lease` (as the API server answered a write or a read) as the
    /// newest known copy; drops copies older than [`FRESH`].
    pub fn remember(&self, lease: &Lease) {
        let now = Instant::now();
        let mut inner = lock(&self.inner);
        inner
            .written
            .retain(|_, (_, at)| now.duration_since(*at) < FRESH);
        inner.written.insert(lease.name_any(), (lease.clone(), now));
    }

    /// Forgets the Lease `name` (deleted).
    pub fn forget(&self, name: &str) {
        lock(&self.inner).written.remove(name);
    }

    /// The copy of `name` written or read within [`FRESH`].
    pub fn get(&self, name: &str) -> Option<Lease> {
        let inner = lock(&self.inner);
        let (lease, at) = inner.written.get(name)?;
        (at.elapsed() < FRESH).then(|| lease.clone())
    }

    /// Calls `f` with every copy within [`FRESH`] (under the lock: `f`
    /// only reads).
    pub fn each_fresh(&self, mut f: impl FnMut(&Lease)) {
        let inner = lock(&self.inner);
        for (lease, at) in inner.written.values() {
            if at.elapsed() < FRESH {
                f(lease);
            }
        }
    }

    /// Claims `key` for one grant's attempt: `None` while another grant of
    /// this process holds it.
    pub fn claim(self: &Arc<Self>, key: &str) -> Option<Claim> {
        lock(&self.inner)
            .claimed
            .insert(key.to_owned())
            .then(|| Claim {
                local: self.clone(),
                key: key.to_owned(),
            })
    }
}

/// A claim on a proxy; released on drop.
pub struct Claim {
    local: Arc<Local>,
    key: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        lock(&self.local.inner).claimed.remove(&self.key);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The critical sections are map operations that cannot panic midway.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn lease(name: &str, rv: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            spec: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn copies_are_preferred_while_fresh() {
        let local = Local::default();
        local.remember(&lease("a", "1"));
        local.remember(&lease("a", "2"));
        assert_eq!(
            local.get("a").and_then(|l| l.metadata.resource_version),
            Some("2".into())
        );
        let count = |local: &Local| {
            let mut n = 0;
            local.each_fresh(|_| n += 1);
            n
        };
        assert_eq!(count(&local), 1);
        tokio::time::advance(FRESH).await;
        assert!(local.get("a").is_none());
        assert_eq!(count(&local), 0);
        local.remember(&lease("b", "1"));
        local.forget("b");
        assert!(local.get("b").is_none());
    }

    #[test]
    fn a_claim_excludes_others_until_dropped() {
        let local = Arc::new(Local::default());
        let first = local.claim("ns/p").unwrap();
        assert!(local.claim("ns/p").is_none());
        assert!(local.claim("ns/q").is_some());
        drop(first);
        assert!(local.claim("ns/p").is_some());
    }
}
