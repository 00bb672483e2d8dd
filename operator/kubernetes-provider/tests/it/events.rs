//! Instance events from the watch on the entry's Pods.

use std::time::Duration;

use provider_api::{Change, InstanceEvent, Provider, ProviderId};
use testkit::pods::{PodsNamespace, require_node};
use testkit::{Descriptor, kubectl::kubectl, names};

use crate::pods::{provider, request, uid};

/// The next event about `id` (or a Resync), within `within`.
async fn next_about(
    events: &mut provider_api::InstanceEvents,
    id: Option<&ProviderId>,
    want: impl Fn(&InstanceEvent) -> bool,
    within: Duration,
) -> InstanceEvent {
    let wait = async {
        loop {
            let e = events.next().await.expect("the watch does not end");
            let about = match (&e, id) {
                (InstanceEvent::Changed { id: got, .. }, Some(id)) => got == id,
                _ => true,
            };
            if about && want(&e) {
                return e;
            }
        }
    };
    tokio::time::timeout(within, wait)
        .await
        .expect("the event came in time")
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_turning_ready_and_vanishing_are_reported() {
    let d = Descriptor::require();
    require_node(&d);
    let kube = d.kube.clone().unwrap();
    let ns = PodsNamespace::new(&kube, &names::unique("pods-events"));
    let p = provider(&ns, "");
    let mut events = p.instance_events().unwrap();
    let first = next_about(&mut events, None, |_| true, Duration::from_secs(30)).await;
    assert!(
        matches!(&first, InstanceEvent::Resync { host } if host.as_str() == ns.name),
        "{first:?}"
    );

    let created = p.create(&request(&uid())).await.unwrap();
    let started = |e: &InstanceEvent| {
        matches!(
            e,
            InstanceEvent::Changed {
                change: Change::Started,
                ..
            }
        )
    };
    next_about(
        &mut events,
        Some(&created.id),
        started,
        Duration::from_secs(120),
    )
    .await;

    // Deleted behind the provider's back: reported, without a poll.
    kubectl(
        &kube,
        &[
            "-n",
            &ns.name,
            "delete",
            "pod",
            created.id.instance().as_str(),
            "--wait=false",
        ],
    );
    let removed = |e: &InstanceEvent| {
        matches!(
            e,
            InstanceEvent::Changed {
                change: Change::Removed,
                ..
            }
        )
    };
    next_about(
        &mut events,
        Some(&created.id),
        removed,
        Duration::from_secs(60),
    )
    .await;
    drop(events);
    p.delete(&created.id).await.unwrap();
}
