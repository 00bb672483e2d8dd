//! libvirt's domain vocabulary as typed values: the state, the reason for
//! it, event ids and driver features (from `include/libvirt/libvirt-domain.h`
//! and `src/driver.h`).
//!
//! libvirt reports a domain's state as two numbers, a `virDomainState` and
//! a reason whose meaning depends on the state. [`StateReason::from_wire`]
//! turns the pair into one value a caller can match without knowing any
//! number. Every enum keeps an `Unknown(n)` fallback for numbers newer than
//! this crate, so decoding is total.

use crate::flags::wire_enum;
use crate::proto::xdr::{Decode, Encode, Reader, XdrError};
use bytes::BytesMut;

wire_enum! {
    /// `virDomainState`.
    DomainState: i32 {
        /// No state.
        NoState = 0,
        /// Running.
        Running = 1,
        /// Blocked on a resource.
        Blocked = 2,
        /// Paused by the user.
        Paused = 3,
        /// Being shut down.
        Shutdown = 4,
        /// Shut off.
        Shutoff = 5,
        /// Crashed.
        Crashed = 6,
        /// Suspended by guest power management.
        PmSuspended = 7,
    }
}

wire_enum! {
    /// `virDomainNostateReason`.
    NoStateReason: i32 {
        /// `VIR_DOMAIN_NOSTATE_UNKNOWN`.
        Unspecified = 0,
    }
}

wire_enum! {
    /// `virDomainRunningReason`.
    RunningReason: i32 {
        /// `VIR_DOMAIN_RUNNING_UNKNOWN`.
        Unspecified = 0,
        /// Normal startup from boot.
        Booted = 1,
        /// Migrated from another host.
        Migrated = 2,
        /// Restored from a state file.
        Restored = 3,
        /// Restored from a snapshot.
        FromSnapshot = 4,
        /// Returned from paused state.
        Unpaused = 5,
        /// Returned from a migration.
        MigrationCanceled = 6,
        /// Returned from a failed save.
        SaveCanceled = 7,
        /// Returned from pmsuspended after a wakeup event.
        Wakeup = 8,
        /// Resumed from the crashed state.
        Crashed = 9,
        /// Running in post-copy migration mode.
        Postcopy = 10,
        /// Running in post-copy mode after a failed migration.
        PostcopyFailed = 11,
    }
}

wire_enum! {
    /// `virDomainBlockedReason`.
    BlockedReason: i32 {
        /// `VIR_DOMAIN_BLOCKED_UNKNOWN`.
        Unspecified = 0,
    }
}

wire_enum! {
    /// `virDomainPausedReason`.
    PausedReason: i32 {
        /// `VIR_DOMAIN_PAUSED_UNKNOWN`.
        Unspecified = 0,
        /// Paused on user request.
        User = 1,
        /// Paused for offline migration.
        Migration = 2,
        /// Paused for save.
        Save = 3,
        /// Paused for an offline core dump.
        Dump = 4,
        /// Paused due to a disk I/O error.
        IoError = 5,
        /// Paused due to a watchdog event.
        Watchdog = 6,
        /// Paused after restoring from a snapshot.
        FromSnapshot = 7,
        /// Paused during the shutdown process.
        ShuttingDown = 8,
        /// Paused while creating a snapshot.
        Snapshot = 9,
        /// Paused due to a guest crash.
        Crashed = 10,
        /// The domain is being started.
        StartingUp = 11,
        /// Paused for post-copy migration.
        Postcopy = 12,
        /// Paused after a failed post-copy migration.
        PostcopyFailed = 13,
        /// Paused after a failed API call.
        ApiError = 14,
    }
}

wire_enum! {
    /// `virDomainShutdownReason`.
    ShutdownReason: i32 {
        /// `VIR_DOMAIN_SHUTDOWN_UNKNOWN`.
        Unspecified = 0,
        /// Shutting down on user request.
        User = 1,
    }
}

