//! The validation rows the demo measures after the Proxies serve: provider
//! health, the image cache, steady state, discovery, an operator restart,
//! a killed QEMU, deletion.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;

use super::target::Kill;
use super::world::{World, condition, current_instance, domain_of, message, serving};
use super::*;
use crate::demo::report::Report;
use crate::util::{cmd, run};

pub(super) fn provider_health_row(w: &World, report: &mut Report) -> Result<()> {
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
pub(super) fn image_rows(w: &World, report: &mut Report) -> Result<()> {
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

pub(super) fn seconds_between(a: &Value, b: &Value) -> Option<f64> {
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
pub(super) fn steady_row(w: &World, report: &mut Report) -> Result<()> {
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

pub(super) fn discovery_row(w: &World, report: &mut Report) -> Result<()> {
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
pub(super) fn fingerprint(w: &World) -> Result<BTreeMap<String, String>> {
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

pub(super) fn restart_row(w: &mut World, report: &mut Report) -> Result<()> {
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
pub(super) fn kill_row(w: &World, report: &mut Report) -> Result<()> {
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
pub(super) fn qemu_pid(w: &World, domain: &str) -> String {
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

pub(super) fn delete_row(w: &World, report: &mut Report, base: &str) -> Result<()> {
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
