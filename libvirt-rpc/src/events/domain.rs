//! The payloads of domain events, one struct per kind, each laid out as
//! its `remote_domain_event_*_msg` in libvirt's `remote_protocol.x`
//! (without the leading callback id), and the small enums they carry.

use bitflags::bitflags;
use bytes::{BufMut, BytesMut};

use crate::flags::{LifecycleEventKind, MetadataType, wire_enum};
use crate::proto::types::Domain;
use crate::proto::xdr::{self, Decode, Encode, Reader, XdrError};
use crate::xdr_struct;

/// Most graphics subject identities libvirt sends
/// (`REMOTE_DOMAIN_EVENT_GRAPHICS_IDENTITY_MAX`).
pub const GRAPHICS_IDENTITY_MAX: usize = 20;

/// Most typed parameters in a tunable event
/// (`REMOTE_DOMAIN_EVENT_TUNABLE_MAX`).
pub const TUNABLE_PARAMS_MAX: usize = 2048;

/// Most typed parameters in a job-completed event
/// (`REMOTE_DOMAIN_JOB_STATS_MAX`).
pub const JOB_STATS_MAX: usize = 64;

xdr_struct! {
    /// [`crate::DomainEventId::Lifecycle`]: the domain was defined,
    /// started, stopped, ... (`remote_domain_event_lifecycle_msg`).
    pub struct LifecycleEvent {
        /// The domain.
        pub dom: Domain,
        /// What happened.
        pub event: LifecycleEventKind,
        /// An event-specific detail code (`virDomainEvent*DetailType` of
        /// the kind: for [`LifecycleEventKind::Stopped`], 0 shutdown,
        /// 1 destroyed, 2 crashed, ...).
        pub detail: i32,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::Reboot`]: the guest rebooted.
    pub struct RebootEvent {
        /// The domain.
        pub dom: Domain,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::RtcChange`]: the guest changed its real-time
    /// clock.
    pub struct RtcChangeEvent {
        /// The domain.
        pub dom: Domain,
        /// The new offset from UTC, in seconds.
        pub offset: i64,
    }
}

wire_enum! {
    /// `virDomainEventWatchdogAction`: what the watchdog did.
    WatchdogAction: i32 {
        /// No action, the watchdog was ignored.
        None = 0,
        /// The guest was paused.
        Pause = 1,
        /// The guest was reset.
        Reset = 2,
        /// The guest was powered off.
        Poweroff = 3,
        /// The guest was asked to shut down.
        Shutdown = 4,
        /// Nothing was done; the event is for debugging.
        Debug = 5,
        /// An NMI was injected.
        InjectNmi = 6,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::Watchdog`]: the guest's watchdog fired.
    pub struct WatchdogEvent {
        /// The domain.
        pub dom: Domain,
        /// What was done.
        pub action: WatchdogAction,
    }
}

wire_enum! {
    /// `virDomainEventIOErrorAction`: what was done about an I/O error.
    IoErrorAction: i32 {
        /// Nothing.
        None = 0,
        /// The guest was paused.
        Pause = 1,
        /// The error was reported to the guest.
        Report = 2,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::IoError`]: a disk I/O error.
    pub struct IoErrorEvent {
        /// The domain.
        pub dom: Domain,
        /// The host path of the disk's source.
        pub src_path: String,
        /// The device alias (`virtio-disk0`).
        pub dev_alias: String,
        /// What was done.
        pub action: IoErrorAction,
    }
}

wire_enum! {
    /// `virDomainEventGraphicsPhase`.
    GraphicsPhase: i32 {
        /// The client connected.
        Connect = 0,
        /// The client authenticated and the session began.
        Initialize = 1,
        /// The client disconnected.
        Disconnect = 2,
    }
}

wire_enum! {
    /// `virDomainEventGraphicsAddressType`.
    GraphicsAddressFamily: i32 {
        /// IPv4.
        Ipv4 = 0,
        /// IPv6.
        Ipv6 = 1,
        /// A unix socket.
        Unix = 2,
    }
}

xdr_struct! {
    /// One end of a graphics connection (`remote_domain_event_graphics_address`).
    pub struct GraphicsAddress {
        /// The address family.
        pub family: GraphicsAddressFamily,
        /// The address (or socket path).
        pub node: String,
        /// The port (empty for unix sockets).
        pub service: String,
    }
}

