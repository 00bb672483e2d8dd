//! Delete: destroy and undefine the domain, remove its overlay and seed;
//! never the base image.
//!
//! Idempotent and resumable: every step treats "already gone" as done, so a
//! half-deleted instance (domain gone and volumes left, or the reverse) is
//! finished rather than reported. A domain without this entry's ownership
//! mark is never touched (Permanent), and then neither are the volumes
//! named after it.

use provider_api::{Error as ApiError, ProviderId};

use super::get::ensure_ours;
use super::provider::Inner;
use crate::libvirt::{DomainOps, Ownership};
use crate::storage::{PoolOps, VmVolumes};

pub(crate) async fn delete(inner: &Inner, id: &ProviderId) -> Result<(), ApiError> {
    ensure_ours(&inner.name, id)?;
    let host = inner.config.host(id.host()).ok_or_else(|| {
        ApiError::permanent(format!("{id}: host {} is not configured", id.host()))
    })?;
    let h = &host.name;
    let name = id.instance();
    let conn = inner.hosts.shared(h).await?;
    let client = conn.client();

    let domains = DomainOps::new(&conn);
    match domains.find_ours(name, &inner.name).await? {
        Ownership::Ours { .. } => domains.remove(name).await?,
        // Already gone: on to its volumes.
        Ownership::Absent => {}
        Ownership::Foreign { .. } => {
            return Err(ApiError::permanent(format!(
                "host {h}: domain {name} does not carry the mark of provider {}; not deleted",
                inner.name
            )));
        }
    }

    let ops = PoolOps::open(h, client, &host.pool).await?;
    for vol in VmVolumes::new(&inner.name, name).all() {
        ops.remove(&vol).await?;
    }
    Ok(())
}
