//! List-by-tag: every domain carrying this entry's ownership mark, on every
//! host — the garbage collector's view.
//!
//! Per host: one `connect_list_all_domains` call, then each domain's mark
//! (`domain_get_metadata`, a few at a time on the shared connection). No
//! state or address reads. Hosts are listed concurrently.
//!
//! **All or nothing.** The garbage collector deletes what the list does not
//! show as claimed, so a host whose listing failed fails the whole call
//! (Transient) rather than shrink the list.
//!
//! The mark records the owner UID, the entry, the creation time and the
//! request's extra tags; every marked instance carries the ownership tag
//! [`Tag::managed`] (`managed-by=egress-proxies`) besides its own. A query
//! for another tag reads the same marks and keeps the instances whose
//! stored tags hold it (the same calls, so the same all-or-nothing rule).

use futures::{StreamExt, TryStreamExt};
use libvirt_rpc::{ListDomainsFlags, proto::types::Domain};
use provider_api::{
    Error as ApiError, ErrorClass, Identifier, ListedInstance, ProviderId, ProviderType, Tag,
};

use crate::hosts::{Connection, HostTable};
use crate::libvirt::{DomainOps, Ownership, observed, to_provider_error};
use libvirt_rpc::proc_num;

/// Mark reads in flight per host.
const MARK_READS_IN_FLIGHT: usize = 8;

/// Lists the instances of provider entry `entry` carrying `tag`, across all
/// hosts of `hosts`, in host (config) order then domain name order.
///
/// # Errors
/// Transient when any host could not be reached or listed, or a mark read
/// failed for a reason other than the domain vanishing or being foreign
/// (the message names the host and keeps the cause as the source).
///
/// # Cancel safety
/// Cancel safe: read-only.
pub async fn list_by_tag(
    hosts: &HostTable,
    entry: &Identifier,
    tag: &Tag,
) -> Result<Vec<ListedInstance>, ApiError> {
    let per_host = hosts.hosts().map(|host| async move {
        list_host(hosts, entry, host, tag).await.map_err(|e| {
            ApiError::wrap(
                ErrorClass::Transient,
                format!("list by tag: host {host} could not be listed; no partial list"),
                e,
            )
        })
    });
    let lists = futures::future::try_join_all(per_host).await?;
    Ok(lists.into_iter().flatten().collect())
}

async fn list_host(
    hosts: &HostTable,
    entry: &Identifier,
    host: &Identifier,
    tag: &Tag,
) -> Result<Vec<ListedInstance>, ApiError> {
    let conn = hosts.shared(host).await?;
    let mut listed = ours_on(&conn, entry).await?;
    listed.retain(|i| i.tags.get(&tag.key) == Some(&tag.value));
    Ok(listed)
}

/// Entry `entry`'s instances on the host behind `conn`, by name.
///
/// # Errors
/// As [`list_by_tag`], for this host.
pub(crate) async fn ours_on(
    conn: &Connection,
    entry: &Identifier,
) -> Result<Vec<ListedInstance>, ApiError> {
    let host = conn.host();
    let domains = observed(
        host,
        proc_num::CONNECT_LIST_ALL_DOMAINS,
        conn.client()
            .connect_list_all_domains(ListDomainsFlags::empty()),
    )
    .await
    .map_err(|e| to_provider_error(format!("host {host}: list domains"), e))?;
    let conn = &conn;
    let mut listed: Vec<ListedInstance> = futures::stream::iter(domains)
        .map(|domain| async move { listed(conn, entry, domain).await })
        .buffered(MARK_READS_IN_FLIGHT)
        .try_filter_map(|item| async move { Ok(item) })
        .try_collect()
        .await?;
    listed.sort_by(|a, b| a.id.instance().cmp(b.id.instance()));
    Ok(listed)
}

/// The listing entry for `domain`, or `None` when it is not ours (no mark,
/// a malformed mark, another entry's mark, a name that is not an
/// identifier) or vanished since the listing.
async fn listed(
    conn: &Connection,
    entry: &Identifier,
    domain: Domain,
) -> Result<Option<ListedInstance>, ApiError> {
    let (domain, mark) = match DomainOps::new(conn).judge(domain, entry).await? {
        Ownership::Ours { domain, mark } => (domain, mark),
        // Foreign, or vanished since the listing: not listed.
        Ownership::Foreign { .. } | Ownership::Absent => return Ok(None),
    };
    let Ok(instance) = Identifier::parse(&domain.name) else {
        return Ok(None);
    };
    let managed = Tag::managed();
    let mut tags = mark.tags().clone();
    tags.insert(managed.key, managed.value);
    Ok(Some(ListedInstance::new(
        ProviderId::new(
            ProviderType::Kvm2,
            entry.clone(),
            conn.host().clone(),
            instance,
        ),
        mark.owner_uid().clone(),
        tags,
        Some(mark.created_at().to_system_time()),
    )))
}
