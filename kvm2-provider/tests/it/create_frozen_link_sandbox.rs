#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A frozen link through Create (invariant 1): host1's link (a relay in front of the
//! sandbox's sshd) freezes in the middle of the base image upload — sockets
//! open, nothing forwarded, no FIN, no RST. That Create fails within its
//! budget, and a Create on host2 (the same sshd, reached directly)
//! completes meanwhile.

use std::time::{Duration, Instant};

use crate::http_server::{digest, image};
use crate::provider_env::{Env, Host, Image};
use kvm2_provider::CacheOptions;
use provider_api::{Identifier, Placement, Provider};
use testkit::relay::{Relay, RelayOptions};
use testkit::sshd::known_hosts_with_port;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_host_fails_its_create_in_budget_while_another_host_creates() {
    let env = Env::new();
    let body = image(24 << 20);
    let server = crate::http_server::serve_body(&body).await;
    // Declared after `env`, so dropped before it: the relay's sockets close
    // (ending the frozen upload on the daemon) before the volumes are
    // removed.
    let relay = Relay::tcp_with(
        format!("{}:{}", env.sandbox.ssh.host, env.sandbox.ssh.port),
        RelayOptions {
            freeze_after: Some(8 << 20),
            ..RelayOptions::default()
        },
    )
    .await;

    // host1 is the relay (its known_hosts line names the relay's port with
    // the sandbox's host key); host2 is the sandbox directly.
    let dir = tempfile::tempdir().unwrap();
    let known_hosts = known_hosts_with_port(&env.sandbox, dir.path(), relay.port());
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
            let _ = testkit::virsh::Virsh::new(uri).run(&["pool-destroy", &pool2]);
        });
    }
    env.watch_pool(&pool2);
    let hosts = [
        env.host("host1").at_loopback_port(relay.port()),
        Host {
            pool: pool2.clone(),
            ..env.host("host2")
        },
    ];
    let img = Image::new(
        "big",
        server.url("/big.raw").to_string(),
        digest(&body).to_string(),
        "raw",
    );
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
        while !relay.is_frozen() {
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
