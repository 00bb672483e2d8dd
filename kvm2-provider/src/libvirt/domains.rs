//! Domain calls shared by Create, Delete, Get and List, and the one
//! ownership check they all use: look the domain up by name, read its
//! mark, compare the mark's entry with ours (invariant 7 of
//! ARCHITECTURE.md: a domain without our mark, or with another owner's, is
//! never modified or deleted).
//!
//! ```text
//!  name ─ domain_lookup_by_name ── NoDomain ─────────────────────▶ Absent
//!            │ domain_get_metadata ── gone since the lookup ──────▶ Absent
//!            │                     ── no mark, malformed mark ────▶ Foreign(Unmarked)
//!            │                     ── another entry's mark ───────▶ Foreign(OtherEntry)
//!            ▼                     ── this entry's mark ──────────▶ Ours(domain, mark)
//! ```
//!
//! Each call is observed (one span and debug line, see
//! [`observed`](super::observed)) and bounded by its connection's per-call
//! deadline; libvirt failures become provider errors that name the host.
//! The twin of [`PoolOps`](crate::storage::PoolOps) for domains.

use libvirt_rpc::{
    DomainDestroyFlags, DomainModificationImpact, DomainState, DomainUndefineFlags, ErrorCode,
    MetadataType, NoFlags, proc_num, proto::types::Domain,
};
use provider_api::error::chain;
use provider_api::{Error as ApiError, Identifier};

use super::errors::{is_absent, to_provider_error};
use super::observe::observed;
use crate::definition::{MARK_NAMESPACE, OwnerMark, parse_metadata_reply};
use crate::hosts::Connection;

/// Whose a domain is, by its ownership mark.
#[derive(Debug)]
pub(crate) enum Ownership {
    /// It carries this entry's mark (the owner UID in it is the caller's to
    /// compare).
    Ours {
        /// The domain.
        domain: Domain,
        /// Its mark.
        mark: OwnerMark,
    },
    /// It exists and is not this entry's: never modified or deleted.
    Foreign {
        /// The domain.
        domain: Domain,
        /// Why it is not ours.
        why: Foreign,
    },
    /// No domain by that name (or it vanished while being judged).
    Absent,
}

/// Why a domain is not ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Foreign {
    /// No mark, or a malformed one.
    Unmarked,
    /// The mark of another provider entry.
    OtherEntry(Identifier),
}

/// The verdict on `domain` whose mark (if any, and well-formed) is `mark`.
fn ownership(domain: Domain, mark: Option<OwnerMark>, entry: &Identifier) -> Ownership {
    match mark {
        None => Ownership::Foreign {
            domain,
            why: Foreign::Unmarked,
        },
        Some(mark) if mark.entry() != entry => Ownership::Foreign {
            domain,
            why: Foreign::OtherEntry(mark.entry().clone()),
        },
        Some(mark) => Ownership::Ours { domain, mark },
    }
}

/// One host's domains, reached through one connection.
pub(crate) struct DomainOps<'a> {
    conn: &'a Connection,
}

impl<'a> DomainOps<'a> {
    /// Domain calls on `conn`.
    pub(crate) fn new(conn: &'a Connection) -> Self {
        Self { conn }
    }

