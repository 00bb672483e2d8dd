//! The guests' network: a network namespace of the sandbox's own.
//!
//! ```text
//!  host namespace                   │ namespace kvm2-sbx (no route out)
//!                                   │
//!  sshd on 127.0.0.1 ─┐             │ libvirtd (its unix socket is in the run dir)
//!  virsh, tests ──────┴─▶ libvirt's │   │ creates taps vnetN for domains' NICs
//!                         socket    │   ▼
//!                                   │ bridge kvm2-sbx0 10.213.7.1/24 ◀── guests
//!                                   │   dnsmasq: DHCP .100-.199, DNS, no upstream
//!                                   │   upstream HTTPS :443 (python3 ssl + http.server)
//! ```
//!
//! `start` creates the namespace (loopback up, the bridge with the gateway
//! address, forwarding off, no other interface, no default route), a CA of
//! its own and a certificate for the upstream signed by it, dnsmasq serving DHCP
//! on the bridge (leases file in the run dir, `--no-resolv`: no upstream
//! DNS), and the upstream HTTPS server. The sandbox then starts libvirtd
//! inside the namespace ([`command`]), so the taps it creates for domains'
//! NICs attach to the bridge here, while its unix socket stays on the
//! filesystem where the host-side sshd forwards to it. `remove` stops what
//! is left inside the namespace (QEMU processes) and deletes it, which takes
//! the bridge and taps with it.
//!
//! Address plan for 10.213.7.0/24 (a private /24 unlikely to clash with a
//! real network; it never leaves the namespace anyway): `.1` the bridge
//! (gateway, DHCP, DNS, upstream :443); `.100`–`.199` DHCP; `.2`–`.99` and
//! `.200`–`.254` free for addresses tests assign themselves.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sandbox_kit::GuestNet;

use crate::util::wait_pid_file;
use crate::util::{cmd, output, read};
use sandbox_kit::pki::{self, CertPair, Usage};

/// The namespace's name (`ip netns`): ours by its `kvm2-` prefix.
pub const NETNS: &str = "kvm2-sbx";
/// The guests' bridge inside the namespace.
const BRIDGE: &str = "kvm2-sbx0";
const NETWORK: Ipv4Addr = Ipv4Addr::new(10, 213, 7, 0);
const PREFIX_LEN: u8 = 24;
const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 213, 7, 1);
/// The bridge's own MAC (locally administered), set once so it never
/// follows its ports' as taps come and go: guests' ARP entries for the
/// gateway stay right.
const BRIDGE_MAC: &str = "02:6b:76:32:07:01";
const DHCP_FIRST: Ipv4Addr = Ipv4Addr::new(10, 213, 7, 100);
const DHCP_LAST: Ipv4Addr = Ipv4Addr::new(10, 213, 7, 199);
const LEASE_TIME: &str = "1h";
const UPSTREAM_PORT: u16 = 443;
/// The DNS domain dnsmasq answers for (`.test` is reserved: RFC 6761).
const SANDBOX_DOMAIN: &str = "kvm2-sandbox.test";
const UPSTREAM_NAME: &str = "upstream.kvm2-sandbox.test";
const UPSTREAM_BODY: &str = "kvm2-sandbox upstream: reached\n";
const UPSTREAM_SCRIPT: &str = include_str!("upstream_https.py");
const PYTHON: &str = "/usr/bin/python3";
/// How long processes left in the namespace get after SIGTERM, and again
/// after SIGKILL.
const STOP_BUDGET: Duration = Duration::from_secs(10);

/// The host's end of the link [`link_host`] makes, and its address.
const HOST_LINK: &str = "kvm2-sbx-h";
const HOST_LINK_PEER: &str = "kvm2-sbx-n";
const HOST_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 213, 7, 2);

