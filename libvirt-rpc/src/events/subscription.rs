//! Subscriptions: registering on the wire, the bounded queue between the
//! connection task and the subscriber, and deregistering.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{mpsc, oneshot};

use crate::client::{Client, decode_reply};
use crate::connection::{Command, Control};
use crate::domain_state::DomainEventId;
use crate::error::{DisconnectReason, Error, Result};
use crate::proto::packet::{self, Header, MessageType, Status};
use crate::proto::types::Domain;
use crate::proto::xdr::XdrError;

use super::domain::LifecycleEvent;
use super::event::{Event, RawEvent};
use super::target::{EventId, EventTarget, Family};

mod sealed {
    pub trait Sealed {}
}

/// What a [`Subscription`] yields: [`Event`] (typed), [`RawEvent`] (the
/// bytes as they came) or [`LifecycleEvent`] (the lifecycle-only
/// subscription of [`Client::subscribe_lifecycle`]). Sealed.
pub trait EventItem: sealed::Sealed + Sized + Send + 'static {
    /// Turns a message into the item.
    ///
    /// # Errors
    /// The codec's error when the message does not decode as the item.
    #[doc(hidden)]
    fn from_raw(raw: RawEvent) -> Result<Self, XdrError>;
}

impl sealed::Sealed for RawEvent {}
impl EventItem for RawEvent {
    fn from_raw(raw: RawEvent) -> Result<Self, XdrError> {
        Ok(raw)
    }
}

impl sealed::Sealed for Event {}
impl EventItem for Event {
    fn from_raw(raw: RawEvent) -> Result<Self, XdrError> {
        raw.decode()
    }
}

impl sealed::Sealed for LifecycleEvent {}
impl EventItem for LifecycleEvent {
    fn from_raw(raw: RawEvent) -> Result<Self, XdrError> {
        match raw.decode()? {
            Event::Lifecycle(ev) => Ok(ev),
            _ => Err(XdrError::Invalid {
                what: "lifecycle event procedure",
                value: raw.procedure() as u32,
            }),
        }
    }
}

/// The connection task's end of a subscription.
pub(crate) struct Subscriber {
    pub(crate) family: Family,
    /// Registered with an id this crate does not know: messages of unknown
    /// procedures may be its.
    pub(crate) takes_unknown: bool,
    tx: mpsc::Sender<RawEvent>,
    missed: Arc<AtomicU64>,
}

impl Subscriber {
    /// Queues an event without waiting; counts it as missed when full.
    pub(crate) fn deliver(&self, ev: RawEvent) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(ev) {
            self.missed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A stream of events for one registration: typed ([`Event`]), raw
/// ([`RawEvent`]), or lifecycle only ([`LifecycleEvent`], the default, as
/// [`Client::subscribe_lifecycle`] returns).
///
/// Its queue is bounded ([`crate::Config::event_queue`]): when it is full
/// the connection task drops the *new* event and counts it
/// ([`Subscription::missed`]); it never waits for a subscriber. A message
/// that does not decode as its kind is skipped and counted
/// ([`Subscription::malformed`], [`Subscription::last_malformed`]); the
/// connection and the subscription go on. When the link dies the
/// subscription ends: [`Subscription::recv`] returns `None` and
/// [`Subscription::end_reason`] says why. Dropping it deregisters on the
/// wire (without waiting).
#[derive(Debug)]
pub struct Subscription<T = LifecycleEvent> {
    client: Client,
    id: EventId,
    callback_id: i32,
    rx: mpsc::Receiver<RawEvent>,
    missed: Arc<AtomicU64>,
    malformed: u64,
    last_malformed: Option<Error>,
    active: bool,
    item: PhantomData<fn() -> T>,
}

impl<T: EventItem> Subscription<T> {
    /// The next event; `None` once the connection died (or after
    /// [`Subscription::unsubscribe`]).
    ///
    /// # Errors
    /// None: the end of the subscription is `None`; messages that do not
    /// decode are counted ([`Subscription::malformed`]), not returned.
    ///
    /// # Cancel safety
    /// Cancel safe: no event is lost if the future is dropped.
    pub async fn recv(&mut self) -> Option<T> {
        loop {
            let raw = self.rx.recv().await?;
            if let Some(item) = self.convert(raw) {
                return Some(item);
            }
        }
    }

    /// The next event if one is queued now, without waiting (`None` when
    /// the queue is empty or the subscription has ended).
    pub fn try_recv(&mut self) -> Option<T> {
        loop {
            let raw = self.rx.try_recv().ok()?;
            if let Some(item) = self.convert(raw) {
                return Some(item);
            }
        }
    }

    fn convert(&mut self, raw: RawEvent) -> Option<T> {
        let procedure = raw.procedure();
        match T::from_raw(raw) {
            Ok(item) => Some(item),
            Err(source) => {
                self.malformed += 1;
                self.last_malformed = Some(Error::Decode { procedure, source });
                None
            }
        }
    }
}

/// A subscription is a [`futures_core::Stream`] of its events, ending when
/// [`Subscription::recv`] would return `None` (the same events, the same
/// skipping of messages that do not decode).
impl<T: EventItem> futures_core::Stream for Subscription<T> {
    type Item = T;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        // Every field is `Unpin`: the subscription may be moved while polled.
        let this = self.get_mut();
        loop {
            match this.rx.poll_recv(cx) {
                std::task::Poll::Ready(Some(raw)) => {
                    if let Some(item) = this.convert(raw) {
                        return std::task::Poll::Ready(Some(item));
                    }
                }
                std::task::Poll::Ready(None) => return std::task::Poll::Ready(None),
                std::task::Poll::Pending => return std::task::Poll::Pending,
            }
        }
    }
}

impl<T> Subscription<T> {
    /// Events dropped because this subscription's queue was full.
    pub fn missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    /// Messages skipped because they did not decode as their kind.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Why the last skipped message did not decode
    /// ([`Error::Decode`] with the message's procedure).
    pub fn last_malformed(&self) -> Option<&Error> {
        self.last_malformed.as_ref()
    }

