#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Safety on shared, busy hosts (issue 13), on the real stack: bases in use
//! are never deleted, fills are fenced across processes, host capacity is
//! checked before define, and Create is bounded by the caller's deadline.

use crate::http_server::qcow2_image;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::provider_env::{Env, Host, Image, served_image};
use kvm2_provider::__internals::images::Lease;
use kvm2_provider::{HostOptions, Kvm2Provider};
use provider_api::{
    ErrorClass, Identifier, OwnerUid, Placement, Provider, ProvidersConfig, name_from_uid,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// An HTTP server that holds each response until its gate opens, then
/// sends the body in 256 KiB pieces `pace` apart (with a Content-Length).
struct SlowServer {
    port: u16,
    hits: Arc<AtomicUsize>,
    gate: Arc<AtomicBool>,
    _tasks: JoinSet<()>,
}

impl SlowServer {
    async fn start(body: Arc<Vec<u8>>, pace: Duration, open: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(AtomicBool::new(open));
        let mut tasks = JoinSet::new();
        let (h, g) = (hits.clone(), gate.clone());
        tasks.spawn(async move {
            let mut conns = JoinSet::new();
            while let Ok((mut sock, _)) = listener.accept().await {
                let (h, g, body) = (h.clone(), g.clone(), body.clone());
                conns.spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    h.fetch_add(1, Ordering::SeqCst);
                    while !g.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    if sock.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    for piece in body.chunks(256 << 10) {
                        if sock.write_all(piece).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(pace).await;
                    }
                });
            }
        });
        Self {
            port,
            hits,
            gate,
            _tasks: tasks,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn open(&self) {
        self.gate.store(true, Ordering::SeqCst);
    }
}

/// Writes `lease` into the volume `name` as another process would: created
/// when absent, else rewritten in place (as a heartbeat is: never absent
/// meanwhile).
fn put_lease(env: &Env, pool: &str, name: &str, lease: &Lease) {
    let bytes = lease.render();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();
    if !env.volumes(pool).iter().any(|v| v == name) {
        let (ok, out) = env.virsh(&["vol-create-as", pool, name, &bytes.len().to_string()]);
        assert!(ok, "{out}");
    }
    let path = file.path().display().to_string();
    let (ok, out) = env.virsh(&["vol-upload", "--pool", pool, name, &path]);
    assert!(ok, "{out}");
}

fn image_at(key: &str, url: String, body: &[u8]) -> Image {
    Image::new(
        key,
        url,
        crate::http_server::digest(body).to_string(),
        "qcow2",
    )
}

/// Item 1: a base whose marker is gone or garbage is kept while a pool
/// volume is backed by it or a domain's disk names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_in_use_is_never_deleted_even_without_a_valid_marker() {
    let env = Env::new();
    let body = qcow2_image("64M");
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "guest", &body, "qcow2");
    let yaml = env.yaml(&[env.host("host1")], &[image], None);
    let provider = env.provider(&yaml, env.options());
    let config = env.config(&yaml);
    let key = Identifier::parse("guest").unwrap();
    let host = &config.hosts[0];
    let got = provider
        .image_cache()
        .ensure(host, &key, &config.images[&key])
        .await
        .unwrap();
    let pool = env.sandbox.pool.name.clone();
    let marker = format!("{}.marker", got.name);

    // A real qcow2 overlay in the pool, backed by the base.
    let overlay = format!("vm-{}.manual.overlay.qcow2", env.entry);
    let (ok, out) = env.virsh(&[
        "vol-create-as",
        &pool,
        &overlay,
        "1G",
        "--format",
        "qcow2",
        "--backing-vol",
        &got.path,
        "--backing-vol-format",
        "qcow2",
    ]);
    assert!(ok, "{out}");
    // The marker is lost, then replaced by garbage.
    for garbage in [false, true] {
        let (ok, out) = env.virsh(&["vol-delete", "--pool", &pool, &marker]);
        assert!(ok, "{out}");
        if garbage {
            let (ok, out) = env.virsh(&["vol-create-as", &pool, &marker, "1K"]);
            assert!(ok, "{out}");
        }
        let err = provider
            .image_cache()
            .ensure(host, &key, &config.images[&key])
            .await
            .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
        let text = err.to_string();
        assert!(text.contains("in use by volumes"), "{text}");
        assert!(text.contains(&overlay), "{text}");
        assert!(env.volumes(&pool).contains(&got.name), "the base must stay");
        assert_eq!(std::fs::read(&got.path).unwrap(), *body);
        assert_eq!(server.hits(), 1, "nothing downloaded over it");
        if !garbage {
            // Put a marker back for the next round to break.
            let (ok, out) = env.virsh(&["vol-create-as", &pool, &marker, "1K"]);
            assert!(ok, "{out}");
        }
    }
    let (ok, out) = env.virsh(&["vol-delete", "--pool", &pool, &overlay]);
    assert!(ok, "{out}");

    // A (defined, stopped) domain whose disk is the base's file.
    let owner = env.owner();
    let dom = name_from_uid(&owner).to_string();
    let xml = format!(
        "<domain type='qemu'><name>{dom}</name><memory unit='MiB'>128</memory><vcpu>1</vcpu>\
         <os><type arch='x86_64' machine='q35'>hvm</type></os><devices>\
         <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>\
         <source file='{}'/><target dev='vda' bus='virtio'/></disk></devices></domain>",
        got.path
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), xml).unwrap();
    let (ok, out) = env.virsh(&["define", &file.path().display().to_string()]);
    assert!(ok, "{out}");
    let err = provider
        .image_cache()
        .ensure(host, &key, &config.images[&key])
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
    assert!(err.to_string().contains(&format!("domains {dom}")), "{err}");
    assert!(env.volumes(&pool).contains(&got.name));
    let (ok, out) = env.virsh(&["undefine", &dom]);
    assert!(ok, "{out}");

    // Unused now: debris, replaced.
    provider
        .image_cache()
        .ensure(host, &key, &config.images[&key])
        .await
        .unwrap();
    assert_eq!(server.hits(), 2);
}