wire_enum! {
    /// `virDomainShutoffReason`.
    ShutoffReason: i32 {
        /// `VIR_DOMAIN_SHUTOFF_UNKNOWN`.
        Unspecified = 0,
        /// Normal shutdown.
        Shutdown = 1,
        /// Forced poweroff.
        Destroyed = 2,
        /// Domain crashed.
        Crashed = 3,
        /// Migrated to another host.
        Migrated = 4,
        /// Saved to a file.
        Saved = 5,
        /// Domain failed to start.
        Failed = 6,
        /// Restored from a snapshot taken while the domain was shut off.
        FromSnapshot = 7,
        /// The daemon killed the domain (it found it on reconnect and
        /// could not take it over).
        Daemon = 8,
    }
}

wire_enum! {
    /// `virDomainCrashedReason`.
    CrashedReason: i32 {
        /// `VIR_DOMAIN_CRASHED_UNKNOWN`.
        Unspecified = 0,
        /// The guest panicked.
        Panicked = 1,
    }
}

wire_enum! {
    /// `virDomainPMSuspendedReason`.
    PmSuspendedReason: i32 {
        /// `VIR_DOMAIN_PMSUSPENDED_UNKNOWN`.
        Unspecified = 0,
    }
}

/// A domain's state together with its reason, typed per state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StateReason {
    /// [`DomainState::NoState`].
    NoState(NoStateReason),
    /// [`DomainState::Running`].
    Running(RunningReason),
    /// [`DomainState::Blocked`].
    Blocked(BlockedReason),
    /// [`DomainState::Paused`].
    Paused(PausedReason),
    /// [`DomainState::Shutdown`].
    Shutdown(ShutdownReason),
    /// [`DomainState::Shutoff`].
    Shutoff(ShutoffReason),
    /// [`DomainState::Crashed`].
    Crashed(CrashedReason),
    /// [`DomainState::PmSuspended`].
    PmSuspended(PmSuspendedReason),
    /// A state number this crate does not know, with its raw reason.
    Unknown {
        /// The `virDomainState` number.
        state: i32,
        /// The reason number.
        reason: i32,
    },
}

impl StateReason {
    /// Interprets `reason` in the light of `state`. Total: any pair maps.
    pub fn from_wire(state: DomainState, reason: i32) -> Self {
        match state {
            DomainState::NoState => Self::NoState(NoStateReason::from_wire(reason)),
            DomainState::Running => Self::Running(RunningReason::from_wire(reason)),
            DomainState::Blocked => Self::Blocked(BlockedReason::from_wire(reason)),
            DomainState::Paused => Self::Paused(PausedReason::from_wire(reason)),
            DomainState::Shutdown => Self::Shutdown(ShutdownReason::from_wire(reason)),
            DomainState::Shutoff => Self::Shutoff(ShutoffReason::from_wire(reason)),
            DomainState::Crashed => Self::Crashed(CrashedReason::from_wire(reason)),
            DomainState::PmSuspended => Self::PmSuspended(PmSuspendedReason::from_wire(reason)),
            DomainState::Unknown(state) => Self::Unknown { state, reason },
        }
    }

    /// The state.
    pub fn state(self) -> DomainState {
        match self {
            Self::NoState(_) => DomainState::NoState,
            Self::Running(_) => DomainState::Running,
            Self::Blocked(_) => DomainState::Blocked,
            Self::Paused(_) => DomainState::Paused,
            Self::Shutdown(_) => DomainState::Shutdown,
            Self::Shutoff(_) => DomainState::Shutoff,
            Self::Crashed(_) => DomainState::Crashed,
            Self::PmSuspended(_) => DomainState::PmSuspended,
            Self::Unknown { state, .. } => DomainState::Unknown(state),
        }
    }

    /// The reason's wire number.
    pub fn reason_number(self) -> i32 {
        match self {
            Self::NoState(r) => r.to_wire(),
            Self::Running(r) => r.to_wire(),
            Self::Blocked(r) => r.to_wire(),
            Self::Paused(r) => r.to_wire(),
            Self::Shutdown(r) => r.to_wire(),
            Self::Shutoff(r) => r.to_wire(),
            Self::Crashed(r) => r.to_wire(),
            Self::PmSuspended(r) => r.to_wire(),
            Self::Unknown { reason, .. } => reason,
        }
    }
}

