//! The sandbox descriptor: what `cargo xtask sandbox up` started and where.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::HypervisorHost;

/// The environment variable that holds the path of the descriptor file.
pub const ENV_VAR: &str = "KVM2_SANDBOX";

/// Everything a test needs to reach the sandbox's services.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Descriptor {
    /// The per-run state directory holding configs, logs, keys and sockets.
    pub state_dir: PathBuf,
    /// The libvirt daemon.
    pub libvirt: LibvirtService,
    /// The OpenSSH daemon.
    pub ssh: SshService,
    /// The path of libvirt's socket as seen from the SSH server's side
    /// (what a `direct-streamlocal` channel opens).
    pub remote_socket: PathBuf,
    /// The `dir` storage pool dedicated to tests (on `qemu:///system`).
    pub pool: PoolInfo,
    /// The Linux bridge guests' NICs attach to (`<source bridge=.../>`): the
    /// one inside the guest network namespace ([`GuestNet::bridge`]), where
    /// libvirtd creates domains' taps. It has no uplink: guest traffic on it
    /// reaches the namespace and nothing outside it.
    #[serde(default)]
    pub bridge: String,
    /// The guests' network: a network namespace holding the bridge, DHCP and
    /// an upstream HTTPS server.
    #[serde(default)]
    pub guest_net: GuestNet,
    /// The Kubernetes control plane (etcd + kube-apiserver), when started.
    #[serde(default)]
    pub kube: Option<KubeService>,
    /// The proxy guest image, served over HTTP on loopback like any user
    /// image, when the sandbox serves one.
    #[serde(default)]
    pub guest_image: Option<GuestImage>,
    /// Every hypervisor host, host 1 first (the top-level `libvirt`, `ssh`
    /// and `pool` are host 1's); see [`HypervisorHost`].
    #[serde(default)]
    pub hosts: Vec<HypervisorHost>,
    /// A /24 (CIDR) whose every address is this machine's (a `local`
    /// route), for tests that need many distinct local addresses an API
    /// server accepts in Endpoints; `None` from an older sandbox.
    #[serde(default)]
    pub local_range: Option<String>,
}

/// The proxy guest image (`cargo xtask guest-image`) and where the sandbox
/// serves it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GuestImage {
    /// The qcow2 file in the image cache.
    pub path: PathBuf,
    /// Its sha256, lower-case hex (what a providers config's `sha256` takes).
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// An `http://127.0.0.1:PORT/...` URL serving it.
    pub url: String,
}

/// The sandbox's Kubernetes API server (v1.20, TLS on loopback, RBAC on) and
/// the etcd behind it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KubeService {
    /// The API server's URL, e.g. `https://127.0.0.1:6443`.
    pub server: String,
    /// A kubeconfig for an administrator (group `system:masters`).
    pub kubeconfig: PathBuf,
    /// The sandbox CA: it signed the server's certificate and is the client CA.
    pub ca_cert: PathBuf,
    /// The CA's private key (to issue client certificates for other users).
    pub ca_key: PathBuf,
    /// The API server's version, e.g. `v1.20.2`.
    pub version: String,
    /// etcd's client URL.
    pub etcd: String,
    /// The issuer of service-account tokens (`TokenRequest` works).
    pub service_account_issuer: String,
}

impl KubeService {
    /// A kubeconfig (JSON, which kubectl and kube-rs read as YAML) that
    /// authenticates with a bearer token, e.g. a ServiceAccount's from
    /// `kubectl create token`.
    pub fn kubeconfig_with_token(&self, user: &str, token: &str) -> String {
        crate::kubeconfig::render(
            &self.server,
            &self.ca_cert,
            user,
            crate::kubeconfig::Credentials::Token(token),
        )
    }

