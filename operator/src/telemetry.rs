//! Logging: every line JSON with an RFC 3339 UTC time (milliseconds),
//! including library chatter (`log` records are bridged into tracing) and
//! panics (a hook logs them before the default handler runs). Traces:
//! exported over OTLP when `OTEL_EXPORTER_OTLP_*` names a collector
//! ([`otlp`]).

pub mod otlp;

use std::time::{SystemTime, UNIX_EPOCH};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// RFC 3339 UTC with milliseconds: `2025-01-31T12:00:00.123Z`.
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339;

impl FormatTime for Rfc3339 {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        w.write_str(&rfc3339(SystemTime::now()))
    }
}

/// `t` as RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    let millis = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_millis())
        .unwrap_or(0);
    let secs = fleet::Timestamp::from_system_time(t).to_string();
    // `Timestamp` prints `...SSZ`; put the milliseconds before the `Z`.
    let base = secs.strip_suffix('Z').unwrap_or(&secs);
    format!("{base}.{millis:03}Z")
}

/// Installs the JSON subscriber (filter `filter`, EnvFilter syntax), the
/// OTLP span layer when the environment names a collector (its exporter
/// starts with [`otlp::start`]) and the panic hook. Returns an error when the filter does not parse; a second
/// call keeps the first subscriber.
///
/// # Errors
/// When `filter` is not a valid EnvFilter directive list, or the
/// `OTEL_EXPORTER_OTLP_*` settings cannot be used.
pub fn init(filter: &str) -> anyhow::Result<()> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let filter = EnvFilter::try_new(filter)?;
    let otlp = otlp::OtlpConfig::from_env(&|name| std::env::var(name).ok())
        .map_err(|e| anyhow::anyhow!("trace export: {e}"))?;
    // Each layer filters for itself: the log's level does not decide which
    // spans are exported.
    let log = tracing_subscriber::fmt::layer()
        .json()
        .with_timer(Rfc3339)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(true)
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let export = otlp.map(|config| {
        otlp::layer(config).with_filter(tracing_subscriber::filter::filter_fn(otlp::exported))
    });
    // `try_init` also bridges the `log` crate (russh and others) into tracing.
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(export)
        .try_init();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(non-text panic payload)".to_owned());
        tracing::error!(panic.location = %location, panic.message = %payload, "panic");
        default_hook(info);
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339_with_millis() {
        let t = UNIX_EPOCH + Duration::from_millis(1_738_324_800_042);
        assert_eq!(rfc3339(t), "2025-01-31T12:00:00.042Z");
    }
}
