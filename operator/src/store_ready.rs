//! [`ready`]: waiting for a watch cache's first complete listing, from
//! several tasks at once.
//!
//! kube's `Store::wait_until_ready` wakes only the task that polled it
//! last (its one-shot channel keeps one waker): with two waiters, one can
//! wait forever (a kube Controller waits on its own store, so anyone else
//! waiting on a controller's store is the second). [`ready`] polls again
//! every [`REPOLL`], so every waiter sees readiness within that.

use std::time::Duration;

use kube::runtime::reflector::Store;

/// How often a waiter looks again.
const REPOLL: Duration = Duration::from_millis(200);

/// Returns once `store` has had its first complete listing.
pub async fn ready<K>(store: &Store<K>)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    while tokio::time::timeout(REPOLL, store.wait_until_ready())
        .await
        .is_err()
    {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::watcher::Event;

    /// Two tasks wait on one store; both return once it is ready (with
    /// kube's own wait, the first waiter is never woken).
    #[tokio::test]
    async fn every_waiter_sees_readiness() {
        let (reader, mut writer) = kube::runtime::reflector::store::<ConfigMap>();
        let first = tokio::spawn({
            let r = reader.clone();
            async move { ready(&r).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = tokio::spawn({
            let r = reader.clone();
            async move { ready(&r).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        let both = tokio::time::timeout(Duration::from_secs(2), async {
            first.await.ok();
            second.await.ok();
        });
        assert!(both.await.is_ok(), "a waiter was never woken");
    }
}