const CHILD_CONFIG: &str = "KVM2_SHARED_HOST_CHILD_CONFIG";
const CHILD_OWNER: &str = "KVM2_SHARED_HOST_CHILD_OWNER";

/// The other process of `two_processes_fill_one_image_once`: a Create from
/// its own provider on the same entry and pool. Does nothing when run on
/// its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process_create() {
    let (Ok(yaml), Ok(owner)) = (std::env::var(CHILD_CONFIG), std::env::var(CHILD_OWNER)) else {
        return;
    };
    let config = ProvidersConfig::from_yaml_str(&yaml).unwrap();
    let entry = &config.providers[0];
    let env = Env::new();
    let provider = Kvm2Provider::with_options(
        entry.name.clone(),
        entry.kvm2().unwrap().clone(),
        env.options(),
    )
    .unwrap();
    let req = env.request(OwnerUid::parse(&owner).unwrap(), Placement::Any);
    provider.create(&req).await.unwrap();
    // Leave the clean-up to the parent's guard: forget this Env's own.
    std::mem::forget(env);
}

/// Item 2: two processes, one pool, concurrent cold Creates of one image:
/// one download, no upload deleted under the other, both succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_fill_one_image_once() {
    let env = Env::new();
    let body = qcow2_image("64M");
    // Slow enough that both processes look while the first fill runs.
    let mut padded = (*body).clone();
    padded.resize(8 << 20, 0);
    let body = Arc::new(padded);
    let server = SlowServer::start(body.clone(), Duration::from_millis(100), true).await;
    let image = image_at("guest", server.url("/guest.qcow2"), &body);
    let yaml = env.yaml(&[env.host("host1")], &[image], None);
    let provider = env.provider(&yaml, env.options());
    let (ours, theirs) = (env.owner(), env.owner());

    // The test's name inside this binary: its module path without the
    // binary's own crate name.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let child_test = format!("{module}::child_process_create");
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &child_test, "--nocapture"])
        .env(CHILD_CONFIG, &yaml)
        .env(CHILD_OWNER, theirs.as_str())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    let mine = provider.create(&env.request(ours, Placement::Any)).await;
    // The child's Create is bounded by its own budgets (fill 120 s, dial
    // 30 s, calls 60 s); this bound only keeps a broken run from hanging.
    let output = tokio::time::timeout(Duration::from_secs(600), waiting)
        .await
        .expect("the other process ended")
        .unwrap()
        .unwrap();
    let out = (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    mine.unwrap();
    assert!(
        out.0.success(),
        "the other process's Create: {}{}",
        out.1,
        out.2
    );
    assert!(out.1.contains("1 passed"), "{}", out.1);
    assert_eq!(server.hits(), 1, "one download for both processes");
    assert!(env.domain_exists(name_from_uid(&theirs).as_str()));
    let pool = env.sandbox.pool.name.clone();
    let left: Vec<_> = env
        .our_volumes(&pool)
        .into_iter()
        .filter(|v| v.starts_with("base-"))
        .collect();
    let base = format!("base-{}.guest.qcow2", env.entry);
    assert_eq!(
        left,
        [base.clone(), format!("{base}.marker")],
        "no lease left"
    );
}

