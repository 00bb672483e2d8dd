//! A running domain's address: the guest agent first, then the host's ARP
//! table, then libvirt's DHCP leases — and invariant 8 for failures.
//!
//! ```text
//!  agent ──found──▶ address
//!    │ empty / failed
//!  arp   ──found──▶ address
//!    │ empty / failed
//!  lease ──found──▶ address
//!    │ empty / failed
//!    ▼
//!  at least one source answered (empty) ─▶ Ok(None): "no address yet"
//!  every source failed                  ─▶ Transient
//!  the link died (any source)           ─▶ Transient, at once
//! ```
//!
//! **Invariant 8**: an address-read failure is never reported as "no
//! address yet" when every source failed. One source failing (a
//! guest agent that is not up yet is the common case) is still "no address
//! yet", but a dead link, a call that hit its deadline, or every source
//! failing is a [`Transient`](provider_api::ErrorClass::Transient) error:
//! the caller keeps what it knew and retries.
//!
//! Addresses are picked by [`pick`]: IPv4 before IPv6, never loopback,
//! link-local, multicast or unspecified addresses. When a source reports
//! usable addresses on more than one interface (a guest agent sees every
//! interface of the guest: a container bridge, a VPN tunnel), only the
//! interfaces whose MAC is one of the domain's NICs count ([`only_nics`];
//! the MACs come from the domain's XML, read once per lookup and only
//! then).

mod nic_macs;

pub use nic_macs::interface_macs;

use provider_api::error::chain;
use std::net::IpAddr;

use libvirt_rpc::{
    DomainInterface, DomainXmlFlags, Error as RpcError, InterfaceAddressesSource, NoFlags,
    proto::types::Domain,
};
use provider_api::{AddressSource, AddressSources, Error as ApiError};

use crate::hosts::Connection;
use crate::libvirt::{observed, observed_source};
use libvirt_rpc::proc_num;

/// The sources, in the order they are asked, with the name each call is
/// observed under (the `source` beside `domain_interface_addresses`) and the [`AddressSource`] it is reported as.
///
/// For the provider's own domains (a NIC on a plain bridge) only the agent
/// and ARP can ever know an address: libvirt reads leases only for NICs on
/// networks it manages, so the lease source answers an empty list
/// (see [`AddressSource`]).
pub const SOURCES: [(InterfaceAddressesSource, &str, AddressSource); 3] = [
    (
        InterfaceAddressesSource::Agent,
        "agent",
        AddressSource::GuestAgent,
    ),
    (InterfaceAddressesSource::Arp, "arp", AddressSource::Arp),
    (
        InterfaceAddressesSource::Lease,
        "lease",
        AddressSource::Lease,
    ),
];

/// What an address lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Discovered {
    /// The address, if a source knew one.
    pub ip: Option<IpAddr>,
    /// The sources that answered (a list, possibly empty) before the
    /// lookup ended; failed sources are not in it.
    pub answered: AddressSources,
}

/// What one source's answer means.
#[derive(Debug)]
enum Step {
    /// An address to report.
    Found(IpAddr),
    /// The source answered but knows no usable address.
    Nothing,
    /// The source failed; another may still answer.
    SourceFailed(String),
    /// The link is dead or the daemon stopped answering: every further call
    /// on this connection would fail too.
    LinkDead(RpcError),
}

fn step(result: Result<Vec<DomainInterface>, RpcError>) -> Step {
    match result {
        Ok(interfaces) => match pick(&interfaces) {
            Some(ip) => Step::Found(ip),
            None => Step::Nothing,
        },
        Err(e) if e.is_disconnected() || e.is_timeout() => Step::LinkDead(e),
        Err(e) => Step::SourceFailed(e.to_string()),
    }
}

/// The address to report from a source's interface list: the first global
/// IPv4 address, else the first global IPv6 address. Interfaces named `lo`
/// and loopback, link-local, multicast and unspecified addresses are
/// skipped; text that is not an address is ignored.
pub fn pick(interfaces: &[DomainInterface]) -> Option<IpAddr> {
    let usable = || {
        interfaces
            .iter()
            .filter(|i| i.name != "lo")
            .flat_map(|i| i.addrs.iter())
            .filter_map(|a| a.addr.parse::<IpAddr>().ok())
            .filter(|ip| is_usable(*ip))
    };
    usable()
        .find(IpAddr::is_ipv4)
        .or_else(|| usable().find(IpAddr::is_ipv6))
}

