//! One span and one debug log line per libvirt call: procedure, host,
//! duration, outcome.
//!
//! Every libvirt call the provider makes goes through [`observed`], named by
//! its procedure number (libvirt-rpc's table gives the name). Only the
//! procedure name, the host and the outcome are recorded — never arguments
//! or payloads, so domain XML, volume contents and cloud-init user data can
//! not reach logs or spans from here. Errors are recorded by their
//! `Display`, which for libvirt-rpc is the daemon's message and code.

use provider_api::error::chain;
use std::future::Future;
use std::time::Instant;

use libvirt_rpc::proc_num;
use provider_api::Identifier;
use tracing::Instrument;

use super::errors::classify;

/// Runs `call` (a libvirt-rpc call on `host`) inside a `libvirt` span named
/// for `procedure` (a [`proc_num`] constant, recorded by its
/// [`proc_num::name`]), and logs one debug line when it ends.
///
/// # Errors
/// Whatever `call` returns, unchanged.
///
/// # Cancel safety
/// As cancel safe as `call`; a cancelled call logs nothing.
pub async fn observed<T, F>(
    host: &Identifier,
    procedure: i32,
    call: F,
) -> Result<T, libvirt_rpc::Error>
where
    F: Future<Output = Result<T, libvirt_rpc::Error>>,
{
    observe(host, procedure, None, call).await
}

/// [`observed`] for a procedure asked of one of several sources (the
/// address sources: `"agent"`, `"arp"`, `"lease"`), recorded as the
/// `source` field beside the procedure.
///
/// # Errors
/// Whatever `call` returns, unchanged.
///
/// # Cancel safety
/// As cancel safe as `call`; a cancelled call logs nothing.
pub async fn observed_source<T, F>(
    host: &Identifier,
    procedure: i32,
    source: &'static str,
    call: F,
) -> Result<T, libvirt_rpc::Error>
where
    F: Future<Output = Result<T, libvirt_rpc::Error>>,
{
    observe(host, procedure, Some(source), call).await
}

async fn observe<T, F>(
    host: &Identifier,
    procedure: i32,
    source: Option<&'static str>,
    call: F,
) -> Result<T, libvirt_rpc::Error>
where
    F: Future<Output = Result<T, libvirt_rpc::Error>>,
{
    let procedure = proc_num::name(procedure).unwrap_or("unlisted procedure");
    // INFO: exported in traces (each procedure under its provider call).
    let span = tracing::info_span!("libvirt", host = %host, procedure, source);
    let started = Instant::now();
    let result = call.instrument(span.clone()).await;
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let _entered = span.enter();
    match &result {
        Ok(_) => tracing::debug!(
            host = %host,
            procedure,
            source,
            elapsed_ms,
            outcome = "ok",
            "libvirt call"
        ),
        Err(e) => tracing::debug!(
            host = %host,
            procedure,
            source,
            elapsed_ms,
            outcome = "error",
            class = %classify(e),
            error = %chain(e),
            "libvirt call"
        ),
    }
    result
}
