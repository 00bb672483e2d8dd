//! One span and one debug log line per libvirt call: procedure, host,
//! duration, outcome.
//!
//! Every libvirt call the provider makes goes through [`observed`]. Only the
//! procedure name, the host and the outcome are recorded — never arguments
//! or payloads, so domain XML, volume contents and cloud-init user data can
//! not reach logs or spans from here. Errors are recorded by their
//! `Display`, which for libvirt-rpc is the daemon's message and code.

use std::future::Future;
use std::time::Instant;

use provider_api::Identifier;
use tracing::Instrument;

use crate::libvirt_errors::classify;

/// Runs `call` (a libvirt-rpc call on `host`) inside a `libvirt` span named
/// for `procedure`, and logs one debug line when it ends.
///
/// # Errors
/// Whatever `call` returns, unchanged.
///
/// # Cancel safety
/// As cancel safe as `call`; a cancelled call logs nothing.
pub async fn observed<T, F>(
    host: &Identifier,
    procedure: &'static str,
    call: F,
) -> Result<T, libvirt_rpc::Error>
where
    F: Future<Output = Result<T, libvirt_rpc::Error>>,
{
    let span = tracing::debug_span!("libvirt", host = %host, procedure);
    let started = Instant::now();
    let result = call.instrument(span.clone()).await;
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let _entered = span.enter();
    match &result {
        Ok(_) => tracing::debug!(
            host = %host,
            procedure,
            elapsed_ms,
            outcome = "ok",
            "libvirt call"
        ),
        Err(e) => tracing::debug!(
            host = %host,
            procedure,
            elapsed_ms,
            outcome = "error",
            class = %classify(e),
            error = %e,
            "libvirt call"
        ),
    }
    result
}
