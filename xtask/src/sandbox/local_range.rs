//! A /24 of addresses that are all this machine's: one `local` route in
//! the kernel's local table (`ip route add local CIDR dev lo table local`).
//!
//! Tests that stand in for many proxies on one machine (the operator's
//! instant provider) need distinct addresses that a Kubernetes API server
//! accepts in Endpoints — not loopback (127.0.0.0/8), link-local or
//! multicast, which it refuses. Every address of the range reaches a socket
//! bound to it, or to `0.0.0.0`, on this machine and goes nowhere else. The
//! route is the sandbox's: `down` removes it.

use anyhow::Result;

use crate::util::{cmd, output, read};

/// The range (apart from the sandbox's other networks: the guest network
/// 10.213.7.0/24, the hosts' links 10.213.20.0/24).
pub const CIDR: &str = "10.213.30.0/24";

fn route(verb: &str) -> std::process::Command {
    cmd(
        "ip",
        ["route", verb, "local", CIDR, "dev", "lo", "table", "local"],
    )
}

/// Adds the route (replacing one a crashed run left).
pub fn add() -> Result<String> {
    read(route("replace"))?;
    Ok(CIDR.to_owned())
}

/// Removes the route, if present.
pub fn remove() {
    let _ = output(route("delete"));
}

/// Whether the route is present.
pub fn present() -> bool {
    output(cmd("ip", ["route", "show", "table", "local", CIDR]))
        .map(|o| !String::from_utf8_lossy(&o.stdout).trim().is_empty())
        .unwrap_or(false)
}
