//! Finds daemons and network namespaces that tests started and left behind.
//!
//! Tests may start daemons of their own (an sshd with another config, a
//! private libvirtd, an `ssh -L` forward, a QEMU domain, a throwaway network
//! namespace for a DHCP client); each must stop or remove them. After the
//! tests, any such process that is not part of the sandbox, and any
//! `kvm2-*` network namespace that was not there before, the sandbox's
//! local route when it was absent before, is reported. Taken before a
//! sandbox starts and read after its `down`, it checks that `down` removed
//! everything, `KUBE-` packet-filter chains (the node's kube-proxy's) that
//! were not there before included; those are not checked while a sandbox
//! runs (see [`leftovers`]).

use std::collections::HashSet;
use std::fmt;
use std::time::{Duration, Instant};

/// Program names (as in `/proc/PID/comm`, at most 15 bytes) that tests must
/// never leave behind.
const WATCHED: &[&str] = &[
    "sshd",
    "libvirtd",
    "virtlogd",
    "ssh",
    "dnsmasq",
    "qemu-system-x86",
    "etcd",
    "kube-apiserver",
    // The sandbox's node (demo): comm is cut at 15 bytes.
    "kube-controller",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim",
    "pause",
    "operator",
    // The alert rules' and dashboard's test (testkit::prometheus).
    "prometheus",
];
/// Network namespaces (`ip netns` names) with this prefix are the project's.
const NETNS_PREFIX: &str = "kvm2-";
const NETNS_DIR: &str = "/run/netns";
/// How long a process that is already exiting gets before it counts.
const GRACE: Duration = Duration::from_secs(5);

/// What ran before the tests.
pub struct Snapshot {
    pids: HashSet<u32>,
    namespaces: HashSet<String>,
    /// Whether the local range's route was there.
    local_route: bool,
    /// The `KUBE-` chains there (`family table chain`).
    chains: HashSet<String>,
}

/// Something the tests left behind.
pub enum Leftover {
    /// A watched process.
    Process {
        pid: u32,
        comm: String,
        cmdline: String,
    },
    /// A `kvm2-*` network namespace.
    Netns(String),
    /// The local range's route (`ip route … table local`).
    Route(&'static str),
    /// A `KUBE-` chain (`family table chain`).
    Chain(String),
}

impl fmt::Display for Leftover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Process { pid, comm, cmdline } => {
                write!(f, "a process running: {comm} (pid {pid}): {cmdline}")
            }
            Self::Netns(name) => write!(f, "a network namespace: {name} ({NETNS_DIR}/{name})"),
            Self::Route(cidr) => write!(f, "a route: local {cidr} dev lo table local"),
            Self::Chain(chain) => write!(f, "a packet-filter chain: {chain}"),
        }
    }
}

/// The watched processes and the project's network namespaces present now.
pub fn snapshot() -> Snapshot {
    Snapshot {
        pids: watched().into_iter().map(|(pid, _)| pid).collect(),
        namespaces: namespaces(),
        local_route: super::local_range::present(),
        chains: crate::node::iptables::chains().into_iter().collect(),
    }
}