wire_enum! {
    /// `virDomainEventID`: which kind of domain event a callback
    /// registers for (see [`crate::events`] for each kind's payload).
    DomainEventId: i32 {
        /// `VIR_DOMAIN_EVENT_ID_LIFECYCLE`: started, stopped, defined, ...
        Lifecycle = 0,
        /// `VIR_DOMAIN_EVENT_ID_REBOOT`: the guest rebooted.
        Reboot = 1,
        /// `VIR_DOMAIN_EVENT_ID_RTC_CHANGE`: the guest changed its RTC.
        RtcChange = 2,
        /// `VIR_DOMAIN_EVENT_ID_WATCHDOG`: the watchdog device fired.
        Watchdog = 3,
        /// `VIR_DOMAIN_EVENT_ID_IO_ERROR`: a disk I/O error.
        IoError = 4,
        /// `VIR_DOMAIN_EVENT_ID_GRAPHICS`: a graphics client (dis)connected.
        Graphics = 5,
        /// `VIR_DOMAIN_EVENT_ID_IO_ERROR_REASON`: a disk I/O error, with
        /// its reason.
        IoErrorReason = 6,
        /// `VIR_DOMAIN_EVENT_ID_CONTROL_ERROR`: the daemon lost control of
        /// the domain (its monitor failed).
        ControlError = 7,
        /// `VIR_DOMAIN_EVENT_ID_BLOCK_JOB`: a block job finished, failed or
        /// is ready (the disk named by path).
        BlockJob = 8,
        /// `VIR_DOMAIN_EVENT_ID_DISK_CHANGE`: a disk's source changed.
        DiskChange = 9,
        /// `VIR_DOMAIN_EVENT_ID_TRAY_CHANGE`: a removable disk's tray moved.
        TrayChange = 10,
        /// `VIR_DOMAIN_EVENT_ID_PMWAKEUP`: the guest woke up.
        PmWakeup = 11,
        /// `VIR_DOMAIN_EVENT_ID_PMSUSPEND`: the guest suspended to memory.
        PmSuspend = 12,
        /// `VIR_DOMAIN_EVENT_ID_BALLOON_CHANGE`: the balloon size changed.
        BalloonChange = 13,
        /// `VIR_DOMAIN_EVENT_ID_PMSUSPEND_DISK`: the guest suspended to disk.
        PmSuspendDisk = 14,
        /// `VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED`: a device was unplugged.
        DeviceRemoved = 15,
        /// `VIR_DOMAIN_EVENT_ID_BLOCK_JOB_2`: as [`DomainEventId::BlockJob`],
        /// the disk named by its target.
        BlockJob2 = 16,
        /// `VIR_DOMAIN_EVENT_ID_TUNABLE`: tunables changed.
        Tunable = 17,
        /// `VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE`: the guest agent
        /// (dis)connected.
        AgentLifecycle = 18,
        /// `VIR_DOMAIN_EVENT_ID_DEVICE_ADDED`: a device was plugged in.
        DeviceAdded = 19,
        /// `VIR_DOMAIN_EVENT_ID_MIGRATION_ITERATION`: a migration pass over
        /// memory began.
        MigrationIteration = 20,
        /// `VIR_DOMAIN_EVENT_ID_JOB_COMPLETED`: a job finished, with its
        /// statistics.
        JobCompleted = 21,
        /// `VIR_DOMAIN_EVENT_ID_DEVICE_REMOVAL_FAILED`: the guest refused
        /// an unplug.
        DeviceRemovalFailed = 22,
        /// `VIR_DOMAIN_EVENT_ID_METADATA_CHANGE`: title, description or a
        /// metadata element changed.
        MetadataChange = 23,
        /// `VIR_DOMAIN_EVENT_ID_BLOCK_THRESHOLD`: a disk's write threshold
        /// was crossed.
        BlockThreshold = 24,
        /// `VIR_DOMAIN_EVENT_ID_MEMORY_FAILURE`: a memory failure was
        /// handled.
        MemoryFailure = 25,
        /// `VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE`: a memory
        /// device's actual size changed.
        MemoryDeviceSizeChange = 26,
        /// `VIR_DOMAIN_EVENT_ID_NIC_MAC_CHANGE` (libvirt 11.2): the guest
        /// changed a virtual NIC's MAC address.
        NicMacChange = 27,
    }
}

