//! Instance events: a provider that can tell when its instances change
//! outside any call (a VM crashed, was stopped or removed on its host)
//! reports it, so its caller looks again at once instead of at its next
//! poll.
//!
//! An event says only *look again*: the caller's next [`get`] is the
//! truth (an event may be late, repeated or about an instance the caller
//! does not know). [`InstanceEvent::Resync`] says changes may have been
//! missed — the provider's view of a host was interrupted — so every
//! instance on that host is worth a look.
//!
//! [`get`]: crate::Provider::get

use async_trait::async_trait;

use crate::ident::Identifier;
use crate::provider_id::ProviderId;

/// What changed, as far as the provider can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Change {
    /// It stopped (shut down, destroyed, its process killed).
    Stopped,
    /// It crashed.
    Crashed,
    /// It was paused or suspended.
    Suspended,
    /// It started or resumed.
    Started,
    /// It was removed from its host.
    Removed,
    /// Something else about it changed.
    Other,
}

impl Change {
    /// A stable lower-case name (metric labels, logs).
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Stopped => "stopped",
            Change::Crashed => "crashed",
            Change::Suspended => "suspended",
            Change::Started => "started",
            Change::Removed => "removed",
            Change::Other => "other",
        }
    }
}

/// One event of an [`InstanceEvents`] source.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstanceEvent {
    /// The instance `id` changed.
    Changed {
        /// The instance.
        id: ProviderId,
        /// How.
        change: Change,
    },
    /// Changes on `host` may have been missed (the watch on it started,
    /// or restarted after its link was down, or events were dropped):
    /// every instance there is worth a look.
    Resync {
        /// The host, as in [`ProviderId::host`].
        host: Identifier,
    },
}

/// A provider's running watch over its instances; see the module docs.
///
/// Dropping it ends the watch: the provider stops every task and
/// subscription it made for it.
#[async_trait]
pub trait InstanceEventSource: Send {
    /// The next event; `None` when the watch ended for good.
    ///
    /// # Cancel safety
    /// Must be cancel safe: no event is lost if the future is dropped.
    async fn next(&mut self) -> Option<InstanceEvent>;
}

/// A boxed [`InstanceEventSource`], as [`Provider::instance_events`]
/// returns it.
///
/// [`Provider::instance_events`]: crate::Provider::instance_events
pub type InstanceEvents = Box<dyn InstanceEventSource>;
