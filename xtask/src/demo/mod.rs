//! `cargo xtask demo [--keep]`: the whole system on this machine.
//!
//! ```text
//!  setup (if needed) → sandbox up (API server, libvirtd, sshd, guest network,
//!  guest image served) → the sandbox's node (controller-manager, scheduler,
//!  kubelet, containerd) → the operator's image → kubectl apply -k deploy/
//!  (an overlay: the image, the run's config) → the operator's pod → two
//!  Proxies → live table → the Go original's validation table → delete → teardown
//! ```
//!
//! Each row is measured, printed at once and again in the final table;
//! the exit status is 0 only when every row passed. `--keep` leaves the
//! operator, the Proxies and the sandbox running and prints how to reach
//! them.
//!
//! The demo runs the operator as deploy/'s pod ([`pod`]); `cargo xtask
//! integration` runs it as a local process, under deploy/'s ServiceAccount
//! on the sandbox or the user's kubeconfig on their cluster (whose nodes
//! cannot pull an image built here).

pub mod bench;
mod pod;
pub mod report;
mod target;
mod world;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::demo::report::Report;
use anyhow::{Context, Result, bail};
use sandbox_kit::Descriptor;
use serde_json::Value;

use crate::util::{cmd, read, run, workspace};
use target::{Kill, Target};

use crate::flags::IntegrationArgs;
use crate::sandbox::Session;
use world::{Runner, World, condition, current_instance, domain_of, message, serving};

const PROXIES: [&str; 2] = ["demo-a", "demo-b"];
/// Two guests booting at once under TCG, image fetch included.
pub(crate) const TO_SERVING: Duration = Duration::from_secs(900);
/// `cargo xtask demo [--keep]`.
pub fn run_demo(keep: bool) -> Result<ExitCode> {
    on_sandbox(keep, "demo", Operator::Pod, |sandbox| {
        Target::sandbox(sandbox, "egress-demo")
    })
}

/// `cargo xtask integration [--host ... | (the sandbox)] [--keep]`.
pub fn run_integration(args: &IntegrationArgs) -> Result<ExitCode> {
    let tag = format!("egress-it-{:08x}", std::process::id() ^ now_micros());
    if args.host.is_none() {
        return on_sandbox(args.keep, "integration", Operator::Process, |sandbox| {
            Target::sandbox(sandbox, &tag)
        });
    }
    let target = Target::from_flags(args, &tag)?;
    let dir = std::env::temp_dir().join(&tag);
    finish(suite(target, dir, None, args.keep)?)
}

/// Now as Kubernetes writes times (RFC 3339, UTC, seconds).
fn now_rfc3339() -> Result<String> {
    Ok(read(cmd("date", ["-u", "+%Y-%m-%dT%H:%M:%SZ"]))?
        .trim()
        .to_owned())
}

fn now_micros() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_micros())
        .unwrap_or(0)
}

fn finish(report: Report) -> Result<ExitCode> {
    println!("\n{}", report.render());
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// How the suite runs the operator on the sandbox.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operator {
    /// deploy/'s Deployment on the sandbox's node.
    Pod,
    /// A local process.
    Process,
}

/// Runs the suite on the local sandbox, in a [`Session`].
fn on_sandbox(
    keep: bool,
    what: &str,
    operator: Operator,
    target: impl FnOnce(&Descriptor) -> Result<Target>,
) -> Result<ExitCode> {
    let session = Session::start(keep)?;
    let result = session.descriptor().and_then(|sandbox| {
        let dir = sandbox.state_dir.join(what);
        let node = match operator {
            Operator::Pod => Some(crate::node::ensure(&sandbox)?),
            Operator::Process => None,
        };
        suite(target(&sandbox)?, dir, node, keep)
    });
    session.finish()?;
    finish(result?)
}

