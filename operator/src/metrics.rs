//! The operator's own metrics, registered in the same Prometheus registry
//! as provider-api's `ProviderMetrics` (one `/metrics`), under the project's
//! one prefix, [`PREFIX`] ([`registry`]). Labels are bounded: outcome and
//! reason words, never a Proxy's name.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReviewLabels {
    review: &'static str,
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberWriteLabels {
    op: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceWriteLabels {
    object: &'static str,
    outcome: &'static str,
}

/// Duration buckets in seconds: 1 ms to about 33 s (a reconcile waits at
/// most `--reconcile-wait` for its call; a probe at most its timeout).
fn duration_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 16)
}

/// Durations by outcome.
#[derive(Clone, Debug)]
struct Durations(Family<OutcomeLabels, Histogram, fn() -> Histogram>);

impl Default for Durations {
    fn default() -> Self {
        Durations(Family::new_with_constructor(|| {
            Histogram::new(duration_buckets())
        }))
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    verb: &'static str,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    writer: &'static str,
}

mod api_requests;
mod fleet_gauges;
mod process;
mod trace_export;

pub use api_requests::CountApiRequests;
pub use fleet_gauges::{FleetGauges, LeaderView};

/// The prefix of every family `/metrics` serves (`egress_proxies_operator_…`,
/// `egress_proxies_provider_…`): generic names such as `operator_leader`
/// would collide with other exporters' in one Prometheus.
pub const PREFIX: &str = "egress_proxies";

/// The registry `/metrics` serves: the standard `process_*` families
/// (unprefixed, as every exporter names them, for dashboards that expect
/// them) and, in [`ours`], everything of this project under [`PREFIX`].
pub fn registry() -> Registry {
    let mut root = Registry::default();
    root.register_collector(Box::new(process::Process));
    root
}

/// The part of `root` under [`PREFIX`], where this project's families go.
pub fn ours(root: &mut Registry) -> &mut Registry {
    root.sub_registry_with_prefix(PREFIX)
}

/// Counters and gauges of the operator.
#[derive(Clone, Debug, Default)]
pub struct OperatorMetrics {
    reconciles: Family<OutcomeLabels, Counter>,
    reconcile_durations: Durations,
    reconcile_errors: Family<ClassLabels, Counter>,
    api_requests: Family<ApiLabels, Counter>,
    probe_durations: Durations,
    status_writes: Family<WriteLabels, Counter>,
    events: Family<ReasonLabels, Counter>,
    gc_deletes: Family<OutcomeLabels, Counter>,
    gc_rounds: Family<OutcomeLabels, Counter>,
    probes: Family<OutcomeLabels, Counter>,
    provider_tasks: Gauge,
    leader: Gauge,
    leadership_losses: Counter,
    http_auth: Family<OutcomeLabels, Counter>,
    http_auth_reviews: Family<ReviewLabels, Counter>,
    consumer_leases: Family<OutcomeLabels, Counter>,
    instance_events: Family<OutcomeLabels, Counter>,
    pool_reconciles: Family<OutcomeLabels, Counter>,
    pool_member_writes: Family<MemberWriteLabels, Counter>,
    service_writes: Family<ServiceWriteLabels, Counter>,
}

impl OperatorMetrics {
    /// Registers the operator's metrics in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = OperatorMetrics::default();
        registry.register_collector(Box::new(trace_export::TraceExport(
            crate::telemetry::otlp::stats(),
        )));
        registry.register(
            "operator_reconciles",
            "Proxy reconciles by outcome",
            m.reconciles.clone(),
        );
        registry.register(
            "operator_api_requests",
            "Kubernetes API requests by verb (WATCH apart from GET) and HTTP status code (error: no answer)",
            m.api_requests.clone(),
        );
        registry.register(
            "operator_reconcile_errors",
            "Failed Proxy reconciles by what failed (add_finalizer, remove_finalizer, status_write, gone, incomplete, other)",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "operator_reconcile_duration_seconds",
            "Proxy reconcile durations by outcome",
            m.reconcile_durations.0.clone(),
        );
        registry.register(
            "operator_probe_duration_seconds",
            "CONNECT probe durations by outcome (healthy or a reason)",
            m.probe_durations.0.clone(),
        );
        registry.register(
            "operator_status_writes",
            "Status writes (server-side apply) by writer",
            m.status_writes.clone(),
        );
        registry.register(
            "operator_events",
            "Events recorded, by reason",
            m.events.clone(),
        );
        registry.register(
            "operator_instance_events",
            "Providers' instance events by kind (a change's name, or resync), and those that named no known Proxy (unmatched)",
            m.instance_events.clone(),
        );
        registry.register(
            "operator_pool_reconciles",
            "ProxyPool reconciles by outcome",
            m.pool_reconciles.clone(),
        );
        registry.register(
            "operator_pool_member_writes",
            "Members made (create) and deleted (delete) by ProxyPools, by outcome",
            m.pool_member_writes.clone(),
        );
        registry.register(
            "operator_service_writes",
            "Service sync writes by object (service, endpoints, endpointslice: applies; delete: a Service with its endpoints) and outcome",
            m.service_writes.clone(),
        );
        registry.register(
            "operator_gc_deletes",
            "Instances deleted by the GC, by outcome",
            m.gc_deletes.clone(),
        );
        registry.register(
            "operator_gc_rounds",
            "GC rounds by verdict",
            m.gc_rounds.clone(),
        );
        registry.register(
            "operator_probes",
            "CONNECT probes by outcome",
            m.probes.clone(),
        );
        registry.register(
            "operator_provider_tasks",
            "Provider calls in flight in per-Proxy tasks",
            m.provider_tasks.clone(),
        );
        registry.register(
            "operator_leader",
            "1 while this replica holds the lease",
            m.leader.clone(),
        );
        registry.register(
            "operator_leadership_losses",
            "Times this replica lost the lease it held (it then campaigns again)",
            m.leadership_losses.clone(),
        );
        registry.register(
            "operator_http_auth",
            "Authenticated HTTP requests (/proxies, /metrics) by outcome",
            m.http_auth.clone(),
        );
        registry.register(
            "operator_http_auth_reviews",
            "TokenReview and SubjectAccessReview answers by review and source (api, cache)",
            m.http_auth_reviews.clone(),
        );
        registry.register(
            "operator_consumer_leases",
            "Consumer lease requests by outcome (granted, none_free, renewed, released, ended, unavailable)",
            m.consumer_leases.clone(),
        );
        // The GC's series exist from the start, at zero: its first round
        // comes a `--gc-interval` after it, and a rate or increase over a
        // counter that does not exist yet is no data at all.
        for outcome in fleet::gc::GcVerdict::WORDS {
            drop(m.gc_rounds.get_or_create(&OutcomeLabels { outcome }));
        }
        drop(m.gc_deletes.get_or_create(&OutcomeLabels { outcome: "ok" }));
        m
    }