/// Item 2: a fill lease that is provably abandoned (its heartbeat older
/// than the staleness window: its holder fenced itself long before) is
/// swept with its unpublished base, even while its fill budget would still
/// run — a killed operator's fill frees the image in minutes, not after
/// 45; a live one is waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_provably_abandoned_fill_is_swept() {
    let env = Env::new();
    let body = qcow2_image("64M");
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "guest", &body, "qcow2");
    let yaml = env.yaml(&[env.host("host1")], &[image], None);
    let mut options = env.options();
    options.cache.fill_budget = Duration::from_secs(45 * 60);
    let provider = env.provider(&yaml, options);
    let config = env.config(&yaml);
    let key = Identifier::parse("guest").unwrap();
    let pool = env.sandbox.pool.name.clone();
    let base = format!("base-{}.guest.qcow2", env.entry);
    let lease_name = format!("{base}.fill");
    let now = std::time::SystemTime::now();
    let write_lease = |lease: Lease| put_lease(&env, &pool, &lease_name, &lease);
    // Another process's fill, live: started now, beating.
    let (ok, out) = env.virsh(&["vol-create-as", &pool, &base, "64K"]);
    assert!(ok, "{out}");
    write_lease(Lease::new(7, now));
    let soon = tokio::time::Instant::now() + Duration::from_secs(4);
    let err = provider
        .image_cache()
        .ensure_by(&config.hosts[0], &key, &config.images[&key], Some(soon))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("still being filled"), "{err}");
    assert!(
        env.volumes(&pool).contains(&base),
        "a live fill's base stays"
    );
    assert!(env.volumes(&pool).contains(&lease_name));
    assert_eq!(server.hits(), 0);

    // The same fill, killed: started 3 min ago, its last beat then too
    // (well inside its 45 min budget).
    let old = Lease::new(7, now - Duration::from_secs(180));
    write_lease(old);
    let got = provider
        .image_cache()
        .ensure(&config.hosts[0], &key, &config.images[&key])
        .await
        .unwrap();
    assert_eq!(server.hits(), 1);
    assert_eq!(std::fs::read(&got.path).unwrap(), *body);
    assert!(!env.volumes(&pool).contains(&lease_name));
}

