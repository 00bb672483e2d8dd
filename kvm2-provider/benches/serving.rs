//! `cargo xtask bench kvm2`, part 3: **Create-to-Squid-serving** for
//! [`GUESTS`] real proxy guests at once (the sandbox's guest image, TCG),
//! against the same guests made by hand with plain `virsh`, in the same run.
//!
//! - *Ours*: [`GUESTS`] concurrent `Provider::create`, then `Provider::get`
//!   every [`POLL`] until Running with an address, then a CONNECT through the
//!   guest's Squid to the sandbox's upstream every [`POLL`] until it answers
//!   200.
//! - *Peer*: for each guest, `virsh vol-create-as --backing-vol` (the
//!   overlay on the same warm base), `virsh vol-create-as` + `vol-upload`
//!   (the same cloud-init seed), `virsh create` of the same domain XML; the
//!   address read from dnsmasq's lease file by MAC every [`POLL`]; then the
//!   same CONNECT probe.
//!
//! Guests boot at the same time on both sides, so the figure is dominated
//! by the guests sharing this machine's cores; the ratio (ours / peer, per
//! round; the median printed) is the provider's overhead. The base is
//! warmed outside the timing. Nothing is asserted. Knobs:
//! `KVM2_BENCH_ONLY=serving` (this part only; `image`/`create` skip it),
//! `KVM2_BENCH_SERVING_ROUNDS` (default 1: a round boots 2 × 5 guests).
//!
//! `KVM2_BENCH_SERVING_PEER=1,5` runs only the peer, once per count, and
//! prints each guest's seconds on a `peer-serving-seconds N: t1 t2 ...` line:
//! the peer of `cargo xtask bench demo`, which times the whole system.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::print_stdout
)]

// The domain spec the tests define without the provider.
#[path = "../tests/it/test_domain.rs"]
mod test_domain;

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use kvm2_provider::__internals::Timestamp;
use kvm2_provider::__internals::definition::domain_xml::render;
use kvm2_provider::__internals::definition::seed_iso::{DEFAULT_SIZE_LIMIT, SeedSpec, build};
use kvm2_provider::__internals::definition::vendor_data::{self, ProxySettings};
use kvm2_provider::__internals::definition::{DomainSpec, MacAddress, MemoryMib};
use kvm2_provider::{Kvm2Provider, ProviderOptions};
use provider_api::config::Cidr;
use provider_api::config::values::BridgeName;
use provider_api::{CreateRequest, Identifier, InstanceState, ObjectName, OwnerUid, Provider};
use testkit::Descriptor;
use testkit::bench::median;
use testkit::providers_yaml::{Host, Image, ProvidersYaml};

const GUESTS: usize = 5;
const POLL: Duration = Duration::from_secs(1);
const BUDGET: Duration = Duration::from_secs(900);
const KEY: &str = "proxy-guest";
const PORT: u16 = 3128;
const MEMORY_MIB: u64 = 512;

fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    format!("{:x}", t.as_micros() & 0xff_ffff_ffff)
}

fn virsh(d: &Descriptor, args: &[&str]) -> String {
    let out = Command::new("virsh")
        .arg("-c")
        .arg(d.virsh_uri(&d.libvirt.qemu_uri))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "virsh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The providers config of `entry`: the sandbox as `host1`, the guest
/// image, a machine type the guest fits in, Squid open to the guest network.
fn config(d: &Descriptor, entry: &str) -> provider_api::config::Kvm2Config {
    ProvidersYaml::sandbox(d, entry)
        .hosts([Host::sandbox(d, "host1").with_socket(&d.remote_socket)])
        .images([Image {
            key: KEY.into(),
            ..Image::guest(d)
        }])
        .machine_type(1, &format!("{MEMORY_MIB}MiB"), "4GiB")
        .proxy(PORT, [d.guest_net.cidr()])
        .kvm2()
}

/// True once a CONNECT through `proxy`'s Squid to the upstream answers 200.
fn serves(d: &Descriptor, proxy: Ipv4Addr) -> bool {
    let out = d
        .guest_net
        .curl_through(std::net::SocketAddr::from((proxy, PORT)), 5)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().last() == Some("200")
}

/// Probes every [`POLL`] until `proxy` serves; panics past [`BUDGET`].
async fn until_serving(d: &Descriptor, proxy: Ipv4Addr, started: Instant) -> Duration {
    loop {
        let dd = d.clone();
        if tokio::task::spawn_blocking(move || serves(&dd, proxy))
            .await
            .unwrap()
        {
            return started.elapsed();
        }
        assert!(started.elapsed() < BUDGET, "{proxy} never served");
        tokio::time::sleep(POLL).await;
    }
}

async fn ours(d: &Descriptor, provider: &Kvm2Provider, tag: &str) -> (Duration, Vec<String>) {
    let started = Instant::now();
    let mut names = Vec::new();
    let mut jobs = Vec::new();
    for i in 0..GUESTS {
        let owner = OwnerUid::parse(&format!("bench-serving-{tag}-{i}")).unwrap();
        names.push(provider_api::name_from_uid(&owner).to_string());
        jobs.push(async move {
            let req = CreateRequest::new(
                owner,
                ObjectName::parse("bench").unwrap(),
                Identifier::parse("default").unwrap(),
            );
            let id = provider.create(&req).await.unwrap().id;
            let ip = loop {
                let inst = provider.get(&id).await.unwrap();
                if inst.state == InstanceState::Running
                    && let Some(std::net::IpAddr::V4(ip)) = inst.ip
                {
                    break ip;
                }
                assert!(started.elapsed() < BUDGET, "never Running: {inst:?}");
                tokio::time::sleep(POLL).await;
            };
            let t = until_serving(d, ip, started).await;
            (id, t)
        });
    }
    let done = futures::future::join_all(jobs).await;
    let slowest = done.iter().map(|(_, t)| *t).max().unwrap();
    for (id, _) in &done {
        provider.delete(id).await.unwrap();
    }
    (slowest, names)
}

struct Peer<'a> {
    d: &'a Descriptor,
    base_path: String,
    vendor: String,
    bridge: BridgeName,
}

