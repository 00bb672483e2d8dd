//! Placement across the sandbox's hypervisor hosts (host 1 on loopback,
//! host 2 a host on a network with its own sshd and libvirtd): a host at
//! its `max_instances`, short of memory after its `reserved_memory`, or
//! down sends a Create on to the next host before the operator waits.

use std::time::Duration;

use crate::provider_env::{Env, Host, tiny_served_image};
use provider_api::{ErrorClass, Identifier, Placement, Provider, ProviderId};
use testkit::HypervisorHost;

/// The tests that stop host 2 take turns with each other and with those
/// that need it up.
pub static HOST2: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn two_hosts(env: &Env) -> (Host, Host) {
    let hosts = &env.sandbox.hosts;
    assert!(
        hosts.len() >= 2,
        "the sandbox has {} host(s); `cargo xtask sandbox up` starts 2",
        hosts.len()
    );
    (
        Host::hypervisor(&env.sandbox, &hosts[0]),
        Host::hypervisor(&env.sandbox, &hosts[1]),
    )
}

/// Starts a stopped host again when dropped, and waits (bounded) until its
/// libvirtd answers.
struct Boot<'a>(&'a HypervisorHost);

impl Drop for Boot<'_> {
    fn drop(&mut self) {
        let _ = self.0.start();
        let virsh = testkit::virsh::Virsh::new(self.0.virsh_uri(&self.0.libvirt.qemu_uri));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !virsh.status(&["pool-list", "--name"]).0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_at_their_limits_send_creates_on_and_all_full_is_quota_exceeded() {
    let _turn = HOST2.lock().await;
    let env = Env::new();
    let (_server, image) = tiny_served_image().await;
    let (h1, h2) = two_hosts(&env);
    let yaml = env.yaml(
        &[h1.with_max_instances(1), h2.with_max_instances(2)],
        &[image],
        None,
    );
    let provider = env.provider(&yaml, env.options());

    // Three owners, whatever their rendezvous order: one lands on host1,
    // two on host2.
    let mut made: Vec<ProviderId> = Vec::new();
    for _ in 0..3 {
        let inst = provider
            .create(&env.request(env.owner(), Placement::Any))
            .await
            .unwrap();
        made.push(inst.id);
    }
    let on = |host: &str| made.iter().filter(|id| id.host().as_str() == host).count();
    let (on1, on2) = (on("host1"), on("host2"));

    // A fourth has nowhere to go: QuotaExceeded naming both hosts.
    let fourth = provider
        .create(&env.request(env.owner(), Placement::Any))
        .await
        .unwrap_err();
    // Required onto a full host: that host's own answer.
    let required = provider
        .create(&env.request(
            env.owner(),
            Placement::Require(Identifier::parse("host1").unwrap()),
        ))
        .await
        .unwrap_err();
    for id in &made {
        provider.delete(id).await.unwrap();
    }
    assert_eq!((on1, on2), (1, 2), "{made:?}");
    assert_eq!(fourth.class(), ErrorClass::QuotaExceeded, "{fourth:?}");
    let message = fourth.to_string();
    assert!(
        message.contains(
            "host1: host host1 holds 1 of this entry's instances, its max_instances is 1"
        ) && message.contains("host2: host host2 holds 2"),
        "{message}"
    );
    assert_eq!(required.class(), ErrorClass::QuotaExceeded, "{required:?}");
    assert!(
        required.to_string().contains("max_instances is 1"),
        "{required}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_short_of_memory_and_a_host_down_is_transient_then_the_host_back_takes_it() {
    let _turn = HOST2.lock().await;
    let env = Env::new();
    let (_server, image) = tiny_served_image().await;
    let (h1, h2) = two_hosts(&env);
    // host1 keeps more memory than any host has: full for every VM.
    let yaml = env.yaml(&[h1.with_reserved_memory("1TiB"), h2], &[image], None);
    let mut options = env.options();
    options.hosts.dial_budget = Duration::from_secs(8);
    // A failed dial is not held against host2 once it is back.
    options.dial_cooldown = Duration::ZERO;
    let provider = env.provider(&yaml, options);

    let host2 = &env.sandbox.hosts[1];
    let boot = Boot(host2);
    host2.stop().unwrap();
    let down = provider
        .create(&env.request(env.owner(), Placement::Any))
        .await
        .unwrap_err();
    drop(boot);
    let back = provider
        .create(&env.request(env.owner(), Placement::Any))
        .await;
    if let Ok(inst) = &back {
        provider.delete(&inst.id).await.unwrap();
    }
    assert_eq!(
        down.class(),
        ErrorClass::Transient,
        "host2 may come back: {down:?}"
    );
    let message = down.to_string();
    assert!(
        message.contains("host1: host host1 lacks capacity for this VM: memory")
            && message.contains("after its reserved_memory of 1048576 MiB"),
        "{message}"
    );
    assert_eq!(back.unwrap().id.host().as_str(), "host2");
}