    /// One reconcile ended with `outcome` (`ok`, `error`, `pending`).
    pub fn reconcile(&self, outcome: &'static str, took: std::time::Duration) {
        let labels = OutcomeLabels { outcome };
        self.reconciles.get_or_create(&labels).inc();
        self.reconcile_durations
            .0
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// One Kubernetes API request answered `code` (or `error`).
    pub fn api_request(&self, verb: &'static str, code: String) {
        self.api_requests
            .get_or_create(&ApiLabels { verb, code })
            .inc();
    }

    /// How many `verb` requests answered `code` (tests).
    #[cfg(test)]
    pub fn api_requests_of(&self, verb: &'static str, code: &str) -> u64 {
        self.api_requests
            .get(&ApiLabels {
                verb,
                code: code.to_owned(),
            })
            .map_or(0, |c| c.get())
    }

    /// One Proxy reconcile failed: `class` says what failed.
    pub fn reconcile_error(&self, class: &'static str) {
        self.reconcile_errors
            .get_or_create(&ClassLabels { class })
            .inc();
    }

    /// One pool reconcile ended with `outcome` (`ok`, `error`, `pending`).
    pub fn pool_reconcile(&self, outcome: &'static str) {
        self.pool_reconciles
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// One member `op` (`create`, `delete`) by a pool, with `outcome`
    /// (`ok`, `exists`, `gone`, `error`).
    pub fn pool_member_write(&self, op: &'static str, outcome: &'static str) {
        self.pool_member_writes
            .get_or_create(&MemberWriteLabels { op, outcome })
            .inc();
    }

    /// One Service sync write of `object` with `outcome` (`ok`, `error`).
    pub fn service_write(&self, object: &'static str, outcome: &'static str) {
        self.service_writes
            .get_or_create(&ServiceWriteLabels { object, outcome })
            .inc();
    }

    /// One status write by `writer` (`reconciler`, `health`, `monitor`).
    pub fn status_write(&self, writer: &'static str) {
        self.status_writes
            .get_or_create(&WriteLabels { writer })
            .inc();
    }

    /// One Event recorded, with its reason.
    pub fn event(&self, reason: &str) {
        self.events
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// One provider instance event of `kind` (`stopped`, …, `resync`,
    /// `unmatched`).
    pub fn instance_event(&self, kind: &'static str) {
        self.instance_events
            .get_or_create(&OutcomeLabels { outcome: kind })
            .inc();
    }

    /// One GC delete with `outcome` (`ok` or an error class).
    pub fn gc_delete(&self, outcome: &'static str) {
        self.gc_deletes
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// One GC round with `verdict` (`sweep`, `skip_*`).
    pub fn gc_round(&self, outcome: &'static str) {
        self.gc_rounds
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// One probe with `outcome` (`healthy` or a reason).
    pub fn probe(&self, outcome: &'static str, took: std::time::Duration) {
        let labels = OutcomeLabels { outcome };
        self.probes.get_or_create(&labels).inc();
        self.probe_durations
            .0
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// The gauge of provider calls in flight.
    pub fn provider_tasks(&self) -> &Gauge {
        &self.provider_tasks
    }

    /// Sets the leader gauge.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// The lease this replica held was lost.
    pub fn leadership_lost(&self) {
        self.leadership_losses.inc();
    }

    /// One request's auth check ended with `outcome` (`allowed`,
    /// `unauthenticated`, `forbidden`, `unavailable`).
    pub fn http_auth(&self, outcome: &'static str) {
        self.http_auth
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// One consumer lease request ended with `outcome` (`granted`,
    /// `none_free`, `renewed`, `released`, `ended`, `unavailable`).
    pub fn consumer_lease(&self, outcome: &'static str) {
        self.consumer_leases
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// One `review` (`token`, `access`) answer came from `source` (`api`,
    /// `cache`).
    pub fn http_auth_review(&self, review: &'static str, source: &'static str) {
        self.http_auth_reviews
            .get_or_create(&ReviewLabels { review, source })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;
    use std::time::Duration;

    use provider_api::{Identifier, Provider, ProviderId};

    use super::*;

    use fleet_gauges::samples::Nothing;

    /// Every family as served: name (as queried: counters with `_total`)
    /// → (type, label names).
    fn served(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
        let mut out = BTreeMap::new();
        let mut types: Vec<(String, String)> = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, ty) = rest.split_once(' ').unwrap();
                types.push((name.to_owned(), ty.to_owned()));
            }
        }
        for (family, ty) in types {
            let name = if ty == "counter" {
                format!("{family}_total")
            } else {
                family.clone()
            };
            let mut labels = BTreeSet::new();
            let of_family = |l: &&str| {
                let sample = l.split(['{', ' ']).next().unwrap_or("");
                ["", "_total", "_bucket", "_sum", "_count", "_created"]
                    .iter()
                    .any(|suffix| sample == format!("{family}{suffix}"))
            };
            for line in text.lines().filter(of_family) {
                if let Some((_, rest)) = line.split_once('{') {
                    let set = rest.split('}').next().unwrap_or("");
                    for kv in set.split(',').filter(|kv| !kv.is_empty()) {
                        let key = kv.split('=').next().unwrap().to_owned();
                        if key != "le" {
                            labels.insert(key);
                        }
                    }
                }
            }
            out.insert(name, (ty, labels));
        }
        out
    }

    /// The Metrics table of docs/operator.md: name → (type, label names).
    fn documented() -> BTreeMap<String, (String, BTreeSet<String>)> {
        let doc = include_str!("../../docs/operator.md");
        let section = doc
            .split("## Metrics\n")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .and_then(|s| s.split("\n### ").next())
            .expect("a Metrics section");
        section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|row| {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                let name = cells[1].trim_matches('`').to_owned();
                let ty = cells[2].to_owned();
                let labels = cells[3]
                    .split(',')
                    .map(|l| l.trim().trim_matches('`').to_owned())
                    .filter(|l| !l.is_empty() && l != "—")
                    .collect();
                (name, (ty, labels))
            })
            .collect()
    }

    #[tokio::test]
    async fn the_docs_table_lists_exactly_what_metrics_serves() {
        let mut root = registry();
        let registry = ours(&mut root);
        let provider_metrics = provider_api::ProviderMetrics::new(registry);
        let m = OperatorMetrics::new(registry);
        // One sample in every family, so its labels show.
        m.reconcile("ok", Duration::from_millis(3));
        m.reconcile_error("status_write");
        m.api_request("GET", "200".to_owned());
        m.pool_reconcile("ok");
        m.pool_member_write("create", "ok");
        m.service_write("service", "ok");
        m.status_write("reconciler");
        m.event("Created");
        m.instance_event("crashed");
        m.gc_delete("ok");
        m.gc_round("sweep");
        m.probe("healthy", Duration::from_millis(2));
        m.provider_tasks().set(0);
        m.set_leader(true);
        m.leadership_lost();
        m.http_auth("allowed");
        m.http_auth_review("token", "api");
        m.consumer_lease("granted");
        registry.register_collector(Box::new(fleet_gauges::samples::gauges()));
        let inner: Arc<dyn Provider> = Arc::new(Nothing(Identifier::parse("p").unwrap()));
        let metered = provider_api::Metered::new(inner, provider_metrics);
        let id = ProviderId::parse("kvm2://p/h/i").unwrap();
        let _ = metered.get(&id).await;
        let _ = metered
            .checker()
            .unwrap()
            .check(Duration::from_secs(1))
            .await;
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &root).unwrap();
        assert_eq!(
            served(&text),
            documented(),
            "docs/operator.md's Metrics table must list what /metrics serves"
        );
    }
}
