//! The discovery API's JSON model: which proxies exist, where they listen
//! and whether they are healthy, filtered by namespace and health.
//!
//! ```text
//! GET /proxies?namespace=team-a&healthy=true
//! {"proxies":[{"namespace":"team-a","name":"egress-1","phase":"Running",
//!   "provider":"kvm2-home","host":"host1","ip":"10.0.0.7","port":3128,
//!   "address":"10.0.0.7:3128","healthy":true,"ready":true}],"count":1}
//! ```
//!
//! Only proxies a client can dial are listed: `Running`, with an instance
//! and an address. `healthy` is [`ProxyStatus::is_healthy`]: a verdict
//! earned by the instance and address the Proxy has now, never one left
//! from a replaced instance or an earlier address.
//!
//! The operator serves it from its watch cache on every replica; this
//! module is the pure part: the query, each proxy's view, the response.

use std::net::{IpAddr, SocketAddr};

use provider_api::Identifier;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, quoted};
use crate::spec::ProxySpec;
use crate::status::{ConditionStatus, ConditionType, Phase, ProxyStatus};

/// One proxy as discovery shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredProxy {
    /// The Proxy's namespace.
    pub namespace: String,
    /// The Proxy's name.
    pub name: String,
    /// Its phase, if reconciled yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Its provider entry.
    pub provider: String,
    /// The host it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Its address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpAddr>,
    /// Its port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// `ip:port` (`[ip]:port` for IPv6), what a client dials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The `Healthy` condition is `True`.
    pub healthy: bool,
    /// The `Ready` condition is `True`.
    pub ready: bool,
}

impl DiscoveredProxy {
    /// The view of the Proxy `namespace/name` with `spec` and `status`: its
    /// address only while it serves (`Running` with an instance).
    pub fn new(namespace: &str, name: &str, spec: &ProxySpec, status: &ProxyStatus) -> Self {
        let (ip, port) = match status.instance_endpoint() {
            Some(_) => (status.ip, status.port),
            None => (None, None),
        };
        let address = match (ip, port) {
            (Some(ip), Some(port)) => Some(SocketAddr::new(ip, port).to_string()),
            _ => None,
        };
        DiscoveredProxy {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            phase: status.phase,
            provider: spec.provider.clone(),
            host: status.host.clone(),
            ip,
            port,
            address,
            healthy: status.is_healthy(),
            ready: status.condition_status(ConditionType::Ready) == Some(ConditionStatus::True),
        }
    }
}

/// The filters of a discovery request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiscoveryQuery {
    /// Only this namespace.
    pub namespace: Option<Identifier>,
    /// Only healthy (`true`) or only not healthy (`false`) proxies.
    pub healthy: Option<bool>,
}

impl DiscoveryQuery {
    /// Parses a URL query string (without the `?`): `namespace=<name>` and
    /// `healthy=true|false`, each at most once; empty parts are ignored.
    ///
    /// # Errors
    /// [`Error::InvalidQuery`] for an unknown or repeated parameter, a
    /// parameter without `=`, a namespace that is not a DNS label, or a
    /// `healthy` other than `true` or `false`.
    pub fn parse(query: &str) -> Result<DiscoveryQuery, Error> {
        let invalid = |reason: String| Error::InvalidQuery { reason };
        let mut q = DiscoveryQuery::default();
        for part in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| invalid(format!("{:?} has no value", quoted(part))))?;
            match key {
                "namespace" if q.namespace.is_none() => {
                    let ns = Identifier::parse(value).map_err(|e| {
                        invalid(format!("namespace {:?} {}", quoted(value), e.rule()))
                    })?;
                    q.namespace = Some(ns);
                }
                "healthy" if q.healthy.is_none() => {
                    q.healthy = Some(match value {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return Err(invalid(format!(
                                "healthy must be true or false, not {:?}",
                                quoted(value)
                            )));
                        }
                    });
                }
                "namespace" | "healthy" => {
                    return Err(invalid(format!("{key} is given more than once")));
                }
                _ => {
                    return Err(invalid(format!(
                        "unknown parameter {:?} (known: namespace, healthy)",
                        quoted(key)
                    )));
                }
            }
        }
        Ok(q)
    }

    /// Whether `p` passes the filters.
    pub fn matches(&self, p: &DiscoveredProxy) -> bool {
        self.namespace
            .as_ref()
            .is_none_or(|ns| ns.as_str() == p.namespace)
            && self.healthy.is_none_or(|h| h == p.healthy)
    }
}

/// The discovery response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiscoveryResponse {
    /// The matching proxies, by namespace then name.
    pub proxies: Vec<DiscoveredProxy>,
    /// How many.
    pub count: usize,
}