    /// Runs `kubectl --kubeconfig <admin> ARGS`; returns its standard output.
    ///
    /// # Errors
    /// When kubectl cannot start or exits non-zero (its stderr is the
    /// message).
    pub fn kubectl(&self, args: &[&str]) -> std::io::Result<String> {
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()?;
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A kubeconfig (as [`kubeconfig_with_token`](Self::kubeconfig_with_token))
    /// for the ServiceAccount `namespace/name`, with a one-hour token from
    /// `kubectl create token`: what a pod running as it would hold.
    ///
    /// # Errors
    /// As [`kubectl`](Self::kubectl).
    pub fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> std::io::Result<String> {
        let token = self.kubectl(&["-n", namespace, "create", "token", name, "--duration=1h"])?;
        let user = format!("system:serviceaccount:{namespace}:{name}");
        Ok(self.kubeconfig_with_token(&user, token.trim()))
    }
}

/// The sandbox's libvirtd (the monolithic daemon).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LibvirtService {
    /// Read-write unix socket of the daemon.
    pub socket: PathBuf,
    /// URI of the real QEMU driver, e.g. `qemu:///system`.
    pub qemu_uri: String,
    /// URI of libvirt's in-memory test driver, e.g. `test:///default`.
    pub test_uri: String,
    /// The daemon's pid file (a test that kills the daemon restarts it with
    /// [`LibvirtService::config`]).
    pub pid_file: PathBuf,
    /// The daemon's `libvirtd.conf`.
    pub config: PathBuf,
    /// Version of the daemon, as `major.minor.micro`.
    pub version: String,
}

/// The sandbox's sshd, listening on loopback.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SshService {
    /// Address sshd listens on (always loopback).
    pub host: String,
    /// TCP port sshd listens on.
    pub port: u16,
    /// User to log in as.
    pub user: String,
    /// Private key (ed25519, unencrypted) accepted by sshd.
    pub key_path: PathBuf,
    /// A known_hosts file holding sshd's host key under `[host]:port` (host
    /// 1's also holds every other sandbox host's).
    pub known_hosts_path: PathBuf,
    /// sshd's `AuthorizedKeysFile`.
    pub authorized_keys_path: PathBuf,
    /// sshd's host private key (tests that run an sshd of their own reuse it).
    pub host_key_path: PathBuf,
    /// The `sshd_config` the sandbox's sshd runs with.
    pub config: PathBuf,
}

/// The dedicated `dir` storage pool.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PoolInfo {
    /// Pool name on `qemu:///system`.
    pub name: String,
    /// Directory backing the pool.
    pub dir: PathBuf,
}

/// The guests' network: a network namespace of the sandbox's own in which
/// libvirtd runs, so domains' taps, the guests' bridge, DHCP and the
/// upstream HTTPS server all live there. The namespace has no route to any
/// other network (no veth to the host, no default route, no forwarding);
/// code that must reach guests joins it ([`GuestNet::connect`],
/// [`GuestNet::command`], [`crate::in_netns`]).
///
/// Address plan (fixed): [`GuestNet::gateway`] is the bridge's own address
/// (DHCP, DNS and the upstream server listen there); DHCP hands out
/// [`GuestNet::dhcp_first`]..=[`GuestNet::dhcp_last`]; the rest of the
/// subnet is free for addresses tests assign themselves.
///
/// Every field has a default (empty or unspecified), so a descriptor written
/// before a field existed still loads.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct GuestNet {
    /// Name of the network namespace (`ip netns` name, pinned at
    /// `/run/netns/NAME`), e.g. `kvm2-sbx`.
    pub netns: String,
    /// The guests' bridge inside the namespace (same as [`Descriptor::bridge`]).
    pub bridge: String,
    /// The bridge's address: the guests' gateway, DHCP and DNS server, and
    /// the upstream server's address.
    pub gateway: Ipv4Addr,
    /// The subnet's network address, e.g. `10.213.7.0`.
    pub network: Ipv4Addr,
    /// The subnet's prefix length, e.g. `24`.
    pub prefix_len: u8,
    /// First address DHCP hands out.
    pub dhcp_first: Ipv4Addr,
    /// Last address DHCP hands out.
    pub dhcp_last: Ipv4Addr,
    /// dnsmasq's leases file (one lease a line: expiry, MAC, IP, hostname,
    /// client id); see [`GuestNet::leases`].
    pub leases_file: PathBuf,
    /// The upstream HTTPS server inside the namespace (what a CONNECT
    /// through a guest's Squid targets), e.g. `10.213.7.1:443`.
    pub upstream: SocketAddr,
    /// The DNS name in the upstream's certificate; the namespace's DNS
    /// (dnsmasq, which DHCP announces) resolves it to the upstream's address.
    pub upstream_name: String,
    /// The exact body the upstream answers every `GET` with.
    pub upstream_body: String,
    /// The sandbox CA's certificate (PEM) that signed the upstream's.
    pub ca_cert: PathBuf,
}

