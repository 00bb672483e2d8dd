//! Domain lifecycle events.
//!
//! Each [`Subscription`] has its own bounded queue
//! ([`crate::Config::event_queue`]). Overflow policy: when the queue is full
//! the connection task drops the *new* event and counts it
//! ([`Subscription::missed`]); it never waits for a subscriber. When the
//! link dies the subscription ends: [`Subscription::recv`] returns `None`
//! and [`Subscription::end_reason`] says why.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{mpsc, oneshot};

use crate::client::{Client, decode_reply};
use crate::connection::{Command, Control};
use crate::domain_state::DomainEventId;
use crate::error::{DisconnectReason, Error, Result};
use crate::flags::LifecycleEventKind;
use crate::procedures::proc_num;
use crate::proto::packet::{self, Header, MessageType, Status};
use crate::proto::types::Domain;
use crate::xdr_struct;

xdr_struct! {
    /// A domain lifecycle event (`remote_domain_event_lifecycle_msg`).
    pub struct LifecycleEvent {
        /// The domain.
        pub dom: Domain,
        /// What happened.
        pub event: LifecycleEventKind,
        /// An event-specific detail code.
        pub detail: i32,
    }
}

/// The connection task's end of a subscription.
pub(crate) struct Subscriber {
    tx: mpsc::Sender<LifecycleEvent>,
    missed: Arc<AtomicU64>,
}

impl Subscriber {
    /// Queues an event without waiting; counts it as missed when full.
    pub(crate) fn deliver(&self, ev: LifecycleEvent) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(ev) {
            self.missed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A stream of lifecycle events for one registration. Dropping it
/// deregisters on the wire (without waiting).
#[derive(Debug)]
pub struct Subscription {
    client: Client,
    callback_id: i32,
    rx: mpsc::Receiver<LifecycleEvent>,
    missed: Arc<AtomicU64>,
    active: bool,
}

impl Subscription {
    /// The next event; `None` once the connection died (or after
    /// [`Subscription::unsubscribe`]).
    ///
    /// # Errors
    /// None: the end of the subscription is `None`.
    ///
    /// # Cancel safety
    /// Cancel safe: no event is lost if the future is dropped.
    pub async fn recv(&mut self) -> Option<LifecycleEvent> {
        self.rx.recv().await
    }

    /// Events dropped because this subscription's queue was full.
    pub fn missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    /// The daemon's id for this registration.
    pub fn callback_id(&self) -> i32 {
        self.callback_id
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
        self.client.control(Control::Unsubscribe {
            callback_id: self.callback_id,
            deregister: false,
        });
        self.client
            .call::<_, ()>(
                proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY,
                &self.callback_id,
            )
            .await
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.active {
            self.client.control(Control::Unsubscribe {
                callback_id: self.callback_id,
                deregister: true,
            });
        }
    }
}

impl Client {
    /// Subscribes to lifecycle events of `dom` (or of every domain when
    /// `None`).
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// If dropped after the daemon registered the callback, the
    /// registration stays until the connection closes (its events are
    /// discarded).
    pub async fn subscribe_lifecycle(&self, dom: Option<&Domain>) -> Result<Subscription> {
        let procedure = proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY;
        let serial = self.next_serial();
        let h = Header::remote(procedure, MessageType::Call, serial, Status::Ok);
        let packet = packet::encode_packet(&h, &(DomainEventId::Lifecycle, dom))
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
            callback_id,
            rx,
            missed,
            active: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::xdr::{from_bytes, to_bytes};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lifecycle_message_round_trips(callback: i32, name in ".{0,12}", uuid: [u8; 16], id: i32,
                                         event: i32, detail: i32) {
            let ev = LifecycleEvent {
                dom: Domain { name, uuid, id },
                event: LifecycleEventKind::from_wire(event),
                detail,
            };
            let wire = to_bytes(&(callback, &ev)).unwrap();
            prop_assert_eq!(from_bytes::<(i32, LifecycleEvent)>(&wire).unwrap(), (callback, ev));
        }
    }
}
