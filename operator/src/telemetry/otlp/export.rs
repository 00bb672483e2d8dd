//! The exporter task: takes finished spans from the queue, batches them
//! (up to [`BATCH`] spans or [`LINGER`] after the first), and POSTs each
//! batch to the collector over HTTP/1.1, bounded by the configured
//! timeout. A batch that fails is dropped and counted — never retried, so
//! a slow or dead collector costs the operator one bounded request per
//! batch and the spans of that batch, nothing else.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::config::OtlpConfig;
use super::encode::{SpanRecord, Value, export_request};
use super::layer::ExportStats;

/// The most spans in one request.
pub const BATCH: usize = 512;
/// How long a batch waits for more spans after its first.
pub const LINGER: Duration = Duration::from_secs(1);
/// The most a final flush at shutdown may take.
pub const FLUSH_BOUND: Duration = Duration::from_secs(2);

/// The instrumentation scope spans are reported under.
const SCOPE: &str = "egress-proxies-operator";

/// Runs until `stop` is cancelled (then sends what is queued, within
/// [`FLUSH_BOUND`]) or the queue's senders are gone.
pub async fn run(
    config: OtlpConfig,
    mut queue: mpsc::Receiver<SpanRecord>,
    stats: Arc<ExportStats>,
    stop: CancellationToken,
) {
    let resource = vec![
        (
            "service.name".to_owned(),
            Value::Str(config.service_name.clone()),
        ),
        (
            "service.version".to_owned(),
            Value::Str(env!("CARGO_PKG_VERSION").to_owned()),
        ),
    ];
    loop {
        let first = tokio::select! {
            () = stop.cancelled() => break,
            span = queue.recv() => match span {
                Some(span) => span,
                None => return,
            },
        };
        let mut batch = vec![first];
        let linger = tokio::time::sleep(LINGER);
        tokio::pin!(linger);
        while batch.len() < BATCH {
            tokio::select! {
                () = &mut linger => break,
                () = stop.cancelled() => break,
                span = queue.recv() => match span {
                    Some(span) => batch.push(span),
                    None => break,
                },
            }
        }
        send(&config, &resource, batch, &stats, config.timeout).await;
    }
    // Shutdown: what is queued now, once, bounded.
    let mut rest = Vec::new();
    while let Ok(span) = queue.try_recv() {
        rest.push(span);
    }
    for chunk in rest.chunks(BATCH) {
        send(
            &config,
            &resource,
            chunk.to_vec(),
            &stats,
            config.timeout.min(FLUSH_BOUND),
        )
        .await;
    }
}

async fn send(
    config: &OtlpConfig,
    resource: &[(String, Value)],
    batch: Vec<SpanRecord>,
    stats: &ExportStats,
    bound: Duration,
) {
    let n = batch.len() as u64;
    let body = export_request(resource, SCOPE, &batch);
    match tokio::time::timeout(bound, post(config, body)).await {
        Ok(Ok(())) => {
            stats.exported.fetch_add(n, Ordering::Relaxed);
        }
        Ok(Err(reason)) => {
            stats.dropped_export_failed.fetch_add(n, Ordering::Relaxed);
            // Debug: a dead collector must not flood the operator's log.
            tracing::debug!(target: "operator::otlp", spans = n, reason, "span export failed");
        }
        Err(_) => {
            stats.dropped_export_failed.fetch_add(n, Ordering::Relaxed);
            tracing::debug!(target: "operator::otlp", spans = n, bound_ms = bound.as_millis() as u64, "span export timed out");
        }
    }
}

/// One POST of `body`; `Err` says why it was not accepted (never quotes
/// the configured headers).
async fn post(config: &OtlpConfig, body: Vec<u8>) -> Result<(), String> {
    let stream = tokio::net::TcpStream::connect(&config.authority)
        .await
        .map_err(|e| format!("connect {}: {e}", config.authority))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    let mut request = hyper::Request::post(config.path.as_str())
        .header(hyper::header::HOST, config.authority.as_str())
        .header(hyper::header::CONTENT_TYPE, "application/x-protobuf");
    for (k, v) in &config.headers {
        request = request.header(k.as_str(), v.as_str());
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|_| "a configured header is not a valid HTTP header".to_owned())?;
    // The connection is driven here, in this task, and dropped with it.
    tokio::pin!(conn);
    let response = tokio::select! {
        r = sender.send_request(request) => r.map_err(|e| format!("request: {e}"))?,
        c = &mut conn => {
            return Err(format!("connection ended before the answer: {c:?}"));
        }
    };
    if response.status().is_success() {
        Ok(())
    } else {
        Err(format!("collector answered {}", response.status()))
    }
}