impl Peer<'_> {
    /// One guest by hand; returns its MAC.
    fn create(&self, name: &Identifier, dir: &std::path::Path) -> String {
        let d = self.d;
        let pool = &d.pool.name;
        let overlay = format!("{name}.overlay.qcow2");
        let seed = format!("{name}.seed.iso");
        virsh(
            d,
            &[
                "vol-create-as",
                pool,
                &overlay,
                "4G",
                "--format",
                "qcow2",
                "--backing-vol",
                &self.base_path,
                "--backing-vol-format",
                "qcow2",
            ],
        );
        let iso = build(&SeedSpec {
            instance_id: name,
            hostname: name,
            user_data: None,
            vendor_data: &self.vendor,
            time: Timestamp::from_unix_seconds(1_796_200_000).unwrap(),
            size_limit: DEFAULT_SIZE_LIMIT,
        })
        .unwrap();
        let iso_file = dir.join(&seed);
        std::fs::write(&iso_file, &iso).unwrap();
        virsh(d, &["vol-create-as", pool, &seed, &iso.len().to_string()]);
        virsh(
            d,
            &[
                "vol-upload",
                "--pool",
                pool,
                &seed,
                &iso_file.display().to_string(),
            ],
        );
        let path = |vol: &str| {
            virsh(d, &["vol-path", "--pool", pool, vol])
                .trim()
                .to_owned()
        };
        // The MAC is chosen here, as an admin would, to find the lease.
        let mac = mac_of(name.as_str());
        let xml = render(&DomainSpec {
            memory: MemoryMib::new(MEMORY_MIB).unwrap(),
            mac: Some(MacAddress::parse(&mac).unwrap()),
            ..test_domain::spec(
                name.as_str(),
                &path(&overlay),
                &path(&seed),
                self.bridge.as_str(),
                test_domain::mark("kvm2-bench", "bench-peer"),
            )
        })
        .unwrap();
        let xml_file = dir.join(format!("{name}.xml"));
        std::fs::write(&xml_file, xml).unwrap();
        virsh(d, &["create", &xml_file.display().to_string()]);
        mac
    }

    /// `guests` at once; each one's time to serving, and their names.
    async fn run(&self, tag: &str, guests: usize) -> (Vec<Duration>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let names: Vec<Identifier> = (0..guests)
            .map(|i| Identifier::parse(&format!("kbp{tag}-{i}")).unwrap())
            .collect();
        let macs: Vec<String> = names.iter().map(|n| self.create(n, dir.path())).collect();
        let jobs = names.iter().zip(&macs).map(|(name, mac)| async move {
            let ip = loop {
                let leases = self.d.guest_net.leases().unwrap_or_default();
                // This guest's lease: its MAC and the hostname it sent (its
                // name). dnsmasq keeps the leases of guests already gone,
                // and an address from one of those never answers.
                let ours = leases
                    .iter()
                    .find(|l| l.mac == *mac && l.hostname.as_deref() == Some(name.as_str()));
                if let Some(l) = ours {
                    break l.ip;
                }
                assert!(started.elapsed() < BUDGET, "no lease for {mac}");
                tokio::time::sleep(POLL).await;
            };
            until_serving(self.d, ip, started).await
        });
        let each = futures::future::join_all(jobs).await;
        (each, names.iter().map(ToString::to_string).collect())
    }

    fn remove(&self, names: &[String]) {
        for name in names {
            let _ = Command::new("virsh")
                .arg("-c")
                .arg(self.d.virsh_uri(&self.d.libvirt.qemu_uri))
                .args(["destroy", name])
                .output();
            for vol in [format!("{name}.overlay.qcow2"), format!("{name}.seed.iso")] {
                let _ = Command::new("virsh")
                    .arg("-c")
                    .arg(self.d.virsh_uri(&self.d.libvirt.qemu_uri))
                    .args(["vol-delete", "--pool", &self.d.pool.name, &vol])
                    .output();
            }
        }
    }
}