/// The validation rows against `target`; the operator's files in `dir`;
/// the operator as a pod when a `node` is given, else as a local process.
fn suite(
    target: Target,
    dir: PathBuf,
    node: Option<crate::node::Node>,
    keep: bool,
) -> Result<Report> {
    let deploy = workspace().join("deploy");
    let runner = runner(&target, &dir, node.as_ref(), &deploy)?;
    let neighbour = format!("base-{}-neighbour.proxy-guest.qcow2", target.tag);
    let mut w = World::new(target, dir, runner)?;
    let mut report = Report::default();
    w.install(&deploy)?;
    let pool = w.target.pool.clone();
    let ours = w.target.base_volume.clone();
    let base_existed = w.volumes()?.contains(&ours);
    // Another entry's base on the same pool: the Go original's shared base was
    // overwritten by a neighbour; ours must never touch it (invariant 5).
    if !w.volumes()?.contains(&neighbour) {
        w.virsh(&[
            "vol-create-as",
            &pool,
            neighbour.as_str(),
            "1M",
            "--format",
            "qcow2",
        ])?;
    }
    let neighbour_before = w.virsh(&["vol-info", neighbour.as_str(), "--pool", &pool])?;

    w.start_operator()?;
    println!(
        "demo: operator running ({})",
        w.operator_label().unwrap_or_default()
    );
    let created = Instant::now();
    w.apply_proxies(&PROXIES)?;
    watch_until_serving(&w, created)?;
    let to_serving = created.elapsed();
    report.row(
        "both Proxies Running and Healthy=True (real CONNECT through Squid)",
        true,
        format!("{:.0} s from kubectl apply", to_serving.as_secs_f64()),
    );

    provider_health_row(&w, &mut report)?;
    image_rows(&w, &mut report)?;
    let after = w.virsh(&["vol-info", neighbour.as_str(), "--pool", &pool])?;
    let has_ours = w.volumes()?.contains(&ours);
    report.row(
        "per-entry base beside another entry's, untouched (invariant 5)",
        has_ours && after == neighbour_before,
        format!(
            "{ours} {}; {neighbour} {}",
            if has_ours { "present" } else { "missing" },
            if after == neighbour_before {
                "unchanged"
            } else {
                "CHANGED"
            }
        ),
    );
    steady_row(&w, &mut report)?;
    discovery_row(&w, &mut report)?;
    restart_row(&mut w, &mut report)?;
    kill_row(&w, &mut report)?;

    if keep {
        print_keep(&w);
        // The operator keeps running: its handle is forgotten, not stopped.
        std::mem::forget(w);
        return Ok(report);
    }
    delete_row(&w, &mut report, &ours)?;
    // Leave the host as it was: the planted neighbour, and our base when
    // this run made it.
    w.virsh(&["vol-delete", neighbour.as_str(), "--pool", &pool])?;
    if !base_existed && w.target.pool_dir.is_none() {
        remove_base(&w, &ours);
    }
    let _ = w.kubectl(&["delete", "namespace", &w.ns, "--wait=false"]);
    Ok(report)
}

/// The operator's image and Deployment overlay (with a `node`), or its
/// debug binary as a local process.
fn runner(
    target: &Target,
    dir: &Path,
    node: Option<&crate::node::Node>,
    deploy: &Path,
) -> Result<Runner> {
    Ok(match node {
        Some(node) => {
            let release = crate::image::operator::build_release(&workspace())?;
            Runner::Pod(pod::Deployment::prepare(
                target, node, dir, &release, deploy,
            )?)
        }
        None => {
            println!("suite: building the operator");
            run(cmd("cargo", ["build", "-p", "operator"]))?;
            let bin = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| workspace().join("target"))
                .join("debug/operator");
            Runner::Process { bin, child: None }
        }
    })
}

/// Removes the run's base image (and its marker) when this run made it.
pub(crate) fn remove_base(w: &World, base: &str) {
    for v in [base.to_owned(), format!("{base}.marker")] {
        if let Err(e) = w.virsh(&["vol-delete", &v, "--pool", &w.target.pool]) {
            eprintln!("suite: could not remove {v}: {e:#}");
        }
    }
}

