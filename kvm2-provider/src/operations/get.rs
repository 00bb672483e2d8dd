//! Get: one instance's state, address and creation time.
//!
//! ```text
//!  ProviderId ─ strict: type kvm2, entry ours, host configured
//!     │
//!  shared connection of the host
//!     │ domain_lookup_by_name ── NoDomain ──────────────▶ NotFound
//!     │ domain_get_metadata   ── no mark / other entry ─▶ Permanent (foreign)
//!     │ domain_get_state ─▶ state::classify
//!     │     running ─▶ address::discover ─ ip ─▶ Running
//!     │                                  └ none ─▶ Provisioning
//!     │                                  └ error ─▶ Transient (invariant 8)
//!     ▼     otherwise ─▶ Stopped / Failed / Provisioning, no address
//!  Instance { created_at from the mark }
//! ```
//!
//! Every libvirt call goes through [`observed`] and carries the connection's
//! call deadline.

use libvirt_rpc::NoFlags;
use provider_api::{
    AddressSources, Error as ApiError, Identifier, Instance, ProviderId, ProviderType,
};

use crate::address;
use crate::hosts::HostTable;
use crate::libvirt::state::{DomainPhase, classify};
use crate::libvirt::{DomainOps, Foreign, Ownership, observed, to_provider_error};
use libvirt_rpc::proc_num;

/// Reads the instance `id` of provider entry `entry` from its host in
/// `hosts`.
///
/// A running domain is [`Running`](provider_api::InstanceState::Running)
/// with an address, or `Provisioning` while no source knows one yet; other
/// states map through [`state::classify`](crate::libvirt::state::classify). The
/// instance carries the address sources that answered
/// ([`Instance::address_sources`]); its `proxy_port` is left to the caller
/// (the provider sets it from its config).
///
/// # Errors
/// * Permanent: `id` is not a kvm2 ID of entry `entry`, names a host that is
///   not configured, or names a domain without our mark (or with another
///   entry's mark, or a malformed one);
/// * NotFound: no domain with that name on the host;
/// * Transient: the host could not be reached or a call failed, including
///   every address source failing or the link dying during the address
///   lookup (invariant 8: never reported as "no address yet").
///
/// # Cancel safety
/// Cancel safe: read-only.
pub async fn get(
    hosts: &HostTable,
    entry: &Identifier,
    id: &ProviderId,
) -> Result<Instance, ApiError> {
    ensure_ours(entry, id)?;
    let host = id.host();
    let name = id.instance();
    let conn = hosts.shared(host).await?;
    let client = conn.client();
    let (domain, mark) = match DomainOps::new(&conn).find_ours(name, entry).await? {
        Ownership::Ours { domain, mark } => (domain, mark),
        Ownership::Absent => {
            return Err(ApiError::not_found(format!(
                "host {host}: no domain named {name}"
            )));
        }
        Ownership::Foreign {
            why: Foreign::Unmarked,
            ..
        } => {
            return Err(ApiError::permanent(format!(
                "host {host}: domain {name} has no valid ownership mark; it is not ours"
            )));
        }
        Ownership::Foreign {
            why: Foreign::OtherEntry(other),
            ..
        } => {
            return Err(ApiError::permanent(format!(
                "host {host}: domain {name} belongs to provider entry {other}, not {entry}"
            )));
        }
    };

    let state = observed(
        host,
        proc_num::DOMAIN_GET_STATE,
        client.domain_get_state(&domain, NoFlags::empty()),
    )
    .await
    .map_err(|e| to_provider_error(format!("host {host}: state of domain {name}"), e))?;
    let verdict = classify(state.state_reason());
    let (state, ip, answered) = match verdict.phase {
        DomainPhase::Running => {
            let found = address::discover(&conn, &domain).await?;
            match found.ip {
                Some(ip) => (
                    provider_api::InstanceState::Running,
                    Some(ip),
                    found.answered,
                ),
                None => (
                    provider_api::InstanceState::Provisioning,
                    None,
                    found.answered,
                ),
            }
        }
        _ => (verdict.instance_state(), None, AddressSources::empty()),
    };
    Ok(Instance::new(
        id.clone(),
        state,
        ip,
        Some(mark.created_at().to_system_time()),
    )
    .with_address_sources(answered))
}

/// Refuses an ID this provider entry did not issue: another provider type
/// or another entry name. (The host is checked by the host table.)
///
/// # Errors
/// Permanent, naming what did not match.
pub(crate) fn ensure_ours(entry: &Identifier, id: &ProviderId) -> Result<(), ApiError> {
    if id.provider_type() != ProviderType::Kvm2 {
        return Err(ApiError::permanent(format!(
            "{id} is not a kvm2 provider ID"
        )));
    }
    if id.provider() != entry {
        return Err(ApiError::permanent(format!(
            "{id} belongs to provider entry {}, not {entry}",
            id.provider()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::ErrorClass;

    #[test]
    fn ids_of_other_entries_are_permanent() {
        let entry = Identifier::parse("kvm2-home").unwrap();
        let ours = ProviderId::parse("kvm2://kvm2-home/host1/ep-1").unwrap();
        assert!(ensure_ours(&entry, &ours).is_ok());
        let other = ProviderId::parse("kvm2://kvm2-work/host1/ep-1").unwrap();
        let err = ensure_ours(&entry, &other).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Permanent);
        assert!(err.to_string().contains("kvm2-work"), "{err}");
    }
}