    /// The domain named `name`, or `None` when there is none.
    ///
    /// # Errors
    /// As the [error table](super::errors).
    pub(crate) async fn find(&self, name: &str) -> Result<Option<Domain>, ApiError> {
        let host = self.conn.host();
        match observed(
            host,
            proc_num::DOMAIN_LOOKUP_BY_NAME,
            self.conn.client().domain_lookup_by_name(name),
        )
        .await
        {
            Ok(dom) => Ok(Some(dom)),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) => Err(to_provider_error(
                format!("host {host}: look up domain {name}"),
                e,
            )),
        }
    }

    /// The domain named `name` judged by its mark against `entry`: the one
    /// ownership check.
    ///
    /// # Errors
    /// As the [error table](super::errors); a domain vanishing
    /// meanwhile is [`Ownership::Absent`], not an error.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub(crate) async fn find_ours(
        &self,
        name: &Identifier,
        entry: &Identifier,
    ) -> Result<Ownership, ApiError> {
        match self.find(name.as_str()).await? {
            Some(domain) => self.judge(domain, entry).await,
            None => Ok(Ownership::Absent),
        }
    }

    /// Judges a domain already in hand (from a listing) by its mark.
    ///
    /// # Errors
    /// As [`DomainOps::find_ours`].
    pub(crate) async fn judge(
        &self,
        domain: Domain,
        entry: &Identifier,
    ) -> Result<Ownership, ApiError> {
        match self.read_mark(&domain).await {
            Ok(mark) => Ok(ownership(domain, mark, entry)),
            Err(e) if e.is_not_found() => Ok(Ownership::Absent),
            Err(e) => Err(e),
        }
    }

    /// Reads and parses `domain`'s ownership mark: `None` when the domain
    /// has no mark or a malformed one (it is foreign: never touched).
    ///
    /// # Errors
    /// NotFound when the domain vanished; otherwise as the
    /// [error table](super::errors).
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub(crate) async fn read_mark(&self, domain: &Domain) -> Result<Option<OwnerMark>, ApiError> {
        let host = self.conn.host();
        let name = &domain.name;
        let reply = observed(
            host,
            proc_num::DOMAIN_GET_METADATA,
            self.conn.client().domain_get_metadata(
                domain,
                MetadataType::Element,
                Some(MARK_NAMESPACE),
                DomainModificationImpact::empty(),
            ),
        )
        .await;
        match reply {
            Ok(text) => match parse_metadata_reply(&text) {
                Ok(mark) => Ok(Some(mark)),
                Err(e) => {
                    tracing::debug!(%host, domain = %name, error = %chain(&e), "malformed ownership mark; foreign");
                    Ok(None)
                }
            },
            Err(e) if e.code() == Some(ErrorCode::NoDomainMetadata) => Ok(None),
            Err(e) => Err(to_provider_error(
                format!("host {host}: ownership mark of domain {name}"),
                e,
            )),
        }
    }

    /// Stops (if running) and undefines the domain `name`, with its NVRAM
    /// file (the flag is harmless for BIOS domains, and needed for UEFI
    /// ones: libvirt refuses to undefine them otherwise). A domain already
    /// gone is done. The caller has checked the mark.
    ///
    /// # Errors
    /// As the [error table](super::errors).
    pub(crate) async fn remove(&self, name: &Identifier) -> Result<(), ApiError> {
        let host = self.conn.host();
        let client = self.conn.client();
        let Some(dom) = self.find(name.as_str()).await? else {
            return Ok(());
        };
        let info = observed(
            host,
            proc_num::DOMAIN_GET_STATE,
            client.domain_get_state(&dom, NoFlags::empty()),
        )
        .await;
        let active = match info {
            Ok(info) => info.state != DomainState::Shutoff,
            Err(e) if is_absent(&e) => return Ok(()),
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
                Err(e) if is_absent(&e) => return Ok(()),
                // Stopped meanwhile ("domain is not running"): go on.
                Err(libvirt_rpc::Error::Libvirt(e)) if e.code == ErrorCode::OperationInvalid => {}
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
            Err(e) if is_absent(&e) => Ok(()),
            Err(e) => Err(to_provider_error(
                format!("host {host}: undefine {name}"),
                e,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timestamp::Timestamp;
    use provider_api::OwnerUid;

    fn domain() -> Domain {
        Domain {
            name: "ep-1".into(),
            uuid: [0; 16],
            id: -1,
        }
    }

    fn mark(entry: &str) -> OwnerMark {
        OwnerMark::new(
            OwnerUid::parse("0b8f1a2c-1d2e-4f50-8a6b-7c8d9e0f1a2b").unwrap(),
            Identifier::parse(entry).unwrap(),
            Timestamp::from_unix_seconds(1_700_000_000).unwrap(),
        )
    }

    #[test]
    fn only_this_entrys_mark_makes_a_domain_ours() {
        let entry = Identifier::parse("kvm2-home").unwrap();
        assert!(matches!(
            ownership(domain(), Some(mark("kvm2-home")), &entry),
            Ownership::Ours { .. }
        ));
        assert!(matches!(
            ownership(domain(), None, &entry),
            Ownership::Foreign {
                why: Foreign::Unmarked,
                ..
            }
        ));
        match ownership(domain(), Some(mark("kvm2-work")), &entry) {
            Ownership::Foreign {
                why: Foreign::OtherEntry(other),
                ..
            } => assert_eq!(other.as_str(), "kvm2-work"),
            other => panic!("{other:?}"),
        }
    }
}
