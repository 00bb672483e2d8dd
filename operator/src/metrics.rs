//! The operator's own metrics, registered in the same Prometheus registry
//! as provider-api's `ProviderMetrics` (one `/metrics`). Labels are bounded:
//! outcome and reason words, never a Proxy's name.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    writer: &'static str,
}

/// Counters and gauges of the operator.
#[derive(Clone, Debug, Default)]
pub struct OperatorMetrics {
    reconciles: Family<OutcomeLabels, Counter>,
    status_writes: Family<WriteLabels, Counter>,
    events: Counter,
    gc_deletes: Family<OutcomeLabels, Counter>,
    gc_rounds: Family<OutcomeLabels, Counter>,
    probes: Family<OutcomeLabels, Counter>,
    provider_tasks: Gauge,
    leader: Gauge,
    leadership_losses: Counter,
    http_auth: Family<OutcomeLabels, Counter>,
    http_auth_reviews: Family<ReviewLabels, Counter>,
    instance_events: Family<OutcomeLabels, Counter>,
    pool_reconciles: Family<OutcomeLabels, Counter>,
    pool_member_writes: Family<MemberWriteLabels, Counter>,
    service_writes: Family<ServiceWriteLabels, Counter>,
}

impl OperatorMetrics {
    /// Registers the operator's metrics in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = OperatorMetrics::default();
        registry.register(
            "operator_reconciles",
            "Proxy reconciles by outcome",
            m.reconciles.clone(),
        );
        registry.register(
            "operator_status_writes",
            "Status writes (server-side apply) by writer",
            m.status_writes.clone(),
        );
        registry.register("operator_events", "Events recorded", m.events.clone());
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
        m
    }

    /// One reconcile ended with `outcome` (`ok`, `error`, `pending`).
    pub fn reconcile(&self, outcome: &'static str) {
        self.reconciles
            .get_or_create(&OutcomeLabels { outcome })
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

    /// One event recorded.
    pub fn event(&self) {
        self.events.inc();
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
    pub fn probe(&self, outcome: &'static str) {
        self.probes.get_or_create(&OutcomeLabels { outcome }).inc();
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

    /// One `review` (`token`, `access`) answer came from `source` (`api`,
    /// `cache`).
    pub fn http_auth_review(&self, review: &'static str, source: &'static str) {
        self.http_auth_reviews
            .get_or_create(&ReviewLabels { review, source })
            .inc();
    }
}
