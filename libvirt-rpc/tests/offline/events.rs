//! Events against a scripted peer (no daemon): every kind decoded from
//! bytes assembled by hand from `remote_protocol.x`'s layouts (not by this
//! crate's encoders, so a field out of order fails here), routing by family
//! and callback id, malformed messages, unknown kinds, deregistration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use libvirt_rpc::events::*;
use libvirt_rpc::proto::packet::{Header, MessageType, Packet, Status};
use libvirt_rpc::testing::DaemonEnd;
use libvirt_rpc::*;
use tokio::io::DuplexStream;

/// The daemon's end of a client's connection, packet by packet, with the
/// bounds and unwraps these tests want.
struct Peer(DaemonEnd);

impl Peer {
    fn pair() -> (DuplexStream, Peer) {
        let (client, end) = DaemonEnd::pair();
        (client, Peer(end))
    }

    async fn read(&mut self) -> Packet {
        tokio::time::timeout(Duration::from_secs(5), self.0.read())
            .await
            .expect("a packet within 5 s")
            .unwrap()
            .expect("link open")
    }

    async fn reply<T: libvirt_rpc::proto::xdr::Encode>(&mut self, call: &Header, body: &T) {
        self.0.reply(call, body).await.unwrap();
    }

    /// Sends an event MESSAGE of `procedure` with `payload` as is.
    async fn event(&mut self, procedure: i32, payload: &[u8]) {
        let h = Header::remote(procedure, MessageType::Message, 0, Status::Ok);
        self.0.send_raw(&h, payload).await.unwrap();
    }

    /// Answers the next call, a registration of `register`, with `callback`.
    async fn register(&mut self, register: i32, callback: i32) -> Packet {
        let call = self.read().await;
        assert_eq!(call.header.procedure, register);
        self.reply(&call.header, &callback).await;
        call
    }
}

/// XDR by hand: the builder the layouts below are written with.
#[derive(Default, Clone)]
struct Wire(Vec<u8>);