impl Default for GuestNet {
    fn default() -> Self {
        Self {
            netns: String::new(),
            bridge: String::new(),
            gateway: Ipv4Addr::UNSPECIFIED,
            network: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
            dhcp_first: Ipv4Addr::UNSPECIFIED,
            dhcp_last: Ipv4Addr::UNSPECIFIED,
            leases_file: PathBuf::new(),
            upstream: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            upstream_name: String::new(),
            upstream_body: String::new(),
            ca_cert: PathBuf::new(),
        }
    }
}

impl GuestNet {
    /// The subnet in CIDR notation, e.g. `10.213.7.0/24`.
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.network, self.prefix_len)
    }

    /// Whether `ip` is in the guests' subnet.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(self.prefix_len.min(32)))
            .unwrap_or(0);
        u32::from(ip) & mask == u32::from(self.network) & mask
    }

    /// Whether DHCP may hand out `ip`.
    pub fn in_dhcp_range(&self, ip: Ipv4Addr) -> bool {
        (self.dhcp_first..=self.dhcp_last).contains(&ip)
    }

    /// The current DHCP leases.
    ///
    /// # Errors
    /// The leases file cannot be read. Lines that are not leases are skipped.
    pub fn leases(&self) -> std::io::Result<Vec<Lease>> {
        Ok(Lease::parse_file(&std::fs::read_to_string(
            &self.leases_file,
        )?))
    }

    /// Opens a TCP connection from inside the namespace (see
    /// [`crate::connect_in`]).
    ///
    /// # Errors
    /// The namespace cannot be joined, or the connect fails or times out.
    pub fn connect(&self, addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
        crate::connect_in(&self.netns, addr, timeout)
    }

    /// A command that runs `program` inside the namespace (see
    /// [`crate::command_in`]).
    pub fn command(&self, program: &str) -> Command {
        crate::command_in(&self.netns, program)
    }

    /// `curl`, inside the namespace, fetching the upstream's page through
    /// the HTTP proxy at `proxy` (a CONNECT tunnel, TLS checked against the
    /// sandbox CA), waiting at most `max_secs`. It prints the body, then a
    /// line with the CONNECT's status code; append arguments (such as
    /// `--interface ADDR`) before running it.
    pub fn curl_through(&self, proxy: SocketAddr, max_secs: u32) -> Command {
        let mut c = self.command("curl");
        c.args(["-sS", "--max-time", &max_secs.to_string()])
            .args(["-w", "\n%{http_connect}"])
            .arg("--cacert")
            .arg(&self.ca_cert)
            .arg("--resolve")
            .arg(format!("{}:443:{}", self.upstream_name, self.upstream.ip()))
            .arg("--proxy")
            .arg(format!("http://{proxy}"))
            .arg(format!("https://{}/", self.upstream_name));
        c
    }
}

/// One line of dnsmasq's leases file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// When the lease expires, in seconds since the Unix epoch (0: never).
    pub expires: u64,
    /// The client's MAC address, lower case, as dnsmasq writes it.
    pub mac: String,
    /// The leased address.
    pub ip: Ipv4Addr,
    /// The hostname the client sent, if any.
    pub hostname: Option<String>,
}

impl Lease {
    /// Parses a leases file; lines that are not IPv4 leases (dnsmasq's
    /// `duid` line, IPv6 leases, garbage) are skipped.
    pub fn parse_file(text: &str) -> Vec<Self> {
        text.lines().filter_map(Self::parse_line).collect()
    }