/// How many interfaces (other than `lo`) carry a usable address.
fn serving_interfaces(interfaces: &[DomainInterface]) -> usize {
    interfaces
        .iter()
        .filter(|i| i.name != "lo")
        .filter(|i| {
            i.addrs
                .iter()
                .filter_map(|a| a.addr.parse::<IpAddr>().ok())
                .any(is_usable)
        })
        .count()
}

/// The interfaces of `interfaces` that are the domain's NICs (`macs`,
/// lower-case). Unfiltered when the MACs are unknown (empty) or when the
/// source reports no MAC at all (nothing to match on).
pub fn only_nics(mut interfaces: Vec<DomainInterface>, macs: &[String]) -> Vec<DomainInterface> {
    if macs.is_empty() || interfaces.iter().all(|i| i.hwaddr.is_none()) {
        return interfaces;
    }
    interfaces.retain(|i| {
        i.hwaddr
            .as_ref()
            .is_some_and(|m| macs.contains(&m.to_ascii_lowercase()))
    });
    interfaces
}

fn is_usable(ip: IpAddr) -> bool {
    if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
        return false;
    }
    match ip {
        IpAddr::V4(v4) => !v4.is_link_local() && !v4.is_broadcast(),
        // fe80::/10
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) != 0xfe80,
    }
}

/// Asks the [`SOURCES`] in order for `domain`'s address on `conn`,
/// keeping invariant 8.
///
/// Returns the address from the first source that knows one, or none when
/// at least one source answered and none knew an address ("no address
/// yet"), with the sources that answered.
///
/// # Errors
/// Transient when the link is dead or a call hit its deadline (at once,
/// without asking further sources), and when every source failed. The
/// message names each source's failure.
///
/// # Cancel safety
/// Cancel safe: read-only calls.
pub async fn discover(conn: &Connection, domain: &Domain) -> Result<Discovered, ApiError> {
    let host = conn.host();
    let mut failures = Vec::new();
    let mut answered = AddressSources::empty();
    let mut macs: Option<Vec<String>> = None;
    for (source, source_name, reported) in SOURCES {
        let call = conn
            .client()
            .domain_interface_addresses(domain, source, NoFlags::empty());
        let mut result = observed_source(
            host,
            proc_num::DOMAIN_INTERFACE_ADDRESSES,
            source_name,
            call,
        )
        .await;
        if let Ok(interfaces) = &mut result
            && serving_interfaces(interfaces) > 1
        {
            let known = match &macs {
                Some(known) => known,
                None => macs.insert(nic_macs(conn, domain).await?),
            };
            *interfaces = only_nics(std::mem::take(interfaces), known);
        }
        match step(result) {
            Step::Found(ip) => {
                return Ok(Discovered {
                    ip: Some(ip),
                    answered: answered.with(reported),
                });
            }
            Step::Nothing => answered.insert(reported),
            Step::SourceFailed(why) => {
                failures.push(format!("domain_interface_addresses({source_name}): {why}"))
            }
            Step::LinkDead(e) => return Err(link_failed(conn, domain, e)),
        }
    }
    conclude(&domain.name, host.as_str(), failures, SOURCES.len())
        .map(|ip| Discovered { ip, answered })
}

/// The domain's NIC MACs from its XML; empty (no filtering) when the XML
/// cannot be read or parsed, an error only when the link failed.
async fn nic_macs(conn: &Connection, domain: &Domain) -> Result<Vec<String>, ApiError> {
    let call = conn
        .client()
        .domain_get_xml_desc(domain, DomainXmlFlags::empty());
    match observed(conn.host(), proc_num::DOMAIN_GET_XML_DESC, call).await {
        Ok(xml) => Ok(interface_macs(&xml).unwrap_or_else(|e| {
            tracing::debug!(domain = %domain.name, error = %chain(&e), "domain XML unreadable; addresses not matched to NICs");
            Vec::new()
        })),
        Err(e) if e.is_disconnected() || e.is_timeout() => Err(link_failed(conn, domain, e)),
        Err(e) => {
            tracing::debug!(domain = %domain.name, error = %chain(&e), "domain XML not read; addresses not matched to NICs");
            Ok(Vec::new())
        }
    }
}

fn link_failed(conn: &Connection, domain: &Domain, e: RpcError) -> ApiError {
    ApiError::wrap(
        provider_api::ErrorClass::Transient,
        format!(
            "host {}: address of domain {}: the libvirt link failed",
            conn.host(),
            domain.name
        ),
        e,
    )
}

