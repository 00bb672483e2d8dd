//! `cargo xtask demo [--keep]`: the whole system on this machine.
//!
//! ```text
//!  setup (if needed) → sandbox up (API server, libvirtd, sshd, guest network,
//!  guest image served) → the sandbox's node (controller-manager, scheduler,
//!  kubelet, containerd) → the operator's image → kubectl apply -k deploy/
//!  (an overlay: the image, the run's config) → the operator's pod → two
//!  Proxies → live table → the Go original's validation table → delete →
//!  a Proxy of the kubernetes entry as a Pod → teardown
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
mod pods_row;
mod prometheus_row;
mod rows;

use rows::{
    delete_row, discovery_row, image_rows, kill_row, provider_health_row, restart_row, steady_row,
};
pub mod report;
mod target;
mod world;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::demo::report::Report;
use anyhow::{Result, bail};
use sandbox_kit::Descriptor;

use crate::util::{cmd, read, run, workspace};
use target::Target;

use crate::flags::IntegrationArgs;
use crate::sandbox::Session;
use world::{Runner, World, condition, serving};

const PROXIES: [&str; 2] = ["demo-a", "demo-b"];
/// Two guests booting at once under TCG, image fetch included.
pub(crate) const TO_SERVING: Duration = Duration::from_secs(900);
/// `cargo xtask demo [--keep]`.
pub fn run_demo(keep: bool) -> Result<ExitCode> {
    on_sandbox(keep, "demo", Operator::Pod, |sandbox| {
        Target::sandbox(sandbox, "egress-demo").map(Target::with_pods)
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
    let mut base_existed = w.volumes()?.contains(&ours);
    // The sandbox keeps the demo entry's base after a run (the entry is
    // the demo's own); the fetch rows measure a cold cache, so an earlier
    // run's base goes first. On a real host nothing of the kind is
    // removed: a base found there stays, and its rows say so.
    if base_existed && w.target.pool_dir.is_some() {
        println!(
            "suite: removing an earlier run's base {ours} (the fetch rows measure a cold cache)"
        );
        remove_base(&w, &ours);
        base_existed = w.volumes()?.contains(&ours);
    }
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

    let pods = match w.target.pods_entry() {
        Some(entry) => {
            pods_row::install(&w, &deploy)?;
            Some((entry, pods_row::Upstream::start()?))
        }
        None => None,
    };
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
    prometheus_row::prometheus_row(&w, &mut report, &deploy)?;
    restart_row(&mut w, &mut report)?;
    kill_row(&w, &mut report)?;

    if keep {
        print_keep(&w);
        // The operator keeps running: its handle is forgotten, not stopped.
        std::mem::forget(w);
        return Ok(report);
    }
    delete_row(&w, &mut report, &ours)?;
    if let Some((entry, upstream)) = &pods {
        pods_row::pods_row(&w, entry, upstream, &mut report)?;
    }
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
