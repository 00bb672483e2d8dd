//! `cargo xtask bench kvm2`: kvm2-provider against its peers, in the same
//! run, against the sandbox (real sshd → real libvirtd).
//!
//! 1. **Cold image**, 256 MiB from a local HTTP server on 127.0.0.1 through
//!    SSH into the sandbox pool:
//!    - *C stack*: one `virsh -c qemu+ssh://…` session (OpenSSH, libvirt's
//!      C client) running `vol-create-as` then `vol-upload … /dev/stdin`,
//!      fed by `curl -s URL`;
//!    - *transfer*: kvm2-provider's download-to-pool pipeline — dial a
//!      dedicated connection (ssh-socket + libvirt-rpc), create the volume,
//!      stream `ImageSource` (sha256 while streaming) into
//!      `storage_vol_upload`, close — the same work as the C stack plus the
//!      digest;
//!    - *ensure*: the whole cold [`ImageCache::ensure`] a first Create pays:
//!      the fill lease, the transfer straight into the base's name,
//!      verification and the marker (the publish step; no second copy).
//!
//!    Both sides use the same SSH cipher, [`CIPHER`]: russh offers it first
//!    (ssh-socket's order), and the C stack's OpenSSH is told `-c` it.
//! 2. **Create-to-Running** with a warm cache, 20 real QEMU domains on
//!    `qemu:///system` (TCG): `Provider::create` one after another vs the
//!    same libvirt calls made directly with libvirt-rpc on one connection.
//!
//! 3. **Create-to-Squid-serving** for real proxy guests: `benches/serving.rs`.
//!
//! Rounds are interleaved; medians are printed with ratios (>1.0 = ours
//! faster for throughput; overhead = ours / direct for Create). Nothing is
//! asserted. Knobs: `KVM2_BENCH_ROUNDS` (default 3), `KVM2_BENCH_ONLY`
//! (`image` or `create`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::print_stdout
)]

// The integration tests' image server; the bench uses part of it.
#[allow(dead_code)]
#[path = "../tests/it/http_server.rs"]
mod common;
// The domain spec the tests define without the provider.
#[path = "../tests/it/test_domain.rs"]
mod test_domain;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kvm2_provider::__internals::Timestamp;
use kvm2_provider::__internals::definition::{seed_iso, vendor_data};
use kvm2_provider::__internals::hosts::HostTable;
use kvm2_provider::__internals::images::ImageSource;
use kvm2_provider::__internals::storage::volume_xml::{overlay_volume, raw_volume};
use kvm2_provider::__internals::storage::{BaseNames, VmVolumes};
use kvm2_provider::{HostOptions, Kvm2Provider, ProviderOptions, SourceLimits};
use libvirt_rpc::{Config as RpcConfig, StorageVolCreateFlags, StorageVolStreamFlags};
use provider_api::Identifier;
use provider_api::config::Kvm2Config;
use testkit::Descriptor;
use testkit::bench::median;
use testkit::providers_yaml::{Image, ProvidersYaml};

const IMAGE_BYTES: usize = 256 << 20;
const IMAGE_KEY: &str = "bench";
/// The SSH cipher of both sides of the image benchmark: ssh-socket offers
/// AES-256-GCM first, and OpenSSH is told to use it (its own default would
/// be chacha20-poly1305).
const CIPHER: &str = "aes256-gcm@openssh.com";

