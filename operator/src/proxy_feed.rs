//! [`ProxyFeed`]: the replica's one Proxy watch, handed on to the
//! controllers of a term, so the API server serves one watch of Proxies to
//! this process instead of three (the cache, the Proxy controller and the
//! ProxyPool controller's members) and the operator decodes each event
//! once.
//!
//! The cache's watch task records each event after the reflector stored it
//! ([`ProxyFeed::record`]); a controller reads its own subscription
//! ([`ProxyFeed::subscribe`]), a stream of the Proxies that changed, as
//! its own watch would have yielded them: every Proxy first (a new term
//! looks at everything), then each one applied or deleted, and every
//! Proxy again after the cache listed anew. Nothing here ever blocks the
//! watch: a subscriber that falls behind by more than [`BACKLOG`] changes
//! is handed every Proxy instead of the ones it missed, which a controller
//! treats the same (its reconciles are idempotent).

use std::sync::Arc;

use futures::Stream;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::broadcast;

use crate::crd::Proxy;

/// Changes a subscriber may fall behind by before it is handed every Proxy.
pub const BACKLOG: usize = 4096;

/// One change, as broadcast to the subscribers.
#[derive(Debug, Clone)]
enum Change {
    /// This Proxy was applied (as stored) or deleted (its last state).
    Touched(Arc<Proxy>),
    /// The cache was listed again: every Proxy may differ.
    All,
}

/// The fan-out of the Proxy watch cache's events (see the module docs).
#[derive(Debug)]
pub struct ProxyFeed {
    tx: broadcast::Sender<Change>,
}

impl ProxyFeed {
    /// A feed without subscribers.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            tx: broadcast::channel(BACKLOG).0,
        })
    }

    /// Hands on what a watch event changed, after the reflector stored it
    /// in `store`. Costs nothing while no one subscribes (a replica that
    /// does not lead).
    pub fn record(&self, store: &Store<Proxy>, event: &watcher::Event<Proxy>) {
        if self.tx.receiver_count() == 0 {
            return;
        }
        let change = match event {
            // The object the reflector stored (no copy), or a copy when
            // it is gone already.
            watcher::Event::Apply(p) => Change::Touched(
                store
                    .get(&ObjectRef::from_obj(p))
                    .unwrap_or_else(|| Arc::new(p.clone())),
            ),
            watcher::Event::Delete(p) => Change::Touched(Arc::new(p.clone())),
            watcher::Event::InitDone => Change::All,
            watcher::Event::Init | watcher::Event::InitApply(_) => return,
        };
        // An error only says no one subscribes any more.
        let _ = self.tx.send(change);
    }

    /// A stream of the Proxies that changed, from now on: every Proxy in
    /// `store` first (once the store has synced), then each change; every
    /// Proxy again after a relist or when this subscriber fell behind. It
    /// ends when the feed is dropped.
    pub fn subscribe(
        &self,
        store: Store<Proxy>,
    ) -> impl Stream<Item = Arc<Proxy>> + Send + 'static {
        // Subscribed before the first read of the store: a change made
        // after that read is in the channel, not lost in between.
        let rx = self.tx.subscribe();
        futures::stream::unfold(
            Subscriber {
                rx,
                store,
                batch: Vec::new(),
                started: false,
            },
            |mut s| async move {
                let next = s.next().await?;
                Some((next, s))
            },
        )
    }
}

/// One subscription's state: the channel, and the Proxies of an "every
/// Proxy" still to be yielded.
struct Subscriber {
    rx: broadcast::Receiver<Change>,
    store: Store<Proxy>,
    batch: Vec<Arc<Proxy>>,
    started: bool,
}

