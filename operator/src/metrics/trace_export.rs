//! [`TraceExport`]: the OTLP span export's counters, read from the
//! exporter's atomics at each scrape (zeros while export is off).
//!
//! | family | type | labels |
//! |---|---|---|
//! | `egress_proxies_operator_trace_spans_exported_total` | counter | |
//! | `egress_proxies_operator_trace_spans_dropped_total` | counter | `reason`: `queue_full`, `export_failed` |

use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;

use crate::telemetry::otlp::ExportStats;

/// The collector.
#[derive(Debug, Clone)]
pub struct TraceExport(pub Arc<ExportStats>);

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

impl Collector for TraceExport {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let exported = ConstCounter::new(self.0.exported.load(Ordering::Relaxed));
        exported.encode(encoder.encode_descriptor(
            "operator_trace_spans_exported",
            "Spans the OTLP collector accepted",
            None,
            exported.metric_type(),
        )?)?;
        let dropped: Family<ReasonLabels, prometheus_client::metrics::counter::Counter> =
            Family::default();
        for (reason, n) in [
            ("queue_full", &self.0.dropped_queue_full),
            ("export_failed", &self.0.dropped_export_failed),
        ] {
            dropped
                .get_or_create(&ReasonLabels { reason })
                .inc_by(n.load(Ordering::Relaxed));
        }
        dropped.encode(encoder.encode_descriptor(
            "operator_trace_spans_dropped",
            "Spans not exported: the queue to the exporter was full, or their export failed (collector down, slow or refusing)",
            None,
            dropped.metric_type(),
        )?)
    }
}