/// A MAC for the guest `name`: three bytes of its name's hash. Names carry
/// the round's tag, so each guest of a run has its own (with a weak hash,
/// two rounds' guests once shared one).
fn mac_of(name: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    let [a, b, c, ..] = h.finish().to_be_bytes();
    format!("52:54:00:{a:02x}:{b:02x}:{c:02x}")
}

fn main() {
    if std::env::var("KVM2_BENCH_ONLY").is_ok_and(|v| v != "serving") {
        return;
    }
    let d = Descriptor::require();
    let rounds: usize = std::env::var("KVM2_BENCH_SERVING_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let rt = testkit::bench::runtime();
    rt.block_on(async {
        let n = nonce();
        let entry = format!("kbs{}", &n[..8.min(n.len())]);
        let cfg = config(&d, &entry);
        let mut options = ProviderOptions::default();
        options.source.deadline = Duration::from_secs(600);
        let provider =
            Kvm2Provider::with_options(Identifier::parse(&entry).unwrap(), cfg.clone(), options)
                .unwrap();
        let key = Identifier::parse(KEY).unwrap();
        let base = provider
            .image_cache()
            .ensure(&cfg.hosts[0], &key, &cfg.images[&key])
            .await
            .unwrap();
        let proxy = ProxySettings::new(PORT, vec![Cidr::parse(&d.guest_net.cidr()).unwrap()]);
        let peer = Peer {
            d: &d,
            base_path: base.path.clone(),
            vendor: vendor_data::render(&proxy, None).unwrap(),
            bridge: BridgeName::parse(&d.bridge).unwrap(),
        };
        if let Ok(counts) = std::env::var("KVM2_BENCH_SERVING_PEER") {
            for (i, count) in counts.split(',').enumerate() {
                let count: usize = count.trim().parse().expect("KVM2_BENCH_SERVING_PEER: counts");
                let (each, names) = peer.run(&format!("{}{i}", &n[..6.min(n.len())]), count).await;
                peer.remove(&names);
                let secs: Vec<String> = each.iter().map(|t| format!("{:.1}", t.as_secs_f64())).collect();
                println!("peer-serving-seconds {count}: {}", secs.join(" "));
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
        let mut ratios = Vec::new();
        for round in 0..rounds {
            if std::env::var("KVM2_BENCH_SERVING_PEER").is_ok() {
                break;
            }
            let mut t = [Duration::ZERO; 2];
            for side in [round % 2, 1 - round % 2] {
                let tag = format!("{n}{round}{side}");
                if side == 0 {
                    t[0] = ours(&d, &provider, &tag).await.0;
                } else {
                    let (each, names) = peer.run(&tag[..8.min(tag.len())], GUESTS).await;
                    peer.remove(&names);
                    t[1] = each.into_iter().max().unwrap();
                }
                // Let the daemon finish tearing the guests down.
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            let ratio = t[0].as_secs_f64() / t[1].as_secs_f64();
            println!(
                "  round {round}: {GUESTS} guests Create-to-Squid-serving: provider {:.1} s, plain virsh {:.1} s, overhead {ratio:.2}x",
                t[0].as_secs_f64(),
                t[1].as_secs_f64()
            );
            ratios.push(ratio);
        }
        println!(
            "create-to-squid-serving, {GUESTS} guests at once (TCG), median of {rounds} round(s): overhead ratio {:.2}x (provider / plain virsh)",
            median(&ratios)
        );
        for vol in [base.name.clone(), format!("{}.marker", base.name)] {
            let _ = Command::new("virsh")
                .arg("-c")
                .arg(d.virsh_uri(&d.libvirt.qemu_uri))
                .args(["vol-delete", "--pool", &d.pool.name, &vol])
                .output();
        }
    });
}