/// Watched processes that were not running at `before` and descend from
/// none of `sandbox` (the sandbox's own daemons and their session
/// children), `kvm2-*` network namespaces that were not there, the local
/// route when it was not, and, once no sandbox runs (`sandbox` empty),
/// `KUBE-` chains that were not there.
///
/// While a sandbox runs, every `KUBE-` chain is its node's kube-proxy's:
/// which ones exist follows the Services in its API server, on
/// kube-proxy's schedule (a chain appears at a sync after the snapshot,
/// a test's Service's chains go at a sync after the test), and `down`
/// removes them all; so they are checked after `down`, against a
/// snapshot taken before the sandbox started.
pub fn leftovers(before: &Snapshot, sandbox: &[u32]) -> Vec<Leftover> {
    let deadline = Instant::now() + GRACE;
    loop {
        let mut found: Vec<Leftover> = watched()
            .into_iter()
            .filter(|(pid, _)| !before.pids.contains(pid) && !descends_from(*pid, sandbox))
            .map(|(pid, comm)| Leftover::Process {
                pid,
                comm,
                cmdline: std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                    .unwrap_or_default(),
            })
            .collect();
        let mut new_namespaces: Vec<String> = namespaces()
            .difference(&before.namespaces)
            .cloned()
            .collect();
        new_namespaces.sort();
        found.extend(new_namespaces.into_iter().map(Leftover::Netns));
        if !before.local_route && super::local_range::present() {
            found.push(Leftover::Route(super::local_range::CIDR));
        }
        if sandbox.is_empty() {
            found.extend(
                crate::node::iptables::chains()
                    .into_iter()
                    .filter(|c| !before.chains.contains(c))
                    .map(Leftover::Chain),
            );
        }
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
            (WATCHED.contains(&comm.as_str()) && !zombie(pid)).then_some((pid, comm))
        })
        .collect()
}

/// An exited process its parent has not reaped yet runs nothing.
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|i| stat.get(i + 1..))
            .and_then(|rest| rest.split_whitespace().next())
            == Some("Z")
    })
}

/// Names of the project's network namespaces (`ip netns add` pins each
/// under [`NETNS_DIR`]).
fn namespaces() -> HashSet<String> {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return HashSet::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|name| name.starts_with(NETNS_PREFIX))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The route counts as left over exactly when it is there now and was
    /// not before (the sandbox is up while the tests run: it is there).
    #[test]
    fn a_route_absent_before_and_present_now_is_left_over() {
        let now = snapshot();
        let before = Snapshot {
            local_route: false,
            ..snapshot()
        };
        let routes = |found: Vec<Leftover>| {
            found
                .iter()
                .filter(|l| matches!(l, Leftover::Route(_)))
                .count()
        };
        assert_eq!(
            routes(leftovers(&before, &[])),
            usize::from(now.local_route),
            "route present now: {}",
            now.local_route
        );
        let had_it = Snapshot {
            local_route: true,
            ..snapshot()
        };
        assert_eq!(routes(leftovers(&had_it, &[])), 0);
    }

    /// A `KUBE-` chain made after the snapshot is reported once no sandbox
    /// runs; one present before is not, nor one made while a sandbox runs
    /// (its kube-proxy's, seen after the snapshot on its own schedule; a
    /// CI run flagged two). (A chain of the test's own, in the filter
    /// table.)
    #[test]
    fn a_kube_chain_made_after_the_snapshot_is_left_over() {
        if crate::util::output(crate::util::cmd("iptables", ["--version"])).is_err() {
            eprintln!("no iptables here: `cargo xtask setup` installs it");
            return;
        }
        let chain = format!("KUBE-XTASK-LEAK-{}", std::process::id());
        let before = snapshot();
        let iptables = |args: &[&str]| {
            let out = crate::util::output(crate::util::cmd("iptables", args)).unwrap();
            assert!(out.status.success(), "iptables {args:?}: {out:?}");
        };
        iptables(&["-w", "-N", &chain]);
        let ours = format!("iptables-save filter {chain}");
        let found: Vec<String> = leftovers(&before, &[])
            .into_iter()
            .filter_map(|l| match l {
                Leftover::Chain(c) => Some(c),
                _ => None,
            })
            .collect();
        let after = snapshot();
        let again = leftovers(&after, &[]);
        // A running sandbox's node owns the chains: not counted until `down`.
        let while_up = leftovers(&before, &[std::process::id()]);
        iptables(&["-w", "-X", &chain]);
        assert!(found.contains(&ours), "{found:?}");
        assert!(
            !while_up.iter().any(|l| l.to_string().contains(&chain)),
            "a running sandbox's chains are its node's"
        );
        assert!(after.chains.contains(&ours));
        assert!(
            !again.iter().any(|l| l.to_string().contains(&chain)),
            "present at the snapshot, so not left over"
        );
    }
}
