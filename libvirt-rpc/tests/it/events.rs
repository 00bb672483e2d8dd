//! Domain lifecycle events from the sandbox daemon's `test:///default`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::time::Duration;
use testkit::names::unique;

use libvirt_rpc::*;

async fn next_for(sub: &mut Subscription, name: &str) -> LifecycleEvent {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), sub.recv())
            .await
            .expect("event within 10 s")
            .expect("subscription open");
        if ev.dom.name == name {
            return ev;
        }
    }
}

#[tokio::test]
async fn lifecycle_events_arrive_and_link_death_ends_the_subscription() {
    let c = support::test_driver().await;
    let mut all = c.subscribe_lifecycle(None).await.unwrap();
    let name = unique("lvrpc-ev");
    let dom = c
        .domain_define_xml_flags(&support::domain_xml(&name), DomainDefineFlags::empty())
        .await
        .unwrap();
    assert_eq!(
        next_for(&mut all, &name).await.event,
        LifecycleEventKind::Defined
    );
    let mut one = c.subscribe_lifecycle(Some(&dom)).await.unwrap();
    assert_ne!(one.callback_id(), all.callback_id());
    c.domain_create(&dom).await.unwrap();
    assert_eq!(
        next_for(&mut all, &name).await.event,
        LifecycleEventKind::Started
    );
    assert_eq!(
        next_for(&mut one, &name).await.event,
        LifecycleEventKind::Started
    );
    one.unsubscribe().await.unwrap();
    c.domain_destroy(&dom).await.unwrap();
    assert_eq!(
        next_for(&mut all, &name).await.event,
        LifecycleEventKind::Stopped
    );
    c.domain_undefine_flags(&dom, DomainUndefineFlags::empty())
        .await
        .unwrap();
    assert_eq!(
        next_for(&mut all, &name).await.event,
        LifecycleEventKind::Undefined
    );
    assert_eq!(all.missed(), 0);
    c.close().await;
    let end = tokio::time::timeout(Duration::from_secs(1), async {
        while all.recv().await.is_some() {}
    })
    .await;
    assert!(end.is_ok(), "subscription did not end with the link");
    assert!(matches!(all.end_reason(), Some(DisconnectReason::Closed)));
}

#[tokio::test]
async fn dropped_subscription_stops_delivery_and_client_keeps_working() {
    let c = support::test_driver().await;
    let sub = c.subscribe_lifecycle(None).await.unwrap();
    drop(sub);
    let name = unique("lvrpc-ev2");
    let dom = c
        .domain_define_xml_flags(&support::domain_xml(&name), DomainDefineFlags::empty())
        .await
        .unwrap();
    c.domain_undefine_flags(&dom, DomainUndefineFlags::empty())
        .await
        .unwrap();
    c.connect_get_lib_version().await.unwrap();
    c.close().await;
}
