//! `cargo xtask bench operator --bench tracing`: what exporting traces
//! costs the operator. The operator process (instant provider, the
//! sandbox's real kube-apiserver, as in `benches/operator.rs`) makes
//! [`PROXIES`] Proxies (`TRACING_BENCH_PROXIES`) Running, three ways,
//! interleaved over [`ROUNDS`] rounds:
//! - **off**: no `OTEL_EXPORTER_OTLP_*` variable;
//! - **on**: exporting to a collector of the bench's own (HTTP/1.1, it
//!   reads each request and answers 200);
//! - **collector down**: exporting to a port nothing listens on (every
//!   export refused).
//!
//! Measured: the operator's CPU time (user + system, `/proc/<pid>/stat`)
//! from its start to the last Proxy `Running`, divided by the reconciles it
//! ran (`egress_proxies_operator_reconciles_total`); and the spans
//! exported and dropped. Printed with the ratios to *off*; nothing is
//! asserted.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::print_stdout,
    clippy::print_stderr,
    dead_code
)]

#[path = "../tests/support/consumer.rs"]
mod consumer;
#[path = "../tests/support/instant.rs"]
mod instant;
#[path = "../tests/support/operator_account.rs"]
mod operator_account;

use std::process::ExitCode;
use std::time::Duration;

use instant::World;

const PROXIES: usize = 300;
const ROUNDS: usize = 3;
const BUDGET: Duration = Duration::from_secs(900);

fn main() -> ExitCode {
    instant::bench_main("tracing", bench)
}

/// A collector that reads each request and answers 200; stops with the
/// runtime (the bench's end).
async fn sink() -> u16 {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = line.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if stream.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                    if stream.get_mut().write_all(ok).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

struct Run {
    cpu_per_reconcile_ms: f64,
    exported: f64,
    dropped: f64,
}

async fn run(world: &mut World, mode: &str, round: usize, collector: u16, n: usize) -> Run {
    let endpoint = match mode {
        "on" => Some(format!("http://127.0.0.1:{collector}")),
        "down" => Some(format!("http://127.0.0.1:{}", testkit::free_port())),
        _ => None,
    };
    world.set_operator_env(
        &endpoint
            .map(|e| vec![("OTEL_EXPORTER_OTLP_ENDPOINT", e)])
            .unwrap_or_default(),
    );
    let responder = instant::responder().await;
    let ns = world.namespace(&format!("bt-{mode}-{round}"));
    let api = instant::proxies(&world.client, &ns);
    instant::create_proxies(&api, &ns, &world.entry, n).await;
    let operator = world
        .operator(
            &ns,
            responder,
            &["--log", "warn,operator=info", "--services", "false"],
        )
        .await;
    instant::wait_all(&api, n, BUDGET, "Running", instant::running).await;
    let cpu = testkit::bench::cpu_seconds(operator.pid());
    let reconciles = operator
        .metric_sum("egress_proxies_operator_reconciles_total", &[])
        .await;
    // Let the last batch leave (1 s linger), then read the counters.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let exported = operator
        .metric("egress_proxies_operator_trace_spans_exported_total")
        .await;
    let dropped = operator
        .metric_sum("egress_proxies_operator_trace_spans_dropped_total", &[])
        .await;
    drop(operator);
    instant::delete_all(&api).await;
    Run {
        cpu_per_reconcile_ms: cpu * 1000.0 / reconciles.max(1.0),
        exported,
        dropped,
    }
}

async fn bench() {
    let n = std::env::var("TRACING_BENCH_PROXIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PROXIES);
    let mut world = World::new().await;
    let collector = sink().await;
    println!("tracing bench: {n} Proxies to Running per run, instant provider, {ROUNDS} rounds");
    let modes = ["off", "on", "down"];
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..ROUNDS {
        for k in 0..modes.len() {
            let i = (round + k) % modes.len();
            let r = run(&mut world, modes[i], round, collector, n).await;
            println!(
                "  round {round}: {:<5} CPU per reconcile {:.3} ms; spans exported {}, dropped {}",
                modes[i], r.cpu_per_reconcile_ms, r.exported, r.dropped
            );
            per[i].push(r.cpu_per_reconcile_ms);
        }
    }
    let median = |v: &[f64]| testkit::bench::median(v);
    let (off, on, down) = (median(&per[0]), median(&per[1]), median(&per[2]));
    println!(
        "operator CPU per reconcile, medians of {ROUNDS}: off {off:.3} ms, exporting {on:.3} ms (ratio {:.2}x), collector down {down:.3} ms (ratio {:.2}x)",
        on / off,
        down / off
    );
}