/// Prints the live table every 5 s until every Proxy serves.
fn watch_until_serving(w: &World, since: Instant) -> Result<()> {
    let base = w
        .target
        .pool_dir
        .as_ref()
        .map(|d| d.join(&w.target.base_volume));
    let image_bytes = w.target.image_bytes.unwrap_or(0);
    let mut last_bytes = 0u64;
    let mut last_at = Instant::now();
    loop {
        let proxies = w.proxies()?;
        let elapsed = since.elapsed().as_secs();
        println!("--- {elapsed:>4} s ---------------------------------------------------------");
        println!(
            "{:<10} {:<13} {:<8} {:<16} {:<8}",
            "PROXY", "PHASE", "HOST", "IP", "HEALTHY"
        );
        for p in &proxies {
            let s = &p["status"];
            let healthy = condition(p, "Healthy")
                .and_then(|c| c["status"].as_str())
                .unwrap_or("-");
            println!(
                "{:<10} {:<13} {:<8} {:<16} {:<8}",
                p["metadata"]["name"].as_str().unwrap_or("?"),
                s["phase"].as_str().unwrap_or("-"),
                s["host"].as_str().unwrap_or("-"),
                s["ip"].as_str().unwrap_or("-"),
                healthy
            );
        }
        if let Ok(ph) = w.get_json(&["get", "providerhealth", &w.entry]) {
            println!(
                "providerhealth/{}: Ready {}",
                w.entry,
                ph["status"]["ready"].as_str().unwrap_or("-")
            );
        }
        let bytes = base
            .as_ref()
            .and_then(|b| std::fs::metadata(b).ok())
            .map_or(0, |m| m.len());
        if bytes > 0 && bytes < image_bytes {
            let rate = (bytes.saturating_sub(last_bytes)) as f64 / last_at.elapsed().as_secs_f64();
            println!(
                "image: {:.1} / {:.1} MiB ({:.0}%), {:.1} MiB/s",
                bytes as f64 / 1048576.0,
                image_bytes as f64 / 1048576.0,
                bytes as f64 * 100.0 / image_bytes as f64,
                rate / 1048576.0
            );
        }
        last_bytes = bytes;
        last_at = Instant::now();
        if proxies.len() == PROXIES.len() && proxies.iter().all(serving) {
            return Ok(());
        }
        if since.elapsed() > TO_SERVING {
            bail!(
                "the Proxies did not serve within {} s; operator log: {}",
                TO_SERVING.as_secs(),
                w.log_path().display()
            );
        }
        std::thread::sleep(Duration::from_secs(5));
    }
}

fn provider_health_row(w: &World, report: &mut Report) -> Result<()> {
    let ph = w.get_json(&["get", "providerhealth", &w.entry])?;
    let s = &ph["status"];
    let t = &s["targets"][0];
    report.row(
        "ProviderHealth Ready 1/1: reachable, latency, libvirt version",
        s["ready"] == "1/1" && t["reachable"] == true && t["version"].is_string(),
        format!(
            "Ready {}, {} reachable={} latency={} ms libvirt {}",
            s["ready"].as_str().unwrap_or("-"),
            t["name"].as_str().unwrap_or("-"),
            t["reachable"],
            t["latencyMs"],
            t["version"].as_str().unwrap_or("-")
        ),
    );
    Ok(())
}

/// Cold fetch and cache hit, from the operator's log.
fn image_rows(w: &World, report: &mut Report) -> Result<()> {
    let lines = w.log_lines();
    let started: Vec<&Value> = lines
        .iter()
        .filter(|l| message(l) == "downloading base image")
        .collect();
    let published = lines.iter().find(|l| message(l) == "base image published");
    match (started.first(), published) {
        (Some(start), Some(done)) => {
            let secs = seconds_between(start, done).unwrap_or(0.0);
            let bytes = done["fields"]["bytes"].as_u64().unwrap_or(0);
            report.row(
                "cold fetch: size, time, rate, sha256 verified before publishing",
                bytes > 0 && w.target.image_bytes.is_none_or(|b| b == bytes),
                format!(
                    "{:.1} MiB in {secs:.1} s ({:.1} MB/s), sha256 {}… matched",
                    bytes as f64 / 1048576.0,
                    bytes as f64 / 1e6 / secs.max(0.001),
                    w.target.image_sha256.get(..12).unwrap_or("?")
                ),
            );
        }
        _ => report.row(
            "cold fetch: size, time, rate, sha256 verified before publishing",
            false,
            "no download/publish pair in the operator's log",
        ),
    }
    report.row(
        "second Proxy a cache hit (one download for two Proxies)",
        started.len() == 1,
        format!(
            "{} download(s) for {} Proxies",
            started.len(),
            PROXIES.len()
        ),
    );
    Ok(())
}

fn seconds_between(a: &Value, b: &Value) -> Option<f64> {
    let t = |v: &Value| -> Option<f64> {
        // RFC 3339 with milliseconds, UTC: compare the time of day (the
        // demo never spans midnight twice).
        let s = v["timestamp"].as_str()?;
        let time = s.split('T').nth(1)?.trim_end_matches('Z');
        let mut parts = time.split(':');
        let h: f64 = parts.next()?.parse().ok()?;
        let m: f64 = parts.next()?.parse().ok()?;
        let sec: f64 = parts.next()?.parse().ok()?;
        Some(h * 3600.0 + m * 60.0 + sec)
    };
    let d = t(b)? - t(a)?;
    Some(if d < 0.0 { d + 86400.0 } else { d })
}