    fn parse_line(line: &str) -> Option<Self> {
        let mut fields = line.split_whitespace();
        let expires = fields.next()?.parse().ok()?;
        let mac = fields.next()?.to_ascii_lowercase();
        let ip = fields.next()?.parse().ok()?;
        let hostname = fields.next().filter(|h| *h != "*").map(str::to_owned);
        Some(Self {
            expires,
            mac,
            ip,
            hostname,
        })
    }
}

/// Why the descriptor could not be read.
#[derive(Debug)]
pub enum DescriptorError {
    /// [`ENV_VAR`] is not set: no sandbox was started for this test run.
    NotSet,
    /// The descriptor file could not be read.
    Read(PathBuf, std::io::Error),
    /// The descriptor file is not a valid descriptor.
    Parse(PathBuf, serde_json::Error),
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotSet => write!(
                f,
                "{ENV_VAR} is not set: integration tests need the sandbox; \
                 run them with `cargo xtask test` (or `cargo xtask sandbox up` \
                 and export the variable it prints)"
            ),
            Self::Read(path, e) => write!(
                f,
                "cannot read sandbox descriptor {}: {e}; is the sandbox up? \
                 run the tests with `cargo xtask test`",
                path.display()
            ),
            Self::Parse(path, e) => write!(
                f,
                "sandbox descriptor {} is invalid: {e}; restart it with \
                 `cargo xtask sandbox down && cargo xtask sandbox up`",
                path.display()
            ),
        }
    }
}

impl std::error::Error for DescriptorError {}

impl Descriptor {
    /// Reads the descriptor named by [`ENV_VAR`].
    ///
    /// # Errors
    /// [`DescriptorError`] when the variable is unset or the file is missing
    /// or invalid.
    pub fn from_env() -> Result<Self, DescriptorError> {
        let path = std::env::var_os(ENV_VAR).ok_or(DescriptorError::NotSet)?;
        Self::load(Path::new(&path))
    }