xdr_struct! {
    /// One identity of a graphics client (`remote_domain_event_graphics_identity`).
    pub struct GraphicsIdentity {
        /// The identity's kind (`x509dname`, `saslUsername`).
        pub kind: String,
        /// Its value.
        pub name: String,
    }
}

/// A graphics client's identities, at most [`GRAPHICS_IDENTITY_MAX`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GraphicsSubject(pub Vec<GraphicsIdentity>);

impl Encode for GraphicsSubject {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        xdr::put_list_len(out, self.0.len(), GRAPHICS_IDENTITY_MAX)?;
        self.0.iter().try_for_each(|i| i.encode(out))
    }
}

impl Decode for GraphicsSubject {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        let len = r.list_len(GRAPHICS_IDENTITY_MAX)?;
        (0..len)
            .map(|_| GraphicsIdentity::decode(r))
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::Graphics`]: a VNC or SPICE client connected,
    /// authenticated or left.
    pub struct GraphicsEvent {
        /// The domain.
        pub dom: Domain,
        /// Which step of the session.
        pub phase: GraphicsPhase,
        /// The server's end.
        pub local: GraphicsAddress,
        /// The client's end.
        pub remote: GraphicsAddress,
        /// The authentication scheme (`vnc`, `sasl`, `none`).
        pub auth_scheme: String,
        /// Who the client is.
        pub subject: GraphicsSubject,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::IoErrorReason`]: a disk I/O error with its
    /// reason.
    pub struct IoErrorReasonEvent {
        /// The domain.
        pub dom: Domain,
        /// The host path of the disk's source.
        pub src_path: String,
        /// The device alias.
        pub dev_alias: String,
        /// What was done.
        pub action: IoErrorAction,
        /// Why (`enospc`, `eio`, ...).
        pub reason: String,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::ControlError`]: the daemon lost control of
    /// the domain.
    pub struct ControlErrorEvent {
        /// The domain.
        pub dom: Domain,
    }
}

wire_enum! {
    /// `virDomainBlockJobType`.
    BlockJobType: i32 {
        /// Unknown.
        Unspecified = 0,
        /// Pull (`virDomainBlockPull`, `virDomainBlockRebase` without a
        /// destination).
        Pull = 1,
        /// Copy (`virDomainBlockCopy`).
        Copy = 2,
        /// Commit of a backing layer.
        Commit = 3,
        /// Commit of the active layer.
        ActiveCommit = 4,
        /// Backup (`virDomainBackupBegin`).
        Backup = 5,
    }
}

wire_enum! {
    /// `virConnectDomainEventBlockJobStatus`.
    BlockJobStatus: i32 {
        /// The job finished.
        Completed = 0,
        /// The job failed.
        Failed = 1,
        /// The job was cancelled.
        Canceled = 2,
        /// The job is ready to pivot (mirroring).
        Ready = 3,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::BlockJob`]: a block job changed state; the
    /// disk is named by its source path.
    pub struct BlockJobEvent {
        /// The domain.
        pub dom: Domain,
        /// The disk's source path.
        pub path: String,
        /// The job.
        pub kind: BlockJobType,
        /// Its new state.
        pub status: BlockJobStatus,
    }
}