/// Joins the host to the guests' bridge with a veth pair: the host gets
/// `10.213.7.2/24` (its route to the guests comes with the address), so a
/// host-network pod — the operator's, in the demo — reaches guests as an
/// operator on a real host network does, without entering the namespace.
/// Nothing is forwarded through it (forwarding off on the host's end, and
/// already off inside), so the guests still have no way out. Idempotent;
/// the pair goes when the namespace is deleted.
pub fn link_host() -> Result<()> {
    if Path::new("/sys/class/net").join(HOST_LINK).exists() {
        return Ok(());
    }
    read(cmd(
        "ip",
        [
            "link",
            "add",
            HOST_LINK,
            "type",
            "veth",
            "peer",
            "name",
            HOST_LINK_PEER,
            "netns",
            NETNS,
        ],
    ))?;
    read(cmd(
        "ip",
        [
            "-n",
            NETNS,
            "link",
            "set",
            HOST_LINK_PEER,
            "master",
            BRIDGE,
            "up",
        ],
    ))?;
    let forwarding = format!("/proc/sys/net/ipv4/conf/{HOST_LINK}/forwarding");
    std::fs::write(&forwarding, "0").with_context(|| format!("cannot write {forwarding}"))?;
    read(cmd(
        "ip",
        [
            "address",
            "add",
            &format!("{HOST_ADDRESS}/{PREFIX_LEN}"),
            "dev",
            HOST_LINK,
        ],
    ))?;
    read(cmd("ip", ["link", "set", HOST_LINK, "up"]))?;
    Ok(())
}

/// Creates the namespace and starts dnsmasq and the upstream server in it,
/// pushing their (comm, pid) onto `processes`. A namespace of the same name
/// left by a killed run is removed first: the name is ours.
pub fn start(dir: &Path, processes: &mut Vec<(String, u32)>) -> Result<GuestNet> {
    remove();
    let net_dir = dir.join("guest-net");
    std::fs::create_dir_all(&net_dir)
        .with_context(|| format!("cannot create {}", net_dir.display()))?;
    create_namespace()?;
    let (ca, upstream) = certificates(&net_dir)?;
    let leases_file = net_dir.join("dnsmasq.leases");
    processes.push(("dnsmasq".into(), start_dnsmasq(&net_dir, &leases_file)?));
    processes.push(("python3".into(), start_upstream(&net_dir, &upstream)?));
    let net = GuestNet {
        netns: NETNS.into(),
        bridge: BRIDGE.into(),
        gateway: GATEWAY,
        network: NETWORK,
        prefix_len: PREFIX_LEN,
        dhcp_first: DHCP_FIRST,
        dhcp_last: DHCP_LAST,
        leases_file,
        upstream: SocketAddr::from((GATEWAY, UPSTREAM_PORT)),
        upstream_name: UPSTREAM_NAME.into(),
        upstream_body: UPSTREAM_BODY.into(),
        ca_cert: ca.cert,
    };
    check_upstream(&net)?;
    Ok(net)
}

/// A command that runs `program` inside the guest network namespace, and
/// only there: `nsenter --net` keeps the host's mount namespace (where
/// `ip netns exec` makes one of its own to remount `/sys`), so the daemons
/// the sandbox starts see every mount made after they start — a test's
/// pool on a tmpfs it mounts, for one. Their `/sys/class/net` describes the
/// host's interfaces; libvirtd makes and attaches taps with ioctls and
/// netlink, which act in the namespace.
pub fn command(program: &str) -> Command {
    let mut c = Command::new("nsenter");
    c.arg(format!(
        "--net={}",
        sandbox_kit::netns_path(NETNS).display()
    ))
    .arg("--")
    .arg(program);
    c
}

/// Whether the namespace exists.
pub fn present() -> bool {
    sandbox_kit::netns_path(NETNS).exists()
}

