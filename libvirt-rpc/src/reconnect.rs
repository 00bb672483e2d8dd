//! [`Reconnecting`]: an opt-in client that redials after its link dies.
//!
//! ```text
//!  Reconnecting ── client() ──▶ the live Client (waits for a redial, up to the call timeout)
//!       │
//!       └─ supervisor task (owned: aborted with the last handle)
//!            loop: current.closed() ─▶ no link ─▶ sleep(backoff) ─▶ dial() ── Err ─▶ backoff × 2 (≤ max)
//!                                                                  └─ Ok ─▶ link, generation + 1
//!  Resubscribed ── recv() ──▶ Resumed::Event(ev) ... link dies ... waits for the next link,
//!                             registers again ──▶ Resumed::Gap { generation } ──▶ Event ...
//! ```
//!
//! Policies:
//! - **Calls in flight fail as on a plain [`Client`]** (`Disconnected`): this
//!   crate cannot know whether the daemon ran them, so it never repeats one.
//!   A call made after the link died waits for the next link within the
//!   call timeout ([`Config::call_timeout`](crate::Config::call_timeout) of
//!   the first client), then fails with the last `Disconnected` reason.
//! - **Subscriptions** are registered again on each new link, and the
//!   subscriber is told ([`Resumed::Gap`]): events of the time without a
//!   link are lost, so it should read the state it follows again.
//! - **Backoff** between dials doubles from [`ReconnectPolicy::initial`] to
//!   [`ReconnectPolicy::max`]; the first redial waits `initial` too, so a
//!   daemon that drops every connection at once is not hammered.
//! - **Close**: [`Reconnecting::close`] (or dropping every handle, including
//!   subscriptions' ones) ends the supervisor and closes the link; it never
//!   dials again and subscriptions end.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::client::Client;
use crate::error::{DisconnectReason, Error, Result};
use crate::events::{Event, EventTarget, Subscription};

type DialFuture = Pin<Box<dyn Future<Output = Result<Client>> + Send>>;
type Dial = Arc<dyn Fn() -> DialFuture + Send + Sync>;

/// How [`Reconnecting`] waits between dials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// The wait before the first redial, doubled after each failed one.
    pub initial: Duration,
    /// The longest wait between dials.
    pub max: Duration,
}