/// The response to `query` over `proxies`: those with an address that pass
/// the filters.
pub fn discover(
    proxies: impl IntoIterator<Item = DiscoveredProxy>,
    query: &DiscoveryQuery,
) -> DiscoveryResponse {
    let mut proxies: Vec<DiscoveredProxy> = proxies
        .into_iter()
        .filter(|p| p.address.is_some() && query.matches(p))
        .collect();
    proxies.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    DiscoveryResponse {
        count: proxies.len(),
        proxies,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::Reason;
    use crate::status::ConditionUpdate;
    use crate::time::Timestamp;

    fn proxy(ns: &str, name: &str, healthy: Option<bool>) -> DiscoveredProxy {
        let mut status = ProxyStatus {
            phase: Some(Phase::Running),
            provider_id: Some("kvm2://kvm2-home/host1/vm".into()),
            host: Some("host1".into()),
            ip: Some("10.0.0.7".parse().unwrap()),
            port: Some(3128),
            ..ProxyStatus::default()
        };
        status.probed_instance = status.instance_endpoint();
        if let Some(h) = healthy {
            status.set_condition(
                ConditionType::Healthy,
                ConditionUpdate::new(
                    ConditionStatus::from_bool(h),
                    if h {
                        Reason::ProbeSucceeded
                    } else {
                        Reason::ProbeTimeout
                    },
                    "",
                    None,
                ),
                Timestamp::from_unix_seconds(0),
            );
        }
        let spec = ProxySpec {
            provider: "kvm2-home".into(),
            ..ProxySpec::default()
        };
        DiscoveredProxy::new(ns, name, &spec, &status)
    }

    fn all() -> Vec<DiscoveredProxy> {
        vec![
            proxy("b", "p2", Some(true)),
            proxy("a", "p9", Some(false)),
            proxy("a", "p1", Some(true)),
            proxy("b", "p1", None),
        ]
    }

    fn names(r: &DiscoveryResponse) -> Vec<String> {
        r.proxies
            .iter()
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect()
    }

    #[test]
    fn filters_table() {
        for (query, expected) in [
            ("", &["a/p1", "a/p9", "b/p1", "b/p2"][..]),
            ("namespace=a", &["a/p1", "a/p9"]),
            ("healthy=true", &["a/p1", "b/p2"]),
            ("healthy=false", &["a/p9", "b/p1"]),
            ("namespace=b&healthy=true", &["b/p2"]),
            ("healthy=false&namespace=b&", &["b/p1"]),
            ("namespace=c", &[]),
        ] {
            let q = DiscoveryQuery::parse(query).unwrap();
            let r = discover(all(), &q);
            assert_eq!(names(&r), expected, "{query:?}");
            assert_eq!(r.count, expected.len());
        }
    }

    #[test]
    fn bad_queries_are_refused() {
        for bad in [
            "namespace",
            "namespace=A",
            "namespace=a&namespace=b",
            "healthy=yes",
            "healthy=true&healthy=true",
            "limit=3",
            "namespace=a%2Fb",
        ] {
            assert!(
                matches!(DiscoveryQuery::parse(bad), Err(Error::InvalidQuery { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_json_model() {
        let r = discover([proxy("a", "p1", Some(true))], &DiscoveryQuery::default());
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "proxies": [{
                    "namespace": "a", "name": "p1", "phase": "Running",
                    "provider": "kvm2-home", "host": "host1", "ip": "10.0.0.7",
                    "port": 3128, "address": "10.0.0.7:3128",
                    "healthy": true, "ready": false
                }],
                "count": 1
            })
        );
    }

    fn healthy_running() -> ProxyStatus {
        let mut s = ProxyStatus {
            phase: Some(Phase::Running),
            provider_id: Some("kvm2://e/h/old".into()),
            ip: Some("10.0.0.7".parse().unwrap()),
            port: Some(3128),
            ..ProxyStatus::default()
        };
        s.probed_instance = s.instance_endpoint();
        s.set_condition(
            ConditionType::Healthy,
            ConditionUpdate::new(ConditionStatus::True, Reason::ProbeSucceeded, "", None),
            Timestamp::from_unix_seconds(0),
        );
        s
    }

    fn view(s: &ProxyStatus) -> DiscoveredProxy {
        DiscoveredProxy::new("a", "p", &ProxySpec::default(), s)
    }

    #[test]
    fn healthy_is_the_current_instances_verdict_only() {
        let s = healthy_running();
        assert!(view(&s).healthy);
        // Replaced: a new instance (same address, as DHCP may give), by
        // another name or by the same one.
        let mut replaced = s.clone();
        replaced.provider_id = Some("kvm2://e/h/new".into());
        assert!(!view(&replaced).healthy);
        let mut same_name = s.clone();
        same_name.replacements = 1;
        assert!(!view(&same_name).healthy);
        // The address changed.
        let mut moved = s.clone();
        moved.ip = Some("10.0.0.8".parse().unwrap());
        assert!(!view(&moved).healthy);
        // Leaving Running: no address is offered, nothing is listed.
        for phase in [
            Phase::Deleting,
            Phase::Pending,
            Phase::Provisioning,
            Phase::Failed,
        ] {
            let mut left = s.clone();
            left.phase = Some(phase);
            let v = view(&left);
            assert!(!v.healthy && v.address.is_none(), "{phase:?}");
            let listed = discover([v], &DiscoveryQuery::default());
            assert_eq!(listed.count, 0, "{phase:?}");
        }
        // A verdict written before probedInstance existed is no verdict.
        let mut unbound = s.clone();
        unbound.probed_instance = None;
        assert!(!view(&unbound).healthy);
    }

    #[test]
    fn a_proxy_without_an_address_has_none() {
        let p = DiscoveredProxy::new(
            "a",
            "p",
            &ProxySpec::default(),
            &ProxyStatus {
                port: Some(3128),
                ..ProxyStatus::default()
            },
        );
        assert_eq!(p.address, None);
        assert!(!p.healthy && !p.ready);
        let mut s = ProxyStatus {
            provider_id: Some("kvm2://e/h/vm".into()),
            ip: Some("2001:db8::7".parse().unwrap()),
            port: Some(3128),
            ..ProxyStatus::default()
        };
        s.phase = Some(Phase::Running);
        let p = DiscoveredProxy::new("a", "p", &ProxySpec::default(), &s);
        assert_eq!(p.address.as_deref(), Some("[2001:db8::7]:3128"));
    }
}
