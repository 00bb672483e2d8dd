//! One event as delivered: typed ([`Event`]) or as the bytes it came in
//! ([`RawEvent`]), and the table that ties each message procedure to its
//! family, event id and payload type.

use bytes::Bytes;

use crate::domain_state::DomainEventId;
use crate::proto::xdr::{self, XdrError};

use super::domain::*;
use super::numbers::*;
use super::objects::*;
use super::target::{
    EventId, Family, NetworkEventId, NodeDeviceEventId, SecretEventId, StoragePoolEventId,
};

/// An event message as it came from the daemon: its procedure, the
/// callback id it was sent for, and its payload. Subscriptions made with
/// [`crate::Client::subscribe_raw`] deliver these; it is also how
/// [`Event::Unknown`] carries a kind this crate does not type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEvent {
    procedure: i32,
    callback_id: i32,
    payload: Bytes,
}

impl RawEvent {
    /// An event message of `procedure` with `payload` (as a fake daemon, a
    /// capture or a test has it): reads the callback id, the first field of
    /// every event message this crate registers for, and keeps the payload
    /// as it is. `None` when the payload is too short to carry one.
    pub fn new(procedure: i32, payload: Bytes) -> Option<Self> {
        let word: [u8; 4] = payload.get(..4)?.try_into().ok()?;
        Some(Self {
            procedure,
            callback_id: i32::from_be_bytes(word),
            payload,
        })
    }

    /// The message's procedure number (`REMOTE_PROC_*`, see
    /// [`crate::proc_num`]; [`crate::proc_num::name`] names it).
    pub fn procedure(&self) -> i32 {
        self.procedure
    }

    /// The callback id the daemon sent it for
    /// ([`super::Subscription::callback_id`]).
    pub fn callback_id(&self) -> i32 {
        self.callback_id
    }

    /// The whole message payload, callback id included: decode it as the
    /// `remote_*_msg` struct of `remote_protocol.x` (with
    /// [`crate::xdr_struct!`] and [`crate::proto::xdr::from_bytes`]).
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// Decodes the payload as its kind.
    ///
    /// # Errors
    /// The codec's error when the bytes do not hold the procedure's
    /// message exactly (truncated, a bad length or discriminant, trailing
    /// bytes).
    pub fn decode(&self) -> Result<Event, XdrError> {
        Event::decode(self)
    }
}

