//! Events: domain, storage pool, network, host device and secret events,
//! typed or raw, through bounded subscriptions.
//!
//! ```text
//!  libvirtd ── MESSAGE (procedure, callback id, payload) ──▶ connection task
//!                                                              │ routes by (family, callback id):
//!                                                              │ reads 4 bytes, never decodes,
//!                                                              │ never waits (full queue: drop + count)
//!                     ┌────────────────────────────────────────┘
//!                     ▼ bounded queue per subscription (Config::event_queue)
//!   Subscription<Event>     ── recv() decodes ──▶ Event::Reboot(RebootEvent { dom }) ...
//!   Subscription<RawEvent>  ── recv() ──────────▶ RawEvent { procedure, callback_id, payload }
//!   Subscription            ── recv() decodes ──▶ LifecycleEvent (subscribe_lifecycle)
//! ```
//!
//! Register with [`crate::Client::subscribe`] (typed), [`crate::Client::subscribe_raw`]
//! (bytes) or [`crate::Client::subscribe_lifecycle`], naming an [`EventTarget`]: an
//! event id ([`crate::DomainEventId`], [`StoragePoolEventId`], [`NetworkEventId`],
//! [`NodeDeviceEventId`], [`SecretEventId`]) for every object of its family or for
//! one object. Each registration is one callback on the daemon
//! (`REMOTE_PROC_CONNECT_*_EVENT_*REGISTER_ANY`) with its own queue; dropping the
//! [`Subscription`] deregisters it. A subscription is also a
//! `futures_core::Stream` of the same events (`StreamExt::next`, `select`,
//! `merge` with other streams), ending with the link.
//!
//! # Policies
//! - **Bounded.** Each subscription's queue holds [`crate::Config::event_queue`]
//!   events. When it is full the connection task drops the *new* event and counts
//!   it ([`Subscription::missed`]): a slow subscriber never slows calls, streams or
//!   other subscriptions.
//! - **Bad bytes.** The connection task reads only an event's callback id; decoding
//!   happens in [`Subscription::recv`], on the subscriber's task. A message that does
//!   not decode as its kind (truncated, a bad length or discriminant, trailing bytes)
//!   is skipped and counted ([`Subscription::malformed`], the error in
//!   [`Subscription::last_malformed`]); the subscription and the connection go on —
//!   the frame around it was whole, so nothing else is out of step. A message too
//!   short to carry a callback id belongs to no subscription and is dropped. Nothing
//!   panics; `cargo xtask fuzz libvirt-rpc` feeds every event payload type mutated
//!   bytes.
//! - **Routing.** libvirtd numbers callbacks per driver (the domain and storage
//!   drivers may both hand out id 1), so an event goes to the subscription of its
//!   message's family with its callback id. A message of a procedure this crate does
//!   not know goes to the one subscription registered with an unknown id under that
//!   callback id, if there is exactly one.
//! - **End.** When the link dies every subscription ends: `recv` returns `None` and
//!   [`Subscription::end_reason`] says why.
//!
//! # Kinds
//! Typed ([`Event`] variant, payload struct), for every kind libvirt 11 emits:
//!
//! | family | ids (`…EventId::`) |
//! |---|---|
//! | domain | `Lifecycle`, `Reboot`, `RtcChange`, `Watchdog`, `IoError`, `Graphics`, `IoErrorReason`, `ControlError`, `BlockJob`, `DiskChange`, `TrayChange`, `PmWakeup`, `PmSuspend`, `BalloonChange`, `PmSuspendDisk`, `DeviceRemoved`, `BlockJob2`, `Tunable`¹, `AgentLifecycle`, `DeviceAdded`, `MigrationIteration`, `JobCompleted`¹, `DeviceRemovalFailed`, `MetadataChange`, `BlockThreshold`, `MemoryFailure`, `MemoryDeviceSizeChange`, `NicMacChange` |
//! | storage pool | `Lifecycle`, `Refresh` |
//! | network | `Lifecycle`, `MetadataChange` |
//! | host device | `Lifecycle`, `Update` |
//! | secret | `Lifecycle`, `ValueChanged` |
//!
//! ¹ Their typed parameters (`remote_typed_param` arrays: tunables, job
//! statistics) are kept raw ([`RawTypedParams`]: the count and the encoded
//! elements); this crate does not decode typed parameters yet.
//!
//! Raw: any id, typed or not ([`crate::Client::subscribe_raw`], or
//! [`Event::Unknown`] on a typed subscription for an id this crate does not know,
//! such as a newer daemon's): the procedure, the callback id and the payload,
//! decodable with [`crate::xdr_struct!`] against `remote_protocol.x`.
//!
//! Not covered: the QEMU program's monitor events
//! (`QEMU_PROC_DOMAIN_MONITOR_EVENT`), the legacy registrations without callback
//! ids, and the connection-closed callback (watch [`crate::Client::closed`]).
//!
//! # Example
//! ```no_run
//! use libvirt_rpc::events::{Event, EventTarget, StoragePoolEventId};
//! use libvirt_rpc::{Client, DomainEventId};
//!
//! # async fn example(client: Client) -> libvirt_rpc::Result<()> {
//! // Device hot-unplugs of every domain, typed:
//! let mut unplugs = client.subscribe(EventTarget::all(DomainEventId::DeviceRemoved)).await?;
//! // Pool refreshes, as raw bytes:
//! let mut refreshes = client.subscribe_raw(EventTarget::all(StoragePoolEventId::Refresh)).await?;
//! loop {
//!     tokio::select! {
//!         Some(Event::DeviceRemoved(ev)) = unplugs.recv() => {
//!             println!("{}: {} removed", ev.dom.name, ev.dev_alias);
//!         }
//!         Some(raw) = refreshes.recv() => {
//!             println!("pool event, procedure {}, {} bytes", raw.procedure(), raw.payload().len());
//!         }
//!         else => break,
//!     }
//! }
//! if unplugs.missed() > 0 {
//!     eprintln!("{} unplug events dropped: the queue was full", unplugs.missed());
//! }
//! # Ok(()) }
//! ```

mod domain;
mod event;
/// The event procedures' numbers (generated with all the others).
pub(crate) use crate::proc_num as numbers;
mod objects;
mod subscription;
mod target;

pub use domain::*;
pub(crate) use event::family_of;
pub use event::{Event, RawEvent};
pub use objects::*;
pub(crate) use subscription::Subscriber;
pub use subscription::{EventItem, Subscription};
pub(crate) use target::Family;
pub use target::{
    EventId, EventTarget, NetworkEventId, NodeDeviceEventId, SecretEventId, StoragePoolEventId,
};
