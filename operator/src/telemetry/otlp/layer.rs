//! The tracing layer that turns closed spans into [`SpanRecord`]s: ids
//! (a root span starts a trace; a child takes its parent's trace id), the
//! span's fields as attributes, an error status when the span recorded
//! `error.class` or `error.message`. A finished span is offered to a
//! bounded queue and dropped (counted) when the queue is full: recording
//! never waits for the exporter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::encode::{Kind, SpanRecord, Value};

/// What happened to finished spans (served as metrics).
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Spans the collector accepted.
    pub exported: AtomicU64,
    /// Spans dropped because the queue was full (the exporter behind).
    pub dropped_queue_full: AtomicU64,
    /// Spans dropped because their export failed (collector down, slow,
    /// or refusing).
    pub dropped_export_failed: AtomicU64,
}

/// The layer.
#[derive(Debug)]
pub struct OtlpLayer {
    queue: mpsc::Sender<SpanRecord>,
    stats: Arc<ExportStats>,
}

impl OtlpLayer {
    /// A layer offering finished spans to `queue`.
    pub fn new(queue: mpsc::Sender<SpanRecord>, stats: Arc<ExportStats>) -> Self {
        Self { queue, stats }
    }
}

/// A span in flight (kept in the registry's extensions).
struct InFlight {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent_span_id: Option<[u8; 8]>,
    start: SystemTime,
    attributes: Vec<(String, Value)>,
}

/// Random ids (the OS's generator; a failure gives a counter-derived id,
/// still unique within the process).
fn random<const N: usize>() -> [u8; N] {
    static FALLBACK: AtomicU64 = AtomicU64::new(1);
    let mut b = [0u8; N];
    if getrandom::fill(&mut b).is_err() || b.iter().all(|x| *x == 0) {
        let n = FALLBACK.fetch_add(1, Ordering::Relaxed).to_be_bytes();
        for (i, x) in b.iter_mut().enumerate() {
            *x = n[i % 8] ^ (i as u8);
        }
    }
    b
}

/// Spans of calls to other processes.
fn kind(meta: &Metadata<'_>) -> Kind {
    match meta.name() {
        "libvirt" | "ssh.dial" | "HTTP" => Kind::Client,
        _ => Kind::Internal,
    }
}

struct Fields<'a>(&'a mut Vec<(String, Value)>);

impl Fields<'_> {
    fn set(&mut self, field: &Field, value: Value) {
        let name = field.name();
        match self.0.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v = value,
            None => self.0.push((name.to_owned(), value)),
        }
    }
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.set(field, Value::Str(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, Value::Str(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, Value::Int(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field, Value::Int(i64::try_from(value).unwrap_or(i64::MAX)));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field, Value::Bool(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field, Value::Double(value));
    }
}

impl<S> Layer<S> for OtlpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|p| {
            p.extensions()
                .get::<InFlight>()
                .map(|f| (f.trace_id, f.span_id))
        });
        let mut attributes = Vec::new();
        attrs.record(&mut Fields(&mut attributes));
        let in_flight = InFlight {
            trace_id: parent.map_or_else(random, |(t, _)| t),
            span_id: random(),
            parent_span_id: parent.map(|(_, s)| s),
            start: SystemTime::now(),
            attributes,
        };
        span.extensions_mut().insert(in_flight);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(f) = span.extensions_mut().get_mut::<InFlight>()
        {
            values.record(&mut Fields(&mut f.attributes));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(f) = span.extensions_mut().remove::<InFlight>() else {
            return;
        };
        let meta = span.metadata();
        let error = f
            .attributes
            .iter()
            .find(|(k, _)| k == "error.message")
            .or_else(|| f.attributes.iter().find(|(k, _)| k == "error.class"))
            .map(|(_, v)| match v {
                Value::Str(s) => s.clone(),
                other => format!("{other:?}"),
            });
        let mut attributes = f.attributes;
        attributes.push((
            "code.namespace".to_owned(),
            Value::Str(meta.target().to_owned()),
        ));
        let record = SpanRecord {
            trace_id: f.trace_id,
            span_id: f.span_id,
            parent_span_id: f.parent_span_id,
            name: meta.name().to_owned(),
            kind: kind(meta),
            start: f.start,
            end: SystemTime::now(),
            attributes,
            error,
        };
        if self.queue.try_send(record).is_err() {
            self.stats
                .dropped_queue_full
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn children_share_the_roots_trace_and_link_to_their_parent() {
        let (tx, mut rx) = mpsc::channel(16);
        let stats = Arc::new(ExportStats::default());
        let subscriber =
            tracing_subscriber::registry().with(OtlpLayer::new(tx, Arc::clone(&stats)));
        tracing::subscriber::with_default(subscriber, || {
            let root = tracing::info_span!("reconcile", object = "ns/p", n = 3u64);
            let _r = root.enter();
            let child = tracing::info_span!("provider.get", error.class = tracing::field::Empty);
            child.record("error.class", "transient");
            drop(child);
            drop(_r);
            drop(root);
            tracing::info_span!("other-root").in_scope(|| {});
        });
        let child = rx.try_recv().unwrap();
        let root = rx.try_recv().unwrap();
        let other = rx.try_recv().unwrap();
        assert_eq!(child.name, "provider.get");
        assert_eq!(child.trace_id, root.trace_id);
        assert_eq!(child.parent_span_id, Some(root.span_id));
        assert_eq!(root.parent_span_id, None);
        assert_ne!(other.trace_id, root.trace_id);
        assert_eq!(child.error.as_deref(), Some("transient"));
        assert_eq!(root.error, None);
        assert!(
            root.attributes
                .contains(&("object".to_owned(), Value::Str("ns/p".into())))
        );
        assert!(root.attributes.contains(&("n".to_owned(), Value::Int(3))));
        assert!(root.end >= root.start);
    }

    #[test]
    fn a_full_queue_drops_and_counts_never_waits() {
        let (tx, _rx) = mpsc::channel(1);
        let stats = Arc::new(ExportStats::default());
        let subscriber =
            tracing_subscriber::registry().with(OtlpLayer::new(tx, Arc::clone(&stats)));
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..5 {
                tracing::info_span!("s").in_scope(|| {});
            }
        });
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 4);
    }
}
