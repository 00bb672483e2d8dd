//! `cargo bench -p operator --bench discovery_auth`: what authentication
//! costs discovery, against the sandbox's real kube-apiserver.
//!
//! [`PROXIES`] Proxies (`DISCOVERY_BENCH_PROXIES`) in one namespace, made
//! Running and Healthy by the operator over the instant provider
//! (`tests/support/instant.rs`). Three more operator processes serve that
//! namespace from their watch caches, side by side, each under a
//! ServiceAccount holding deploy/'s RBAC rules:
//!
//! | mode | flags | per request, when warm |
//! |---|---|---|
//! | `auth+cache` | (defaults: `--http-auth-cache-ttl=10s`) | no API call |
//! | `auth, no cache` | `--http-auth-cache-ttl=0` | a TokenReview, two SubjectAccessReviews |
//! | `auth off` | `--http-auth=none` | none |
//!
//! All three follow on deploy/'s Lease: a fourth, unmeasured, leads (it
//! made the Proxies Running and Healthy and keeps probing them), so the
//! three measured processes do the same work but for the mode. The caller holds `list` on the Proxies of that
//! one namespace (deploy/samples/discovery-reader.yaml), so every check
//! asks cluster-wide first (refused), then for the namespace (allowed). It
//! sends `GET /proxies?namespace=NS` with its token over
//! [`CONNECTIONS`] keep-alive connections (`DISCOVERY_BENCH_CONNECTIONS`)
//! for [`WINDOW`] (`DISCOVERY_BENCH_SECS`) per mode, the modes interleaved
//! over [`ROUNDS`] rounds (`DISCOVERY_BENCH_ROUNDS`), so they share
//! whatever else the machine does. Printed: requests per second, p50 and
//! p99 latency per mode, the ratios to auth off and between the two auth
//! modes, and the reviews each mode asked of the API server per request
//! (its `egress_proxies_operator_http_auth_reviews_total`).
//!
//! Everything (client, three operators, the API server, etcd) shares this
//! machine's cores; the ratios, from one run, are the figures that travel.
//! Nothing is asserted beyond every response being a 200 listing the
//! whole namespace.
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
use std::time::{Duration, Instant as Clock};
use testkit::bench::knob;

use consumer::Consumer;
use instant::{Operator, World};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PROXIES: usize = 1000;
const CONNECTIONS: usize = 4;
const WINDOW: Duration = Duration::from_secs(5);
const ROUNDS: usize = 3;
const BUDGET: Duration = Duration::from_secs(600);

fn main() -> ExitCode {
    instant::bench_main("discovery_auth", bench)
}

