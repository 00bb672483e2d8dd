//! Finds daemons that tests started and left running.
//!
//! Tests may start daemons of their own (an sshd with another config, a
//! private libvirtd, an `ssh -L` forward); each must stop them. After the
//! tests, any such process that is not part of the sandbox is reported.

use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Program names (as in `/proc/PID/comm`) that tests must never leave behind.
const WATCHED: &[&str] = &["sshd", "libvirtd", "virtlogd", "ssh", "dnsmasq"];
/// How long a process that is already exiting gets before it counts.
const GRACE: Duration = Duration::from_secs(5);

/// A leftover process.
pub struct Leftover {
    pub pid: u32,
    pub comm: String,
    pub cmdline: String,
}

/// The watched processes running now.
pub fn snapshot() -> HashSet<u32> {
    watched().into_iter().map(|(pid, _)| pid).collect()
}

/// Watched processes that were not running at `before`, and descend from
/// none of `sandbox` (the sandbox's own daemons and their session children).
pub fn leftovers(before: &HashSet<u32>, sandbox: &[u32]) -> Vec<Leftover> {
    let deadline = Instant::now() + GRACE;
    loop {
        let found: Vec<Leftover> = watched()
            .into_iter()
            .filter(|(pid, _)| !before.contains(pid) && !descends_from(*pid, sandbox))
            .map(|(pid, comm)| Leftover {
                pid,
                comm,
                cmdline: std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                    .unwrap_or_default(),
            })
            .collect();
        if found.is_empty() || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn watched() -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let comm = comm.trim().to_owned();
            WATCHED.contains(&comm.as_str()).then_some((pid, comm))
        })
        .collect()
}

fn descends_from(mut pid: u32, ancestors: &[u32]) -> bool {
    for _ in 0..64 {
        if ancestors.contains(&pid) {
            return true;
        }
        match parent(pid) {
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}