    /// The daemon's id for this registration.
    pub fn callback_id(&self) -> i32 {
        self.callback_id
    }

    /// The event id this subscription registered for.
    pub fn id(&self) -> EventId {
        self.id
    }

    /// Why the subscription ended, once the connection is dead.
    pub fn end_reason(&self) -> Option<DisconnectReason> {
        self.client.disconnect_reason()
    }

    /// Deregisters on the wire and waits for the daemon's answer.
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// If dropped early, the registration is still removed (as on drop).
    pub async fn unsubscribe(mut self) -> Result<()> {
        self.active = false;
        let family = self.id.family();
        self.client.control(Control::Unsubscribe {
            family,
            callback_id: self.callback_id,
            deregister: false,
        });
        self.client
            .call::<_, ()>(family.deregister_procedure(), &self.callback_id)
            .await
    }
}

impl<T> Drop for Subscription<T> {
    fn drop(&mut self) {
        if self.active {
            self.client.control(Control::Unsubscribe {
                family: self.id.family(),
                callback_id: self.callback_id,
                deregister: true,
            });
        }
    }
}

impl Client {
    /// Subscribes to the events of `target`, typed: each arrives as an
    /// [`Event`] (a kind this crate does not know as [`Event::Unknown`]).
    ///
    /// ```no_run
    /// use libvirt_rpc::events::{Event, EventTarget};
    /// use libvirt_rpc::{Client, DomainEventId};
    ///
    /// # async fn example(client: Client) -> libvirt_rpc::Result<()> {
    /// let mut reboots = client.subscribe(EventTarget::all(DomainEventId::Reboot)).await?;
    /// while let Some(event) = reboots.recv().await {
    ///     if let Event::Reboot(r) = event {
    ///         println!("{} rebooted", r.dom.name);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::call`]; [`Error::Libvirt`] when the daemon does not
    /// know the event id or the object.
    ///
    /// # Cancel safety
    /// If dropped after the daemon registered the callback, the
    /// registration stays until the connection closes (its events are
    /// discarded).
    pub async fn subscribe(&self, target: EventTarget) -> Result<Subscription<Event>> {
        self.register(target).await
    }

    /// Subscribes to the events of `target`, delivered as the bytes they
    /// came in ([`RawEvent`]): for kinds this crate does not type (a newer
    /// daemon's), or to decode them yourself.
    ///
    /// # Errors
    /// As [`Client::subscribe`].
    ///
    /// # Cancel safety
    /// As [`Client::subscribe`].
    pub async fn subscribe_raw(&self, target: EventTarget) -> Result<Subscription<RawEvent>> {
        self.register(target).await
    }

    /// Subscribes to lifecycle events of `dom` (or of every domain when
    /// `None`): [`Client::subscribe`] with [`DomainEventId::Lifecycle`],
    /// yielding [`LifecycleEvent`]s.
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// As [`Client::subscribe`].
    pub async fn subscribe_lifecycle(&self, dom: Option<&Domain>) -> Result<Subscription> {
        let target = match dom {
            Some(dom) => EventTarget::domain(DomainEventId::Lifecycle, dom),
            None => EventTarget::all(DomainEventId::Lifecycle),
        };
        self.register(target).await
    }

    async fn register<T>(&self, target: EventTarget) -> Result<Subscription<T>> {
        let id = target.id();
        let family = id.family();
        let procedure = family.register_procedure();
        let serial = self.next_serial();
        let h = Header::remote(procedure, MessageType::Call, serial, Status::Ok);
        let packet = packet::encode_packet(&h, &target.register_args())
            .map_err(|source| Error::Encode { procedure, source })?;
        let (tx, rx) = mpsc::channel(self.config().event_queue);
        let missed = Arc::new(AtomicU64::new(0));
        let (reply_tx, reply_rx) = oneshot::channel();
        let after = self.call_timeout();
        let work = async {
            self.submit(Command::Subscribe {
                serial,
                packet,
                reply: reply_tx,
                subscriber: Subscriber {
                    family,
                    takes_unknown: !id.is_known(),
                    tx,
                    missed: missed.clone(),
                },
            })
            .await?;
            reply_rx.await.map_err(|_| self.disconnected())
        };
        let reply = tokio::time::timeout(after, work)
            .await
            .map_err(|_| Error::Timeout { procedure, after })??;
        let callback_id: i32 = decode_reply(procedure, &reply)?;
        Ok(Subscription {
            client: self.clone(),
            id,
            callback_id,
            rx,
            missed,
            malformed: 0,
            last_malformed: None,
            active: true,
            item: PhantomData,
        })
    }
}
