//! The packet-filter rules kube-proxy writes on the node: found by their
//! chains' `KUBE-` prefix (kube-proxy's, and the kubelet's were it to make
//! any), and removed at `sandbox down` once kube-proxy has stopped (it
//! would write them again). The leak check reads [`chains`] after `down`.
//!
//! Both address families and every table are read with `iptables-save` /
//! `ip6tables-save`; removal is one `iptables-restore --noflush`
//! transaction per family: the jumps into a `KUBE-` chain from the tables'
//! own chains deleted, then every `KUBE-` chain flushed, then deleted.

use std::io::Write;
use std::process::Stdio;

use anyhow::{Context, Result, bail};

use crate::util::{cmd, output};

/// The prefix of the chains kube-proxy (and the kubelet) make.
const PREFIX: &str = "KUBE-";

/// An address family's tools.
struct Family {
    save: &'static str,
    restore: &'static str,
}

const FAMILIES: [Family; 2] = [
    Family {
        save: "iptables-save",
        restore: "iptables-restore",
    },
    Family {
        save: "ip6tables-save",
        restore: "ip6tables-restore",
    },
];

/// Every `KUBE-` chain now, as `family table chain` (empty when iptables
/// is not installed).
pub fn chains() -> Vec<String> {
    FAMILIES
        .iter()
        .filter_map(|f| Some((f.save, save(f)?)))
        .flat_map(|(family, text)| {
            kube_chains(&text)
                .into_iter()
                .map(move |(table, chain)| format!("{family} {table} {chain}"))
        })
        .collect()
}

/// Removes every `KUBE-` chain and every jump into one, in both families.
pub fn remove() -> Result<()> {
    for family in &FAMILIES {
        let Some(text) = save(family) else { continue };
        let script = removal(&text);
        if script.is_empty() {
            continue;
        }
        let mut child = cmd(family.restore, ["--noflush", "--wait"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {}", family.restore))?;
        child
            .stdin
            .take()
            .context("no stdin")?
            .write_all(script.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "{} refused the removal of kube-proxy's rules: {}",
                family.restore,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// `family.save`'s output, or `None` when it is not installed or fails.
fn save(family: &Family) -> Option<String> {
    let out = output(cmd(family.save, [] as [&str; 0])).ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `(table, chain)` pairs of `KUBE-` chains in an `iptables-save` text.
fn kube_chains(save: &str) -> Vec<(String, String)> {
    let mut table = "";
    let mut found = Vec::new();
    for line in save.lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.trim();
        } else if let Some(chain) = kube_chain(line) {
            found.push((table.to_owned(), chain.to_owned()));
        }
    }
    found
}

/// The chain a `:CHAIN POLICY [counters]` line declares, if it is a
/// `KUBE-` chain.
fn kube_chain(line: &str) -> Option<&str> {
    let chain = line.strip_prefix(':')?.split_whitespace().next()?;
    chain.starts_with(PREFIX).then_some(chain)
}

/// The `iptables-restore --noflush` input removing the `KUBE-` chains of
/// an `iptables-save` text: per table, the rules of other chains that
/// jump into one deleted (`-A` turned into `-D`, the rule as saved), then
/// each `KUBE-` chain flushed, then deleted (a chain cannot go while a
/// rule refers to it). Empty when there is nothing to remove.
fn removal(save: &str) -> String {
    let mut script = String::new();
    let mut table = "";
    let mut deletes = Vec::new();
    let mut chains = Vec::new();
    let mut flush = |table: &str, deletes: &mut Vec<String>, chains: &mut Vec<String>| {
        if deletes.is_empty() && chains.is_empty() {
            return;
        }
        script.push_str(&format!("*{table}\n"));
        for d in deletes.drain(..) {
            script.push_str(&d);
            script.push('\n');
        }
        for c in chains.iter() {
            script.push_str(&format!("-F {c}\n"));
        }
        for c in chains.drain(..) {
            script.push_str(&format!("-X {c}\n"));
        }
        script.push_str("COMMIT\n");
    };
    for line in save.lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.trim();
        } else if line.trim() == "COMMIT" {
            flush(table, &mut deletes, &mut chains);
        } else if let Some(chain) = kube_chain(line) {
            chains.push(chain.to_owned());
        } else if let Some(rule) = line.strip_prefix("-A ") {
            let from = rule.split_whitespace().next().unwrap_or_default();
            let jumps_in = rule
                .split_whitespace()
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| (w[0] == "-j" || w[0] == "-g") && w[1].starts_with(PREFIX));
            if !from.starts_with(PREFIX) && jumps_in {
                deletes.push(format!("-D {rule}"));
            }
        }
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What kube-proxy 1.20 leaves in a table (abridged), beside a rule
    /// and a chain of somebody else's.
    const SAVED: &str = "# Generated by iptables-save v1.8.9 (nf_tables)
*mangle
:PREROUTING ACCEPT [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-ABC - [0:0]
:OTHER - [0:0]
-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-A POSTROUTING -o eth0 -j MASQUERADE
-A OTHER -j ACCEPT
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -j KUBE-SVC-ABC
COMMIT
*filter
:INPUT ACCEPT [0:0]
COMMIT
";

    #[test]
    fn chains_are_found_by_prefix_in_every_table() {
        assert_eq!(
            kube_chains(SAVED),
            [
                ("mangle".to_owned(), "KUBE-PROXY-CANARY".to_owned()),
                ("nat".to_owned(), "KUBE-SERVICES".to_owned()),
                ("nat".to_owned(), "KUBE-SVC-ABC".to_owned()),
            ]
        );
    }

    /// Jumps from the tables' own chains go first (as saved, quotes kept),
    /// then every KUBE- chain is flushed and deleted; other rules and
    /// chains stay; a table with nothing of kube-proxy's is not named.
    #[test]
    fn the_removal_deletes_jumps_then_flushes_then_deletes_chains() {
        assert_eq!(
            removal(SAVED),
            "*mangle
-F KUBE-PROXY-CANARY
-X KUBE-PROXY-CANARY
COMMIT
*nat
-D PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-D OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES
-F KUBE-SERVICES
-F KUBE-SVC-ABC
-X KUBE-SERVICES
-X KUBE-SVC-ABC
COMMIT
"
        );
        assert_eq!(removal("*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n"), "");
    }
}