impl Wire {
    fn int(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn hyper(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn string(mut self, s: &str) -> Self {
        self.0.extend_from_slice(&(s.len() as u32).to_be_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self.0.resize(self.0.len().next_multiple_of(4), 0);
        self
    }
    fn some(self, s: &str) -> Self {
        self.int(1).string(s)
    }
    fn none(self) -> Self {
        self.int(0)
    }
    fn uuid(mut self, b: u8) -> Self {
        self.0.extend_from_slice(&[b; 16]);
        self
    }
    /// `remote_nonnull_domain`: name, uuid, id.
    fn dom(self) -> Self {
        self.string("web").uuid(7).int(3)
    }
}

fn dom() -> Domain {
    Domain {
        name: "web".into(),
        uuid: [7; 16],
        id: 3,
    }
}

/// Callback ids the peer hands out, one per family.
const CB: i32 = 5;

fn cb() -> Wire {
    Wire::default().int(CB)
}

/// Each typed kind: its message procedure, its bytes per `remote_protocol.x`
/// (`remote_*_msg`, callback id first) and what it must decode to.
fn domain_kinds() -> Vec<(i32, Wire, Event)> {
    let d = dom();
    let params = || {
        TunableParams(RawTypedParams {
            count: 1,
            encoded: Wire::default().string("cpu_shares").int(4).hyper(1024).0,
        })
    };
    vec![
        (
            318,
            cb().dom().int(2).int(0),
            Event::Lifecycle(LifecycleEvent {
                dom: d.clone(),
                event: LifecycleEventKind::Started,
                detail: 0,
            }),
        ),
        (
            319,
            cb().dom(),
            Event::Reboot(RebootEvent { dom: d.clone() }),
        ),
        (
            320,
            cb().dom().hyper((-7200i64) as u64),
            Event::RtcChange(RtcChangeEvent {
                dom: d.clone(),
                offset: -7200,
            }),
        ),
        (
            321,
            cb().dom().int(6),
            Event::Watchdog(WatchdogEvent {
                dom: d.clone(),
                action: WatchdogAction::InjectNmi,
            }),
        ),
        (
            322,
            cb().dom()
                .string("/var/lib/x.qcow2")
                .string("virtio-disk0")
                .int(1),
            Event::IoError(IoErrorEvent {
                dom: d.clone(),
                src_path: "/var/lib/x.qcow2".into(),
                dev_alias: "virtio-disk0".into(),
                action: IoErrorAction::Pause,
            }),
        ),
        (
            323,
            cb().dom()
                .int(0)
                .int(0)
                .string("127.0.0.1")
                .string("5900")
                .int(1)
                .string("::1")
                .string("40000")
                .string("none")
                .int(1)
                .string("saslUsername")
                .string("fred"),
            Event::Graphics(GraphicsEvent {
                dom: d.clone(),
                phase: GraphicsPhase::Connect,
                local: GraphicsAddress {
                    family: GraphicsAddressFamily::Ipv4,
                    node: "127.0.0.1".into(),
                    service: "5900".into(),
                },
                remote: GraphicsAddress {
                    family: GraphicsAddressFamily::Ipv6,
                    node: "::1".into(),
                    service: "40000".into(),
                },
                auth_scheme: "none".into(),
                subject: GraphicsSubject(vec![GraphicsIdentity {
                    kind: "saslUsername".into(),
                    name: "fred".into(),
                }]),
            }),
        ),
        (
            324,
            cb().dom()
                .string("/x")
                .string("sata0-0-0")
                .int(2)
                .string("enospc"),
            Event::IoErrorReason(IoErrorReasonEvent {
                dom: d.clone(),
                src_path: "/x".into(),
                dev_alias: "sata0-0-0".into(),
                action: IoErrorAction::Report,
                reason: "enospc".into(),
            }),
        ),
        (
            325,
            cb().dom(),
            Event::ControlError(ControlErrorEvent { dom: d.clone() }),
        ),
        (
            326,
            cb().dom().string("/x").int(2).int(3),
            Event::BlockJob(BlockJobEvent {
                dom: d.clone(),
                path: "/x".into(),
                kind: BlockJobType::Copy,
                status: BlockJobStatus::Ready,
            }),
        ),
        (
            327,
            cb().dom().some("/old.iso").none().string("ide0-1-0").int(0),
            Event::DiskChange(DiskChangeEvent {
                dom: d.clone(),
                old_src_path: Some("/old.iso".into()),
                new_src_path: None,
                dev_alias: "ide0-1-0".into(),
                reason: DiskChangeReason::MissingOnStart,
            }),
        ),
        (
            328,
            cb().dom().string("ide0-1-0").int(0),
            Event::TrayChange(TrayChangeEvent {
                dom: d.clone(),
                dev_alias: "ide0-1-0".into(),
                reason: TrayChangeReason::Open,
            }),
        ),
        // The PM events put the reason before the domain.
        (
            329,
            cb().int(0).dom(),
            Event::PmWakeup(PmWakeupEvent {
                reason: 0,
                dom: d.clone(),
            }),
        ),
        (
            330,
            cb().int(0).dom(),
            Event::PmSuspend(PmSuspendEvent {
                reason: 0,
                dom: d.clone(),
            }),
        ),
        (
            331,
            cb().dom().hyper(524_288),
            Event::BalloonChange(BalloonChangeEvent {
                dom: d.clone(),
                actual: 524_288,
            }),
        ),
        (
            332,
            cb().int(0).dom(),
            Event::PmSuspendDisk(PmSuspendDiskEvent {
                reason: 0,
                dom: d.clone(),
            }),
        ),
        (
            333,
            cb().dom().string("net1"),
            Event::DeviceRemoved(DeviceRemovedEvent {
                dom: d.clone(),
                dev_alias: "net1".into(),
            }),
        ),
        (
            339,
            cb().dom().string("vda").int(4).int(0),
            Event::BlockJob2(BlockJob2Event {
                dom: d.clone(),
                dst: "vda".into(),
                kind: BlockJobType::ActiveCommit,
                status: BlockJobStatus::Completed,
            }),
        ),
        (
            346,
            cb().dom().int(1).string("cpu_shares").int(4).hyper(1024),
            Event::Tunable(TunableEvent {
                dom: d.clone(),
                params: params(),
            }),
        ),
        (
            348,
            cb().dom().int(2).int(1),
            Event::AgentLifecycle(AgentLifecycleEvent {
                dom: d.clone(),
                state: AgentLifecycleState::Disconnected,
                reason: AgentLifecycleReason::DomainStarted,
            }),
        ),
        (
            354,
            cb().dom().string("net1"),
            Event::DeviceAdded(DeviceAddedEvent {
                dom: d.clone(),
                dev_alias: "net1".into(),
            }),
        ),
        (
            359,
            cb().dom().int(3),
            Event::MigrationIteration(MigrationIterationEvent {
                dom: d.clone(),
                iteration: 3,
            }),
        ),
        (
            363,
            cb().dom().int(1).string("cpu_shares").int(4).hyper(1024),
            Event::JobCompleted(JobCompletedEvent {
                dom: d.clone(),
                stats: JobStats(params().0),
            }),
        ),
        (
            367,
            cb().dom().string("hostdev0"),
            Event::DeviceRemovalFailed(DeviceRemovalFailedEvent {
                dom: d.clone(),
                dev_alias: "hostdev0".into(),
            }),
        ),
        (
            379,
            cb().dom().int(2).some("https://example.org/ns"),
            Event::MetadataChange(MetadataChangeEvent {
                dom: d.clone(),
                kind: MetadataType::Element,
                nsuri: Some("https://example.org/ns".into()),
            }),
        ),
        (
            385,
            cb().dom()
                .string("vda")
                .some("/x.qcow2")
                .hyper(1 << 30)
                .hyper(65536),
            Event::BlockThreshold(BlockThresholdEvent {
                dom: d.clone(),
                dev: "vda".into(),
                path: Some("/x.qcow2".into()),
                threshold: 1 << 30,
                excess: 65536,
            }),
        ),
        (
            423,
            cb().dom().int(1).int(1).int(3),
            Event::MemoryFailure(MemoryFailureEvent {
                dom: d.clone(),
                recipient: MemoryFailureRecipient::Guest,
                action: MemoryFailureAction::Inject,
                flags: MemoryFailureFlags::ACTION_REQUIRED | MemoryFailureFlags::RECURSIVE,
            }),
        ),
        (
            438,
            cb().dom().string("virtiomem0").hyper(1 << 20),
            Event::MemoryDeviceSizeChange(MemoryDeviceSizeChangeEvent {
                dom: d.clone(),
                alias: "virtiomem0".into(),
                size: 1 << 20,
            }),
        ),
        (
            453,
            cb().dom()
                .string("net0")
                .string("52:54:00:00:00:01")
                .string("52:54:00:00:00:02"),
            Event::NicMacChange(NicMacChangeEvent {
                dom: d,
                alias: "net0".into(),
                old_mac: "52:54:00:00:00:01".into(),
                new_mac: "52:54:00:00:00:02".into(),
            }),
        ),
    ]
}

/// The other families' kinds, as [`domain_kinds`], with the registration
/// call of each family.
fn object_kinds() -> Vec<(i32, i32, Wire, Event)> {
    let pool = StoragePool {
        name: "default".into(),
        uuid: [1; 16],
    };
    let net = Network {
        name: "default".into(),
        uuid: [2; 16],
    };
    let dev = NodeDevice {
        name: "net_lo_00_00_00_00_00_00".into(),
    };
    let secret = Secret {
        uuid: [3; 16],
        usage_type: 1,
        usage_id: "/var/lib/x".into(),
    };
    let p = || cb().string("default").uuid(1);
    let n = || cb().string("default").uuid(2);
    let v = || cb().string("net_lo_00_00_00_00_00_00");
    let s = || cb().uuid(3).int(1).string("/var/lib/x");
    vec![
        (
            368,
            370,
            p().int(4).int(0),
            Event::StoragePoolLifecycle(StoragePoolLifecycleEvent {
                pool: pool.clone(),
                event: StoragePoolLifecycleKind::Created,
                detail: 0,
            }),
        ),
        (
            368,
            373,
            p(),
            Event::StoragePoolRefresh(StoragePoolRefreshEvent { pool }),
        ),
        (
            313,
            315,
            n().int(3).int(0),
            Event::NetworkLifecycle(NetworkLifecycleEvent {
                net: net.clone(),
                event: NetworkLifecycleKind::Stopped,
                detail: 0,
            }),
        ),
        (
            313,
            446,
            n().int(1).none(),
            Event::NetworkMetadataChange(NetworkMetadataChangeEvent {
                net,
                kind: MetadataType::Title,
                nsuri: None,
            }),
        ),
        (
            374,
            376,
            v().int(3).int(0),
            Event::NodeDeviceLifecycle(NodeDeviceLifecycleEvent {
                dev: dev.clone(),
                event: NodeDeviceLifecycleKind::Undefined,
                detail: 0,
            }),
        ),
        (
            374,
            377,
            v(),
            Event::NodeDeviceUpdate(NodeDeviceUpdateEvent { dev }),
        ),
        (
            380,
            382,
            s().int(0).int(0),
            Event::SecretLifecycle(SecretLifecycleEvent {
                secret: secret.clone(),
                event: SecretLifecycleKind::Defined,
                detail: 0,
            }),
        ),
        (
            380,
            383,
            s(),
            Event::SecretValueChanged(SecretValueChangedEvent { secret }),
        ),
    ]
}

/// A client whose typed subscription for `target` the peer registered with
/// callback [`CB`].
async fn subscribed(target: EventTarget, register: i32) -> (Client, Subscription<Event>, Peer) {
    let (io, mut peer) = Peer::pair();
    let c = Client::new(io, Config::default());
    let sub = {
        let c = c.clone();
        tokio::spawn(async move { c.subscribe(target).await })
    };
    peer.register(register, CB).await;
    (c, sub.await.unwrap().unwrap(), peer)
}

async fn next(sub: &mut Subscription<Event>) -> Event {
    tokio::time::timeout(Duration::from_secs(5), sub.recv())
        .await
        .expect("an event within 5 s")
        .expect("subscription open")
}

#[tokio::test]
async fn every_domain_kind_decodes_from_its_wire_layout() {
    // The router goes by family and callback id only, so one registration
    // receives every domain message sent under its callback id.
    let (_c, mut sub, mut peer) = subscribed(
        EventTarget::all(DomainEventId::Lifecycle),
        proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY,
    )
    .await;
    let kinds = domain_kinds();
    assert_eq!(kinds.len(), 28, "every DomainEventId of libvirt 11");
    for (procedure, bytes, want) in kinds {
        peer.event(procedure, &bytes.0).await;
        let got = next(&mut sub).await;
        assert_eq!(got, want, "procedure {procedure}");
        assert_eq!(got.procedure(), procedure);
    }
    assert_eq!((sub.malformed(), sub.missed()), (0, 0));
}

#[tokio::test]
async fn every_object_kind_decodes_from_its_wire_layout() {
    for (register, procedure, bytes, want) in object_kinds() {
        let id = want.id().unwrap();
        let (c, mut sub, mut peer) = subscribed(EventTarget::all(id), register).await;
        peer.event(procedure, &bytes.0).await;
        assert_eq!(next(&mut sub).await, want, "procedure {procedure}");
        drop(c);
    }
}

#[tokio::test]
async fn registration_names_the_object_and_the_id() {
    let (io, mut peer) = Peer::pair();
    let c = Client::new(io, Config::default());
    let pool = StoragePool {
        name: "default".into(),
        uuid: [1; 16],
    };
    let target = EventTarget::storage_pool(StoragePoolEventId::Refresh, &pool);
    let sub = tokio::spawn(async move { c.subscribe_raw(target).await });
    let call = peer
        .register(proc_num::CONNECT_STORAGE_POOL_EVENT_REGISTER_ANY, CB)
        .await;
    // remote_connect_storage_pool_event_register_any_args: int eventID,
    // remote_storage_pool pool (optional).
    assert_eq!(
        &call.payload[..],
        &Wire::default().int(1).int(1).string("default").uuid(1).0[..]
    );
    let sub = sub.await.unwrap().unwrap();
    assert_eq!(sub.callback_id(), CB);
    assert_eq!(sub.id(), EventId::StoragePool(StoragePoolEventId::Refresh));
}

/// libvirtd numbers callbacks per driver: a domain callback and a pool
/// callback may share an id. Each message goes to its own family's.
#[tokio::test]
async fn the_same_callback_id_in_two_families_routes_by_family() {
    let (io, mut peer) = Peer::pair();
    let c = Client::new(io, Config::default());
    let reboot = tokio::spawn({
        let c = c.clone();
        async move { c.subscribe(EventTarget::all(DomainEventId::Reboot)).await }
    });
    peer.register(proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY, 1)
        .await;
    let refresh = tokio::spawn({
        let c = c.clone();
        async move {
            c.subscribe(EventTarget::all(StoragePoolEventId::Refresh))
                .await
        }
    });
    peer.register(proc_num::CONNECT_STORAGE_POOL_EVENT_REGISTER_ANY, 1)
        .await;
    let (mut reboot, mut refresh) = (
        reboot.await.unwrap().unwrap(),
        refresh.await.unwrap().unwrap(),
    );
    peer.event(373, &Wire::default().int(1).string("p").uuid(1).0)
        .await;
    peer.event(319, &Wire::default().int(1).dom().0).await;
    assert!(matches!(next(&mut reboot).await, Event::Reboot(_)));
    assert!(matches!(
        next(&mut refresh).await,
        Event::StoragePoolRefresh(_)
    ));
    assert!(reboot.try_recv().is_none() && refresh.try_recv().is_none());
}

/// A message that does not decode as its kind is skipped and counted; the
/// subscription, other subscriptions and calls go on.
#[tokio::test]
async fn malformed_events_are_counted_and_the_link_survives() {
    let (c, mut sub, mut peer) = subscribed(
        EventTarget::all(DomainEventId::DeviceAdded),
        proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY,
    )
    .await;
    let good = cb().dom().string("net1");
    let mut truncated = good.clone().0;
    truncated.truncate(truncated.len() - 3);
    let mut trailing = good.clone().0;
    trailing.extend_from_slice(&[0, 0, 0, 9]);
    // An alias 4 GiB long, a bad optional discriminant, a bad UTF-8 name.
    let huge = cb().dom().int(-1).0;
    let bad_option = cb().dom().int(2).int(7).0;
    let bad_utf8 = cb()
        .int(2)
        .int(0xffff_0000u32 as i32)
        .uuid(7)
        .int(3)
        .string("net1")
        .0;
    for bad in [&truncated, &trailing, &huge, &bad_utf8] {
        peer.event(354, bad).await;
    }
    peer.event(379, &bad_option).await;
    // Too short to carry a callback id: nobody's, dropped.
    peer.event(354, &[0, 0]).await;
    peer.event(354, &good.0).await;
    match next(&mut sub).await {
        Event::DeviceAdded(ev) => assert_eq!(ev.dev_alias, "net1"),
        other => panic!("{other:?}"),
    }
    assert_eq!(sub.malformed(), 5);
    match sub.last_malformed() {
        Some(Error::Decode {
            procedure: 379,
            source,
        }) => {
            assert!(
                matches!(source, libvirt_rpc::proto::xdr::XdrError::Invalid { .. }),
                "{source:?}"
            )
        }
        other => panic!("{other:?}"),
    }
    // The link is fine.
    let call = tokio::spawn({
        let c = c.clone();
        async move { c.connect_get_lib_version().await }
    });
    let p = peer.read().await;
    peer.reply(&p.header, &11_003_000u64).await;
    assert_eq!(call.await.unwrap().unwrap(), 11_003_000);
    assert!(!c.is_closed());
}

/// A kind this crate does not know (a newer daemon's id) arrives raw, or
/// as `Event::Unknown` on a typed subscription.
#[tokio::test]
async fn an_unknown_kind_arrives_raw() {
    let (io, mut peer) = Peer::pair();
    let c = Client::new(io, Config::default());
    let newer = DomainEventId::from_wire(28);
    let raw = tokio::spawn({
        let c = c.clone();
        async move { c.subscribe_raw(EventTarget::all(newer)).await }
    });
    let call = peer
        .register(proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY, 9)
        .await;
    assert_eq!(&call.payload[..], &Wire::default().int(28).none().0[..]);
    let typed = tokio::spawn({
        let c = c.clone();
        async move { c.subscribe(EventTarget::domain(newer, &dom())).await }
    });
    peer.register(proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY, 10)
        .await;
    let (mut raw, mut typed) = (raw.await.unwrap().unwrap(), typed.await.unwrap().unwrap());
    let body = Wire::default().int(9).dom().int(1).string("space").0;
    peer.event(449, &body).await;
    let got = tokio::time::timeout(Duration::from_secs(5), raw.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (got.procedure(), got.callback_id(), &got.payload()[..]),
        (449, 9, &body[..])
    );
    let body10 = Wire::default().int(10).dom().0;
    peer.event(449, &body10).await;
    match next(&mut typed).await {
        Event::Unknown(raw) => assert_eq!(&raw.payload()[..], &body10[..]),
        other => panic!("{other:?}"),
    }
    // A known kind's message under a callback id nobody holds: dropped.
    peer.event(319, &Wire::default().int(11).dom().0).await;
    assert!(raw.try_recv().is_none());
}

/// Dropping a subscription deregisters it with its own family's call;
/// `unsubscribe` waits for the daemon's answer.
#[tokio::test]
async fn each_family_deregisters_with_its_own_call() {
    for (target, register, deregister) in [
        (
            EventTarget::all(NetworkEventId::Lifecycle),
            proc_num::CONNECT_NETWORK_EVENT_REGISTER_ANY,
            proc_num::CONNECT_NETWORK_EVENT_DEREGISTER_ANY,
        ),
        (
            EventTarget::all(NodeDeviceEventId::Update),
            proc_num::CONNECT_NODE_DEVICE_EVENT_REGISTER_ANY,
            proc_num::CONNECT_NODE_DEVICE_EVENT_DEREGISTER_ANY,
        ),
        (
            EventTarget::all(SecretEventId::Lifecycle),
            proc_num::CONNECT_SECRET_EVENT_REGISTER_ANY,
            proc_num::CONNECT_SECRET_EVENT_DEREGISTER_ANY,
        ),
    ] {
        let (c, sub, mut peer) = subscribed(target, register).await;
        drop(sub);
        let call = peer.read().await;
        assert_eq!(call.header.procedure, deregister);
        assert_eq!(&call.payload[..], &CB.to_be_bytes());
        drop(c);
    }
    let (_c, sub, mut peer) = subscribed(
        EventTarget::all(StoragePoolEventId::Lifecycle),
        proc_num::CONNECT_STORAGE_POOL_EVENT_REGISTER_ANY,
    )
    .await;
    let done = tokio::spawn(sub.unsubscribe());
    let call = peer.read().await;
    assert_eq!(
        call.header.procedure,
        proc_num::CONNECT_STORAGE_POOL_EVENT_DEREGISTER_ANY
    );
    peer.reply(&call.header, &()).await;
    done.await.unwrap().unwrap();
    // Events after it are nobody's; the link is fine.
    peer.event(370, &cb().string("p").uuid(1).int(0).int(0).0)
        .await;
}

/// The reader never waits for a slow typed subscriber either: the queue
/// keeps the first events, drops and counts the rest.
#[tokio::test]
async fn a_full_typed_queue_drops_new_events_and_counts_them() {
    let (io, mut peer) = Peer::pair();
    let c = Client::new(io, Config::default().event_queue(3));
    let sub = tokio::spawn({
        let c = c.clone();
        async move {
            c.subscribe(EventTarget::all(DomainEventId::MigrationIteration))
                .await
        }
    });
    peer.register(proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY, CB)
        .await;
    let mut sub = sub.await.unwrap().unwrap();
    for i in 0..50 {
        peer.event(359, &cb().dom().int(i).0).await;
    }
    let call = tokio::spawn({
        let c = c.clone();
        async move { c.connect_get_lib_version().await }
    });
    let p = peer.read().await;
    peer.reply(&p.header, &1u64).await;
    assert_eq!(call.await.unwrap().unwrap(), 1);
    assert_eq!(sub.missed(), 47);
    for i in 0..3 {
        match next(&mut sub).await {
            Event::MigrationIteration(ev) => assert_eq!(ev.iteration, i),
            other => panic!("{other:?}"),
        }
    }
    assert!(sub.try_recv().is_none());
}

/// The testing kit registers every family and emits any typed event to the
/// subscriptions of its id.
#[tokio::test]
async fn the_testing_kit_emits_every_family() {
    let (c, daemon) = libvirt_rpc::testing::Script::new()
        .connect(Config::default())
        .await
        .unwrap();
    let mut pools = c
        .subscribe(EventTarget::all(StoragePoolEventId::Refresh))
        .await
        .unwrap();
    let mut unplugs = c
        .subscribe_raw(EventTarget::all(DomainEventId::DeviceRemoved))
        .await
        .unwrap();
    let pool = StoragePool {
        name: "default".into(),
        uuid: [1; 16],
    };
    let refresh = Event::StoragePoolRefresh(StoragePoolRefreshEvent { pool });
    assert_eq!(daemon.emit_event(&refresh).await.unwrap(), 1);
    assert_eq!(next(&mut pools).await, refresh);
    let removed = Event::DeviceRemoved(DeviceRemovedEvent {
        dom: dom(),
        dev_alias: "net1".into(),
    });
    assert_eq!(daemon.emit_event(&removed).await.unwrap(), 1);
    let raw = tokio::time::timeout(Duration::from_secs(5), unplugs.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raw.callback_id(), unplugs.callback_id());
    assert_eq!(raw.decode().unwrap(), removed);
    let net = Network {
        name: "n".into(),
        uuid: [2; 16],
    };
    let nobody = Event::NetworkLifecycle(NetworkLifecycleEvent {
        net,
        event: NetworkLifecycleKind::Started,
        detail: 0,
    });
    assert_eq!(daemon.emit_event(&nobody).await.unwrap(), 0);
}

/// A subscription is a `futures::Stream`: the same events as `recv`
/// (messages that do not decode skipped and counted), ending when the
/// link does.
#[tokio::test]
async fn a_subscription_is_a_stream_that_ends_with_the_link() {
    use futures::StreamExt;
    let (_c, mut sub, mut peer) = subscribed(
        EventTarget::all(DomainEventId::DeviceAdded),
        proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY,
    )
    .await;
    let good = cb().dom().string("net1");
    let mut truncated = good.clone().0;
    truncated.truncate(truncated.len() - 3);
    peer.event(354, &truncated).await;
    peer.event(354, &good.0).await;
    let got = tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("an event within 5 s");
    match got {
        Some(Event::DeviceAdded(ev)) => assert_eq!(ev.dev_alias, "net1"),
        other => panic!("{other:?}"),
    }
    assert_eq!(sub.malformed(), 1);
    drop(peer);
    let end = tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("the end within 5 s");
    assert!(end.is_none(), "{end:?}");
}
