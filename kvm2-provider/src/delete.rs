//! Delete: destroy and undefine the domain, remove its overlay and seed;
//! never the base image.
//!
//! Idempotent and resumable: every step treats "already gone" as done, so a
//! half-deleted instance (domain gone and volumes left, or the reverse) is
//! finished rather than reported. A domain without this entry's ownership
//! mark is never touched (Permanent), and then neither are the volumes
//! named after it.

use libvirt_rpc::{Client, DomainDestroyFlags, DomainUndefineFlags, NoFlags};
use provider_api::{Error as ApiError, Identifier, ProviderId};

use crate::get::{ensure_ours, read_mark};
use crate::libvirt_errors::to_provider_error;
use crate::observe::observed;
use crate::provider::Inner;
use crate::volume_names::VmVolumes;
use crate::volumes::PoolOps;
use libvirt_rpc::proc_num;

pub(crate) async fn delete(inner: &Inner, id: &ProviderId) -> Result<(), ApiError> {
    ensure_ours(&inner.name, id)?;
    let host = inner.config.host(id.host()).ok_or_else(|| {
        ApiError::permanent(format!("{id}: host {} is not configured", id.host()))
    })?;
    let h = &host.name;
    let name = id.instance();
    let conn = inner.hosts.shared(h).await?;
    let client = conn.client();

    match observed(
        h,
        proc_num::DOMAIN_LOOKUP_BY_NAME,
        client.domain_lookup_by_name(name.as_str()),
    )
    .await
    {
        Ok(dom) => match read_mark(&conn, &dom).await {
            // Gone since the lookup: on to its volumes, as for a domain
            // that was already gone.
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
            Ok(mark) => {
                if mark.is_none_or(|m| m.entry() != &inner.name) {
                    return Err(ApiError::permanent(format!(
                        "host {h}: domain {name} does not carry the mark of provider {}; not deleted",
                        inner.name
                    )));
                }
                remove_domain(h, client, name).await?;
            }
        },
        Err(e) if e.is_not_found() => {}
        Err(e) => {
            return Err(to_provider_error(
                format!("host {h}: look up domain {name}"),
                e,
            ));
        }
    }

    let ops = PoolOps::open(h, client, &host.pool).await?;
    for vol in VmVolumes::new(&inner.name, name).all() {
        ops.remove(&vol).await?;
    }
    Ok(())
}

/// Stops (if running) and undefines the domain `name` on `host`, with its
/// NVRAM file (the flag is harmless for BIOS domains, and needed for UEFI
/// ones: libvirt refuses to undefine them otherwise). A domain already gone
/// is done. The caller has checked the mark.
pub(crate) async fn remove_domain(
    host: &Identifier,
    client: &Client,
    name: &Identifier,
) -> Result<(), ApiError> {
    let dom = match observed(
        host,
        proc_num::DOMAIN_LOOKUP_BY_NAME,
        client.domain_lookup_by_name(name.as_str()),
    )
    .await
    {
        Ok(dom) => dom,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(to_provider_error(format!("host {host}: look up {name}"), e)),
    };
    let info = observed(
        host,
        proc_num::DOMAIN_GET_STATE,
        client.domain_get_state(&dom, NoFlags::empty()),
    )
    .await;
    let active = match info {
        Ok(info) => info.state != libvirt_rpc::DomainState::Shutoff,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => {
            return Err(to_provider_error(
                format!("host {host}: state of {name}"),
                e,
            ));
        }
    };
    if active {
        match observed(
            host,
            proc_num::DOMAIN_DESTROY_FLAGS,
            client.domain_destroy_flags(&dom, DomainDestroyFlags::empty()),
        )
        .await
        {
            Ok(()) => {}
            Err(e) if e.is_not_found() => return Ok(()),
            // Stopped meanwhile ("domain is not running"): go on.
            Err(libvirt_rpc::Error::Libvirt(e))
                if e.code == libvirt_rpc::ErrorCode::OperationInvalid => {}
            Err(e) => return Err(to_provider_error(format!("host {host}: stop {name}"), e)),
        }
    }
    match observed(
        host,
        proc_num::DOMAIN_UNDEFINE_FLAGS,
        client.domain_undefine_flags(&dom, DomainUndefineFlags::NVRAM),
    )
    .await
    {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(to_provider_error(
            format!("host {host}: undefine {name}"),
            e,
        )),
    }
}