wire_enum! {
    /// `virDrvFeature`: what [`crate::Client::connect_supports_feature`]
    /// asks about (numbers from libvirt's `src/libvirt_internal.h`).
    DrvFeature: i32 {
        /// `VIR_DRV_FEATURE_MIGRATION_V1`.
        MigrationV1 = 1,
        /// `VIR_DRV_FEATURE_REMOTE`.
        Remote = 2,
        /// `VIR_DRV_FEATURE_MIGRATION_V2`.
        MigrationV2 = 3,
        /// `VIR_DRV_FEATURE_MIGRATION_P2P`.
        MigrationP2p = 4,
        /// `VIR_DRV_FEATURE_MIGRATION_DIRECT`.
        MigrationDirect = 5,
        /// `VIR_DRV_FEATURE_MIGRATION_V3`.
        MigrationV3 = 6,
        /// `VIR_DRV_FEATURE_MIGRATE_CHANGE_PROTECTION`.
        MigrateChangeProtection = 7,
        /// `VIR_DRV_FEATURE_FD_PASSING`.
        FdPassing = 8,
        /// `VIR_DRV_FEATURE_TYPED_PARAM_STRING`.
        TypedParamString = 9,
        /// `VIR_DRV_FEATURE_PROGRAM_KEEPALIVE`: the daemon answers the
        /// keepalive program's PING.
        ProgramKeepalive = 10,
        /// `VIR_DRV_FEATURE_XML_MIGRATABLE`.
        XmlMigratable = 11,
        /// `VIR_DRV_FEATURE_MIGRATION_OFFLINE`.
        MigrationOffline = 12,
        /// `VIR_DRV_FEATURE_MIGRATION_PARAMS`.
        MigrationParams = 13,
        /// `VIR_DRV_FEATURE_REMOTE_EVENT_CALLBACK`.
        RemoteEventCallback = 14,
        /// `VIR_DRV_FEATURE_REMOTE_CLOSE_CALLBACK`.
        RemoteCloseCallback = 15,
    }
}

impl crate::remote::DomainStateInfo {
    /// The state with its reason, typed.
    pub fn state_reason(&self) -> StateReason {
        StateReason::from_wire(self.state, self.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::xdr::{from_bytes, to_bytes};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn state_reason_keeps_both_numbers(state: i32, reason: i32) {
            let sr = StateReason::from_wire(DomainState::from_wire(state), reason);
            prop_assert_eq!(sr.state().to_wire(), state);
            prop_assert_eq!(sr.reason_number(), reason);
        }
        #[test]
        fn enums_round_trip(n: i32) {
            let s = DomainState::from_wire(n);
            prop_assert_eq!(s.to_wire(), n);
            prop_assert_eq!(from_bytes::<DomainState>(&to_bytes(&s).unwrap()).unwrap(), s);
        }
    }

    #[test]
    fn reasons_are_read_per_state() {
        // The same number means different things under different states.
        assert_eq!(
            StateReason::from_wire(DomainState::Paused, 11),
            StateReason::Paused(PausedReason::StartingUp)
        );
        assert_eq!(
            StateReason::from_wire(DomainState::Running, 11),
            StateReason::Running(RunningReason::PostcopyFailed)
        );
        assert_eq!(
            StateReason::from_wire(DomainState::Shutoff, 6),
            StateReason::Shutoff(ShutoffReason::Failed)
        );
        assert_eq!(
            StateReason::from_wire(DomainState::Unknown(8), 3),
            StateReason::Unknown {
                state: 8,
                reason: 3
            }
        );
    }

    #[test]
    fn keepalive_feature_and_lifecycle_event_numbers() {
        assert_eq!(DrvFeature::ProgramKeepalive.to_wire(), 10);
        assert_eq!(DomainEventId::Lifecycle.to_wire(), 0);
    }
}