impl Default for ReconnectPolicy {
    /// 100 ms, doubling up to 10 s.
    fn default() -> Self {
        ReconnectPolicy {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

#[derive(Clone)]
struct Link {
    /// The live client, if any.
    client: Option<Client>,
    /// Links made after the first.
    generation: u64,
    /// Why the last link died.
    last_reason: Option<DisconnectReason>,
    /// Closed for good: no more links.
    closed: bool,
}

/// Aborts the supervisor when the last handle goes.
struct Owner(JoinHandle<()>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A client that redials after its link dies (see the module docs). Cheap
/// to clone; the supervisor runs until [`close`](Self::close) or the last
/// clone (and subscription) is dropped.
#[derive(Clone)]
pub struct Reconnecting {
    link: watch::Receiver<Link>,
    close: Arc<watch::Sender<bool>>,
    wait: Duration,
    _owner: Arc<Owner>,
}

impl std::fmt::Debug for Reconnecting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let link = self.link.borrow();
        f.debug_struct("Reconnecting")
            .field("connected", &link.client.is_some())
            .field("generation", &link.generation)
            .field("closed", &link.closed)
            .finish()
    }
}

impl Reconnecting {
    /// Dials with `dial` and keeps a link up from then on, redialing with
    /// `policy` after it dies. Must be called within a Tokio runtime.
    ///
    /// ```no_run
    /// use libvirt_rpc::{Client, Config, OpenFlags, Reconnecting, ReconnectPolicy};
    ///
    /// # async fn example() -> libvirt_rpc::Result<()> {
    /// let libvirt = Reconnecting::connect(
    ///     || Client::connect_unix("/run/libvirt/libvirt-sock", "qemu:///system",
    ///                             OpenFlags::empty(), Config::default()),
    ///     ReconnectPolicy::default(),
    /// )
    /// .await?;
    /// let version = libvirt.client().await?.connect_get_lib_version().await?;
    /// # let _ = version; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The first dial's error: a client that never connected is a
    /// configuration problem to report, not to retry blindly.
    pub async fn connect<F, Fut>(dial: F, policy: ReconnectPolicy) -> Result<Self>
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Client>> + Send + 'static,
    {
        let dial: Dial = Arc::new(move || Box::pin(dial()));
        let first = dial().await?;
        let wait = first.config().call_timeout;
        let (tx, rx) = watch::channel(Link {
            client: Some(first.clone()),
            generation: 0,
            last_reason: None,
            closed: false,
        });
        let (close_tx, close_rx) = watch::channel(false);
        let task = tokio::spawn(supervise(dial, policy, first, tx, close_rx));
        Ok(Reconnecting {
            link: rx,
            close: Arc::new(close_tx),
            wait,
            _owner: Arc::new(Owner(task)),
        })
    }

    /// The live client; after the link died, waits for the next one, up to
    /// the call timeout.
    ///
    /// # Errors
    /// [`Error::Disconnected`] with the last link's reason when no link came
    /// within the call timeout, or after [`close`](Self::close).
    pub async fn client(&self) -> Result<Client> {
        let mut rx = self.link.clone();
        let live = |l: &Link| l.closed || l.client.as_ref().is_some_and(|c| !c.is_closed());
        let waited = tokio::time::timeout(self.wait, rx.wait_for(live)).await;
        let link = self.link.borrow().clone();
        match (waited, link.client) {
            (Ok(Ok(_)), Some(c)) if !link.closed && !c.is_closed() => Ok(c),
            _ => Err(Error::Disconnected(
                link.last_reason.unwrap_or(DisconnectReason::Closed),
            )),
        }
    }

    /// Links made after the first one.
    pub fn generation(&self) -> u64 {
        self.link.borrow().generation
    }

    /// Whether a link is up now.
    pub fn is_connected(&self) -> bool {
        self.link
            .borrow()
            .client
            .as_ref()
            .is_some_and(|c| !c.is_closed())
    }

    /// Subscribes to `target`'s events ([`Client::subscribe`]), registered
    /// again on every new link.
    ///
    /// # Errors
    /// As [`client`](Self::client) and [`Client::subscribe`].
    pub async fn subscribe(&self, target: EventTarget) -> Result<Resubscribed> {
        let client = self.client().await?;
        let generation = self.generation();
        let sub = client.subscribe(target.clone()).await?;
        Ok(Resubscribed {
            reconnecting: self.clone(),
            target,
            sub: Some(sub),
            generation,
        })
    }

    /// Stops for good: closes the link, never dials again; subscriptions
    /// end.
    pub async fn close(&self) {
        let _ = self.close.send(true);
        let client = self.link.borrow().client.clone();
        if let Some(c) = client {
            c.close().await;
        }
    }

    /// Waits for a link newer than `generation`: its client and generation,
    /// or `None` once closed.
    async fn newer(&self, generation: u64) -> Option<(Client, u64)> {
        let mut rx = self.link.clone();
        let ready = |l: &Link| l.closed || (l.generation > generation && l.client.is_some());
        let link = rx.wait_for(ready).await.ok()?.clone();
        if link.closed {
            return None;
        }
        link.client.map(|c| (c, link.generation))
    }
}

/// The supervisor: waits for the link to die, then redials with backoff.
async fn supervise(
    dial: Dial,
    policy: ReconnectPolicy,
    mut current: Client,
    link: watch::Sender<Link>,
    mut close: watch::Receiver<bool>,
) {
    loop {
        let reason = tokio::select! {
            r = current.closed() => r,
            _ = close.wait_for(|c| *c) => break,
        };
        link.send_modify(|l| {
            l.client = None;
            l.last_reason = Some(reason);
        });
        let mut delay = policy.initial;
        current = loop {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = close.wait_for(|c| *c) => {
                    link.send_modify(|l| l.closed = true);
                    return;
                }
            }
            let dialled = tokio::select! {
                r = dial() => r,
                _ = close.wait_for(|c| *c) => {
                    link.send_modify(|l| l.closed = true);
                    return;
                }
            };
            match dialled {
                Ok(client) => break client,
                Err(_) => delay = (delay * 2).min(policy.max),
            }
        };
        link.send_modify(|l| {
            l.client = Some(current.clone());
            l.generation += 1;
        });
    }
    link.send_modify(|l| l.closed = true);
}

/// What a [`Resubscribed`] yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Resumed<T> {
    /// An event.
    Event(T),
    /// The link died and a new one carries the subscription from here:
    /// events of the time between are lost; read the state again.
    Gap {
        /// The new link's [`Reconnecting::generation`].
        generation: u64,
    },
}

/// A subscription that survives reconnects ([`Reconnecting::subscribe`]).
#[derive(Debug)]
pub struct Resubscribed {
    reconnecting: Reconnecting,
    target: EventTarget,
    sub: Option<Subscription<Event>>,
    generation: u64,
}

impl Resubscribed {
    /// The next event, or a [`Resumed::Gap`] after a reconnect; `None` once
    /// the [`Reconnecting`] is closed.
    ///
    /// # Cancel safety
    /// Cancel safe while waiting for an event or a link; a registration
    /// cancelled midway is made again on the next call.
    pub async fn recv(&mut self) -> Option<Resumed<Event>> {
        loop {
            if let Some(sub) = &mut self.sub {
                if let Some(event) = sub.recv().await {
                    return Some(Resumed::Event(event));
                }
                self.sub = None;
            }
            let (client, generation) = self.reconnecting.newer(self.generation).await?;
            // The link may die again before the registration: wait for the
            // one after it.
            self.generation = generation;
            if let Ok(sub) = client.subscribe(self.target.clone()).await {
                self.sub = Some(sub);
                return Some(Resumed::Gap { generation });
            }
        }
    }
}
