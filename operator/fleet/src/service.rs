//! Services for proxies: which Services should exist and which addresses
//! back each ([`desired`]).
//!
//! Every pool gets a selector-less Service named after it, and every Proxy
//! that is not a pool member one named after the Proxy (members are reached
//! through their pool's: a Service per member would triple a large pool's
//! objects). A Service's endpoints are exactly the proxies behind it that
//! are `Healthy` now ([`ProxyStatus::is_healthy`]), at their address and
//! proxy port. A Service name must be a DNS-1035 label (a letter first, at
//! most 63 characters); a Proxy or pool whose name is not gets none, and a
//! Proxy named like a pool of its namespace yields the name to the pool.
//! An address Kubernetes refuses in endpoints (loopback, link-local,
//! multicast, unspecified) is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::status::ProxyStatus;

/// The proxy port a Service advertises when no member reports one.
pub const DEFAULT_PROXY_PORT: u16 = 3128;
/// The name of the Service's (and its endpoints') one port.
pub const PORT_NAME: &str = "proxy";

/// What owns a Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OwnerKind {
    /// A Proxy (not a pool member).
    Proxy,
    /// A ProxyPool.
    ProxyPool,
}

/// A Proxy as the Service sync sees it.
#[derive(Debug, Clone, Copy)]
pub struct ServiceProxy<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its UID.
    pub uid: &'a str,
    /// The pool that owns it (name), if any.
    pub pool: Option<&'a str>,
    /// It is being deleted.
    pub deleting: bool,
    /// Its status.
    pub status: &'a ProxyStatus,
}

/// A pool as the Service sync sees it.
#[derive(Debug, Clone, Copy)]
pub struct ServicePool<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its UID.
    pub uid: &'a str,
    /// It is being deleted.
    pub deleting: bool,
}

/// One Service that should exist, and what backs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredService {
    /// Its namespace.
    pub namespace: String,
    /// Its name (the owner's).
    pub name: String,
    /// The owner's kind.
    pub owner_kind: OwnerKind,
    /// The owner's UID.
    pub owner_uid: String,
    /// The port it advertises: the port most of its healthy proxies listen
    /// on ([`DEFAULT_PROXY_PORT`] when none is healthy).
    pub port: u16,
    /// The healthy proxies' addresses, by the port each listens on.
    pub endpoints: BTreeMap<u16, BTreeSet<IpAddr>>,
}

impl DesiredService {
    /// How many addresses back it.
    pub fn len(&self) -> usize {
        self.endpoints.values().map(BTreeSet::len).sum()
    }

    /// No address backs it.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether Kubernetes takes `ip` as an endpoint address: not loopback,
/// link-local, multicast or unspecified (the API server refuses those).
pub fn is_endpoint_address(ip: IpAddr) -> bool {
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_unicast_link_local(),
    };
    !(ip.is_loopback() || ip.is_multicast() || ip.is_unspecified() || link_local)
}

