//! The sans-IO core: XDR, packet framing, message and error payloads.
//! Nothing in here performs IO or knows about tokio; the connection driver
//! feeds it bytes and clock readings.
//!
//! # What of it is public, and why
//! These modules are part of the crate's API, under the same semver rules
//! as the rest:
//! - [`xdr`]: the codec. [`crate::Client::call`] takes and returns any
//!   [`xdr::Encode`] / [`xdr::Decode`] type, so reaching a procedure this
//!   crate has no typed method for means writing one (by hand or with
//!   [`crate::xdr_struct!`]).
//! - [`packet`]: headers and framing, for code that plays the daemon's
//!   side (test doubles, like this crate's own fake daemon) or reads
//!   captured traffic.
//! - [`types`]: the handles libvirt passes around (domain, pool, volume,
//!   network), also re-exported at the crate root.
//! - [`typed_param`]: libvirt's typed parameters (`virTypedParameter`, a
//!   discriminated union of int, uint, llong, ullong, double, boolean and
//!   string), the payload of stats, tuning and migration calls.
//! - [`limits`]: libvirt's protocol maxima (`REMOTE_*_MAX`), which the
//!   typed replies enforce per field.
//! - [`remote_error`]: the error payload as it is on the wire, for the
//!   same peers; callers get it as [`crate::LibvirtError`].
//!
//! The enums libvirt may grow (message types, statuses, the codec's and
//! framing's errors) are `#[non_exhaustive]`; the header is plain data
//! with public fields, its six fields fixed by the protocol.
//!
//! The keepalive state machine is private: the connection drives it, and
//! [`crate::Config::keepalive`] is its only knob.

pub(crate) mod keepalive;
pub use crate::generated::limits;
pub mod packet;
pub mod remote_error;
pub mod typed_param;
pub mod types;
pub mod xdr;