    /// Reads a descriptor file.
    ///
    /// # Errors
    /// [`DescriptorError`] when the file is missing or invalid.
    pub fn load(path: &Path) -> Result<Self, DescriptorError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| DescriptorError::Read(path.to_owned(), e))?;
        serde_json::from_str(&text).map_err(|e| DescriptorError::Parse(path.to_owned(), e))
    }

    /// Reads the descriptor for an integration test, failing the test with a
    /// message naming `cargo xtask test` when there is no sandbox.
    ///
    /// Integration tests must fail, never pass silently, without the sandbox.
    #[allow(clippy::panic)]
    pub fn require() -> Self {
        match Self::from_env() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        }
    }

    /// A libvirt URI that reaches the sandbox daemon's socket for `virsh -c`,
    /// e.g. `qemu+unix:///system?socket=/.../libvirt-sock`.
    pub fn virsh_uri(&self, uri: &str) -> String {
        let (scheme, rest) = uri.split_once("://").unwrap_or((uri, "/"));
        format!(
            "{scheme}+unix://{rest}?socket={}",
            self.libvirt.socket.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_env_names_the_test_command() {
        let e = DescriptorError::NotSet.to_string();
        assert!(e.contains("cargo xtask test"), "{e}");
    }

    #[test]
    fn virsh_uri_adds_socket() {
        let d = Descriptor {
            state_dir: "/s".into(),
            libvirt: LibvirtService {
                socket: "/s/libvirt-sock".into(),
                qemu_uri: "qemu:///system".into(),
                test_uri: "test:///default".into(),
                pid_file: "/s/libvirtd.pid".into(),
                config: "/s/libvirtd.conf".into(),
                version: "11.3.0".into(),
            },
            ssh: SshService {
                host: "127.0.0.1".into(),
                port: 2222,
                user: "root".into(),
                key_path: "/s/id".into(),
                known_hosts_path: "/s/kh".into(),
                authorized_keys_path: "/s/ak".into(),
                host_key_path: "/s/hk".into(),
                config: "/s/sshd_config".into(),
            },
            remote_socket: "/s/libvirt-sock".into(),
            pool: PoolInfo {
                name: "p".into(),
                dir: "/s/pool".into(),
            },
            bridge: "kvm2-sbx0".into(),
            guest_net: guest_net(),
            kube: None,
            guest_image: None,
            hosts: Vec::new(),
            local_range: None,
        };
        assert_eq!(
            d.virsh_uri("qemu:///system"),
            "qemu+unix:///system?socket=/s/libvirt-sock"
        );
        assert_eq!(
            d.virsh_uri("test:///default"),
            "test+unix:///default?socket=/s/libvirt-sock"
        );
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<Descriptor>(&json).unwrap(), d);

        // A descriptor written before `guest_net` existed still loads.
        let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
        value.as_object_mut().unwrap().remove("guest_net");
        let old: Descriptor = serde_json::from_value(value).unwrap();
        assert_eq!(old.guest_net, GuestNet::default());
    }

    fn guest_net() -> GuestNet {
        GuestNet {
            netns: "kvm2-sbx".into(),
            bridge: "kvm2-sbx0".into(),
            gateway: Ipv4Addr::new(10, 213, 7, 1),
            network: Ipv4Addr::new(10, 213, 7, 0),
            prefix_len: 24,
            dhcp_first: Ipv4Addr::new(10, 213, 7, 100),
            dhcp_last: Ipv4Addr::new(10, 213, 7, 199),
            leases_file: "/s/dnsmasq.leases".into(),
            upstream: "10.213.7.1:443".parse().unwrap(),
            upstream_name: "upstream.kvm2-sandbox.test".into(),
            upstream_body: "reached\n".into(),
            ca_cert: "/s/ca.crt".into(),
        }
    }

    #[test]
    fn guest_net_fields_default_one_by_one() {
        let mut value = serde_json::to_value(guest_net()).unwrap();
        value.as_object_mut().unwrap().remove("upstream_body");
        let net: GuestNet = serde_json::from_value(value).unwrap();
        assert_eq!(net.upstream_body, "");
        assert_eq!(net.netns, "kvm2-sbx");
    }

    #[test]
    fn guest_net_subnet_and_dhcp_range() {
        let net = guest_net();
        assert_eq!(net.cidr(), "10.213.7.0/24");
        assert!(net.contains(Ipv4Addr::new(10, 213, 7, 0)));
        assert!(net.contains(Ipv4Addr::new(10, 213, 7, 255)));
        assert!(!net.contains(Ipv4Addr::new(10, 213, 8, 1)));
        assert!(!net.contains(Ipv4Addr::new(10, 213, 6, 255)));
        assert!(net.in_dhcp_range(Ipv4Addr::new(10, 213, 7, 100)));
        assert!(net.in_dhcp_range(Ipv4Addr::new(10, 213, 7, 199)));
        assert!(!net.in_dhcp_range(Ipv4Addr::new(10, 213, 7, 99)));
        assert!(!net.in_dhcp_range(Ipv4Addr::new(10, 213, 7, 200)));
        let everything = GuestNet {
            prefix_len: 0,
            ..guest_net()
        };
        assert!(everything.contains(Ipv4Addr::new(192, 0, 2, 1)));
    }

    #[test]
    fn leases_parse_dnsmasq_lines_and_skip_the_rest() {
        let text = "1796240856 AE:4c:5c:45:7d:b3 10.213.7.173 * 01:ae:4c:5c:45:7d:b3\n\
                    1796240857 52:54:00:84:fc:4c 10.213.7.118 proxy-a 01:52:54:00:84:fc:4c\n\
                    duid 00:01:00:01:2c:aa:bb:cc\n\
                    1796240858 1234 fd00::5 * 00:01\n\
                    \n";
        assert_eq!(
            Lease::parse_file(text),
            vec![
                Lease {
                    expires: 1796240856,
                    mac: "ae:4c:5c:45:7d:b3".into(),
                    ip: Ipv4Addr::new(10, 213, 7, 173),
                    hostname: None,
                },
                Lease {
                    expires: 1796240857,
                    mac: "52:54:00:84:fc:4c".into(),
                    ip: Ipv4Addr::new(10, 213, 7, 118),
                    hostname: Some("proxy-a".into()),
                },
            ]
        );
    }
}