/// Whether `name` can name a Service: a DNS-1035 label.
pub fn is_service_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_lowercase)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// The Services that should exist for `proxies` and `pools`, keyed by
/// namespace and name. A pool or Proxy being deleted keeps no Service.
pub fn desired(
    proxies: &[ServiceProxy<'_>],
    pools: &[ServicePool<'_>],
) -> BTreeMap<(String, String), DesiredService> {
    let mut out: BTreeMap<(String, String), DesiredService> = BTreeMap::new();
    let live_pools: BTreeSet<(&str, &str)> = pools
        .iter()
        .filter(|p| !p.deleting)
        .map(|p| (p.namespace, p.name))
        .collect();
    let mut add = |ns: &str, name: &str, kind: OwnerKind, uid: &str| {
        out.entry((ns.to_owned(), name.to_owned()))
            .or_insert_with(|| DesiredService {
                namespace: ns.to_owned(),
                name: name.to_owned(),
                owner_kind: kind,
                owner_uid: uid.to_owned(),
                port: DEFAULT_PROXY_PORT,
                endpoints: BTreeMap::new(),
            });
    };
    for p in pools
        .iter()
        .filter(|p| !p.deleting && is_service_name(p.name))
    {
        add(p.namespace, p.name, OwnerKind::ProxyPool, p.uid);
    }
    for p in proxies.iter().filter(|p| !p.deleting && p.pool.is_none()) {
        if is_service_name(p.name) && !live_pools.contains(&(p.namespace, p.name)) {
            add(p.namespace, p.name, OwnerKind::Proxy, p.uid);
        }
    }
    for p in proxies
        .iter()
        .filter(|p| !p.deleting && p.status.is_healthy())
    {
        let (Some(ip), Some(port)) = (p.status.ip, p.status.port) else {
            continue;
        };
        if !is_endpoint_address(ip) {
            continue;
        }
        let service = p.pool.unwrap_or(p.name);
        let key = (p.namespace.to_owned(), service.to_owned());
        if let Some(s) = out.get_mut(&key) {
            // A pool's Service takes its members only; a Proxy's, itself.
            let ours = match s.owner_kind {
                OwnerKind::ProxyPool => p.pool.is_some(),
                OwnerKind::Proxy => p.pool.is_none() && s.owner_uid == p.uid,
            };
            if ours {
                s.endpoints.entry(port).or_default().insert(ip);
            }
        }
    }
    for s in out.values_mut() {
        if let Some((port, _)) = s
            .endpoints
            .iter()
            .max_by_key(|(port, ips)| (ips.len(), std::cmp::Reverse(**port)))
        {
            s.port = *port;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::status::{ConditionStatus, ConditionType, ConditionUpdate, Phase};
    use crate::{Reason, Timestamp};

    fn status(ip: &str, port: u16, healthy: bool) -> ProxyStatus {
        let mut s = ProxyStatus {
            phase: Some(Phase::Running),
            provider_id: Some(format!("kvm2://e/h/{ip}")),
            ip: Some(ip.parse().unwrap()),
            port: Some(port),
            ..ProxyStatus::default()
        };
        s.probed_instance = s.instance_endpoint();
        s.set_condition(
            ConditionType::Healthy,
            ConditionUpdate::new(
                ConditionStatus::from_bool(healthy),
                Reason::ProbeSucceeded,
                "",
                None,
            ),
            Timestamp::from_unix_seconds(1),
        );
        s
    }

    fn proxy<'a>(name: &'a str, pool: Option<&'a str>, s: &'a ProxyStatus) -> ServiceProxy<'a> {
        ServiceProxy {
            namespace: "ns",
            name,
            uid: name,
            pool,
            deleting: false,
            status: s,
        }
    }

    fn pool(name: &str) -> ServicePool<'_> {
        ServicePool {
            namespace: "ns",
            name,
            uid: "pool-uid",
            deleting: false,
        }
    }

    #[test]
    fn a_pools_service_is_backed_by_its_healthy_members_only() {
        let (a, b, c) = (
            status("10.0.0.1", 3128, true),
            status("10.0.0.2", 3128, false),
            status("10.0.0.3", 3128, true),
        );
        let proxies = [
            proxy("egress-x-0", Some("egress"), &a),
            proxy("egress-x-1", Some("egress"), &b),
            proxy("solo", None, &c),
        ];
        let out = desired(&proxies, &[pool("egress")]);
        let keys: Vec<&str> = out.keys().map(|(_, n)| n.as_str()).collect();
        assert_eq!(
            keys,
            ["egress", "solo"],
            "members get no Service of their own"
        );
        let egress = &out[&("ns".into(), "egress".into())];
        assert_eq!(egress.owner_kind, OwnerKind::ProxyPool);
        assert_eq!(
            egress.endpoints[&3128]
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["10.0.0.1"]
        );
        assert_eq!(out[&("ns".into(), "solo".into())].len(), 1);
    }

    #[test]
    fn addresses_kubernetes_refuses_in_endpoints_are_left_out() {
        let bad = [
            "127.0.0.1",
            "169.254.1.1",
            "224.0.0.1",
            "::1",
            "fe80::1",
            "0.0.0.0",
        ];
        for ip in bad {
            let s = status(ip, 3128, true);
            let out = desired(&[proxy("solo", None, &s)], &[]);
            assert!(out[&("ns".into(), "solo".into())].is_empty(), "{ip}");
        }
        assert!(is_endpoint_address("10.213.30.1".parse().unwrap()));
        assert!(is_endpoint_address("fd00::1".parse().unwrap()));
    }

    #[test]
    fn a_verdict_about_an_earlier_instance_backs_nothing() {
        let mut stale = status("10.0.0.1", 3128, true);
        stale.replacements = 1; // replaced since the verdict
        let proxies = [proxy("solo", None, &stale)];
        let out = desired(&proxies, &[]);
        assert!(out[&("ns".into(), "solo".into())].is_empty());
    }

    #[test]
    fn names_that_cannot_be_services_and_deleting_owners_get_none() {
        let s = status("10.0.0.1", 3128, true);
        let mut deleting = proxy("gone", None, &s);
        deleting.deleting = true;
        let long = "a".repeat(64);
        let proxies = [
            proxy("1digit-first", None, &s),
            proxy(&long, None, &s),
            proxy("has.dot", None, &s),
            deleting,
        ];
        let mut dying = pool("dying");
        dying.deleting = true;
        assert!(desired(&proxies, &[dying]).is_empty());
    }

    #[test]
    fn a_proxy_named_like_a_pool_yields_the_name() {
        let s = status("10.0.0.9", 3128, true);
        let proxies = [proxy("egress", None, &s)];
        let out = desired(&proxies, &[pool("egress")]);
        let svc = &out[&("ns".into(), "egress".into())];
        assert_eq!(svc.owner_kind, OwnerKind::ProxyPool);
        assert!(svc.is_empty(), "the Proxy is not a member");
    }

    #[test]
    fn the_advertised_port_is_the_one_most_members_use() {
        let (a, b, c) = (
            status("10.0.0.1", 8080, true),
            status("10.0.0.2", 3128, true),
            status("10.0.0.3", 3128, true),
        );
        let proxies = [
            proxy("p-0", Some("p"), &a),
            proxy("p-1", Some("p"), &b),
            proxy("p-2", Some("p"), &c),
        ];
        let out = desired(&proxies, &[pool("p")]);
        let svc = &out[&("ns".into(), "p".into())];
        assert_eq!(svc.port, 3128);
        assert_eq!(svc.endpoints.len(), 2, "both ports keep their addresses");
        assert_eq!(
            desired(&[], &[pool("p")])[&("ns".into(), "p".into())].port,
            DEFAULT_PROXY_PORT
        );
    }
}