impl Subscriber {
    async fn next(&mut self) -> Option<Arc<Proxy>> {
        if !self.started {
            self.started = true;
            // Not kube's own wait: it wakes only its last waiter, and the
            // cache has several.
            crate::store_ready::ready(&self.store).await;
            self.batch = self.store.state();
        }
        loop {
            if let Some(p) = self.batch.pop() {
                return Some(p);
            }
            match self.rx.recv().await {
                Ok(Change::Touched(p)) => return Some(p),
                Ok(Change::All) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    self.batch = self.store.state();
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use kube::runtime::reflector::store::Writer;
    use std::collections::BTreeSet;
    use std::time::Duration;

    fn proxy(name: &str) -> Proxy {
        let spec = serde_json::from_value(serde_json::json!({"provider": "p"})).unwrap();
        let mut p = Proxy::new(name, spec);
        p.metadata.namespace = Some("ns".into());
        p
    }

    /// Applies `event` to the store and the feed, as the cache's task does.
    fn apply(writer: &mut Writer<Proxy>, feed: &ProxyFeed, event: watcher::Event<Proxy>) {
        writer.apply_watcher_event(&event);
        feed.record(&writer.as_reader(), &event);
    }

    fn synced(names: &[&str]) -> Writer<Proxy> {
        let mut writer = Writer::default();
        writer.apply_watcher_event(&watcher::Event::Init);
        for n in names {
            writer.apply_watcher_event(&watcher::Event::InitApply(proxy(n)));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        writer
    }

    async fn take(stream: &mut (impl Stream<Item = Arc<Proxy>> + Unpin), n: usize) -> Vec<String> {
        let mut names = Vec::new();
        for _ in 0..n {
            let p = tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .expect("a change within 5 s")
                .expect("the feed runs");
            names.push(p.metadata.name.clone().unwrap());
        }
        names
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    async fn nothing_more(stream: &mut (impl Stream<Item = Arc<Proxy>> + Unpin)) {
        let more = tokio::time::timeout(Duration::from_millis(100), stream.next()).await;
        assert!(more.is_err(), "nothing else changed: {more:?}");
    }

    #[tokio::test]
    async fn a_subscriber_sees_every_proxy_then_each_change() {
        let mut writer = synced(&["a", "b"]);
        let feed = ProxyFeed::new();
        let mut sub = Box::pin(feed.subscribe(writer.as_reader()));
        let first: BTreeSet<String> = take(&mut sub, 2).await.into_iter().collect();
        assert_eq!(first, set(&["a", "b"]));
        apply(&mut writer, &feed, watcher::Event::Apply(proxy("c")));
        apply(&mut writer, &feed, watcher::Event::Delete(proxy("a")));
        // A delete is handed on with its last state (an owner learns its
        // member is gone).
        assert_eq!(take(&mut sub, 2).await, ["c", "a"]);
        nothing_more(&mut sub).await;
        // A relist: every Proxy again.
        apply(&mut writer, &feed, watcher::Event::Init);
        apply(&mut writer, &feed, watcher::Event::InitApply(proxy("b")));
        apply(&mut writer, &feed, watcher::Event::InitDone);
        assert_eq!(take(&mut sub, 1).await, ["b"]);
        nothing_more(&mut sub).await;
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_gets_every_proxy_instead() {
        let mut writer = synced(&["a"]);
        let feed = ProxyFeed::new();
        let mut sub = Box::pin(feed.subscribe(writer.as_reader()));
        assert_eq!(take(&mut sub, 1).await, ["a"]);
        for _ in 0..BACKLOG + 10 {
            apply(&mut writer, &feed, watcher::Event::Apply(proxy("b")));
        }
        // The changes it missed are replaced by every Proxy, then the
        // rest of the backlog follows.
        let seen: BTreeSet<String> = take(&mut sub, 2).await.into_iter().collect();
        assert_eq!(seen, set(&["a", "b"]));
    }

    #[tokio::test]
    async fn a_subscriber_waits_for_the_store_to_sync_and_a_change_before_it_is_not_lost() {
        let mut writer: Writer<Proxy> = Writer::default();
        let feed = ProxyFeed::new();
        let mut sub = Box::pin(feed.subscribe(writer.as_reader()));
        nothing_more(&mut sub).await;
        apply(&mut writer, &feed, watcher::Event::Init);
        apply(&mut writer, &feed, watcher::Event::InitApply(proxy("a")));
        apply(&mut writer, &feed, watcher::Event::InitDone);
        // The sync's "every Proxy", then the relist's (the store synced
        // by the same event).
        assert_eq!(take(&mut sub, 2).await, ["a", "a"]);
        nothing_more(&mut sub).await;
    }

    #[test]
    fn without_subscribers_nothing_is_kept() {
        let mut writer = synced(&[]);
        let feed = ProxyFeed::new();
        for i in 0..10 {
            apply(
                &mut writer,
                &feed,
                watcher::Event::Apply(proxy(&format!("p{i}"))),
            );
        }
        assert_eq!(feed.tx.len(), 0);
    }

    #[tokio::test]
    async fn a_dropped_feed_ends_its_subscriptions() {
        let writer = synced(&["a"]);
        let feed = ProxyFeed::new();
        let mut sub = Box::pin(feed.subscribe(writer.as_reader()));
        assert_eq!(take(&mut sub, 1).await, ["a"]);
        drop(feed);
        let end = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
        assert!(matches!(end, Ok(None)), "{end:?}");
    }
}