/// One mode: its operator and what was measured.
struct Mode {
    name: &'static str,
    operator: Operator,
    requests: u64,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

async fn bench() {
    let n = knob("DISCOVERY_BENCH_PROXIES", PROXIES as u64) as usize;
    let connections = knob("DISCOVERY_BENCH_CONNECTIONS", CONNECTIONS as u64) as usize;
    let window = Duration::from_secs(knob("DISCOVERY_BENCH_SECS", WINDOW.as_secs()));
    let rounds = knob("DISCOVERY_BENCH_ROUNDS", ROUNDS as u64) as usize;
    let world = World::new().await;
    let responder = instant::responder().await;
    println!(
        "discovery_auth bench: {n} Proxies in one namespace, {connections} connections, \
         {rounds} rounds of {} s per mode, kube-apiserver {}",
        window.as_secs(),
        world.kube.version
    );
    let ns = world.namespace("bench-auth");
    let api = instant::proxies(&world.client, &ns);
    instant::create_proxies(&api, &ns, &world.entry, n).await;
    let log = ["--log", "info,kube=warn"];
    let leader = world.operator(&ns, responder, &log).await;
    instant::wait_all(&api, n, BUDGET, "Healthy", instant::healthy).await;
    let cache = world.follower(&ns, responder, &log);
    let no_cache = world.follower(
        &ns,
        responder,
        &["--log", "info,kube=warn", "--http-auth-cache-ttl", "0"],
    );
    let off = world.follower(
        &ns,
        responder,
        &["--log", "info,kube=warn", "--http-auth", "none"],
    );
    let caller = Consumer::discovery_reader(&world.kube, &ns, "bench-caller");
    let path = format!("/proxies?namespace={ns}");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: operator\r\nAuthorization: Bearer {}\r\n\r\n",
        caller.token()
    );
    let mut modes: Vec<Mode> = [
        ("auth+cache", cache),
        ("auth, no cache", no_cache),
        ("auth off", off),
    ]
    .into_iter()
    .map(|(name, operator)| Mode {
        name,
        operator,
        requests: 0,
        elapsed: Duration::ZERO,
        latencies: Vec::new(),
    })
    .collect();
    // Every replica lists the whole namespace to this caller.
    for mode in &modes {
        let deadline = Clock::now() + BUDGET;
        loop {
            let addr = mode.operator.http_addr_opt();
            let listed = match addr {
                Some(addr) => consumer::http_get(&addr, &path, Some(caller.token())).await,
                None => (0, String::new()),
            };
            let count = serde_json::from_str::<Value>(&listed.1)
                .ok()
                .and_then(|v| v["count"].as_u64());
            if listed.0 == 200 && count == Some(n as u64) {
                break;
            }
            assert!(
                Clock::now() < deadline,
                "{}: not listing {n} Proxies: {} {}",
                mode.name,
                listed.0,
                listed.1.chars().take(200).collect::<String>()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let reviews_before: Vec<f64> = futures::future::join_all(modes.iter().map(api_reviews)).await;
    for round in 0..rounds {
        for mode in &mut modes {
            let addr = mode.operator.http_addr();
            let (requests, latencies, elapsed) = load(&addr, &request, connections, window).await;
            mode.requests += requests;
            mode.elapsed += elapsed;
            mode.latencies.extend(latencies);
            println!(
                "  round {}: {:<15} {:>8.1} req/s",
                round + 1,
                mode.name,
                requests as f64 / elapsed.as_secs_f64()
            );
        }
    }
    let reviews_after: Vec<f64> = futures::future::join_all(modes.iter().map(api_reviews)).await;

    let rate = |m: &Mode| m.requests as f64 / m.elapsed.as_secs_f64();
    let off_rate = rate(&modes[2]);
    println!();
    println!(
        "discovery with auth ({n} Proxies in the caller's one namespace, {connections} connections)"
    );
    println!(
        "  {:<15} {:>10} {:>10} {:>10} {:>12} {:>16}",
        "mode", "req/s", "p50 ms", "p99 ms", "vs auth off", "API reviews/req"
    );
    for (i, mode) in modes.iter_mut().enumerate() {
        mode.latencies.sort();
        let pct = |p: f64| {
            let l = &mode.latencies;
            l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        };
        let reviews = (reviews_after[i] - reviews_before[i]) / mode.requests.max(1) as f64;
        println!(
            "  {:<15} {:>10.1} {:>10.2} {:>10.2} {:>11.2}x {:>16.3}",
            mode.name,
            mode.requests as f64 / mode.elapsed.as_secs_f64(),
            pct(0.50),
            pct(0.99),
            mode.requests as f64 / mode.elapsed.as_secs_f64() / off_rate,
            reviews
        );
    }
    println!(
        "  auth+cache / auth without cache: {:.2}x",
        rate(&modes[0]) / rate(&modes[1])
    );

    drop(modes);
    instant::delete_all(&api).await;
    // The leader releases the finalizers.
    let _ = instant::wait_gone(&api, Duration::from_secs(120)).await;
    drop(leader);
    let _ = world
        .kube
        .kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// TokenReviews and SubjectAccessReviews `mode`'s operator asked the API
/// server for so far (its `egress_proxies_operator_http_auth_reviews_total`, source
/// `api`).
async fn api_reviews(mode: &Mode) -> f64 {
    let body = mode.operator.get("/metrics").await;
    body.lines()
        .filter(|l| {
            l.starts_with("egress_proxies_operator_http_auth_reviews_total{")
                && l.contains("source=\"api\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `connections` keep-alive connections sending `request` to `addr` for
/// `window`: the 200s answered, their latencies, and the time taken.
async fn load(
    addr: &str,
    request: &str,
    connections: usize,
    window: Duration,
) -> (u64, Vec<Duration>, Duration) {
    let started = Clock::now();
    let until = started + window;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let (addr, request) = (addr.to_owned(), request.as_bytes().to_vec());
        tasks.spawn(async move {
            let mut conn = Conn::new(addr);
            let mut latencies = Vec::new();
            while Clock::now() < until {
                let sent = Clock::now();
                match conn.exchange(&request).await {
                    Ok(200) => latencies.push(sent.elapsed()),
                    Ok(code) => panic!("answered {code}"),
                    // The server closes a connection after its lifetime:
                    // reconnect, uncounted.
                    Err(_) => conn.stream = None,
                }
            }
            latencies
        });
    }
    let mut all = Vec::new();
    while let Some(latencies) = tasks.join_next().await {
        all.extend(latencies.unwrap());
    }
    (all.len() as u64, all, started.elapsed())
}

/// One keep-alive HTTP/1.1 connection: a request, then its response read
/// by `Content-Length`.
struct Conn {
    addr: String,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
}

impl Conn {
    fn new(addr: String) -> Conn {
        Conn {
            addr,
            stream: None,
            buf: Vec::with_capacity(1 << 20),
        }
    }

    /// Sends `request`, reads the whole response; its status code.
    async fn exchange(&mut self, request: &[u8]) -> std::io::Result<u16> {
        if self.stream.is_none() {
            self.stream = Some(TcpStream::connect(&self.addr).await?);
            self.buf.clear();
        }
        let stream = self.stream.as_mut().unwrap();
        stream.write_all(request).await?;
        let exchange = async {
            let mut chunk = vec![0u8; 64 * 1024];
            let head_end = loop {
                if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                let got = stream.read(&mut chunk).await?;
                if got == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                self.buf.extend_from_slice(&chunk[..got]);
            };
            let head = String::from_utf8_lossy(&self.buf[..head_end]).to_ascii_lowercase();
            let code: u16 = head.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while self.buf.len() < head_end + length {
                let got = stream.read(&mut chunk).await?;
                if got == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                self.buf.extend_from_slice(&chunk[..got]);
            }
            self.buf.drain(..head_end + length);
            Ok(code)
        };
        match tokio::time::timeout(Duration::from_secs(30), exchange).await {
            Ok(r) => r,
            Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
        }
    }
}
