//! Processes this tool starts and stops: liveness by pid and name, a
//! bounded stop, pid files, readiness polls, free ports.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::command::{cmd, output};

/// How long a daemon gets to write its pid file or answer.
pub const READY_BUDGET: Duration = Duration::from_secs(15);
/// How long a process gets between SIGTERM and SIGKILL.
const STOP_BUDGET: Duration = Duration::from_secs(10);

/// Whether `pid` runs and is the program we started (guards against pid
/// reuse). A zombie (exited, not yet reaped by its parent) does not run.
pub fn alive(pid: u32, name: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`: comm may hold spaces and parentheses.
    let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
        return false;
    };
    let comm = stat.get(open + 1..close).unwrap_or("");
    let state = stat
        .get(close + 1..)
        .unwrap_or("")
        .split_whitespace()
        .next();
    comm == name && state != Some("Z")
}

/// SIGTERM, a bounded wait, then SIGKILL.
pub fn stop(name: &str, pid: u32) {
    if !alive(pid, name) {
        return;
    }
    let _ = output(cmd("kill", ["-TERM", &pid.to_string()]));
    let deadline = Instant::now() + STOP_BUDGET;
    while alive(pid, name) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(pid, name) {
        eprintln!("sandbox: {name} ({pid}) ignored SIGTERM for {STOP_BUDGET:?}; killing it");
        let _ = output(cmd("kill", ["-KILL", &pid.to_string()]));
    }
}

/// Waits (bounded) for a daemon's pid file and returns the pid in it.
pub fn wait_pid_file(path: &Path) -> Result<u32> {
    let mut pid = None;
    wait_until_within(&path.display().to_string(), READY_BUDGET, || {
        pid = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok());
        Ok(pid.is_some())
    })?;
    pid.context("pid file vanished")
}

/// Polls `ready` every 25 ms until it answers true or `budget` runs out.
pub fn wait_until_within(
    what: &str,
    budget: Duration,
    mut ready: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + budget;
    loop {
        if ready()? {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{what} not ready within {budget:?}");
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}
