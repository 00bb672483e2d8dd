#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The base image cache's failure modes, through Create on the real stack
//! (local HTTP server → provider → sandbox sshd → libvirtd's pool): digest
//! mismatch, a download dying mid-way, five cold Creates sharing one GET,
//! edited URL / sha256, a pool too small.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use testkit::tasks::alive_tasks;

use crate::http_server::{Reply, Server, digest, image};
use crate::provider_env::{Env, Host, Image};
use kvm2_provider::CacheOptions;
use provider_api::{
    ErrorClass, Identifier, Placement, Provider, ProviderId, ProviderType, name_from_uid,
};

fn raw_image(key: &str, server: &Server, path: &str, body: &[u8]) -> Image {
    Image::new(
        key,
        server.url(path).to_string(),
        digest(body).to_string(),
        "raw",
    )
}

fn id(env: &Env, owner: &provider_api::OwnerUid) -> ProviderId {
    ProviderId::new(
        ProviderType::Kvm2,
        Identifier::parse(&env.entry).unwrap(),
        Identifier::parse("host1").unwrap(),
        name_from_uid(owner),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_download_is_permanent_and_publishes_nothing() {
    let env = Env::new();
    let body = image(2 << 20);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let mut img = raw_image("tiny", &server, "/tiny.raw", &body);
    // The config expects other bytes than the server sends.
    img.sha256 = digest(b"something else").to_string();
    let provider = env.one_host_provider(img);

    let err = provider
        .create(&env.request(env.owner(), Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
    assert!(format!("{err}").contains("sha256 mismatch"), "{err}");
    assert_eq!(server.hits(), 1);
    // No base, no marker, no upload left; no domain.
    let pool = env.sandbox.pool.name.clone();
    assert_eq!(env.our_volumes(&pool), Vec::<String>::new());
    assert_eq!(provider.image_cache().in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_dying_mid_way_leaves_nothing_and_the_next_create_succeeds() {
    let env = Env::new();
    let body = image(4 << 20);
    let dies = Arc::new(AtomicBool::new(true));
    let (b, d) = (body.clone(), dies.clone());
    let server = Server::start(move |_| {
        if d.load(Ordering::SeqCst) {
            Reply::ChunkedDies {
                body: b.clone(),
                send: 3 << 20,
            }
        } else {
            Reply::Chunked(b.clone())
        }
    })
    .await;
    let img = raw_image("tiny", &server, "/tiny.raw", &body);
    let provider = env.one_host_provider(img);
    let owner = env.owner();
    let req = env.request(owner.clone(), Placement::Any);

    // Warm the shared connection so its driver task is in the baseline.
    let probe = id(&env, &env.owner());
    assert!(provider.get(&probe).await.unwrap_err().is_not_found());
    let baseline = alive_tasks();

    let err = provider.create(&req).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err:?}");
    assert!(format!("{err}").contains("image download failed"), "{err}");
    assert_eq!(server.hits(), 1);
    let pool = env.sandbox.pool.name.clone();
    assert_eq!(env.our_volumes(&pool), Vec::<String>::new());
    assert_eq!(provider.image_cache().in_flight(), 0);
    // No task outlives the failed Create (the dedicated connection's driver
    // and the HTTP server's connection end).
    let waited = Instant::now();
    while alive_tasks() > baseline {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "{} tasks alive, {baseline} before the create",
            alive_tasks()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The source recovers: the next Create downloads again and succeeds.
    dies.store(false, Ordering::SeqCst);
    let inst = provider.create(&req).await.unwrap();
    assert_eq!(server.hits(), 2);
    let base = format!("base-{}.tiny.raw", env.entry);
    assert_eq!(
        std::fs::read(env.sandbox.pool.dir.join(&base)).unwrap(),
        *body
    );
    provider.delete(&inst.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_concurrent_creates_on_a_cold_image_download_it_once() {
    let env = Env::new();
    let body = image(8 << 20);
    let server = crate::http_server::serve_body(&body).await;
    let img = raw_image("tiny", &server, "/tiny.raw", &body);
    let provider = env.one_host_provider(img);
    let owners: Vec<_> = (0..5).map(|_| env.owner()).collect();
    let reqs: Vec<_> = owners
        .iter()
        .map(|o| env.request(o.clone(), Placement::Any))
        .collect();

    // Plus a second Create for the first owner at the same time: turned
    // away while the first runs (it would replace the first's volumes).
    let (results, duplicate) = tokio::join!(
        futures::future::join_all(reqs.iter().map(|r| provider.create(r))),
        provider.create(&reqs[0])
    );
    let err = duplicate.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err:?}");
    assert!(err.to_string().contains("already running"), "{err}");
    let instances: Vec<_> = results.into_iter().map(Result::unwrap).collect();
    // Afterwards, Create for that owner returns the same instance.
    assert_eq!(provider.create(&reqs[0]).await.unwrap().id, instances[0].id);
    assert_eq!(server.hits(), 1, "five cold creates, one download");
    for inst in &instances {
        assert_eq!(env.domain_state(inst.id.instance().as_str()), "running");
    }
    for inst in &instances {
        provider.delete(&inst.id).await.unwrap();
    }
    let base = format!("base-{}.tiny.raw", env.entry);
    let pool = env.sandbox.pool.name.clone();
    assert_eq!(
        env.our_volumes(&pool),
        [base.clone(), format!("{base}.marker")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_url_or_sha256_is_permanent_and_the_base_stays() {
    let env = Env::new();
    let body = image(1 << 20);
    let other = image(1 << 19);
    let (b, o) = (body.clone(), other.clone());
    let server = Server::start(move |path| {
        if path == "/other.raw" {
            Reply::Chunked(o.clone())
        } else {
            Reply::Chunked(b.clone())
        }
    })
    .await;
    let original = raw_image("tiny", &server, "/tiny.raw", &body);
    let yaml = env.yaml(&[env.host("host1")], &[original], None);
    let provider = env.provider(&yaml, env.options());
    let config = env.config(&yaml);
    let key = Identifier::parse("tiny").unwrap();
    provider
        .image_cache()
        .ensure(&config.hosts[0], &key, &config.images[&key])
        .await
        .unwrap();
    assert_eq!(server.hits(), 1);
    let base = format!("base-{}.tiny.raw", env.entry);
    let pool = env.sandbox.pool.name.clone();
    let kept = [base.clone(), format!("{base}.marker")];

    // Same bytes at a new URL, and a new digest (and bytes) at the old URL.
    let moved = raw_image("tiny", &server, "/tiny-moved.raw", &body);
    let mut redigested = raw_image("tiny", &server, "/other.raw", &other);
    redigested.url = server.url("/tiny.raw").to_string();
    for (edited, field) in [(moved, "url"), (redigested, "sha256")] {
        let yaml = env.yaml(&[env.host("host1")], &[edited], None);
        let edited_provider = env.provider(&yaml, env.options());
        let err = edited_provider
            .create(&env.request(env.owner(), Placement::Any))
            .await
            .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
        let text = err.to_string();
        assert!(text.contains(&format!("{field} is")), "{text}");
        assert!(text.contains("add a new image key"), "{text}");
        assert_eq!(env.our_volumes(&pool), kept, "the base must stay");
    }
    // Neither edit downloaded anything.
    assert_eq!(server.hits(), 1);
    assert_eq!(
        std::fs::read(env.sandbox.pool.dir.join(&base)).unwrap(),
        *body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_too_small_is_quota_exceeded() {
    let env = Env::new();
    // A pool of this test's own on a 16 MiB tmpfs.
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("pool");
    std::fs::create_dir(&mount).unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
        .arg(&mount)
        .status()
        .unwrap();
    assert!(status.success(), "mount tmpfs");
    let pool = format!("{}-small", env.entry);
    {
        let mount = mount.clone();
        env.on_teardown(move || {
            let _ = std::process::Command::new("umount").arg(&mount).status();
        });
    }
    let (ok, out) = env.virsh(&[
        "pool-create-as",
        &pool,
        "dir",
        "--target",
        &mount.display().to_string(),
    ]);
    assert!(ok, "{out}");
    {
        let (uri, pool) = (env.uri.clone(), pool.clone());
        env.on_teardown(move || {
            let _ = testkit::virsh::Virsh::new(uri).run(&["pool-destroy", &pool]);
        });
    }
    env.watch_pool(&pool);

    // 20 MiB does not fit the 16 MiB pool (the image is written once,
    // straight into the base).
    let body = image(20 << 20);
    let server = crate::http_server::serve_body(&body).await;
    let img = raw_image("big", &server, "/big.raw", &body);
    let host = Host {
        pool: pool.clone(),
        ..env.host("host1")
    };
    let yaml = env.yaml(&[host], &[img], None);
    let mut options = env.options();
    let mut cache = CacheOptions::default();
    cache.headroom = 0;
    cache.fill_budget = Duration::from_secs(120);
    options.cache = cache;
    let provider = env.provider(&yaml, options);

    let err = provider
        .create(&env.request(env.owner(), Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::QuotaExceeded, "{err:?}");
    assert!(err.to_string().contains(&pool), "{err}");
    assert_eq!(env.volumes(&pool), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_without_a_valid_marker_is_debris_and_replaced() {
    let env = Env::new();
    let body = image(1 << 20);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let img = raw_image("tiny", &server, "/tiny.raw", &body);
    let yaml = env.yaml(&[env.host("host1")], &[img], None);
    let provider = env.provider(&yaml, env.options());
    let config = env.config(&yaml);
    let key = Identifier::parse("tiny").unwrap();
    let pool = env.sandbox.pool.name.clone();
    let base = format!("base-{}.tiny.raw", env.entry);
    let marker = format!("{base}.marker");

    // A half-published base (no marker), then one with a garbage marker.
    for with_marker in [false, true] {
        let (ok, out) = env.virsh(&["vol-create-as", &pool, &base, "64K"]);
        assert!(ok, "{out}");
        if with_marker {
            let (ok, out) = env.virsh(&["vol-create-as", &pool, &marker, "1K"]);
            assert!(ok, "{out}");
        }
        let before = server.hits();
        let got = provider
            .image_cache()
            .ensure(&config.hosts[0], &key, &config.images[&key])
            .await
            .unwrap();
        assert_eq!(server.hits(), before + 1, "debris must not be used");
        assert_eq!(got.size, body.len() as u64);
        assert_eq!(
            std::fs::read(env.sandbox.pool.dir.join(&base)).unwrap(),
            *body
        );
        // Warm now: no further download.
        provider
            .image_cache()
            .ensure(&config.hosts[0], &key, &config.images[&key])
            .await
            .unwrap();
        assert_eq!(server.hits(), before + 1);
        let (ok, out) = env.virsh(&["vol-delete", "--pool", &pool, &marker]);
        assert!(ok, "{out}");
        let (ok, out) = env.virsh(&["vol-delete", "--pool", &pool, &base]);
        assert!(ok, "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_over_its_budget_fails_and_removes_its_upload() {
    let env = Env::new();
    let body = image(2 << 20);
    let b = body.clone();
    // Headers and 1 MiB, then silence (the download's own stall timeout is
    // a minute: the fill budget must end it first).
    let server = Server::start(move |_| Reply::Stalls {
        body: b.clone(),
        send: 1 << 20,
    })
    .await;
    let img = raw_image("tiny", &server, "/tiny.raw", &body);
    let yaml = env.yaml(&[env.host("host1")], &[img], None);
    let mut options = env.options();
    let mut cache = CacheOptions::default();
    cache.fill_budget = Duration::from_secs(3);
    options.cache = cache;
    let provider = env.provider(&yaml, options);

    let started = Instant::now();
    let err = provider
        .create(&env.request(env.owner(), Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err:?}");
    assert!(err.to_string().contains("budget"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "took {:?}",
        started.elapsed()
    );
    let pool = env.sandbox.pool.name.clone();
    assert_eq!(env.our_volumes(&pool), Vec::<String>::new());
    assert_eq!(provider.image_cache().in_flight(), 0);
}