wire_enum! {
    /// `virConnectDomainEventDiskChangeReason`.
    DiskChangeReason: i32 {
        /// The source was missing when the domain started.
        MissingOnStart = 0,
        /// The missing source was dropped when the domain started.
        DropMissingOnStart = 1,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::DiskChange`]: a disk's source changed.
    pub struct DiskChangeEvent {
        /// The domain.
        pub dom: Domain,
        /// The old source path.
        pub old_src_path: Option<String>,
        /// The new source path.
        pub new_src_path: Option<String>,
        /// The device alias.
        pub dev_alias: String,
        /// Why.
        pub reason: DiskChangeReason,
    }
}

wire_enum! {
    /// `virDomainEventTrayChangeReason`.
    TrayChangeReason: i32 {
        /// The tray opened.
        Open = 0,
        /// The tray closed.
        Close = 1,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::TrayChange`]: a removable disk's tray moved.
    pub struct TrayChangeEvent {
        /// The domain.
        pub dom: Domain,
        /// The device alias.
        pub dev_alias: String,
        /// Which way.
        pub reason: TrayChangeReason,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::PmWakeup`]: the guest woke up (on the wire
    /// the reason precedes the domain).
    pub struct PmWakeupEvent {
        /// Reserved, 0.
        pub reason: i32,
        /// The domain.
        pub dom: Domain,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::PmSuspend`]: the guest suspended to memory.
    pub struct PmSuspendEvent {
        /// Reserved, 0.
        pub reason: i32,
        /// The domain.
        pub dom: Domain,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::BalloonChange`]: the balloon's size changed.
    pub struct BalloonChangeEvent {
        /// The domain.
        pub dom: Domain,
        /// The guest's new memory, in KiB.
        pub actual: u64,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::PmSuspendDisk`]: the guest suspended to disk.
    pub struct PmSuspendDiskEvent {
        /// Reserved, 0.
        pub reason: i32,
        /// The domain.
        pub dom: Domain,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::DeviceRemoved`]: a device was unplugged.
    pub struct DeviceRemovedEvent {
        /// The domain.
        pub dom: Domain,
        /// The device's alias.
        pub dev_alias: String,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::BlockJob2`]: a block job changed state; the
    /// disk is named by its target (`vda`).
    pub struct BlockJob2Event {
        /// The domain.
        pub dom: Domain,
        /// The disk's target.
        pub dst: String,
        /// The job.
        pub kind: BlockJobType,
        /// Its new state.
        pub status: BlockJobStatus,
    }
}

/// A `remote_typed_param` array kept as it came: its element count and
/// the elements' XDR bytes. This crate does not decode typed parameters
/// yet; the bytes are those of libvirt's `remote_typed_param` (a field
/// name, then a union of int, uint, llong, ullong, double, boolean or
/// string).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawTypedParams {
    /// How many parameters the array holds.
    pub count: u32,
    /// The parameters' XDR encoding, after the count.
    pub encoded: Vec<u8>,
}

impl RawTypedParams {
    /// Reads the count (at most `max`) and keeps every byte after it: the
    /// array is the last field of the messages that carry one.
    fn decode_last(r: &mut Reader<'_>, max: usize) -> Result<Self, XdrError> {
        let count = r.list_len(max)?;
        let encoded = r.take(r.remaining())?.to_vec();
        // `list_len` bounds the count by `max`, a u32-sized limit.
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        Ok(Self { count, encoded })
    }
}

impl Encode for RawTypedParams {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_u32(self.count);
        out.put_slice(&self.encoded);
        Ok(())
    }
}

/// The typed parameters of a [`TunableEvent`], raw (see [`RawTypedParams`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TunableParams(pub RawTypedParams);

impl Encode for TunableParams {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.0.encode(out)
    }
}
impl Decode for TunableParams {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        RawTypedParams::decode_last(r, TUNABLE_PARAMS_MAX).map(Self)
    }
}

/// The statistics of a [`JobCompletedEvent`], raw (see [`RawTypedParams`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobStats(pub RawTypedParams);