/// Item 2, the holder's side: a fill that finds its lease taken (swept by
/// another process that judged it abandoned) stops writing at once — its
/// upload is aborted mid-way — and publishes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_that_loses_its_lease_stops_writing_at_once() {
    let env = Env::new();
    // 16 MiB in 256 KiB pieces 100 ms apart: about 6.4 s of upload.
    let body = crate::http_server::image(16 << 20);
    let server = SlowServer::start(body.clone(), Duration::from_millis(100), true).await;
    let mut image = image_at("guest", server.url("/guest.raw"), &body);
    image.format = "raw";
    let yaml = env.yaml(&[env.host("host1")], &[image], None);
    let mut options = env.options();
    options.cache.lease.heartbeat = Duration::from_millis(200);
    let provider = Arc::new(env.provider(&yaml, options));
    let config = env.config(&yaml);
    let key = Identifier::parse("guest").unwrap();
    let pool = env.sandbox.pool.name.clone();
    let base = format!("base-{}.guest.raw", env.entry);
    let lease_name = format!("{base}.fill");
    let filling = {
        let (provider, host, image) = (
            provider.clone(),
            config.hosts[0].clone(),
            config.images[&key].clone(),
        );
        let key = key.clone();
        tokio::spawn(async move { provider.image_cache().ensure(&host, &key, &image).await })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !env.volumes(&pool).contains(&base) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fill never began"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Another process sweeps the lease and takes it for a fill of its own.
    let (ok, out) = env.virsh(&["vol-delete", "--pool", &pool, &lease_name]);
    assert!(ok, "{out}");
    let theirs = Lease::new(9, std::time::SystemTime::now());
    put_lease(&env, &pool, &lease_name, &theirs);

    let err = tokio::time::timeout(Duration::from_secs(60), filling)
        .await
        .expect("the fill ended")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err:?}");
    assert!(err.to_string().contains("lease was lost"), "{err}");
    let vols = env.volumes(&pool);
    assert!(
        !vols.contains(&format!("{base}.marker")),
        "nothing published"
    );
    // The other fill's lease is left alone, and our upload stopped short.
    let (ok, info) = env.virsh(&["vol-info", "--pool", &pool, &base, "--bytes", "--physical"]);
    assert!(ok, "{info}");
    let written: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("Physical:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no physical size in {info}"));
    assert!(
        written < body.len() as u64,
        "the fill wrote on: {written} of {} bytes",
        body.len()
    );
    assert!(vols.contains(&lease_name), "their lease stays");
    let (ok, out) = env.virsh(&["vol-delete", "--pool", &pool, &lease_name]);
    assert!(ok, "{out}");
}

/// Item 3: a host without room for the machine type is QuotaExceeded,
/// naming what is short: vCPUs and memory at admission, before the image
/// is fetched to the host; pool space before anything per-VM is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_room_is_quota_exceeded_naming_what_is_short() {
    let env = Env::new();
    let body = qcow2_image("64M");
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "guest", &body, "qcow2");
    let yaml = env
        .providers()
        .images([image.clone()])
        .machine_type(128, "1TiB", "1GiB")
        .render();
    let provider = env.provider(&yaml, env.options());
    let owner = env.owner();
    let err = provider
        .create(&env.request(owner.clone(), Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::QuotaExceeded, "{err:?}");
    let text = err.to_string();
    for what in ["vCPUs", "memory"] {
        assert!(text.contains(what), "{what}: {text}");
    }
    assert_eq!(server.hits(), 0, "the image is not fetched to a full host");

    // A machine that fits, a pool that does not.
    let yaml = env.providers().images([image]).render();
    let mut options = env.options();
    options.overlay_reserve = 1 << 50;
    let provider = env.provider(&yaml, options);
    let err = provider
        .create(&env.request(owner.clone(), Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::QuotaExceeded, "{err:?}");
    assert!(err.to_string().contains("pool"), "{err}");
    assert!(!env.domain_exists(name_from_uid(&owner).as_str()));
    let pool = env.sandbox.pool.name.clone();
    assert!(
        env.our_volumes(&pool).iter().all(|v| !v.starts_with("vm-")),
        "{:?}",
        env.our_volumes(&pool)
    );
}

/// Item 3: a start that fails for want of memory is QuotaExceeded, not
/// Transient (the capacity check off, so the start is what fails).
///
/// 256 GiB: far more than a test machine has (the kernel refuses QEMU's
/// guest RAM mapping), yet inside a 40-bit guest address space (1 TiB
/// would make QEMU refuse the layout itself on such CPUs: "phys-bits too
/// low", which is not a shortage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_short_of_memory_is_quota_exceeded() {
    let env = Env::new();
    let body = qcow2_image("64M");
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "guest", &body, "qcow2");
    let yaml = env
        .providers()
        .images([image])
        .machine_type(1, "256GiB", "1GiB")
        .render();
    // With vm.overcommit_memory=1 (what the kubelet of `cargo xtask sandbox
    // node`, which `cargo xtask test` starts, sets) the kernel grants every
    // mapping and no start can fail for want of memory: the kernel's
    // default heuristic is restored for this test, and the node's value
    // after it (`sandbox down` restores the machine's own in any case).
    let _heuristic = Overcommit::heuristic();
    let overcommit = std::fs::read_to_string(OVERCOMMIT).unwrap();
    assert_ne!(overcommit.trim(), "1", "the kernel grants every mapping");
    let mut options = env.options();
    options.capacity_check = false;
    let provider = env.provider(&yaml, options);
    let owner = env.owner();
    let err = provider
        .create(&env.request(owner.clone(), Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::QuotaExceeded, "{err:?}");
    assert!(err.to_string().contains("memory"), "{err}");
    assert!(!env.domain_exists(name_from_uid(&owner).as_str()));
}