macro_rules! event_table {
    ($(
        $(#[$m:meta])*
        $variant:ident($payload:ty) = $family:ident($id:expr) @ $procedure:ident;
    )*) => {
        /// A typed event. Each kind's payload is laid out as its message in
        /// libvirt's `remote_protocol.x`; the callback id is not part of it
        /// (see [`RawEvent::callback_id`]).
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Event {
            $($(#[$m])* $variant($payload),)*
            /// A message of a kind this crate does not type (registered
            /// with an id it does not know, from a newer daemon), as it
            /// came.
            Unknown(RawEvent),
        }

        impl Event {
            /// Decodes `raw` as its procedure's message; a procedure this
            /// crate does not know gives [`Event::Unknown`].
            ///
            /// # Errors
            /// The codec's error when the payload does not hold the
            /// message exactly.
            pub fn decode(raw: &RawEvent) -> Result<Self, XdrError> {
                let b = &raw.payload[..];
                Ok(match raw.procedure {
                    $($procedure => Self::$variant(xdr::from_bytes::<(i32, $payload)>(b)?.1),)*
                    _ => Self::Unknown(raw.clone()),
                })
            }

            /// The event's id, `None` for [`Event::Unknown`].
            pub fn id(&self) -> Option<EventId> {
                match self {
                    $(Self::$variant(_) => Some(EventId::from($id)),)*
                    Self::Unknown(_) => None,
                }
            }

            /// The message's XDR after its callback id, as a daemon sends
            /// it (for [`crate::testing`]).
            #[cfg(feature = "testing")]
            pub(crate) fn encode_body(&self) -> Result<Bytes, XdrError> {
                match self {
                    $(Self::$variant(v) => xdr::to_bytes(v),)*
                    Self::Unknown(raw) => Ok(raw.payload.get(4..).map(Bytes::copy_from_slice).unwrap_or_default()),
                }
            }

            /// The procedure number of the message this kind travels in.
            pub fn procedure(&self) -> i32 {
                match self {
                    $(Self::$variant(_) => $procedure,)*
                    Self::Unknown(raw) => raw.procedure,
                }
            }
        }

        /// The family of an event message's procedure, `None` for one this
        /// crate does not know.
        pub(crate) fn family_of(procedure: i32) -> Option<Family> {
            match procedure {
                $($procedure => Some(Family::$family),)*
                _ => None,
            }
        }

        /// The message procedure that carries events of `id`.
        #[cfg(test)]
        pub(crate) fn procedure_of(id: EventId) -> Option<i32> {
            $(if id == EventId::from($id) {
                return Some($procedure);
            })*
            None
        }
    };
}

event_table! {
    /// [`DomainEventId::Lifecycle`].
    Lifecycle(LifecycleEvent) = Domain(DomainEventId::Lifecycle) @ DOMAIN_EVENT_CALLBACK_LIFECYCLE;
    /// [`DomainEventId::Reboot`].
    Reboot(RebootEvent) = Domain(DomainEventId::Reboot) @ DOMAIN_EVENT_CALLBACK_REBOOT;
    /// [`DomainEventId::RtcChange`].
    RtcChange(RtcChangeEvent) = Domain(DomainEventId::RtcChange) @ DOMAIN_EVENT_CALLBACK_RTC_CHANGE;
    /// [`DomainEventId::Watchdog`].
    Watchdog(WatchdogEvent) = Domain(DomainEventId::Watchdog) @ DOMAIN_EVENT_CALLBACK_WATCHDOG;
    /// [`DomainEventId::IoError`].
    IoError(IoErrorEvent) = Domain(DomainEventId::IoError) @ DOMAIN_EVENT_CALLBACK_IO_ERROR;
    /// [`DomainEventId::Graphics`].
    Graphics(GraphicsEvent) = Domain(DomainEventId::Graphics) @ DOMAIN_EVENT_CALLBACK_GRAPHICS;
    /// [`DomainEventId::IoErrorReason`].
    IoErrorReason(IoErrorReasonEvent) = Domain(DomainEventId::IoErrorReason) @ DOMAIN_EVENT_CALLBACK_IO_ERROR_REASON;
    /// [`DomainEventId::ControlError`].
    ControlError(ControlErrorEvent) = Domain(DomainEventId::ControlError) @ DOMAIN_EVENT_CALLBACK_CONTROL_ERROR;
    /// [`DomainEventId::BlockJob`].
    BlockJob(BlockJobEvent) = Domain(DomainEventId::BlockJob) @ DOMAIN_EVENT_CALLBACK_BLOCK_JOB;
    /// [`DomainEventId::DiskChange`].
    DiskChange(DiskChangeEvent) = Domain(DomainEventId::DiskChange) @ DOMAIN_EVENT_CALLBACK_DISK_CHANGE;
    /// [`DomainEventId::TrayChange`].
    TrayChange(TrayChangeEvent) = Domain(DomainEventId::TrayChange) @ DOMAIN_EVENT_CALLBACK_TRAY_CHANGE;
    /// [`DomainEventId::PmWakeup`].
    PmWakeup(PmWakeupEvent) = Domain(DomainEventId::PmWakeup) @ DOMAIN_EVENT_CALLBACK_PMWAKEUP;
    /// [`DomainEventId::PmSuspend`].
    PmSuspend(PmSuspendEvent) = Domain(DomainEventId::PmSuspend) @ DOMAIN_EVENT_CALLBACK_PMSUSPEND;
    /// [`DomainEventId::BalloonChange`].
    BalloonChange(BalloonChangeEvent) = Domain(DomainEventId::BalloonChange) @ DOMAIN_EVENT_CALLBACK_BALLOON_CHANGE;
    /// [`DomainEventId::PmSuspendDisk`].
    PmSuspendDisk(PmSuspendDiskEvent) = Domain(DomainEventId::PmSuspendDisk) @ DOMAIN_EVENT_CALLBACK_PMSUSPEND_DISK;
    /// [`DomainEventId::DeviceRemoved`].
    DeviceRemoved(DeviceRemovedEvent) = Domain(DomainEventId::DeviceRemoved) @ DOMAIN_EVENT_CALLBACK_DEVICE_REMOVED;
    /// [`DomainEventId::BlockJob2`].
    BlockJob2(BlockJob2Event) = Domain(DomainEventId::BlockJob2) @ DOMAIN_EVENT_BLOCK_JOB_2;
    /// [`DomainEventId::Tunable`] (its parameters raw).
    Tunable(TunableEvent) = Domain(DomainEventId::Tunable) @ DOMAIN_EVENT_CALLBACK_TUNABLE;
    /// [`DomainEventId::AgentLifecycle`].
    AgentLifecycle(AgentLifecycleEvent) = Domain(DomainEventId::AgentLifecycle) @ DOMAIN_EVENT_CALLBACK_AGENT_LIFECYCLE;
    /// [`DomainEventId::DeviceAdded`].
    DeviceAdded(DeviceAddedEvent) = Domain(DomainEventId::DeviceAdded) @ DOMAIN_EVENT_CALLBACK_DEVICE_ADDED;
    /// [`DomainEventId::MigrationIteration`].
    MigrationIteration(MigrationIterationEvent) = Domain(DomainEventId::MigrationIteration) @ DOMAIN_EVENT_CALLBACK_MIGRATION_ITERATION;
    /// [`DomainEventId::JobCompleted`] (its statistics raw).
    JobCompleted(JobCompletedEvent) = Domain(DomainEventId::JobCompleted) @ DOMAIN_EVENT_CALLBACK_JOB_COMPLETED;
    /// [`DomainEventId::DeviceRemovalFailed`].
    DeviceRemovalFailed(DeviceRemovalFailedEvent) = Domain(DomainEventId::DeviceRemovalFailed) @ DOMAIN_EVENT_CALLBACK_DEVICE_REMOVAL_FAILED;
    /// [`DomainEventId::MetadataChange`].
    MetadataChange(MetadataChangeEvent) = Domain(DomainEventId::MetadataChange) @ DOMAIN_EVENT_CALLBACK_METADATA_CHANGE;
    /// [`DomainEventId::BlockThreshold`].
    BlockThreshold(BlockThresholdEvent) = Domain(DomainEventId::BlockThreshold) @ DOMAIN_EVENT_BLOCK_THRESHOLD;
    /// [`DomainEventId::MemoryFailure`].
    MemoryFailure(MemoryFailureEvent) = Domain(DomainEventId::MemoryFailure) @ DOMAIN_EVENT_MEMORY_FAILURE;
    /// [`DomainEventId::MemoryDeviceSizeChange`].
    MemoryDeviceSizeChange(MemoryDeviceSizeChangeEvent) = Domain(DomainEventId::MemoryDeviceSizeChange) @ DOMAIN_EVENT_MEMORY_DEVICE_SIZE_CHANGE;
    /// [`DomainEventId::NicMacChange`].
    NicMacChange(NicMacChangeEvent) = Domain(DomainEventId::NicMacChange) @ DOMAIN_EVENT_NIC_MAC_CHANGE;
    /// [`StoragePoolEventId::Lifecycle`].
    StoragePoolLifecycle(StoragePoolLifecycleEvent) = StoragePool(StoragePoolEventId::Lifecycle) @ STORAGE_POOL_EVENT_LIFECYCLE;
    /// [`StoragePoolEventId::Refresh`].
    StoragePoolRefresh(StoragePoolRefreshEvent) = StoragePool(StoragePoolEventId::Refresh) @ STORAGE_POOL_EVENT_REFRESH;
    /// [`NetworkEventId::Lifecycle`].
    NetworkLifecycle(NetworkLifecycleEvent) = Network(NetworkEventId::Lifecycle) @ NETWORK_EVENT_LIFECYCLE;
    /// [`NetworkEventId::MetadataChange`].
    NetworkMetadataChange(NetworkMetadataChangeEvent) = Network(NetworkEventId::MetadataChange) @ NETWORK_EVENT_CALLBACK_METADATA_CHANGE;
    /// [`NodeDeviceEventId::Lifecycle`].
    NodeDeviceLifecycle(NodeDeviceLifecycleEvent) = NodeDevice(NodeDeviceEventId::Lifecycle) @ NODE_DEVICE_EVENT_LIFECYCLE;
    /// [`NodeDeviceEventId::Update`].
    NodeDeviceUpdate(NodeDeviceUpdateEvent) = NodeDevice(NodeDeviceEventId::Update) @ NODE_DEVICE_EVENT_UPDATE;
    /// [`SecretEventId::Lifecycle`].
    SecretLifecycle(SecretLifecycleEvent) = Secret(SecretEventId::Lifecycle) @ SECRET_EVENT_LIFECYCLE;
    /// [`SecretEventId::ValueChanged`].
    SecretValueChanged(SecretValueChangedEvent) = Secret(SecretEventId::ValueChanged) @ SECRET_EVENT_VALUE_CHANGED;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every id libvirt 11 knows has exactly one message procedure, of its
    /// own family; unknown ids have none.
    #[test]
    fn every_known_id_has_one_procedure_of_its_family() {
        let mut ids: Vec<EventId> = (0..28)
            .map(|n| DomainEventId::from_wire(n).into())
            .collect();
        ids.extend((0..2).map(|n| EventId::from(StoragePoolEventId::from_wire(n))));
        ids.extend((0..2).map(|n| EventId::from(NetworkEventId::from_wire(n))));
        ids.extend((0..2).map(|n| EventId::from(NodeDeviceEventId::from_wire(n))));
        ids.extend((0..2).map(|n| EventId::from(SecretEventId::from_wire(n))));
        let mut procedures = std::collections::HashSet::new();
        for id in ids {
            assert!(id.is_known(), "{id:?}");
            let p = procedure_of(id).unwrap_or_else(|| panic!("{id:?} has no message"));
            assert!(procedures.insert(p), "{p} used twice");
            assert_eq!(family_of(p), Some(id.family()), "{id:?}");
            assert!(crate::proc_num::name(p).is_some(), "{p} unnamed");
        }
        assert_eq!(procedures.len(), 36);
        let newer = EventId::from(DomainEventId::from_wire(28));
        assert!(!newer.is_known());
        assert_eq!(procedure_of(newer), None);
    }

    use crate::flags::{LifecycleEventKind, MetadataType};
    use crate::proto::types::{Domain, Network, NodeDevice, Secret, StoragePool};
    use crate::proto::xdr::{Encode, to_bytes};

    fn dom() -> Domain {
        Domain {
            name: "web".into(),
            uuid: [7; 16],
            id: 3,
        }
    }

    fn params() -> RawTypedParams {
        // One `remote_typed_param`: "a", type 1 (int), 5.
        RawTypedParams {
            count: 1,
            encoded: vec![0, 0, 0, 1, b'a', 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5],
        }
    }

    /// One value of every typed kind, with its payload's encoding.
    fn samples() -> Vec<(Event, bytes::Bytes)> {
        fn enc<T: Encode>(v: &T) -> bytes::Bytes {
            to_bytes(v).unwrap()
        }
        let d = dom();
        let a = |f| GraphicsAddress {
            family: f,
            node: "127.0.0.1".into(),
            service: "5900".into(),
        };
        let pool = StoragePool {
            name: "p".into(),
            uuid: [1; 16],
        };
        let net = Network {
            name: "n".into(),
            uuid: [2; 16],
        };
        let dev = NodeDevice { name: "d".into() };
        let secret = Secret {
            uuid: [3; 16],
            usage_type: 1,
            usage_id: "/v".into(),
        };
        macro_rules! s {
            ($($v:ident($e:expr)),* $(,)?) => { vec![$({ let e = $e; (Event::$v(e.clone()), enc(&e)) }),*] };
        }
        s![
            Lifecycle(LifecycleEvent {
                dom: d.clone(),
                event: LifecycleEventKind::Started,
                detail: 1
            }),
            Reboot(RebootEvent { dom: d.clone() }),
            RtcChange(RtcChangeEvent {
                dom: d.clone(),
                offset: -3600
            }),
            Watchdog(WatchdogEvent {
                dom: d.clone(),
                action: WatchdogAction::Reset
            }),
            IoError(IoErrorEvent {
                dom: d.clone(),
                src_path: "/x".into(),
                dev_alias: "virtio-disk0".into(),
                action: IoErrorAction::Pause
            }),
            Graphics(GraphicsEvent {
                dom: d.clone(),
                phase: GraphicsPhase::Initialize,
                local: a(GraphicsAddressFamily::Ipv4),
                remote: a(GraphicsAddressFamily::Ipv6),
                auth_scheme: "vnc".into(),
                subject: GraphicsSubject(vec![GraphicsIdentity {
                    kind: "x509dname".into(),
                    name: "CN=a".into()
                }])
            }),
            IoErrorReason(IoErrorReasonEvent {
                dom: d.clone(),
                src_path: "/x".into(),
                dev_alias: "sata0".into(),
                action: IoErrorAction::Report,
                reason: "enospc".into()
            }),
            ControlError(ControlErrorEvent { dom: d.clone() }),
            BlockJob(BlockJobEvent {
                dom: d.clone(),
                path: "/x".into(),
                kind: BlockJobType::Copy,
                status: BlockJobStatus::Ready
            }),
            DiskChange(DiskChangeEvent {
                dom: d.clone(),
                old_src_path: Some("/a".into()),
                new_src_path: None,
                dev_alias: "ide0".into(),
                reason: DiskChangeReason::DropMissingOnStart
            }),
            TrayChange(TrayChangeEvent {
                dom: d.clone(),
                dev_alias: "ide0-1-0".into(),
                reason: TrayChangeReason::Close
            }),
            PmWakeup(PmWakeupEvent {
                reason: 0,
                dom: d.clone()
            }),
            PmSuspend(PmSuspendEvent {
                reason: 0,
                dom: d.clone()
            }),
            BalloonChange(BalloonChangeEvent {
                dom: d.clone(),
                actual: 1 << 20
            }),
            PmSuspendDisk(PmSuspendDiskEvent {
                reason: 0,
                dom: d.clone()
            }),
            DeviceRemoved(DeviceRemovedEvent {
                dom: d.clone(),
                dev_alias: "net1".into()
            }),
            BlockJob2(BlockJob2Event {
                dom: d.clone(),
                dst: "vda".into(),
                kind: BlockJobType::ActiveCommit,
                status: BlockJobStatus::Completed
            }),
            Tunable(TunableEvent {
                dom: d.clone(),
                params: TunableParams(params())
            }),
            AgentLifecycle(AgentLifecycleEvent {
                dom: d.clone(),
                state: AgentLifecycleState::Connected,
                reason: AgentLifecycleReason::Channel
            }),
            DeviceAdded(DeviceAddedEvent {
                dom: d.clone(),
                dev_alias: "net1".into()
            }),
            MigrationIteration(MigrationIterationEvent {
                dom: d.clone(),
                iteration: 2
            }),
            JobCompleted(JobCompletedEvent {
                dom: d.clone(),
                stats: JobStats(params())
            }),
            DeviceRemovalFailed(DeviceRemovalFailedEvent {
                dom: d.clone(),
                dev_alias: "hostdev0".into()
            }),
            MetadataChange(MetadataChangeEvent {
                dom: d.clone(),
                kind: MetadataType::Element,
                nsuri: Some("urn:x".into())
            }),
            BlockThreshold(BlockThresholdEvent {
                dom: d.clone(),
                dev: "vda[1]".into(),
                path: None,
                threshold: 1 << 30,
                excess: 4096
            }),
            MemoryFailure(MemoryFailureEvent {
                dom: d.clone(),
                recipient: MemoryFailureRecipient::Guest,
                action: MemoryFailureAction::Inject,
                flags: MemoryFailureFlags::ACTION_REQUIRED
            }),
            MemoryDeviceSizeChange(MemoryDeviceSizeChangeEvent {
                dom: d.clone(),
                alias: "virtiomem0".into(),
                size: 1 << 21
            }),
            NicMacChange(NicMacChangeEvent {
                dom: d.clone(),
                alias: "net0".into(),
                old_mac: "52:54:00:00:00:01".into(),
                new_mac: "52:54:00:00:00:02".into()
            }),
            StoragePoolLifecycle(StoragePoolLifecycleEvent {
                pool: pool.clone(),
                event: StoragePoolLifecycleKind::Created,
                detail: 0
            }),
            StoragePoolRefresh(StoragePoolRefreshEvent { pool }),
            NetworkLifecycle(NetworkLifecycleEvent {
                net: net.clone(),
                event: NetworkLifecycleKind::Stopped,
                detail: 0
            }),
            NetworkMetadataChange(NetworkMetadataChangeEvent {
                net,
                kind: MetadataType::Title,
                nsuri: None
            }),
            NodeDeviceLifecycle(NodeDeviceLifecycleEvent {
                dev: dev.clone(),
                event: NodeDeviceLifecycleKind::Undefined,
                detail: 0
            }),
            NodeDeviceUpdate(NodeDeviceUpdateEvent { dev }),
            SecretLifecycle(SecretLifecycleEvent {
                secret: secret.clone(),
                event: SecretLifecycleKind::Defined,
                detail: 0
            }),
            SecretValueChanged(SecretValueChangedEvent { secret }),
        ]
    }

    /// Every typed kind decodes from its message, and from no prefix of it.
    #[test]
    fn every_kind_round_trips_and_no_prefix_decodes() {
        let all = samples();
        assert_eq!(all.len(), 36);
        for (event, body) in all {
            let mut payload = to_bytes(&42i32).unwrap().to_vec();
            payload.extend_from_slice(&body);
            let raw = RawEvent::new(event.procedure(), payload.clone().into()).unwrap();
            assert_eq!(raw.callback_id(), 42);
            assert_eq!(raw.decode().as_ref(), Ok(&event));
            assert_eq!(
                family_of(event.procedure()),
                event.id().map(EventId::family)
            );
            for cut in 4..payload.len() {
                let short =
                    RawEvent::new(event.procedure(), payload[..cut].to_vec().into()).unwrap();
                // The typed-parameter kinds keep whatever follows the count
                // (once four bytes, the least one parameter takes, follow).
                if !matches!(event, Event::Tunable(_) | Event::JobCompleted(_))
                    || cut < payload.len() - 12
                {
                    assert!(short.decode().is_err(), "{event:?} cut at {cut}");
                }
            }
            payload.extend_from_slice(&[0, 0, 0, 0]);
            if !matches!(event, Event::Tunable(_) | Event::JobCompleted(_)) {
                let long = RawEvent::new(event.procedure(), payload.into()).unwrap();
                assert!(long.decode().is_err(), "{event:?} with trailing bytes");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn decoding_garbage_never_panics(procedure in 310i32..450, b: Vec<u8>) {
            if let Some(raw) = RawEvent::new(procedure, b.into()) {
                let _ = raw.decode();
            }
        }
    }

    #[test]
    fn a_payload_too_short_for_a_callback_id_is_not_an_event() {
        assert_eq!(RawEvent::new(319, Bytes::from_static(&[0, 0, 1])), None);
        let raw = RawEvent::new(319, Bytes::from_static(&[0, 0, 1, 2])).unwrap();
        assert_eq!(raw.callback_id(), 258);
        assert!(matches!(raw.decode(), Err(XdrError::Truncated { .. })));
    }

    #[test]
    fn an_unknown_procedure_decodes_as_unknown() {
        let raw = RawEvent::new(449, Bytes::from_static(&[0, 0, 0, 5, 9, 9])).unwrap();
        assert_eq!(raw.decode().unwrap(), Event::Unknown(raw.clone()));
        assert_eq!(Event::Unknown(raw).id(), None);
    }
}
