//! [`FleetGauges`]: the fleet's state as gauges, computed at each scrape
//! from what the operator already holds — the Proxy watch cache (every
//! replica), and, on the leader only, the pool controller's cache, the
//! monitor's latest host checks (a follower has no fresh copy of either,
//! so it serves none rather than stale ones) and the providers' image
//! fills (only the leader creates).
//!
//! | family | labels |
//! |---|---|
//! | `operator_proxies` | `namespace`, `phase`, `healthy` |
//! | `operator_pool_replicas` | `namespace`, `pool`, `state` (`desired`, `current`, `ready`, `healthy`, `updated`) |
//! | `operator_host_reachable` | `provider`, `host` |
//! | `operator_image_fills_in_flight` | `provider` |
//!
//! Label values are bounded by what users made (namespaces, pools) and
//! what the providers config names (entries, hosts): never a Proxy's name,
//! a UID or an address.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use provider_api::Provider;

use crate::crd::{Proxy, ProxyPool};
use crate::leader::Leadership;
use crate::pool::HostBook;

/// What only the leader has fresh: set at each term's start.
#[derive(Clone)]
pub struct LeaderView {
    /// The term's leadership (the view counts only while it holds).
    pub leadership: Leadership,
    /// The pool controller's cache.
    pub pools: Store<ProxyPool>,
}

/// The collector (cheap to clone: shared handles).
#[derive(Clone)]
pub struct FleetGauges {
    proxies: Store<Proxy>,
    hosts: HostBook,
    providers: Vec<Arc<dyn Provider>>,
    leader: Arc<RwLock<Option<LeaderView>>>,
}

impl std::fmt::Debug for FleetGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetGauges").finish_non_exhaustive()
    }
}

impl FleetGauges {
    /// Gauges over the Proxy cache `proxies`, the monitor's `hosts` and
    /// the `providers`' image fills.
    pub fn new(
        proxies: Store<Proxy>,
        hosts: HostBook,
        providers: impl IntoIterator<Item = Arc<dyn Provider>>,
    ) -> Self {
        FleetGauges {
            proxies,
            hosts,
            providers: providers.into_iter().collect(),
            leader: Arc::default(),
        }
    }

    /// A new term's view (replacing the last term's).
    pub fn lead(&self, view: LeaderView) {
        *self.leader.write().unwrap_or_else(|e| e.into_inner()) = Some(view);
    }

    fn leading(&self) -> Option<LeaderView> {
        let view = self.leader.read().unwrap_or_else(|e| e.into_inner());
        view.as_ref().filter(|v| v.leadership.holds()).cloned()
    }
}

/// Proxies counted by `(namespace, phase, healthy)`.
pub(super) fn proxy_counts(proxies: &[Arc<Proxy>]) -> BTreeMap<[String; 3], i64> {
    let mut counts = BTreeMap::new();
    for p in proxies {
        let status = p.status.as_ref();
        let key = [
            p.metadata.namespace.clone().unwrap_or_default(),
            status
                .and_then(|s| s.phase)
                .map_or("None", fleet::Phase::as_str)
                .to_owned(),
            status.is_some_and(|s| s.is_healthy()).to_string(),
        ];
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// Each pool's replica counts by `(namespace, pool, state)`.
pub(super) fn pool_rows(pools: &[Arc<ProxyPool>]) -> Vec<([String; 3], i64)> {
    let mut rows = Vec::new();
    for p in pools {
        let (Some(ns), Some(name)) = (&p.metadata.namespace, &p.metadata.name) else {
            continue;
        };
        let s = p.status.clone().unwrap_or_default();
        for (state, n) in [
            ("desired", p.spec.inner.replicas),
            ("current", s.replicas),
            ("ready", s.ready_replicas),
            ("healthy", s.healthy_replicas),
            ("updated", s.updated_replicas),
        ] {
            rows.push(([ns.clone(), name.clone(), state.to_owned()], i64::from(n)));
        }
    }
    rows
}

fn family<const N: usize>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    labels: [&str; N],
    rows: impl IntoIterator<Item = ([String; N], i64)>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (values, n) in rows {
        let set: Vec<(&str, &str)> = labels
            .iter()
            .copied()
            .zip(values.iter().map(String::as_str))
            .collect();
        ConstGauge::new(n).encode(metric.encode_family(&set)?)?;
    }
    Ok(())
}

impl Collector for FleetGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        family(
            &mut encoder,
            "operator_proxies",
            "Proxies in the watch cache by namespace, phase and health",
            ["namespace", "phase", "healthy"],
            proxy_counts(&self.proxies.state()),
        )?;
        let Some(view) = self.leading() else {
            return Ok(());
        };
        family(
            &mut encoder,
            "operator_pool_replicas",
            "Each ProxyPool's replicas: desired (spec) and, from its status, current, ready, healthy and updated (leader only)",
            ["namespace", "pool", "state"],
            pool_rows(&view.pools.state()),
        )?;
        let hosts = self
            .hosts
            .snapshot()
            .into_iter()
            .flat_map(|(entry, hosts)| {
                hosts
                    .into_iter()
                    .map(move |h| ([entry.clone(), h.name], i64::from(h.ready)))
            });
        family(
            &mut encoder,
            "operator_host_reachable",
            "1 when the latest check of a provider entry's host reached it, else 0 (leader only)",
            ["provider", "host"],
            hosts,
        )?;
        // Only the leader makes instances, so only its providers fill.
        let fills = self.providers.iter().filter_map(|p| {
            let n = p.fills_in_flight()?;
            Some(([p.name().to_string()], i64::try_from(n).unwrap_or(i64::MAX)))
        });
        family(
            &mut encoder,
            "operator_image_fills_in_flight",
            "Base-image fills (downloads to a host) running now, by provider entry (leader only)",
            ["provider"],
            fills,
        )
    }
}