/// `Ok(None)` unless all `asked` sources failed (then Transient).
fn conclude(
    domain: &str,
    host: &str,
    failures: Vec<String>,
    asked: usize,
) -> Result<Option<IpAddr>, ApiError> {
    if failures.len() < asked {
        return Ok(None);
    }
    Err(ApiError::transient(format!(
        "host {host}: address of domain {domain}: every source failed ({})",
        failures.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use libvirt_rpc::{DomainIpAddr, ErrorCode, LibvirtError};

    fn iface(name: &str, addrs: &[&str]) -> DomainInterface {
        DomainInterface {
            name: name.into(),
            hwaddr: Some("52:54:00:00:00:01".into()),
            addrs: addrs
                .iter()
                .map(|a| DomainIpAddr {
                    kind: i32::from(a.contains(':')),
                    addr: (*a).into(),
                    prefix: 24,
                })
                .collect(),
        }
    }

    #[test]
    fn pick_prefers_global_ipv4_and_skips_what_cannot_serve() {
        let ifaces = [
            iface("lo", &["127.0.0.1", "::1"]),
            iface(
                "eth0",
                &["fe80::1", "2001:db8::5", "169.254.3.4", "10.0.0.7"],
            ),
        ];
        assert_eq!(pick(&ifaces), Some("10.0.0.7".parse().unwrap()));
        let v6_only = [iface("eth0", &["fe80::1", "2001:db8::5"])];
        assert_eq!(pick(&v6_only), Some("2001:db8::5".parse().unwrap()));
        let nothing = [
            iface("eth0", &["fe80::1", "0.0.0.0", "224.0.0.1", "not-an-ip"]),
            iface("lo", &["10.9.9.9"]),
        ];
        assert_eq!(pick(&nothing), None);
        assert_eq!(pick(&[]), None);
    }

    fn nic(name: &str, mac: Option<&str>, addrs: &[&str]) -> DomainInterface {
        DomainInterface {
            hwaddr: mac.map(str::to_owned),
            ..iface(name, addrs)
        }
    }

    #[test]
    fn only_the_domains_nics_count_when_the_guest_has_several() {
        let guest = vec![
            iface("lo", &["127.0.0.1"]),
            nic("docker0", Some("02:42:ac:11:00:01"), &["172.17.0.1"]),
            nic("ens3", Some("52:54:00:AB:00:01"), &["fe80::1", "10.0.0.7"]),
        ];
        assert_eq!(serving_interfaces(&guest), 2);
        // Without the filter the container bridge would win.
        assert_eq!(pick(&guest), Some("172.17.0.1".parse().unwrap()));
        let macs = ["52:54:00:ab:00:01".to_owned()];
        assert_eq!(
            pick(&only_nics(guest.clone(), &macs)),
            Some("10.0.0.7".parse().unwrap())
        );
        // Our NIC has no address yet: "no address yet", not docker0's.
        let waiting = vec![
            nic("docker0", Some("02:42:ac:11:00:01"), &["172.17.0.1"]),
            nic("ens3", Some("52:54:00:ab:00:01"), &["fe80::1"]),
        ];
        assert_eq!(pick(&only_nics(waiting, &macs)), None);
        // Unknown MACs, or a source that names none: unfiltered.
        assert_eq!(only_nics(guest.clone(), &[]), guest);
        let anonymous = vec![nic("a", None, &["10.1.1.1"]), nic("b", None, &["10.2.2.2"])];
        assert_eq!(only_nics(anonymous.clone(), &macs), anonymous);
    }

    fn agent_down() -> RpcError {
        RpcError::Libvirt(LibvirtError {
            code: ErrorCode::AgentUnresponsive,
            domain: 10,
            message: "QEMU guest agent is not connected".into(),
            level: 2,
        })
    }

    #[test]
    fn steps_tell_a_failing_source_from_a_dead_link() {
        assert!(matches!(step(Err(agent_down())), Step::SourceFailed(_)));
        let timeout = RpcError::Timeout {
            procedure: 353,
            after: std::time::Duration::from_secs(1),
        };
        assert!(matches!(step(Err(timeout)), Step::LinkDead(_)));
        assert!(matches!(step(Ok(vec![])), Step::Nothing));
        assert!(matches!(
            step(Ok(vec![iface("eth0", &["192.0.2.1"])])),
            Step::Found(_)
        ));
    }

    #[test]
    fn one_failing_source_is_no_address_yet_but_all_failing_is_transient() {
        assert_eq!(
            conclude("d", "h", vec!["agent: down".into()], 3).unwrap(),
            None
        );
        assert_eq!(conclude("d", "h", vec![], 3).unwrap(), None);
        let all = conclude(
            "d",
            "h",
            vec!["agent: a".into(), "arp: b".into(), "lease: c".into()],
            3,
        )
        .unwrap_err();
        assert!(all.is_transient());
        assert!(all.to_string().contains("arp: b"), "{all}");
    }
}
