//! Instance events from libvirt's lifecycle events on every host: a killed
//! QEMU is reported at once, a host's watch that restarts (its link came
//! back) says Resync, and dropping the watch leaves no task behind.

use std::time::{Duration, Instant};

use crate::provider_env::{Env, Host, tiny_served_image};
use provider_api::{Change, Identifier, InstanceEvent, InstanceEvents, Placement, Provider};

/// The next event matching `want` within `budget`, and how long it took.
async fn next_matching(
    events: &mut InstanceEvents,
    budget: Duration,
    want: impl Fn(&InstanceEvent) -> bool,
) -> Option<(InstanceEvent, Duration)> {
    let started = Instant::now();
    tokio::time::timeout(budget, async {
        loop {
            let ev = events.next().await?;
            if want(&ev) {
                return Some((ev, started.elapsed()));
            }
        }
    })
    .await
    .ok()
    .flatten()
}

fn resync_of(host: &str) -> impl Fn(&InstanceEvent) -> bool + '_ {
    move |ev| matches!(ev, InstanceEvent::Resync { host: h } if h.as_str() == host)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_qemu_is_reported_at_once_and_a_host_back_is_resynced() {
    let _turn = crate::placement_sandbox::HOST2.lock().await;
    let env = Env::new();
    let (_server, image) = tiny_served_image().await;
    let hosts = &env.sandbox.hosts;
    assert!(hosts.len() >= 2, "the sandbox starts 2 hosts");
    let yaml = env.yaml(
        &[
            Host::hypervisor(&env.sandbox, &hosts[0]),
            Host::hypervisor(&env.sandbox, &hosts[1]),
        ],
        &[image],
        None,
    );
    let tasks_before = testkit::tasks::alive_tasks();
    let provider = env.provider(&yaml, env.options());
    let mut events = provider.instance_events().expect("kvm2 reports events");
    // Each host's watch starts with a Resync (in either order).
    let mut resynced = std::collections::BTreeSet::new();
    while resynced.len() < 2 {
        let (ev, _) = next_matching(&mut events, Duration::from_secs(30), |ev| {
            matches!(ev, InstanceEvent::Resync { .. })
        })
        .await
        .unwrap_or_else(|| panic!("Resyncs seen only for {resynced:?}"));
        if let InstanceEvent::Resync { host } = ev {
            resynced.insert(host.to_string());
        }
    }
    assert_eq!(resynced.into_iter().collect::<Vec<_>>(), ["host1", "host2"]);

    let inst = provider
        .create(&env.request(
            env.owner(),
            Placement::Require(Identifier::parse("host1").unwrap()),
        ))
        .await
        .unwrap();
    let pid_file = format!("/run/libvirt/qemu/{}.pid", inst.id.instance());
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let id = inst.id.clone();
    // (The Create's own start came first.)
    let seen = next_matching(&mut events, Duration::from_secs(30), |ev| {
        matches!(ev, InstanceEvent::Changed { id: i, change } if *i == id && *change != Change::Started)
    })
    .await;
    provider.delete(&inst.id).await.unwrap();
    let (ev, after) = seen.expect("the killed QEMU was reported");
    eprintln!("killed QEMU reported after {after:?}");
    assert_eq!(
        ev,
        InstanceEvent::Changed {
            id: inst.id.clone(),
            change: Change::Crashed
        }
    );

    // host2 loses power and boots again: its watch resubscribes and says
    // Resync (what changed meanwhile is unknown).
    let host2 = &hosts[1];
    host2.stop().unwrap();
    host2.start().unwrap();
    next_matching(&mut events, Duration::from_secs(90), resync_of("host2"))
        .await
        .expect("a Resync for host2 once it is back");

    // Dropping the watch (and the provider, whose shared connections the
    // watch used) ends every task they started.
    drop(events);
    drop(provider);
    let deadline = Instant::now() + Duration::from_secs(10);
    while testkit::tasks::alive_tasks() > tasks_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        testkit::tasks::alive_tasks() <= tasks_before,
        "{} tasks alive, {tasks_before} before the watch",
        testkit::tasks::alive_tasks()
    );
}
