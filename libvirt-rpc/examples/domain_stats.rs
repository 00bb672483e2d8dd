//! Print each domain's statistics, as `virsh domstats` does: libvirt's
//! typed parameters read with their accessors and the parameter-name
//! constants libvirt defines.
//!
//! ```text
//! cargo run --example domain_stats -- [URI]
//! ```
//!
//! `URI` defaults to `qemu:///system`. For each domain: its state, CPU
//! time, balloon size and vCPU count (those the driver reports), then
//! every parameter as `name=value`.
//!
//! ```text
//! guest1  state=running (reason 1)  cpu 12.48 s  balloon 1048576 KiB  vcpus 2
//!   state.state=1
//!   state.reason=1
//!   cpu.time=12480000000
//!   ...
//! ```

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use libvirt_rpc::{
    Client, ConnectGetAllDomainStatsFlags, ConnectOptions, TypedParam, TypedParamValue, Uri, params,
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args, &mut std::io::stdout()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("domain_stats: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the statistics of every domain of the URI in `args` to `out`.
pub async fn run(args: &[String], out: &mut dyn Write) -> Result<(), Box<dyn Error>> {
    let uri: Uri = match args {
        [] => "qemu:///system".parse()?,
        [uri] => uri.parse()?,
        _ => return Err("usage: domain_stats [URI]".into()),
    };
    let client = Client::connect_uri(&uri, &ConnectOptions::new()).await?;
    // No domains named and no stats groups asked for: every domain, every
    // group the driver supports.
    let records = client
        .connect_get_all_domain_stats(&[], 0, ConnectGetAllDomainStatsFlags::empty())
        .await?;
    for record in records {
        let p = &record.params;
        let get = |name| TypedParam::find(p, name);
        // Each accessor answers only for its own type; `to_u64` takes any
        // unsigned-convertible integer, as drivers differ in the width.
        let state = get(params::DOMAIN_STATS_STATE_STATE).and_then(TypedParamValue::to_u64);
        let reason = get(params::DOMAIN_STATS_STATE_REASON).and_then(TypedParamValue::to_u64);
        let cpu_ns = get(params::DOMAIN_STATS_CPU_TIME).and_then(TypedParamValue::as_u64);
        let balloon = get(params::DOMAIN_STATS_BALLOON_CURRENT).and_then(TypedParamValue::to_u64);
        let vcpus = get(params::DOMAIN_STATS_VCPU_CURRENT).and_then(TypedParamValue::to_u64);
        write!(out, "{}", record.dom.name)?;
        if let Some(state) = state {
            write!(
                out,
                "  state={} (reason {})",
                state_name(state),
                reason.unwrap_or(0)
            )?;
        }
        if let Some(ns) = cpu_ns {
            // Lossy on purpose: seconds to print.
            write!(out, "  cpu {:.2} s", ns as f64 / 1e9)?;
        }
        if let Some(kib) = balloon {
            write!(out, "  balloon {kib} KiB")?;
        }
        if let Some(n) = vcpus {
            write!(out, "  vcpus {n}")?;
        }
        writeln!(out)?;
        for param in p {
            writeln!(out, "  {}={}", param.field, value(&param.value))?;
        }
    }
    client.close().await;
    Ok(())
}

/// libvirt's `virDomainState` names.
fn state_name(state: u64) -> &'static str {
    match state {
        1 => "running",
        2 => "blocked",
        3 => "paused",
        4 => "shutdown",
        5 => "shutoff",
        6 => "crashed",
        7 => "pmsuspended",
        _ => "nostate",
    }
}

/// A parameter's value as `virsh` prints it.
fn value(v: &TypedParamValue) -> String {
    if let Some(s) = v.as_str() {
        return s.to_owned();
    }
    if let Some(b) = v.as_bool() {
        return if b { "yes" } else { "no" }.to_owned();
    }
    if let Some(f) = v.as_f64() {
        return format!("{f:.6}");
    }
    v.to_i64()
        .map(|i| i.to_string())
        .or_else(|| v.to_u64().map(|u| u.to_string()))
        .unwrap_or_else(|| format!("{v:?}"))
}
