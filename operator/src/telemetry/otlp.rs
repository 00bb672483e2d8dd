//! Traces exported over OTLP/HTTP (protobuf) when the standard
//! `OTEL_EXPORTER_OTLP_*` variables name an endpoint; off otherwise.
//!
//! ```text
//!  tracing spans ──▶ OtlpLayer ──try_send──▶ bounded queue ──▶ exporter task ──POST──▶ collector
//!                    (on close)   full: dropped, counted        batches ≤ 512 / 1 s, bounded by the timeout;
//!                                                               failed: dropped, counted
//! ```
//!
//! What is exported: every span at INFO or above (a libvirt call and an
//! SSH dial are INFO spans), so one reconcile is one trace —
//! kube-runtime's `reconciling object` span, the provider calls
//! under it (`provider.create`, `provider.get`, ...) and the libvirt
//! procedures and SSH dials under those. Span fields become attributes;
//! the spans carry no secrets (user data is a byte count, credentials are
//! never span fields).

mod config;
mod encode;
mod export;
mod layer;

use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Metadata;

pub use config::OtlpConfig;
pub use encode::SpanRecord;
pub use layer::{ExportStats, OtlpLayer};

/// Spans waiting for the exporter, at most.
pub const QUEUE: usize = 4096;

/// Whether a span is exported: every span at INFO or above (libvirt
/// calls and SSH dials are INFO spans for this).
pub fn exported(meta: &Metadata<'_>) -> bool {
    meta.is_span() && *meta.level() <= tracing::Level::INFO
}

/// The counters of the process's export (zeros when export is off).
pub fn stats() -> Arc<ExportStats> {
    Arc::clone(STATS.get_or_init(Default::default))
}

static STATS: OnceLock<Arc<ExportStats>> = OnceLock::new();

/// What `init` made for `start`: the settings and the queue's receiving end.
static PENDING: Mutex<Option<(OtlpConfig, mpsc::Receiver<SpanRecord>)>> = Mutex::new(None);

/// The layer for `config`, its exporter to be started by [`start`] once a
/// runtime runs.
pub fn layer(config: OtlpConfig) -> OtlpLayer {
    let (tx, rx) = mpsc::channel(QUEUE);
    if let Ok(mut pending) = PENDING.lock() {
        *pending = Some((config, rx));
    }
    OtlpLayer::new(tx, stats())
}

/// The running exporter; [`Exporter::shutdown`] flushes (bounded) and ends
/// it.
#[derive(Debug)]
pub struct Exporter {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Exporter {
    /// Sends what is queued (within [`export::FLUSH_BOUND`] plus a margin)
    /// and ends the task.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let mut task = self.task;
        if tokio::time::timeout(export::FLUSH_BOUND * 2, &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

/// Starts the exporter `layer` prepared, on the current runtime; `None`
/// when export is off.
pub fn start() -> Option<Exporter> {
    let (config, rx) = PENDING.lock().ok()?.take()?;
    let stop = CancellationToken::new();
    let task = tokio::spawn(export::run(config, rx, stats(), stop.clone()));
    Some(Exporter { stop, task })
}