/// A steady address: the same IP over polls.
fn steady_row(w: &World, report: &mut Report) -> Result<()> {
    const POLLS: usize = 6;
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for _ in 0..POLLS {
        for p in w.proxies()? {
            let name = p["metadata"]["name"].as_str().unwrap_or("?").to_owned();
            let ip = format!(
                "{}/{}",
                p["status"]["phase"].as_str().unwrap_or("-"),
                p["status"]["ip"].as_str().unwrap_or("-")
            );
            seen.entry(name).or_default().push(ip);
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    let steady = seen.len() == PROXIES.len()
        && seen
            .values()
            .all(|v| v.len() == POLLS && v.iter().all(|x| x == &v[0] && x.starts_with("Running/")));
    let shown: Vec<String> = seen.iter().map(|(n, v)| format!("{n} {}", v[0])).collect();
    report.row(
        "Running steady: same IP over 6 polls, 30 s (address grace)",
        steady,
        shown.join(", "),
    );
    Ok(())
}

fn discovery_row(w: &World, report: &mut Report) -> Result<()> {
    let listed = w.discovery(&format!("/proxies?namespace={}&healthy=true", w.ns))?;
    let addrs: Vec<String> = listed["proxies"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    format!(
                        "{} {}",
                        p["name"].as_str().unwrap_or("?"),
                        p["address"].as_str().unwrap_or("-")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    report.row(
        "discovery API lists both healthy proxies",
        listed["count"] == PROXIES.len(),
        addrs.join(", "),
    );
    Ok(())
}

/// What must not change across operator restarts, per Proxy.
fn fingerprint(w: &World) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for p in w.proxies()? {
        let s = &p["status"];
        let healthy = condition(&p, "Healthy")
            .map(|c| format!("{}@{}", c["status"], c["lastTransitionTime"]))
            .unwrap_or_default();
        out.insert(
            p["metadata"]["name"].as_str().unwrap_or("?").to_owned(),
            format!(
                "{} {} {} {} healthy={healthy}",
                s["providerID"], s["createdAt"], s["ip"], s["replacements"]
            ),
        );
    }
    Ok(out)
}

fn restart_row(w: &mut World, report: &mut Report) -> Result<()> {
    let before = fingerprint(w)?;
    let domains = w.domains()?;
    let mut stops = Vec::new();
    for _ in 0..2 {
        stops.push(w.stop_operator()?);
        w.start_operator()?;
        // A reconcile pass per Proxy and a few probe rounds.
        std::thread::sleep(Duration::from_secs(20));
    }
    let after = fingerprint(w)?;
    let same_domains = w.domains()? == domains;
    let changed: Vec<&String> = before
        .iter()
        .filter(|(k, v)| after.get(*k) != Some(v))
        .map(|(k, _)| k)
        .collect();
    report.row(
        "operator restarted twice: no re-create, no IP change, no Healthy flap",
        changed.is_empty() && same_domains && after.len() == before.len(),
        format!(
            "{} {}; {} (provider ID, created, IP, Healthy transition time compared)",
            if w.in_pod() {
                "pod scaled to 0 and gone in"
            } else {
                "SIGTERM exits in"
            },
            stops
                .iter()
                .map(|d| format!("{} ms", d.as_millis()))
                .collect::<Vec<_>>()
                .join(" and "),
            if changed.is_empty() {
                "nothing changed".to_owned()
            } else {
                format!("CHANGED: {changed:?}")
            }
        ),
    );
    Ok(())
}

/// Kills one guest's QEMU; waits for the replacement to serve, and
/// measures the new instance: another instance (replacement count, QEMU),
/// `Healthy=True` earned by it (`probedInstance`) with a transition after
/// the kill.
fn kill_row(w: &World, report: &mut Report) -> Result<()> {
    let name = PROXIES[0];
    let p = w.proxy(name)?;
    let domain = domain_of(&p).context("no provider ID")?;
    let replacements = p["status"]["replacements"].as_u64().unwrap_or(0);
    let old_instance = current_instance(&p);
    let pid = qemu_pid(w, &domain);
    let killed_at = now_rfc3339()?;
    match w.target.kill {
        Kill::Process => run(cmd("kill", ["-9", &pid]))?,
        Kill::Destroy => {
            w.virsh(&["destroy", &domain])?;
        }
    }
    let killed = Instant::now();
    loop {
        let p = w.proxy(name)?;
        let now = p["status"]["replacements"].as_u64().unwrap_or(0);
        if now > replacements && serving(&p) {
            let new_pid = qemu_pid(w, &domain);
            let instance = current_instance(&p);
            let since = condition(&p, "Healthy")
                .and_then(|c| c["lastTransitionTime"].as_str().map(str::to_owned))
                .unwrap_or_default();
            // RFC 3339 UTC timestamps of one format compare as text.
            let fresh = since.as_str() > killed_at.as_str();
            report.row(
                "QEMU of one proxy killed: replaced, Healthy again",
                new_pid != pid && instance != old_instance && fresh,
                format!(
                    "{name}: {} {pid} killed, replacement #{now} Healthy (since {since}, killed {killed_at}) after {:.0} s at {}",
                    match w.target.kill {
                        Kill::Process => "QEMU",
                        Kill::Destroy => "domain (virsh destroy) id",
                    },
                    killed.elapsed().as_secs_f64(),
                    p["status"]["ip"].as_str().unwrap_or("-")
                ),
            );
            return Ok(());
        }
        if killed.elapsed() > TO_SERVING {
            report.row(
                "QEMU of one proxy killed: replaced, Healthy again",
                false,
                format!("not replaced and Healthy within {} s", TO_SERVING.as_secs()),
            );
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(5));
    }
}

/// The QEMU process of `domain` on this machine, or (remote) the domain's
/// ID, which a new start changes too.
fn qemu_pid(w: &World, domain: &str) -> String {
    match w.target.kill {
        Kill::Process => crate::util::read(cmd("pgrep", ["-f", &format!("guest={domain},")]))
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_owned(),
        Kill::Destroy => w
            .virsh(&["domid", domain])
            .unwrap_or_default()
            .trim()
            .to_owned(),
    }
}

fn delete_row(w: &World, report: &mut Report, base: &str) -> Result<()> {
    let domains: Vec<String> = w.proxies()?.iter().filter_map(domain_of).collect();
    let started = Instant::now();
    w.kubectl(&["-n", &w.ns, "delete", "proxies", "--all", "--timeout=300s"])?;
    let took = started.elapsed();
    let left_domains: Vec<String> = w
        .domains()?
        .into_iter()
        .filter(|d| domains.contains(d))
        .collect();
    let prefix = format!("vm-{}.", w.entry);
    let volumes = w.volumes()?;
    let left_volumes: Vec<&String> = volumes.iter().filter(|v| v.starts_with(&prefix)).collect();
    let base_kept = volumes.iter().any(|v| v == base);
    report.row(
        "delete: domains and per-VM volumes gone, base kept",
        left_domains.is_empty() && left_volumes.is_empty() && base_kept,
        format!(
            "deleted in {:.1} s; domains left {left_domains:?}, volumes left {left_volumes:?}, base {}",
            took.as_secs_f64(),
            if base_kept { "kept" } else { "GONE" }
        ),
    );
    Ok(())
}

fn print_keep(w: &World) {
    println!("\ndemo: --keep: everything stays up.");
    let admin = w.admin_kubeconfig().display();
    println!(
        "  kubectl --kubeconfig {admin} -n {} get proxies,providerhealths",
        w.ns
    );
    println!("  virsh -c '{}' list --all", w.target.virsh_uri);
    if let Some(addr) = w.http_addr() {
        match w.token_header() {
            Ok(header) => println!(
                "  curl -H @{} http://{addr}/proxies   (discovery, as {}'s proxy-consumer; token valid 1 h)",
                header.display(),
                w.ns
            ),
            Err(e) => println!("  curl http://{addr}/proxies needs a token: {e:#}"),
        }
    }
    println!(
        "  operator: {} (earlier runs' log {})",
        w.operator_label().unwrap_or_default(),
        w.log_path().display()
    );
    if w.in_pod() {
        println!(
            "  kubectl --kubeconfig {admin} -n {} logs deploy/egress-proxies-operator",
            world::OPERATOR_NS
        );
        println!("  stop: cargo xtask sandbox down");
    } else {
        println!("  stop: kill the operator; cargo xtask sandbox down");
    }
}