impl Encode for JobStats {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.0.encode(out)
    }
}
impl Decode for JobStats {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        RawTypedParams::decode_last(r, JOB_STATS_MAX).map(Self)
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::Tunable`]: tunables (CPU pinning, block
    /// I/O tuning, ...) changed; the new values are typed parameters, kept
    /// raw.
    pub struct TunableEvent {
        /// The domain.
        pub dom: Domain,
        /// The changed tunables.
        pub params: TunableParams,
    }
}

wire_enum! {
    /// `virConnectDomainEventAgentLifecycleState`.
    AgentLifecycleState: i32 {
        /// The agent connected.
        Connected = 1,
        /// The agent disconnected.
        Disconnected = 2,
    }
}

wire_enum! {
    /// `virConnectDomainEventAgentLifecycleReason`.
    AgentLifecycleReason: i32 {
        /// Unknown.
        Unspecified = 0,
        /// The domain started.
        DomainStarted = 1,
        /// The channel's state changed.
        Channel = 2,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::AgentLifecycle`]: the guest agent connected
    /// or disconnected.
    pub struct AgentLifecycleEvent {
        /// The domain.
        pub dom: Domain,
        /// Connected or not.
        pub state: AgentLifecycleState,
        /// Why.
        pub reason: AgentLifecycleReason,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::DeviceAdded`]: a device was plugged in.
    pub struct DeviceAddedEvent {
        /// The domain.
        pub dom: Domain,
        /// The device's alias.
        pub dev_alias: String,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::MigrationIteration`]: a migration began
    /// another pass over the guest's memory.
    pub struct MigrationIterationEvent {
        /// The domain.
        pub dom: Domain,
        /// The pass (1 the first).
        pub iteration: i32,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::JobCompleted`]: a job (migration, save,
    /// ...) finished; its statistics are typed parameters, kept raw.
    pub struct JobCompletedEvent {
        /// The domain.
        pub dom: Domain,
        /// The job's statistics.
        pub stats: JobStats,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::DeviceRemovalFailed`]: the guest did not let
    /// a device go.
    pub struct DeviceRemovalFailedEvent {
        /// The domain.
        pub dom: Domain,
        /// The device's alias.
        pub dev_alias: String,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::MetadataChange`]: the title, description or
    /// a metadata element changed.
    pub struct MetadataChangeEvent {
        /// The domain.
        pub dom: Domain,
        /// What changed.
        pub kind: MetadataType,
        /// For [`MetadataType::Element`], the element's namespace URI.
        pub nsuri: Option<String>,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::BlockThreshold`]: a disk's write threshold
    /// (`virDomainSetBlockThreshold`) was crossed; the threshold is then
    /// cleared.
    pub struct BlockThresholdEvent {
        /// The domain.
        pub dom: Domain,
        /// The disk's target (`vda`, or `vda[1]` for a backing layer).
        pub dev: String,
        /// The source's path, if it has one.
        pub path: Option<String>,
        /// The threshold that was crossed, in bytes.
        pub threshold: u64,
        /// How far past it the write went, in bytes.
        pub excess: u64,
    }
}

wire_enum! {
    /// `virDomainMemoryFailureRecipientType`.
    MemoryFailureRecipient: i32 {
        /// The hypervisor's memory.
        Hypervisor = 0,
        /// The guest's memory.
        Guest = 1,
    }
}

wire_enum! {
    /// `virDomainMemoryFailureActionType`.
    MemoryFailureAction: i32 {
        /// Ignored (a non-fatal, action-optional error).
        Ignore = 0,
        /// Injected into the guest.
        Inject = 1,
        /// Fatal: the hypervisor exits.
        Fatal = 2,
        /// The guest is reset.
        Reset = 3,
    }
}

bitflags! {
    /// `virDomainMemoryFailureFlags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct MemoryFailureFlags: u32 {
        /// The failure needs action (not just optional).
        const ACTION_REQUIRED = 1;
        /// It happened while handling another memory failure.
        const RECURSIVE = 2;
    }
}

impl Encode for MemoryFailureFlags {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_u32(self.bits());
        Ok(())
    }
}
impl Decode for MemoryFailureFlags {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.u32().map(Self::from_bits_retain)
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::MemoryFailure`]: a hardware memory error was
    /// handled.
    pub struct MemoryFailureEvent {
        /// The domain.
        pub dom: Domain,
        /// Whose memory.
        pub recipient: MemoryFailureRecipient,
        /// What was done.
        pub action: MemoryFailureAction,
        /// Details.
        pub flags: MemoryFailureFlags,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::NicMacChange`]: the guest changed the MAC
    /// address of a virtual NIC (QEMU: virtio NICs only).
    pub struct NicMacChangeEvent {
        /// The domain.
        pub dom: Domain,
        /// The interface's device alias.
        pub alias: String,
        /// The MAC address before.
        pub old_mac: String,
        /// The MAC address now.
        pub new_mac: String,
    }
}

xdr_struct! {
    /// [`crate::DomainEventId::MemoryDeviceSizeChange`]: a `virtio-mem`
    /// device's actual size changed.
    pub struct MemoryDeviceSizeChangeEvent {
        /// The domain.
        pub dom: Domain,
        /// The device's alias.
        pub alias: String,
        /// Its new size, in KiB.
        pub size: u64,
    }
}
