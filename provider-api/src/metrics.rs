//! [`Metered`]: a [`Provider`] decorator that counts and times every
//! operation per provider, operation and outcome, and forwards the
//! [`Checker`] capability (metered as well).
//!
//! Metrics (Prometheus/OpenMetrics, registered by [`ProviderMetrics::new`]):
//!
//! | name | type | labels |
//! |---|---|---|
//! | `provider_operations` (`_total`) | counter | `provider`, `operation`, `outcome` |
//! | `provider_operation_duration_seconds` | histogram | `provider`, `operation`, `outcome` |
//! | `provider_check_targets` (`_total`) | counter | `provider`, `reason` |
//!
//! `operation` is `create`, `get`, `delete`, `list_by_tag` or `check`;
//! `outcome` is `ok`, an [`ErrorClass`](crate::ErrorClass) name (`transient`, `permanent`,
//! `not_found`, `quota_exceeded`) or `cancelled` (the caller dropped the
//! future). Label values are provider names and fixed words only: never
//! request data.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry as MetricsRegistry;

use crate::check::{Checker, TargetStatus};
use crate::error::Error;
use crate::ident::Identifier;
use crate::instance::{Instance, ListedInstance};
use crate::provider::Provider;
use crate::provider_id::ProviderId;
use crate::provider_type::ProviderType;
use crate::request::{CreateRequest, Tag};

/// Histogram buckets in seconds: 5 ms to 10 min (a cold create downloads a
/// base image).
const BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Labels of the operation metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    provider: String,
    operation: &'static str,
    outcome: &'static str,
}

/// Labels of the check-target counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    provider: String,
    reason: &'static str,
}

type HistogramFamily = Family<OpLabels, Histogram, fn() -> Histogram>;

fn new_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The provider metric families. Cheap to clone (shared handles); create
/// one per process with [`new`](Self::new) and hand clones to every
/// [`Metered`].
#[derive(Clone, Debug)]
pub struct ProviderMetrics {
    operations: Family<OpLabels, Counter>,
    durations: HistogramFamily,
    check_targets: Family<CheckLabels, Counter>,
}

impl ProviderMetrics {
    /// Creates the families and registers them in `registry`.
    pub fn new(registry: &mut MetricsRegistry) -> Self {
        let m = ProviderMetrics {
            operations: Family::default(),
            durations: Family::new_with_constructor(new_histogram),
            check_targets: Family::default(),
        };
        registry.register(
            "provider_operations",
            "Provider operations by provider, operation and outcome",
            m.operations.clone(),
        );
        registry.register(
            "provider_operation_duration_seconds",
            "Provider operation latency by provider, operation and outcome",
            m.durations.clone(),
        );
        registry.register(
            "provider_check_targets",
            "Checked targets by provider and reason",
            m.check_targets.clone(),
        );
        m
    }

    fn record(
        &self,
        provider: &Identifier,
        operation: &'static str,
        outcome: &'static str,
        took: Duration,
    ) {
        let labels = OpLabels {
            provider: provider.as_str().to_owned(),
            operation,
            outcome,
        };
        self.operations.get_or_create(&labels).inc();
        self.durations
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }
}

/// The `outcome` label of a result.
fn outcome<T>(r: &Result<T, Error>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.class().as_str(),
    }
}

/// Records `cancelled` if dropped before [`finish`](Self::finish).
struct Timer<'a> {
    metrics: &'a ProviderMetrics,
    provider: &'a Identifier,
    operation: &'static str,
    start: Instant,
    done: bool,
}

impl<'a> Timer<'a> {
    fn start(
        metrics: &'a ProviderMetrics,
        provider: &'a Identifier,
        operation: &'static str,
    ) -> Self {
        Timer {
            metrics,
            provider,
            operation,
            start: Instant::now(),
            done: false,
        }
    }

    fn finish(mut self, outcome: &'static str) {
        self.done = true;
        self.metrics
            .record(self.provider, self.operation, outcome, self.start.elapsed());
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.metrics.record(
                self.provider,
                self.operation,
                "cancelled",
                self.start.elapsed(),
            );
        }
    }
}

/// Counts and times every operation of the wrapped provider. Results,
/// including errors, pass through unchanged.
pub struct Metered {
    inner: Arc<dyn Provider>,
    metrics: ProviderMetrics,
    checker: Option<MeteredChecker>,
}

impl Metered {
    /// Wraps `inner`. If `inner` has a [`Checker`], so does the wrapper.
    pub fn new(inner: Arc<dyn Provider>, metrics: ProviderMetrics) -> Self {
        let checker = inner.checker().is_some().then(|| MeteredChecker {
            inner: inner.clone(),
            metrics: metrics.clone(),
        });
        Metered {
            inner,
            metrics,
            checker,
        }
    }
}

#[async_trait]
impl Provider for Metered {
    fn name(&self) -> &Identifier {
        self.inner.name()
    }

    fn provider_type(&self) -> ProviderType {
        self.inner.provider_type()
    }

    async fn create(&self, req: &CreateRequest) -> Result<Instance, Error> {
        let t = Timer::start(&self.metrics, self.inner.name(), "create");
        let r = self.inner.create(req).await;
        t.finish(outcome(&r));
        r
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, Error> {
        let t = Timer::start(&self.metrics, self.inner.name(), "get");
        let r = self.inner.get(id).await;
        t.finish(outcome(&r));
        r
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), Error> {
        let t = Timer::start(&self.metrics, self.inner.name(), "delete");
        let r = self.inner.delete(id).await;
        t.finish(outcome(&r));
        r
    }

    async fn list_by_tag(&self, tag: &Tag) -> Result<Vec<ListedInstance>, Error> {
        let t = Timer::start(&self.metrics, self.inner.name(), "list_by_tag");
        let r = self.inner.list_by_tag(tag).await;
        t.finish(outcome(&r));
        r
    }

    fn checker(&self) -> Option<&dyn Checker> {
        self.checker.as_ref().map(|c| c as &dyn Checker)
    }

    fn instance_events(&self) -> Option<crate::events::InstanceEvents> {
        self.inner.instance_events()
    }

    fn fills_in_flight(&self) -> Option<usize> {
        self.inner.fills_in_flight()
    }
}

/// The [`Checker`] of a [`Metered`] provider: times the check and counts
/// targets by reason.
pub struct MeteredChecker {
    inner: Arc<dyn Provider>,
    metrics: ProviderMetrics,
}

#[async_trait]
impl Checker for MeteredChecker {
    async fn check(&self, timeout: Duration) -> Vec<TargetStatus> {
        let Some(checker) = self.inner.checker() else {
            // The inner provider broke the "same answer for life" contract.
            return Vec::new();
        };
        let t = Timer::start(&self.metrics, self.inner.name(), "check");
        let statuses = checker.check(timeout).await;
        t.finish("ok");
        for s in &statuses {
            self.metrics
                .check_targets
                .get_or_create(&CheckLabels {
                    provider: self.inner.name().as_str().to_owned(),
                    reason: s.reason.as_str(),
                })
                .inc();
        }
        statuses
    }
}