/// Item 4: a Create leaves at its deadline while the image fill it waits
/// on goes on; the next Create joins that fill (one download).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_leaves_at_its_deadline_and_the_fill_goes_on() {
    let env = Env::new();
    let body = qcow2_image("64M");
    let server = SlowServer::start(body.clone(), Duration::ZERO, false).await;
    let image = image_at("guest", server.url("/guest.qcow2"), &body);
    let provider = env.one_host_provider(image);
    let owner = env.owner();

    let req = env
        .request(owner.clone(), Placement::Any)
        .with_timeout(Duration::from_secs(5));
    let outcome = tokio::time::timeout(Duration::from_secs(60), provider.create(&req))
        .await
        .expect("the create returned near its deadline");
    let err = outcome.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err:?}");
    assert!(err.to_string().contains("deadline"), "{err}");
    assert_eq!(provider.image_cache().in_flight(), 1, "the fill goes on");
    assert!(!env.domain_exists(name_from_uid(&owner).as_str()));

    server.open();
    let inst = provider
        .create(&env.request(owner, Placement::Any))
        .await
        .unwrap();
    assert_eq!(server.hits(), 1, "joined the fill, not restarted");
    provider.delete(&inst.id).await.unwrap();
}

/// Item 4: a host whose dial failed is tried last while it cools down, so
/// a blackholed host does not cost its dial budget on every Create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_failed_to_dial_is_tried_last_during_its_cool_down() {
    let env = Env::new();
    // Accepts and never speaks: an SSH dial to it hangs until its budget.
    let hole = testkit::silent::Silent::start().await;
    let body = qcow2_image("64M");
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "guest", &body, "qcow2");
    let dead = Host {
        name: "dead".into(),
        ..env.host("host1").at_loopback_port(hole.port())
    };
    let yaml = env.yaml(&[dead, env.host("host1")], &[image], None);
    let mut options = env.options();
    options.hosts = HostOptions {
        dial_budget: Duration::from_secs(2),
        ..options.hosts
    };
    let provider = env.provider(&yaml, options);
    let prefer_dead = Placement::Prefer(Identifier::parse("dead").unwrap());

    let first = provider
        .create(&env.request(env.owner(), prefer_dead.clone()))
        .await
        .unwrap();
    assert_eq!(first.host.as_str(), "host1");
    assert_eq!(hole.accepted(), 1, "the first Create dialled it");
    let second = provider
        .create(&env.request(env.owner(), prefer_dead))
        .await
        .unwrap();
    assert_eq!(second.host.as_str(), "host1");
    assert_eq!(hole.accepted(), 1, "cooling down: not dialled again");
    provider.delete(&first.id).await.unwrap();
    provider.delete(&second.id).await.unwrap();
}

const OVERCOMMIT: &str = "/proc/sys/vm/overcommit_memory";

/// vm.overcommit_memory at 0 (the kernel's heuristic) while it lives, the
/// value before it afterwards.
struct Overcommit(Option<String>);

impl Overcommit {
    fn heuristic() -> Overcommit {
        let before = std::fs::read_to_string(OVERCOMMIT).unwrap();
        if before.trim() == "0" {
            return Overcommit(None);
        }
        std::fs::write(OVERCOMMIT, "0").unwrap();
        Overcommit(Some(before))
    }
}

impl Drop for Overcommit {
    fn drop(&mut self) {
        if let Some(before) = &self.0 {
            let _ = std::fs::write(OVERCOMMIT, before.trim());
        }
    }
}