fn rounds() -> usize {
    std::env::var("KVM2_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

fn only(part: &str) -> bool {
    std::env::var("KVM2_BENCH_ONLY").map_or(true, |v| v == part)
}

fn mib_s(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / f64::from(1u32 << 20) / t.as_secs_f64()
}

fn nonce() -> String {
    format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    )
}

/// The providers config of one entry with the sandbox as `host1`.
fn kvm2_config(d: &Descriptor, entry: &str, url: &str, sha256: &str) -> Kvm2Config {
    ProvidersYaml::sandbox(d, entry)
        .images([Image::new(IMAGE_KEY, url, sha256, "raw")])
        .kvm2()
}

fn options(d: &Descriptor) -> ProviderOptions {
    let mut options = ProviderOptions::default();
    options.hosts = HostOptions {
        remote_socket: d.remote_socket.display().to_string(),
        dial_budget: Duration::from_secs(30),
        rpc: RpcConfig::default().call_timeout(Duration::from_secs(120)),
        ..HostOptions::default()
    };
    options.source.deadline = Duration::from_secs(300);
    options.start_watch = Duration::from_millis(0);
    options
}

fn virsh_local(d: &Descriptor, args: &[&str]) -> bool {
    Command::new("virsh")
        .arg("-c")
        .arg(d.virsh_uri(&d.libvirt.qemu_uri))
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Deletes every volume of `pool` whose name contains `needle`.
fn delete_volumes(d: &Descriptor, needle: &str) {
    let _ = virsh_local(d, &["pool-refresh", &d.pool.name]);
    let out = Command::new("virsh")
        .arg("-c")
        .arg(d.virsh_uri(&d.libvirt.qemu_uri))
        .args(["vol-list", "--pool", &d.pool.name])
        .output()
        .unwrap();
    for line in String::from_utf8_lossy(&out.stdout).lines().skip(2) {
        if let Some(name) = line.split_whitespace().next()
            && name.contains(needle)
        {
            let _ = virsh_local(d, &["vol-delete", "--pool", &d.pool.name, name]);
        }
    }
}

/// An OpenSSH wrapper for libvirt's `command=` URI parameter: verifies the
/// host key against the sandbox's known_hosts (libvirt's ssh transport has
/// no known_hosts parameter of its own).
fn ssh_wrapper(dir: &Path, d: &Descriptor) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("ssh");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nexec ssh -c {CIPHER} -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes -o BatchMode=yes \"$@\"\n",
            d.ssh.known_hosts_path.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn c_stack_uri(d: &Descriptor, wrapper: &Path) -> String {
    format!(
        "qemu+ssh://{user}@{host}:{port}/system?keyfile={key}&socket={socket}&no_tty=1&command={wrapper}",
        user = d.ssh.user,
        host = d.ssh.host,
        port = d.ssh.port,
        key = d.ssh.key_path.display(),
        socket = d.remote_socket.display(),
        wrapper = wrapper.display(),
    )
}

/// curl | virsh (one session: create the volume, upload stdin into it).
fn c_stack_upload(d: &Descriptor, uri: &str, url: &str, volume: &str) -> Duration {
    let started = Instant::now();
    let mut curl = Command::new("curl")
        .args(["-s", "--fail", url])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let script = format!(
        "vol-create-as --pool {pool} {volume} {IMAGE_BYTES}b --format raw; vol-upload --pool {pool} {volume} /dev/stdin",
        pool = d.pool.name
    );
    testkit::run::stdout(
        Command::new("virsh")
            .args(["-c", uri, &script])
            .stdin(curl.stdout.take().unwrap()),
    );
    let took = started.elapsed();
    assert!(curl.wait().unwrap().success(), "curl failed");
    took
}

/// kvm2-provider's transfer: dedicated connection, volume, hashed download
/// streamed into the upload, close.
async fn our_transfer(
    d: &Descriptor,
    config: &Kvm2Config,
    source: &ImageSource,
    url: &provider_api::config::values::HttpUrl,
    sha: provider_api::config::values::Sha256Digest,
    volume: &str,
) -> Duration {
    let started = Instant::now();
    let table = HostTable::new(config, &options(d).hosts).unwrap();
    let conn = table
        .dedicated(&Identifier::parse("host1").unwrap())
        .await
        .unwrap();
    let client = conn.client();
    let pool = client
        .storage_pool_lookup_by_name(&d.pool.name)
        .await
        .unwrap();
    let download = source.open(url, sha).await.unwrap();
    let vol = client
        .storage_vol_create_xml(
            &pool,
            &raw_volume(volume, download.declared_len().unwrap_or(0)).unwrap(),
            StorageVolCreateFlags::empty(),
        )
        .await
        .unwrap();
    let mut reader = download.into_async_read();
    client
        .storage_vol_upload(&vol, 0, 0, StorageVolStreamFlags::empty(), &mut reader)
        .await
        .unwrap();
    assert_eq!(reader.into_inner().into_inner().verified(), Some(sha));
    conn.close().await;
    started.elapsed()
}

/// A cold `ImageCache::ensure` on a fresh provider (fresh connections).
async fn our_ensure(d: &Descriptor, entry: &str, url: &str, sha: &str) -> Duration {
    let config = kvm2_config(d, entry, url, sha);
    let host = config.hosts[0].clone();
    let key = Identifier::parse(IMAGE_KEY).unwrap();
    let image = config.images.get(&key).unwrap().clone();
    let started = Instant::now();
    let provider =
        Kvm2Provider::with_options(Identifier::parse(entry).unwrap(), config, options(d)).unwrap();
    provider
        .image_cache()
        .ensure(&host, &key, &image)
        .await
        .unwrap();
    started.elapsed()
}

async fn image_bench(d: &Descriptor) {
    let body = common::image(IMAGE_BYTES);
    let sha = common::digest(&body);
    let served = body.clone();
    let server = common::Server::start(move |_| common::Reply::Body {
        body: served.clone(),
        length: true,
    })
    .await;
    let url = server.url("bench.img");
    let sha_hex = sha.to_string();
    let dir = tempfile::tempdir().unwrap();
    let uri = c_stack_uri(d, &ssh_wrapper(dir.path(), d));
    let source = ImageSource::new(SourceLimits {
        deadline: Duration::from_secs(300),
        ..SourceLimits::default()
    })
    .unwrap();
    let tag = format!("kvm2bench-{}", nonce());
    let config = kvm2_config(d, "kvm2-bench", url.as_str(), &sha_hex);

    let (mut c, mut t, mut e) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds() {
        let cv = format!("{tag}-c{round}.raw");
        let tc = c_stack_upload(d, &uri, url.as_str(), &cv);
        delete_volumes(d, &cv);
        let ov = format!("{tag}-o{round}.raw");
        let to = our_transfer(d, &config, &source, &url, sha, &ov).await;
        delete_volumes(d, &ov);
        // A fresh entry per round: its base names are new, so the cache is
        // cold.
        let entry = format!("kb{}-{round}", &nonce()[..8.min(nonce().len())]);
        let hits = server.hits();
        let te = our_ensure(d, &entry, url.as_str(), &sha_hex).await;
        assert_eq!(server.hits(), hits + 1, "a cold ensure downloads once");
        delete_volumes(d, &format!("-{entry}."));
        println!(
            "  round {round}: C stack {:.0} MiB/s, transfer {:.0} MiB/s, ensure {:.0} MiB/s",
            mib_s(IMAGE_BYTES, tc),
            mib_s(IMAGE_BYTES, to),
            mib_s(IMAGE_BYTES, te)
        );
        c.push(mib_s(IMAGE_BYTES, tc));
        t.push(mib_s(IMAGE_BYTES, to));
        e.push(mib_s(IMAGE_BYTES, te));
    }
    // Per-round ratios first (the machine is shared: neighbours in the
    // same round see the same load), then medians.
    let rt = median(&t.iter().zip(&c).map(|(t, c)| t / c).collect::<Vec<_>>());
    let re = median(&e.iter().zip(&c).map(|(e, c)| e / c).collect::<Vec<_>>());
    let (c, t, e) = (median(&c), median(&t), median(&e));
    println!(
        "cold image 256 MiB via SSH ({CIPHER} on both sides), medians of {} interleaved rounds: C stack (curl | virsh qemu+ssh vol-upload) {c:.0} MiB/s; \
         kvm2-provider transfer {t:.0} MiB/s (ratio {rt:.2}x); cold ImageCache::ensure incl. lease, verify + marker {e:.0} MiB/s (ratio {re:.2}x)",
        rounds(),
    );
    drop(server);
}

fn main() {
    let d = Descriptor::require();
    let rt = testkit::bench::runtime();
    rt.block_on(async {
        if only("image") {
            image_bench(&d).await;
        }
        if only("create") {
            create_bench(&d).await;
        }
    });
}

const DOMAINS: usize = 20;

/// QEMU processes running now.
fn qemu_processes() -> usize {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|c| c.starts_with("qemu-system"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Waits (up to 30 s) until no more QEMU processes run than `baseline`,
/// then 2 s more: the daemon finishes tearing the last side's domains down
/// before the next side is timed.
async fn settle(baseline: usize) {
    for _ in 0..300 {
        if qemu_processes() <= baseline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// Removes the bench's domains and their volumes (by name) after each
/// round, and on drop also the base volumes (by substring), also when a
/// round panics.
struct Cleanup<'a> {
    d: &'a Descriptor,
    domains: std::sync::Mutex<Vec<String>>,
    needles: Vec<String>,
}

impl Cleanup<'_> {
    fn domain(&self, name: &str) {
        self.domains.lock().unwrap().push(name.to_owned());
    }

    /// Destroys and undefines the recorded domains (their overlay and seed
    /// volumes carry the entry's name: the needles remove them).
    fn domains(&self) {
        for name in self.domains.lock().unwrap().drain(..) {
            let _ = virsh_local(self.d, &["destroy", &name]);
            let _ = virsh_local(self.d, &["undefine", "--nvram", &name]);
        }
        for needle in &self.needles {
            delete_volumes(self.d, &format!("{needle}ep-"));
        }
    }
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        self.domains();
        for needle in &self.needles {
            delete_volumes(self.d, needle);
        }
    }
}

/// The libvirt calls a warm-cache Create makes, made directly with
/// libvirt-rpc on one connection: look the domain up, read the base and its
/// marker, make the overlay and the seed volume, define, start, read the
/// state once.
async fn direct_create(
    client: &libvirt_rpc::Client,
    pool_name: &str,
    base: &BaseNames,
    entry: &Identifier,
    name: &Identifier,
    seed: &[u8],
    bridge: &str,
) {
    use kvm2_provider::__internals::definition::domain_xml::render;
    use libvirt_rpc::{DomainCreateFlags, DomainDefineFlags, NoFlags};

    assert!(client.domain_lookup_by_name(name.as_str()).await.is_err());
    // The base and its marker.
    let pool = client.storage_pool_lookup_by_name(pool_name).await.unwrap();
    let base_vol = client
        .storage_vol_lookup_by_name(&pool, &base.base())
        .await
        .unwrap();
    let marker = client
        .storage_vol_lookup_by_name(&pool, &base.marker())
        .await
        .unwrap();
    client.storage_vol_get_info(&marker).await.unwrap();
    let mut text = Vec::new();
    client
        .storage_vol_download(&marker, 0, 0, StorageVolStreamFlags::empty(), &mut text)
        .await
        .unwrap();
    let base_path = client.storage_vol_get_path(&base_vol).await.unwrap();
    // Overlay and seed.
    let pool = client.storage_pool_lookup_by_name(pool_name).await.unwrap();
    let vols = VmVolumes::new(entry, name);
    assert!(
        client
            .storage_vol_lookup_by_name(&pool, &vols.overlay())
            .await
            .is_err()
    );
    let overlay_xml = overlay_volume(
        &vols.overlay(),
        1 << 30,
        &base_path,
        provider_api::config::ImageFormat::Raw,
    )
    .unwrap();
    let overlay = client
        .storage_vol_create_xml(&pool, &overlay_xml, StorageVolCreateFlags::empty())
        .await
        .unwrap();
    let overlay_path = client.storage_vol_get_path(&overlay).await.unwrap();
    assert!(
        client
            .storage_vol_lookup_by_name(&pool, &vols.seed())
            .await
            .is_err()
    );
    let seed_vol = client
        .storage_vol_create_xml(
            &pool,
            &raw_volume(&vols.seed(), seed.len() as u64).unwrap(),
            StorageVolCreateFlags::empty(),
        )
        .await
        .unwrap();
    client
        .storage_vol_upload(
            &seed_vol,
            0,
            seed.len() as u64,
            StorageVolStreamFlags::empty(),
            seed,
        )
        .await
        .unwrap();
    let seed_path = client.storage_vol_get_path(&seed_vol).await.unwrap();
    // Define, start, one state read.
    let xml = render(&test_domain::spec(
        name.as_str(),
        &overlay_path,
        &seed_path,
        bridge,
        test_domain::mark("kvm2-bench", "bench-direct"),
    ))
    .unwrap();
    let dom = client
        .domain_define_xml_flags(&xml, DomainDefineFlags::VALIDATE)
        .await
        .unwrap();
    client
        .domain_create_with_flags(&dom, DomainCreateFlags::empty())
        .await
        .unwrap();
    client
        .domain_get_state(&dom, NoFlags::empty())
        .await
        .unwrap();
}

async fn create_bench(d: &Descriptor) {
    use provider_api::{CreateRequest, ObjectName, OwnerUid, Provider};

    let body = common::image(1 << 20);
    let sha = common::digest(&body);
    let server = common::Server::start(move |_| common::Reply::Body {
        body: body.clone(),
        length: true,
    })
    .await;
    let url = server.url("small.img");
    let n = nonce();
    let entry = format!("kbc{}", &n[..8.min(n.len())]);
    let direct_prefix = format!("kbd{}", &n[..8.min(n.len())]);
    let cleanup = Cleanup {
        d,
        domains: std::sync::Mutex::new(Vec::new()),
        needles: vec![format!("-{entry}.")],
    };
    let config = kvm2_config(d, &entry, url.as_str(), &sha.to_string());
    let host = config.hosts[0].clone();
    let key = Identifier::parse(IMAGE_KEY).unwrap();
    let image = config.images.get(&key).unwrap().clone();
    let provider = Kvm2Provider::with_options(
        Identifier::parse(&entry).unwrap(),
        config.clone(),
        options(d),
    )
    .unwrap();
    // Warm the cache (and the shared connection) outside the timing.
    provider
        .image_cache()
        .ensure(&host, &key, &image)
        .await
        .unwrap();
    let base_names = BaseNames::new(
        &Identifier::parse(&entry).unwrap(),
        &key,
        provider_api::config::ImageFormat::Raw,
    );
    // The direct side's connection: the same transport (ssh-socket +
    // libvirt-rpc), dialled outside the timing like the provider's.
    let table = HostTable::new(&config, &options(d).hosts).unwrap();
    let conn = table.shared(&host.name).await.unwrap();
    let vendor = vendor_data::render(&config.proxy, None).unwrap();

    let rounds: usize = std::env::var("KVM2_BENCH_CREATE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let baseline = qemu_processes();
    let (mut ours, mut direct, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which side goes first: load drifts on a shared machine.
        let mut t_ours = Duration::ZERO;
        let mut t_direct = Duration::ZERO;
        for side in [round % 2, 1 - round % 2] {
            settle(baseline).await;
            if side == 0 {
                // Provider: Create one after another.
                let mut ids = Vec::new();
                let started = Instant::now();
                for i in 0..DOMAINS {
                    let owner = OwnerUid::parse(&format!("bench-{n}-{round}-{i}")).unwrap();
                    cleanup.domain(provider_api::name_from_uid(&owner).as_str());
                    let req = CreateRequest::new(
                        owner,
                        ObjectName::parse("bench").unwrap(),
                        Identifier::parse("default").unwrap(),
                    );
                    ids.push(provider.create(&req).await.unwrap().id);
                }
                t_ours = started.elapsed();
                for id in &ids {
                    provider.delete(id).await.unwrap();
                }
            } else {
                // Direct: the same calls with libvirt-rpc.
                let names: Vec<Identifier> = (0..DOMAINS)
                    .map(|i| Identifier::parse(&format!("{direct_prefix}-{round}-{i}")).unwrap())
                    .collect();
                let seeds: Vec<Vec<u8>> = names
                    .iter()
                    .map(|name| {
                        seed_iso::build(&seed_iso::SeedSpec {
                            instance_id: name,
                            hostname: name,
                            user_data: None,
                            vendor_data: &vendor,
                            time: Timestamp::from_unix_seconds(1_796_200_000).unwrap(),
                            size_limit: seed_iso::DEFAULT_SIZE_LIMIT,
                        })
                        .unwrap()
                    })
                    .collect();
                let started = Instant::now();
                for (name, seed) in names.iter().zip(&seeds) {
                    cleanup.domain(name.as_str());
                    direct_create(
                        conn.client(),
                        &d.pool.name,
                        &base_names,
                        &Identifier::parse(&entry).unwrap(),
                        name,
                        seed,
                        &d.bridge,
                    )
                    .await;
                }
                t_direct = started.elapsed();
                cleanup.domains();
            }
        }
        let ratio = t_ours.as_secs_f64() / t_direct.as_secs_f64();
        println!(
            "  round {round}: {DOMAINS} Creates to Running: provider {:.2} s, direct libvirt-rpc {:.2} s, overhead {ratio:.2}x",
            t_ours.as_secs_f64(),
            t_direct.as_secs_f64()
        );
        ours.push(t_ours.as_secs_f64());
        direct.push(t_direct.as_secs_f64());
        ratios.push(ratio);
    }
    println!(
        "create-to-running, {DOMAINS} QEMU domains, warm cache, medians of {rounds} rounds: provider {:.2} s, direct libvirt-rpc {:.2} s, overhead ratio {:.2}x (goal <= 1.2)",
        median(&ours),
        median(&direct),
        median(&ratios)
    );
    conn.close().await;
    drop(cleanup);
    drop(server);
}
