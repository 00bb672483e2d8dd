#![allow(clippy::unwrap_used, clippy::expect_used)]
//! H1 regression through Create: host1's link (a relay in front of the
//! sandbox's sshd) freezes in the middle of the base image upload — sockets
//! open, nothing forwarded, no FIN, no RST. That Create fails within its
//! budget, and a Create on host2 (the same sshd, reached directly)
//! completes meanwhile.

mod common;
mod provider_env;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{digest, image};
use kvm2_provider::image_cache::CacheOptions;
use provider_api::{Identifier, Placement, Provider};
use provider_env::{Env, Host, Image};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// A TCP relay that stops forwarding (without closing anything) once
/// `freeze_after` bytes have passed.
struct Relay {
    port: u16,
    frozen: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort(); // drops the JoinSet: every pump is aborted
    }
}

impl Relay {
    async fn start(upstream: String, freeze_after: u64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let forwarded = Arc::new(AtomicU64::new(0));
        let f = frozen.clone();
        let task = tokio::spawn(async move {
            let mut pumps = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                pumps.spawn(pump(cr, sw, f.clone(), forwarded.clone(), freeze_after));
                pumps.spawn(pump(sr, cw, f.clone(), forwarded.clone(), freeze_after));
            }
        });
        Relay { port, frozen, task }
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
    forwarded: Arc<AtomicU64>,
    freeze_after: u64,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if frozen.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if forwarded.fetch_add(n as u64, Ordering::SeqCst) + n as u64 > freeze_after {
            frozen.store(true, Ordering::SeqCst);
        }
        if frozen.load(Ordering::SeqCst) {
            // Hold both sockets, read nothing more: the sender's window
            // fills and its writes block, like a host that vanished.
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_host_fails_its_create_in_budget_while_another_host_creates() {
    let env = Env::new();
    let body = image(24 << 20);
    let server = common::serve_body(&body).await;
    // Declared after `env`, so dropped before it: the relay's sockets close
    // (ending the frozen upload on the daemon) before the volumes are
    // removed.
    let relay = Relay::start(
        format!("{}:{}", env.sandbox.ssh.host, env.sandbox.ssh.port),
        8 << 20,
    )
    .await;

    // host1 is the relay (its known_hosts line names the relay's port with
    // the sandbox's host key); host2 is the sandbox directly.
    let dir = tempfile::tempdir().unwrap();
    let key_pub = format!("{}.pub", env.sandbox.ssh.host_key_path.display());
    let host_key = std::fs::read_to_string(&key_pub).unwrap();
    let known_hosts = dir.path().join("known_hosts");
    std::fs::write(
        &known_hosts,
        format!(
            "[127.0.0.1]:{} {}\n{}",
            relay.port,
            host_key.trim(),
            std::fs::read_to_string(&env.sandbox.ssh.known_hosts_path).unwrap()
        ),
    )
    .unwrap();
    // Two hosts never share a pool; here both are the sandbox's daemon, so
    // host2 gets a pool of its own (one pool would hold one base and one
    // fill lease, and host2 would rightly wait for host1's fill).
    let pool_dir = tempfile::tempdir().unwrap();
    let pool2 = format!("{}-h2", env.entry);
    let (ok, out) = env.virsh(&[
        "pool-create-as",
        &pool2,
        "dir",
        "--target",
        &pool_dir.path().display().to_string(),
    ]);
    assert!(ok, "{out}");
    {
        let (uri, pool2) = (env.uri.clone(), pool2.clone());
        env.on_teardown(move || {
            let _ = std::process::Command::new("virsh")
                .args(["-c", &uri, "pool-destroy", &pool2])
                .output();
        });
    }
    env.watch_pool(&pool2);
    let hosts = [
        Host {
            address: "127.0.0.1".into(),
            port: relay.port,
            ..env.host("host1")
        },
        Host {
            pool: pool2.clone(),
            ..env.host("host2")
        },
    ];
    let img = Image {
        key: "big".into(),
        url: server.url("/big.raw").to_string(),
        sha256: digest(&body).to_string(),
        format: "raw",
    };
    let yaml = env.yaml(&hosts, &[img], Some(&known_hosts.display().to_string()));
    let mut options = env.options();
    let fill_budget = Duration::from_secs(30);
    let cleanup_budget = Duration::from_secs(5);
    let mut cache = CacheOptions::default();
    cache.fill_budget = fill_budget;
    cache.cleanup_budget = cleanup_budget;
    options.cache = cache;
    let provider = env.provider(&yaml, options);

    let frozen_req = env.request(
        env.owner(),
        Placement::Require(Identifier::parse("host1").unwrap()),
    );
    let other_req = env.request(
        env.owner(),
        Placement::Require(Identifier::parse("host2").unwrap()),
    );

    let started = Instant::now();
    let frozen_create = async {
        let r = provider.create(&frozen_req).await;
        (r, Instant::now())
    };
    let other_create = async {
        // Start once host1's link is frozen mid-upload.
        while !relay.frozen.load(Ordering::SeqCst) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the upload through the relay never got going"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = provider.create(&other_req).await;
        (r, Instant::now())
    };
    // Both futures in one task: a frozen Create that blocked its thread or
    // a shared lock would stall the other one here.
    let ((frozen_result, frozen_done), (other_result, other_done)) =
        tokio::time::timeout(Duration::from_secs(180), async {
            tokio::join!(frozen_create, other_create)
        })
        .await
        .expect("a create hung past every budget");

    let other = other_result.expect("the create on the healthy host failed");
    assert_eq!(env.domain_state(other.id.instance().as_str()), "running");
    assert!(
        other_done < frozen_done,
        "host2's create should finish while host1's is stuck"
    );
    let err = frozen_result.expect_err("a create over a frozen link cannot succeed");
    eprintln!("frozen create: {err} after {:?}", frozen_done - started);
    assert!(err.is_transient(), "{err:?}");
    let took = frozen_done - started;
    // Its budget: dial, the fill budget, the clean-up bound; plus slack for
    // a loaded CI machine, far below the 5-minute default call deadline.
    assert!(
        took < fill_budget + cleanup_budget + Duration::from_secs(40),
        "the frozen create took {took:?}"
    );
    provider.delete(&other.id).await.unwrap();
}