/// Objects and stores for tests of the gauges (here and the docs table's).
#[cfg(test)]
pub(super) mod samples {
    use super::*;
    use async_trait::async_trait;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use provider_api::{
        Checker, CreateRequest, Error, Identifier, Instance, ListedInstance, ProviderId,
        ProviderType, Tag, TargetStatus,
    };
    use serde_json::json;
    use std::time::Duration;

    /// Answers NotFound to everything; its one host is reachable; two
    /// image fills run.
    pub struct Nothing(pub Identifier);

    #[async_trait]
    impl Provider for Nothing {
        fn name(&self) -> &Identifier {
            &self.0
        }
        fn provider_type(&self) -> ProviderType {
            ProviderType::Kvm2
        }
        async fn create(&self, _: &CreateRequest) -> Result<Instance, Error> {
            Err(Error::not_found("nothing"))
        }
        async fn get(&self, _: &ProviderId) -> Result<Instance, Error> {
            Err(Error::not_found("nothing"))
        }
        async fn delete(&self, _: &ProviderId) -> Result<(), Error> {
            Ok(())
        }
        async fn list_by_tag(&self, _: &Tag) -> Result<Vec<ListedInstance>, Error> {
            Ok(Vec::new())
        }
        fn checker(&self) -> Option<&dyn Checker> {
            Some(self)
        }
        fn fills_in_flight(&self) -> Option<usize> {
            Some(2)
        }
    }

    #[async_trait]
    impl Checker for Nothing {
        async fn check(&self, _: Duration) -> Vec<TargetStatus> {
            vec![TargetStatus::reachable(
                self.0.clone(),
                Duration::from_millis(1),
                None,
            )]
        }
    }

