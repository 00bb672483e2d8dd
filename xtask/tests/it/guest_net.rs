//! The guests' network namespace is real: libvirtd runs inside it and puts
//! domains' taps on its bridge, dnsmasq leases addresses in the fixed range
//! to real DHCP clients (busybox's udhcpc, a QEMU guest's iPXE firmware),
//! the upstream answers HTTPS verified with the sandbox CA, and nothing
//! outside the namespace is reachable from it.
//!
//! These need `cargo xtask test` (or `cargo xtask sandbox up` and the
//! exported variable); without the sandbox they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use testkit::virsh::Virsh;
use testkit::{Descriptor, GuestNet};

fn run(mut c: Command) -> Output {
    c.stdin(Stdio::null()).output().expect("command runs")
}

fn ok(c: Command) -> String {
    let what = format!("{c:?}");
    let out = run(c);
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ip(netns: &str, args: &[&str]) -> String {
    let mut c = Command::new("ip");
    c.args(["-n", netns]).args(args);
    ok(c)
}

/// (device, inode) of a namespace file: equal for the same namespace.
fn ns_id(path: impl AsRef<Path>) -> (u64, u64) {
    let m = std::fs::metadata(path.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()));
    (m.dev(), m.ino())
}

/// A short name no other test (or run) uses at the same time.
fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let n = N.fetch_add(1, Ordering::Relaxed);
    // Interface names hold at most 15 bytes.
    format!(
        "{prefix}{:x}",
        (std::process::id() ^ nanos ^ n.rotate_left(16)) & 0xff_ffff
    )
}