/// Stops every process still inside the namespace (what the sandbox's
/// libvirtd started: QEMU) and deletes the namespace, its bridge and taps
/// with it. Bounded; reports what it could not do.
pub fn remove() {
    if Path::new("/sys/class/net").join(HOST_LINK).exists() {
        let _ = output(cmd("ip", ["link", "delete", HOST_LINK]));
    }
    if !present() {
        return;
    }
    let left = pids_inside();
    if !left.is_empty() {
        for pid in &left {
            eprintln!(
                "sandbox: stopping {} (pid {pid}) left in network namespace {NETNS}",
                comm(*pid)
            );
        }
        signal_all(&left, "-TERM");
        if !wait_empty(STOP_BUDGET) {
            let still = pids_inside();
            eprintln!("sandbox: {still:?} ignored SIGTERM for {STOP_BUDGET:?}; killing them");
            signal_all(&still, "-KILL");
            if !wait_empty(STOP_BUDGET) {
                eprintln!(
                    "sandbox: processes {:?} are still in {NETNS}; it goes away with them",
                    pids_inside()
                );
            }
        }
    }
    match output(cmd("ip", ["netns", "delete", NETNS])) {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!(
            "sandbox: cannot delete network namespace {NETNS}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => eprintln!("sandbox: cannot delete network namespace {NETNS}: {e:#}"),
    }
}

/// Lines for `sandbox status`.
pub fn print_status(net: &GuestNet) {
    let state = if present() { "present" } else { "MISSING" };
    println!("  netns     {} ({state})", net.netns);
    println!(
        "  bridge    {} {}/{} (gateway)",
        net.bridge, net.gateway, net.prefix_len
    );
    println!(
        "  dhcp      {}-{} leases {}",
        net.dhcp_first,
        net.dhcp_last,
        net.leases_file.display()
    );
    println!(
        "  upstream  https://{} ({}), CA {}",
        net.upstream,
        net.upstream_name,
        net.ca_cert.display()
    );
}

fn create_namespace() -> Result<()> {
    read(cmd("ip", ["netns", "add", NETNS]))?;
    let ip = |args: &[&str]| {
        let mut c = cmd("ip", ["-n", NETNS]);
        c.args(args);
        read(c)
    };
    ip(&["link", "set", "lo", "up"])?;
    ip(&[
        "link",
        "add",
        BRIDGE,
        "address",
        BRIDGE_MAC,
        "type",
        "bridge",
        "stp_state",
        "0",
        "forward_delay",
        "0",
    ])?;
    ip(&[
        "address",
        "add",
        &format!("{GATEWAY}/{PREFIX_LEN}"),
        "dev",
        BRIDGE,
    ])?;
    ip(&["link", "set", BRIDGE, "up"])?;
    // A fresh namespace may inherit the host's IPv4 forwarding setting.
    for knob in [
        "/proc/sys/net/ipv4/ip_forward",
        "/proc/sys/net/ipv6/conf/all/forwarding",
    ] {
        sandbox_kit::in_netns(NETNS, move || std::fs::write(knob, "0"))
            .with_context(|| format!("cannot turn off {knob} in {NETNS}"))?;
    }
    Ok(())
}

/// A CA of the guest network's own and the upstream's certificate signed by
/// it, for its name and its address ([`pki`]: OpenSSL, ECDSA P-256).
fn certificates(dir: &Path) -> Result<(CertPair, CertPair)> {
    let ca = pki::new_ca(dir, "kvm2-guest-net-ca")?;
    let names = [format!("DNS:{UPSTREAM_NAME}"), format!("IP:{GATEWAY}")];
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let upstream = pki::issue(
        &ca,
        dir,
        "upstream",
        &format!("/CN={UPSTREAM_NAME}"),
        Usage::Server(&names),
    )?;
    Ok((ca, upstream))
}

fn start_dnsmasq(dir: &Path, leases_file: &Path) -> Result<u32> {
    let pid_file = dir.join("dnsmasq.pid");
    let mut c = command("/usr/sbin/dnsmasq");
    c.args([
        // No configuration file, no /etc/hosts, no upstream servers.
        "--conf-file=/dev/null",
        "--no-hosts",
        "--no-resolv",
        "--no-poll",
        "--user=root",
        "--group=root",
        &format!("--interface={BRIDGE}"),
        "--except-interface=lo",
        "--bind-interfaces",
        &format!("--host-record={UPSTREAM_NAME},{GATEWAY}"),
        // Names in the sandbox's domain are answered here, never forwarded.
        &format!("--local=/{SANDBOX_DOMAIN}/"),
        &format!("--dhcp-range={DHCP_FIRST},{DHCP_LAST},255.255.255.0,{LEASE_TIME}"),
        "--dhcp-authoritative",
        // Leases at once: every address in the range is ours to hand out.
        "--no-ping",
        "--log-dhcp",
    ])
    .arg(format!("--dhcp-leasefile={}", leases_file.display()))
    .arg(format!("--pid-file={}", pid_file.display()))
    .arg(format!(
        "--log-facility={}",
        dir.join("dnsmasq.log").display()
    ));
    // dnsmasq forks into the background; its parent exits once it serves.
    read(c)?;
    wait_pid_file(&pid_file)
}

fn start_upstream(dir: &Path, upstream: &CertPair) -> Result<u32> {
    let script = dir.join("upstream_https.py");
    std::fs::write(&script, UPSTREAM_SCRIPT)?;
    let pid_file = dir.join("upstream.pid");
    let log = dir.join("upstream.log");
    let log_file =
        File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    // `setsid -f` forks it into a session of its own: no terminal signal
    // (Ctrl-C in `cargo xtask test`) reaches it, and it outlives `up`.
    let mut c = command("setsid");
    c.args(["-f", PYTHON, "-I", "-u"])
        .arg(&script)
        .args(["--bind", &GATEWAY.to_string()])
        .args(["--port", &UPSTREAM_PORT.to_string()])
        .arg("--cert")
        .arg(&upstream.cert)
        .arg("--key")
        .arg(&upstream.key)
        .args(["--body", UPSTREAM_BODY])
        .arg("--pid-file")
        .arg(&pid_file)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file);
    let status = c.status().context("cannot run setsid python3")?;
    if !status.success() {
        bail!(
            "the upstream server did not start ({status}): see {}",
            log.display()
        );
    }
    // It writes its pid file once it listens.
    wait_pid_file(&pid_file).with_context(|| {
        format!(
            "the upstream server did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default().trim()
        )
    })
}

/// One real HTTPS request from inside the namespace, verified with the CA,
/// by name and by address.
fn check_upstream(net: &GuestNet) -> Result<()> {
    for url in [
        format!("https://{}/", net.upstream_name),
        format!("https://{}/", net.upstream),
    ] {
        let mut c = command("curl");
        c.args(["--silent", "--show-error", "--max-time", "10"])
            .arg("--resolve")
            .arg(format!(
                "{}:{}:{}",
                net.upstream_name, UPSTREAM_PORT, net.gateway
            ))
            .arg("--cacert")
            .arg(&net.ca_cert)
            .arg(&url);
        let body = read(c)?;
        if body != net.upstream_body {
            bail!("the upstream server at {url} answered {body:?}");
        }
    }
    Ok(())
}

/// Pids of the processes inside the namespace (zombies excluded: they have
/// left every namespace).
fn pids_inside() -> Vec<u32> {
    read(cmd("ip", ["netns", "pids", NETNS]))
        .map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn wait_empty(budget: Duration) -> bool {
    let deadline = Instant::now() + budget;
    while Instant::now() < deadline {
        if pids_inside().is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    pids_inside().is_empty()
}

fn signal_all(pids: &[u32], signal: &str) {
    let mut c = cmd("kill", [signal]);
    c.args(pids.iter().map(u32::to_string));
    let _ = output(c);
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}