    pub fn proxy(ns: &str, name: &str, status: serde_json::Value) -> Proxy {
        serde_json::from_value(json!({
            "apiVersion": "egress-proxies.io/v1alpha1", "kind": "Proxy",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"provider": "kvm2-home"},
            "status": status,
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn healthy_running() -> serde_json::Value {
        json!({
            "phase": "Running", "providerID": "kvm2://kvm2-home/host1/i1",
            "ip": "10.0.0.7", "port": 3128,
            "probedInstance": "kvm2://kvm2-home/host1/i1#0@10.0.0.7:3128",
            "conditions": [{"type": "Healthy", "status": "True", "reason": "ProbeSucceeded",
                            "message": "", "lastTransitionTime": "2026-12-05T00:00:00Z"}]
        })
    }

    pub fn pool(ns: &str, name: &str, replicas: u32, healthy: u32) -> ProxyPool {
        serde_json::from_value(json!({
            "apiVersion": "egress-proxies.io/v1alpha1", "kind": "ProxyPool",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "template": {"spec": {"provider": "kvm2-home"}}},
            "status": {"replicas": replicas, "readyReplicas": replicas,
                       "healthyReplicas": healthy, "updatedReplicas": replicas},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn store<K>(objects: Vec<K>) -> Store<K>
    where
        K: kube::Resource<DynamicType = ()> + Clone + 'static,
    {
        let (reader, mut writer) = reflector::store();
        for o in objects {
            writer.apply_watcher_event(&Event::Apply(o));
        }
        reader
    }

    /// Gauges over one healthy and one pending Proxy, one pool and two
    /// hosts, led by a leadership held for a minute.
    pub fn gauges() -> FleetGauges {
        let proxies = store(vec![
            proxy("a", "p1", healthy_running()),
            proxy("a", "p2", json!({"phase": "Pending"})),
        ]);
        let hosts = HostBook::new(["kvm2-home".to_owned()]);
        let target = crate::pool::hosts_tests::target;
        hosts.record(
            "kvm2-home",
            &[target("host1", true), target("host2", false)],
        );
        let nothing: Arc<dyn Provider> = Arc::new(Nothing(
            Identifier::parse("kvm2-home").unwrap_or_else(|e| panic!("{e}")),
        ));
        let g = FleetGauges::new(proxies, hosts, [nothing]);
        g.lead(LeaderView {
            leadership: Leadership::held_for(std::time::Duration::from_secs(60)),
            pools: store(vec![pool("a", "egress", 3, 2)]),
        });
        g
    }
}

#[cfg(test)]
mod tests {
    use super::samples::*;
    use super::*;
    use prometheus_client::registry::Registry;

    fn scrape(g: &FleetGauges) -> Vec<String> {
        let mut registry = Registry::with_prefix("egress_proxies");
        registry.register_collector(Box::new(g.clone()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)
            .unwrap_or_else(|e| panic!("{e}"));
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_leader_serves_proxies_pools_and_hosts() {
        let lines = scrape(&gauges());
        for want in [
            r#"egress_proxies_operator_proxies{namespace="a",phase="Running",healthy="true"} 1"#,
            r#"egress_proxies_operator_proxies{namespace="a",phase="Pending",healthy="false"} 1"#,
            r#"egress_proxies_operator_pool_replicas{namespace="a",pool="egress",state="desired"} 3"#,
            r#"egress_proxies_operator_pool_replicas{namespace="a",pool="egress",state="healthy"} 2"#,
            r#"egress_proxies_operator_host_reachable{provider="kvm2-home",host="host1"} 1"#,
            r#"egress_proxies_operator_host_reachable{provider="kvm2-home",host="host2"} 0"#,
            r#"egress_proxies_operator_image_fills_in_flight{provider="kvm2-home"} 2"#,
        ] {
            assert!(lines.iter().any(|l| l == want), "{want} not in {lines:#?}");
        }
    }

    #[test]
    fn a_follower_serves_proxies_only() {
        let g = gauges();
        let held = g.leading().map(|v| v.pools);
        g.lead(LeaderView {
            leadership: Leadership::held_for(std::time::Duration::ZERO),
            pools: held.unwrap_or_else(|| store(Vec::new())),
        });
        let lines = scrape(&g);
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("egress_proxies_operator_proxies{"))
        );
        assert!(
            !lines.iter().any(|l| l.contains("pool_replicas{")
                || l.contains("host_reachable{")
                || l.contains("fills_in_flight{")),
            "{lines:#?}"
        );
    }

    #[test]
    fn counts_group_by_namespace_phase_and_health() {
        let ps: Vec<Arc<Proxy>> = [
            proxy("a", "p1", healthy_running()),
            proxy("a", "p2", healthy_running()),
            proxy("b", "p3", serde_json::json!({})),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let counts = proxy_counts(&ps);
        let key = |ns: &str, phase: &str, h: &str| [ns.to_owned(), phase.to_owned(), h.to_owned()];
        assert_eq!(counts.get(&key("a", "Running", "true")), Some(&2));
        assert_eq!(counts.get(&key("b", "None", "false")), Some(&1));
        assert_eq!(counts.len(), 2);
    }
}