fn random_mac() -> String {
    let mut b = [0u8; 3];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    format!("52:54:00:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2])
}

/// Polls the leases file until it holds a lease for `mac`.
fn lease_for(net: &GuestNet, mac: &str, budget: Duration) -> Option<Ipv4Addr> {
    let deadline = Instant::now() + budget;
    loop {
        if let Some(l) = net.leases().unwrap().into_iter().find(|l| l.mac == mac) {
            return Some(l.ip);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn descriptor_describes_the_guest_network() {
    let sandbox = Descriptor::require();
    let net = &sandbox.guest_net;
    assert_eq!(
        sandbox.bridge, net.bridge,
        "domains attach to the guests' bridge"
    );
    assert!(net.netns.starts_with("kvm2-"), "{}", net.netns);
    assert!(net.contains(net.gateway));
    assert!(net.contains(net.dhcp_first) && net.contains(net.dhcp_last));
    assert!(!net.in_dhcp_range(net.gateway));
    assert_eq!(net.upstream, SocketAddr::from((net.gateway, 443)));
    assert!(net.leases_file.starts_with(&sandbox.state_dir));
    assert!(net.ca_cert.exists(), "{}", net.ca_cert.display());
    // The gateway address is on the bridge inside the namespace.
    let addrs = ip(
        &net.netns,
        &["-4", "-o", "address", "show", "dev", &net.bridge],
    );
    assert!(
        addrs.contains(&format!("{}/{}", net.gateway, net.prefix_len)),
        "{addrs}"
    );
}

#[test]
fn libvirtd_runs_inside_the_guest_namespace() {
    let sandbox = Descriptor::require();
    let pid = std::fs::read_to_string(&sandbox.libvirt.pid_file).unwrap();
    let ns = ns_id(testkit::netns_path(&sandbox.guest_net.netns));
    assert_eq!(ns_id(format!("/proc/{}/ns/net", pid.trim())), ns);
    assert_ne!(
        ns_id("/proc/self/ns/net"),
        ns,
        "tests run in the host namespace"
    );
    // Only the network namespace differs: libvirtd sees the mounts tests
    // make (a pool on a tmpfs a test mounts after `sandbox up`).
    assert_eq!(
        ns_id(format!("/proc/{}/ns/mnt", pid.trim())),
        ns_id("/proc/self/ns/mnt"),
        "libvirtd runs in a mount namespace of its own"
    );
}

/// Destroys and undefines a domain when dropped, even if the test panics.
struct Domain {
    uri: String,
    name: String,
}

impl Drop for Domain {
    fn drop(&mut self) {
        let virsh = Virsh::new(self.uri.as_str());
        let _ = virsh.run(&["destroy", &self.name]);
        let _ = virsh.run(&["undefine", &self.name]);
    }
}

/// A QEMU domain without a disk: its firmware's iPXE is a real DHCP client
/// on the NIC libvirtd attached to the namespace's bridge.
#[test]
fn domain_nic_joins_the_bridge_in_the_namespace_and_gets_a_lease() {
    let sandbox = Descriptor::require();
    let net = &sandbox.guest_net;
    let uri = sandbox.virsh_uri(&sandbox.libvirt.qemu_uri);
    let name = format!("gn-{}", unique("dom"));
    let mac = random_mac();
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("domain.xml");
    std::fs::write(
        &xml,
        format!(
            "<domain type='qemu'><name>{name}</name><memory unit='MiB'>64</memory>\
             <vcpu>1</vcpu><os><type arch='x86_64'>hvm</type><boot dev='network'/></os>\
             <devices><serial type='pty'/>\
             <interface type='bridge'><mac address='{mac}'/>\
             <source bridge='{bridge}'/><model type='virtio'/></interface>\
             </devices></domain>",
            bridge = sandbox.bridge
        ),
    )
    .unwrap();
    let virsh = |args: &[&str]| Virsh::new(uri.as_str()).ok(args);
    let _domain = Domain {
        uri: uri.clone(),
        name: name.clone(),
    };
    virsh(&["define", xml.to_str().unwrap()]);
    virsh(&["start", &name]);

    // QEMU runs inside the namespace.
    let pid = std::fs::read_to_string(format!("/run/libvirt/qemu/{name}.pid")).unwrap();
    assert_eq!(
        ns_id(format!("/proc/{}/ns/net", pid.trim())),
        ns_id(testkit::netns_path(&net.netns))
    );
    // Its tap is a port of the namespace's bridge, and absent from the host.
    let iflist = virsh(&["domiflist", &name]);
    let tap = iflist
        .lines()
        .find(|l| l.contains(&mac))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no interface with {mac}: {iflist}"))
        .to_owned();
    let link = ip(&net.netns, &["-o", "link", "show", "dev", &tap]);
    assert!(
        link.contains(&format!("master {}", net.bridge)),
        "{tap} is not a port of {}: {link}",
        net.bridge
    );
    assert!(
        !Path::new("/sys/class/net").join(&tap).exists(),
        "{tap} is in the host namespace"
    );
    // The guest's firmware leases an address in the range for its MAC.
    let leased = lease_for(net, &mac, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("no lease for {mac} within 120 s"));
    assert!(net.in_dhcp_range(leased), "{leased} is outside the range");
}

/// A throwaway namespace whose veth is a port of the guests' bridge.
struct Client {
    netns: String,
    port: String,
    sandbox_netns: String,
}

impl Client {
    fn new(net: &GuestNet) -> Self {
        let id = unique("");
        let client = Self {
            netns: format!("kvm2-t{id}"),
            port: format!("kvm2p{id}"),
            sandbox_netns: net.netns.clone(),
        };
        ok(cmd("ip", &["netns", "add", &client.netns]));
        ip(
            &net.netns,
            &[
                "link",
                "add",
                &client.port,
                "master",
                &net.bridge,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &client.netns,
            ],
        );
        ip(&net.netns, &["link", "set", &client.port, "up"]);
        ip(&client.netns, &["link", "set", "lo", "up"]);
        ip(&client.netns, &["link", "set", "eth0", "up"]);
        client
    }

    fn mac(&self) -> String {
        let link = ip(&self.netns, &["-o", "link", "show", "dev", "eth0"]);
        let mut words = link.split_whitespace();
        words.find(|w| *w == "link/ether");
        words.next().unwrap().to_ascii_lowercase()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = run(cmd(
            "ip",
            &["-n", &self.sandbox_netns, "link", "del", &self.port],
        ));
        let _ = run(cmd("ip", &["netns", "del", &self.netns]));
    }
}

fn cmd(program: &str, args: &[&str]) -> Command {
    let mut c = Command::new(program);
    c.args(args);
    c
}

#[test]
fn dhcp_leases_an_address_in_range_to_a_client_on_the_bridge() {
    let sandbox = Descriptor::require();
    let net = &sandbox.guest_net;
    let client = Client::new(net);
    let mac = client.mac();
    // busybox's udhcpc: -q quit once leased, -n fail if none; at most 5
    // discovers 2 s apart; the no-op script leaves the interface alone.
    let mut c = testkit::command_in(&client.netns, "timeout");
    c.args(["30", "busybox", "udhcpc", "-f", "-q", "-n", "-i", "eth0"])
        .args(["-t", "5", "-T", "2", "-s", "/bin/true"]);
    let out = run(c);
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "udhcpc got no lease: {said}");
    let offered: Ipv4Addr = said
        .split("lease of ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|ip| ip.parse().ok())
        .unwrap_or_else(|| panic!("no lease in udhcpc's output: {said}"));
    assert!(net.in_dhcp_range(offered), "{offered} is outside the range");
    assert!(
        said.contains(&format!("obtained from {}", net.gateway)),
        "{said}"
    );
    // The leases file, readable by tests, holds it.
    assert_eq!(
        lease_for(net, &mac, Duration::from_secs(10)),
        Some(offered),
        "leases: {:?}",
        net.leases()
    );
}

fn curl(net: &GuestNet, args: &[&str]) -> Output {
    let mut c = net.command("curl");
    c.args(["--silent", "--show-error", "--max-time", "10"])
        .args(args)
        .env_remove("CURL_CA_BUNDLE")
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR");
    run(c)
}

#[test]
fn upstream_answers_https_verified_with_the_sandbox_ca() {
    let sandbox = Descriptor::require();
    let net = &sandbox.guest_net;
    let ca = net.ca_cert.to_str().unwrap();
    let resolve = format!(
        "{}:{}:{}",
        net.upstream_name,
        net.upstream.port(),
        net.gateway
    );
    for url in [
        format!("https://{}/", net.upstream),
        format!("https://{}/anything", net.upstream_name),
    ] {
        let out = curl(net, &["--cacert", ca, "--resolve", &resolve, &url]);
        assert!(
            out.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), net.upstream_body);
    }
    // Without the sandbox CA the certificate is refused (curl: 60).
    let out = curl(net, &[&format!("https://{}/", net.upstream)]);
    assert_eq!(out.status.code(), Some(60), "{out:?}");
    // The namespace's DNS (what DHCP announces) knows the upstream's name.
    let mut c = net.command("busybox");
    c.args(["nslookup", &net.upstream_name, &net.gateway.to_string()]);
    let answer = ok(c);
    assert!(
        answer
            .lines()
            .skip_while(|l| !l.contains(&net.upstream_name))
            .any(|l| l.contains(&net.gateway.to_string())),
        "{answer}"
    );
}

#[test]
fn connect_in_opens_sockets_inside_the_namespace() {
    let sandbox = Descriptor::require();
    let net = &sandbox.guest_net;
    let mut upstream = net.connect(net.upstream, Duration::from_secs(5)).unwrap();
    // The source address is the gateway's: this socket is in the namespace.
    assert_eq!(
        upstream.local_addr().unwrap().ip(),
        std::net::IpAddr::V4(net.gateway)
    );
    // The stream keeps working from this thread, after the joining thread
    // ended: the server reads a plain-HTTP request, refuses it as a TLS
    // handshake and closes the connection (EOF or a reset, not a timeout).
    upstream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    upstream.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut reply = Vec::new();
    if let Err(e) = upstream.read_to_end(&mut reply) {
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    }

    // The namespace has a loopback of its own.
    let listener = testkit::in_netns(&net.netns, || TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let inside = SocketAddr::from(([127, 0, 0, 1], port));
    let stream = testkit::connect_in(&net.netns, inside, Duration::from_secs(5)).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    assert_eq!(accepted.peer_addr().unwrap(), stream.local_addr().unwrap());
    let from_host = TcpStream::connect_timeout(&inside, Duration::from_secs(5));
    assert_eq!(
        from_host.map_err(|e| e.kind()).err(),
        Some(ErrorKind::ConnectionRefused),
        "the host's loopback is another one"
    );

    // And command_in runs programs there.
    let mut c = testkit::command_in(&net.netns, "ip");
    c.args(["-o", "link", "show"]);
    let links = ok(c);
    assert!(links.contains(&format!(": {}:", net.bridge)), "{links}");

    let missing = testkit::connect_in("kvm2-no-such-ns", inside, Duration::from_secs(1));
    assert_eq!(
        missing.map_err(|e| e.kind()).err(),
        Some(ErrorKind::NotFound)
    );
}

#[test]
fn nothing_outside_is_reachable_from_the_namespace() {
    let sandbox = Descriptor::require();
    let net = &sandbox.guest_net;
    // Routes: only the guests' subnet, on the bridge; no default route.
    let routes = ip(&net.netns, &["-4", "route", "show", "table", "all"]);
    for route in routes.lines() {
        let ours = route.contains(&format!("dev {}", net.bridge)) || route.contains("dev lo");
        assert!(
            ours && !route.starts_with("default"),
            "unexpected route: {route}"
        );
    }
    let routes6 = ip(&net.netns, &["-6", "route", "show"]);
    assert!(!routes6.contains("default"), "{routes6}");
    // No forwarding.
    let mut c = net.command("cat");
    c.args([
        "/proc/sys/net/ipv4/ip_forward",
        "/proc/sys/net/ipv6/conf/all/forwarding",
    ]);
    assert_eq!(ok(c), "0\n0\n");
    // Every link is loopback, the bridge, or a port of the bridge (domains'
    // taps, other tests' veths); none leads to the host's namespace.
    let links = ip(&net.netns, &["-o", "link", "show"]);
    for link in links.lines() {
        let name = link.split(": ").nth(1).unwrap_or("");
        let name = name.split('@').next().unwrap_or(name);
        assert!(
            name == "lo" || name == net.bridge || link.contains(&format!("master {}", net.bridge)),
            "unexpected link in {}: {link}",
            net.netns
        );
    }

    // The host's own addresses (this machine) are unreachable: no route, so
    // connect fails at once and no packet leaves the namespace.
    let host = ok(cmd(
        "ip",
        &["-4", "-o", "address", "show", "scope", "global"],
    ));
    let host_addrs: Vec<Ipv4Addr> = host
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter_map(|cidr| cidr.split('/').next()?.parse().ok())
        .filter(|a| !net.contains(*a))
        .collect();
    for addr in &host_addrs {
        let target = SocketAddr::from((*addr, sandbox.ssh.port));
        let err = net
            .connect(target, Duration::from_secs(2))
            .expect_err("the host is reachable from the guest namespace");
        assert_eq!(err.kind(), ErrorKind::NetworkUnreachable, "{target}: {err}");
        let mut c = Command::new("ip");
        c.args(["-n", &net.netns, "route", "get", &addr.to_string()]);
        assert!(!run(c).status.success(), "a route to {addr}");
    }
    // The sandbox's sshd listens on the host's loopback, not this one.
    let sshd = SocketAddr::from(([127, 0, 0, 1], sandbox.ssh.port));
    TcpStream::connect_timeout(&sshd, Duration::from_secs(5)).expect("sshd on the host");
    let err = net.connect(sshd, Duration::from_secs(2)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
}
