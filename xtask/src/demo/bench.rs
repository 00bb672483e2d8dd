//! `cargo xtask bench demo [--rounds N]`: **Proxy-to-Healthy** through the
//! whole system, for 1 and 5 Proxies at once, against the same guests made
//! by hand with plain `virsh` and probed by hand, in the same run.
//!
//! - *Ours*: the operator as deploy/'s pod on the sandbox's node (as in the
//!   demo). `kubectl apply` of N Proxies, then every second a `kubectl get`:
//!   each Proxy's time is from the apply to the first poll that shows it
//!   Running with `Healthy=True` (a real CONNECT through its Squid, made by
//!   the operator's health engine). The base image is warmed by one Proxy
//!   first, outside the timing, as the peer warms its own.
//! - *Peer*: kvm2-provider's serving benchmark in peer-only mode
//!   (`KVM2_BENCH_SERVING_PEER`): `virsh vol-create-as --backing-vol`, the
//!   same cloud-init seed uploaded, `virsh create` of the same domain XML,
//!   the address from dnsmasq's lease file, then a CONNECT through Squid
//!   every second until it answers 200.
//!
//! Printed: p50 and p95 (nearest rank) per side and count, and their ratios
//! (ours / peer): the overhead of the operator, the API server, the health
//! engine's probe interval and the provider over doing it by hand. Nothing
//! is asserted.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use sandbox_kit::Descriptor;

use super::target::Target;
use super::world::{World, serving};
use super::{TO_SERVING, remove_base, runner};
use crate::sandbox::Session;
use crate::util::workspace;
use crate::util::{cmd, output};

const COUNTS: [usize; 2] = [1, 5];

/// `cargo xtask bench demo [--rounds N] [--keep]`.
pub fn run(rounds: usize, keep: bool) -> Result<ExitCode> {
    let session = Session::start(keep)?;
    let result = session
        .descriptor()
        .and_then(|d| bench(&d, session.path(), rounds));
    session.finish()?;
    result.map(|()| ExitCode::SUCCESS)
}

fn bench(d: &Descriptor, descriptor: &std::path::Path, rounds: usize) -> Result<()> {
    let node = crate::node::ensure(d)?;
    let target = Target::sandbox(d, "egress-bench")?;
    let dir = d.state_dir.join("bench-demo");
    let deploy = workspace().join("deploy");
    let runner = runner(&target, &dir, Some(&node), &deploy)?;
    let mut w = World::new(target, dir, runner)?;
    w.install(&deploy)?;
    w.start_operator()?;
    let base = w.target.base_volume.clone();
    println!("bench: warming the base image (one Proxy, not timed)");
    time_to_serving(&w, &["warm-0"])?;
    delete_all(&w)?;

    let mut ours: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for round in 0..rounds {
        for n in COUNTS {
            let names: Vec<String> = (0..n).map(|i| format!("b{round}-{n}-{i}")).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let each = time_to_serving(&w, &refs)?;
            println!("  ours, {n} at once, round {round}: {}", seconds(&each));
            ours.entry(n).or_default().extend(each);
            delete_all(&w)?;
            // Let the daemon finish tearing the guests down.
            std::thread::sleep(Duration::from_secs(5));
        }
    }
    w.stop_operator()?;
    remove_base(&w, &base);
    let _ = w.kubectl(&["delete", "namespace", &w.ns, "--wait=false"]);

    println!("bench: the peer (plain virsh, probed by hand)");
    let counts: Vec<String> = (0..rounds)
        .flat_map(|_| COUNTS.iter().map(ToString::to_string))
        .collect();
    let mut c = cmd(
        "cargo",
        ["bench", "-p", "kvm2-provider", "--bench", "serving"],
    );
    c.env(sandbox_kit::ENV_VAR, descriptor)
        .env("KVM2_BENCH_ONLY", "serving")
        .env("KVM2_BENCH_SERVING_PEER", counts.join(","));
    let out = output(c)?;
    if !out.status.success() {
        bail!(
            "the peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    let mut peer: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(rest) = line.strip_prefix("peer-serving-seconds ") else {
            continue;
        };
        let Some((n, times)) = rest.split_once(':') else {
            continue;
        };
        let n: usize = n.trim().parse()?;
        let times: Vec<f64> = times
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        println!("  peer, {n} at once: {}", seconds(&times));
        peer.entry(n).or_default().extend(times);
    }
    println!(
        "\nProxy-to-Healthy (TCG guests, 2 cores, {rounds} round(s)); ratio = operator / plain virsh"
    );
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "proxies", "ours p50", "ours p95", "virsh p50", "virsh p95", "p50 ratio", "p95 ratio"
    );
    for n in COUNTS {
        let (Some(o), Some(p)) = (ours.get(&n), peer.get(&n)) else {
            bail!("no figures for {n} at once");
        };
        let (o50, o95, p50, p95) = (rank(o, 0.50), rank(o, 0.95), rank(p, 0.50), rank(p, 0.95));
        println!(
            "{n:<10} {o50:>10.1} s {o95:>10.1} s {p50:>10.1} s {p95:>10.1} s {:>9.2}x {:>9.2}x",
            o50 / p50,
            o95 / p95
        );
    }
    Ok(())
}

/// Applies the Proxies; each one's seconds from the apply to the first poll
/// that shows it serving.
fn time_to_serving(w: &World, names: &[&str]) -> Result<Vec<f64>> {
    let started = Instant::now();
    w.apply_proxies(names)?;
    let mut done: BTreeMap<String, f64> = BTreeMap::new();
    while done.len() < names.len() {
        for p in w.proxies()? {
            let name = p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if names.contains(&name.as_str()) && serving(&p) {
                done.entry(name)
                    .or_insert_with(|| started.elapsed().as_secs_f64());
            }
        }
        if started.elapsed() > TO_SERVING {
            bail!(
                "{} of {} Proxies served within {} s",
                done.len(),
                names.len(),
                TO_SERVING.as_secs()
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(done.into_values().collect())
}

fn delete_all(w: &World) -> Result<()> {
    w.kubectl(&["-n", &w.ns, "delete", "proxies", "--all", "--timeout=300s"])?;
    Ok(())
}

/// Nearest-rank percentile.
fn rank(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1)) - 1;
    v.get(i).copied().unwrap_or(f64::NAN)
}

fn seconds(v: &[f64]) -> String {
    v.iter()
        .map(|t| format!("{t:.1} s"))
        .collect::<Vec<_>>()
        .join(", ")
}
