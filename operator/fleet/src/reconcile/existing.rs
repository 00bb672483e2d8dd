//! An existing (unmanaged) proxy, `spec.existing`: nothing is made and no
//! provider is called. The status says where it listens and that it runs;
//! the health engine probes it like any proxy, discovery and Services
//! publish it once `Healthy`, the GC never touches anything for it (it
//! records no provider ID), and deleting it releases the finalizer at once.

use std::net::SocketAddr;

use super::draft::Draft;
use super::{Next, Step};
use crate::reason::Reason;
use crate::status::Phase;

/// The step for an existing proxy at `addr`.
pub(super) fn step(mut d: Draft<'_>, addr: SocketAddr) -> Step {
    d.memory.failures = 0;
    d.status.applied_spec = Some(d.spec());
    d.status.phase = Some(Phase::Running);
    d.status.provider_id = None;
    d.status.host = None;
    d.status.ip = Some(addr.ip());
    d.status.port = Some(addr.port());
    let msg = format!("an existing proxy at {addr}: probed and published, never made or deleted");
    d.provisioned(true, Reason::Existing, msg.clone());
    d.ready(true, Reason::Existing, msg);
    d.finish(Next::AwaitChange)
}
