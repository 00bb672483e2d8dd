//! libvirt domain state and reason → instance state.
//!
//! libvirt-rpc decodes a domain's state and its per-state reason into one
//! typed [`StateReason`]; [`classify`] maps it to what the operator needs: is the proxy VM coming up, serving, going
//! away, or broken (and why).
//!
//! A running domain is only [`DomainPhase::Running`] here; whether it has an
//! address yet (and so is really serving) is decided by the address lookup,
//! not by this table.
//!
//! States and reasons libvirt adds in later versions (libvirt-rpc's
//! `Unknown` fallbacks) fall through to the state's generic row, with the
//! raw reason number in the text.

use libvirt_rpc::{
    CrashedReason, DomainState, PausedReason, RunningReason, ShutoffReason, StateReason,
};
use provider_api::InstanceState;

/// What a domain's libvirt state means for the proxy instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DomainPhase {
    /// Coming up: being started, or in a state libvirt moves on from by
    /// itself.
    Starting,
    /// The guest is executing.
    Running,
    /// Being shut down, or shut off cleanly (destroyed, shut down by the
    /// guest, saved, migrated away).
    Stopped,
    /// Will not serve without intervention: crashed, failed to start, paused
    /// by an error or a user, suspended by the guest.
    Failed,
}

/// The verdict for one (state, reason) pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateVerdict {
    /// The phase.
    pub phase: DomainPhase,
    /// Human-readable libvirt state and reason, e.g. `"paused: I/O error"`.
    pub detail: String,
}

impl StateVerdict {
    /// The provider-API state. A running domain is
    /// [`InstanceState::Running`] here; `get` downgrades it to
    /// `Provisioning` while no address is known.
    pub fn instance_state(&self) -> InstanceState {
        match self.phase {
            DomainPhase::Starting => InstanceState::Provisioning,
            DomainPhase::Running => InstanceState::Running,
            DomainPhase::Stopped => InstanceState::Stopped,
            DomainPhase::Failed => InstanceState::Failed {
                reason: self.detail.clone(),
            },
        }
    }
}

/// Maps a libvirt state and reason to a [`StateVerdict`]. Total: any
/// pair, including numbers libvirt has not defined yet, gets an answer.
pub fn classify(state: StateReason) -> StateVerdict {
    let phase = phase(state);
    let reason = state.reason_number();
    let detail = match (state_name(state.state()), reason_name(state)) {
        (Some(name), Some(r)) => format!("{name}: {r}"),
        (Some(name), None) if reason == 0 => name.to_owned(),
        (Some(name), None) => format!("{name} (reason {reason})"),
        (None, _) => format!(
            "unknown libvirt state {} (reason {reason})",
            state.state().to_wire()
        ),
    };
    StateVerdict { phase, detail }
}

/// The phase of a state and reason.
fn phase(state: StateReason) -> DomainPhase {
    use DomainPhase::*;
    match state {
        StateReason::NoState(_) => Starting,
        // Xen's "blocked on a resource" is a running guest waiting for I/O.
        StateReason::Running(_) | StateReason::Blocked(_) => Running,
        // libvirt starts domains paused, then resumes them.
        StateReason::Paused(PausedReason::StartingUp) => Starting,
        StateReason::Paused(PausedReason::ShuttingDown) => Stopped,
        // A host-side job that ends by itself (resumed, or shut off).
        StateReason::Paused(
            PausedReason::Migration
            | PausedReason::Save
            | PausedReason::Dump
            | PausedReason::Snapshot
            | PausedReason::Postcopy,
        ) => Starting,
        // Paused by a user or an error, or a reason newer than this table.
        StateReason::Paused(_) => Failed,
        StateReason::Shutdown(_) => Stopped,
        StateReason::Shutoff(
            ShutoffReason::Crashed | ShutoffReason::Failed | ShutoffReason::Daemon,
        ) => Failed,
        StateReason::Shutoff(_) => Stopped,
        StateReason::Crashed(_) => Failed,
        // The guest suspended itself (S3/S4): it serves nothing until woken.
        StateReason::PmSuspended(_) => Failed,
        _ => Failed,
    }
}

/// The state in words; `None` for a state libvirt added after this table.
fn state_name(state: DomainState) -> Option<&'static str> {
    Some(match state {
        DomainState::NoState => "no state",
        DomainState::Running => "running",
        DomainState::Blocked => "blocked",
        DomainState::Paused => "paused",
        DomainState::Shutdown => "shutting down",
        DomainState::Shutoff => "shut off",
        DomainState::Crashed => "crashed",
        DomainState::PmSuspended => "suspended by guest power management",
        _ => return None,
    })
}

/// The reason in words, where it says more than the state.
fn reason_name(state: StateReason) -> Option<&'static str> {
    match state {
        StateReason::Running(r) => running_reason(r),
        StateReason::Paused(r) => paused_reason(r),
        StateReason::Shutoff(r) => shutoff_reason(r),
        StateReason::Crashed(CrashedReason::Panicked) => Some("guest panicked"),
        _ => None,
    }
}

fn running_reason(reason: RunningReason) -> Option<&'static str> {
    use RunningReason::*;
    Some(match reason {
        Booted => "booted",
        Migrated => "migrated",
        Restored => "restored",
        FromSnapshot => "from snapshot",
        Unpaused => "unpaused",
        MigrationCanceled => "migration canceled",
        SaveCanceled => "save canceled",
        Wakeup => "woken up",
        Crashed => "resumed from crash",
        Postcopy => "post-copy migration",
        PostcopyFailed => "post-copy migration failed",
        _ => return None,
    })
}

fn paused_reason(reason: PausedReason) -> Option<&'static str> {
    use PausedReason::*;
    Some(match reason {
        User => "paused by user",
        Migration => "migration",
        Save => "save",
        Dump => "core dump",
        IoError => "I/O error",
        Watchdog => "watchdog",
        FromSnapshot => "restored from snapshot",
        ShuttingDown => "shutting down",
        Snapshot => "snapshot",
        Crashed => "guest crashed",
        StartingUp => "starting up",
        Postcopy => "post-copy migration",
        PostcopyFailed => "post-copy migration failed",
        ApiError => "API error",
        _ => return None,
    })
}

fn shutoff_reason(reason: ShutoffReason) -> Option<&'static str> {
    use ShutoffReason::*;
    Some(match reason {
        Shutdown => "shut down",
        Destroyed => "destroyed",
        Crashed => "crashed",
        Migrated => "migrated",
        Saved => "saved",
        Failed => "failed to start",
        FromSnapshot => "restored from snapshot",
        Daemon => "killed by the daemon",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::DomainPhase::*;
    use super::*;

    /// The verdict for a raw wire pair.
    fn classify_wire(state: i32, reason: i32) -> StateVerdict {
        classify(StateReason::from_wire(
            DomainState::from_wire(state),
            reason,
        ))
    }

    /// One row per libvirt state and reason (libvirt 11 header), plus
    /// out-of-range numbers. The table keeps the wire numbers on purpose:
    /// it pins the decoding as well as the words.
    const TABLE: &[(i32, i32, DomainPhase, &str)] = &[
        (0, 0, Starting, "no state"),
        (1, 0, Running, "running"),
        (1, 1, Running, "running: booted"),
        (1, 2, Running, "running: migrated"),
        (1, 3, Running, "running: restored"),
        (1, 4, Running, "running: from snapshot"),
        (1, 5, Running, "running: unpaused"),
        (1, 6, Running, "running: migration canceled"),
        (1, 7, Running, "running: save canceled"),
        (1, 8, Running, "running: woken up"),
        (1, 9, Running, "running: resumed from crash"),
        (1, 10, Running, "running: post-copy migration"),
        (1, 11, Running, "running: post-copy migration failed"),
        (2, 0, Running, "blocked"),
        (3, 0, Failed, "paused"),
        (3, 1, Failed, "paused: paused by user"),
        (3, 2, Starting, "paused: migration"),
        (3, 3, Starting, "paused: save"),
        (3, 4, Starting, "paused: core dump"),
        (3, 5, Failed, "paused: I/O error"),
        (3, 6, Failed, "paused: watchdog"),
        (3, 7, Failed, "paused: restored from snapshot"),
        (3, 8, Stopped, "paused: shutting down"),
        (3, 9, Starting, "paused: snapshot"),
        (3, 10, Failed, "paused: guest crashed"),
        (3, 11, Starting, "paused: starting up"),
        (3, 12, Starting, "paused: post-copy migration"),
        (3, 13, Failed, "paused: post-copy migration failed"),
        (3, 14, Failed, "paused: API error"),
        (3, 99, Failed, "paused (reason 99)"),
        (4, 0, Stopped, "shutting down"),
        (4, 1, Stopped, "shutting down (reason 1)"),
        (5, 0, Stopped, "shut off"),
        (5, 1, Stopped, "shut off: shut down"),
        (5, 2, Stopped, "shut off: destroyed"),
        (5, 3, Failed, "shut off: crashed"),
        (5, 4, Stopped, "shut off: migrated"),
        (5, 5, Stopped, "shut off: saved"),
        (5, 6, Failed, "shut off: failed to start"),
        (5, 7, Stopped, "shut off: restored from snapshot"),
        (5, 8, Failed, "shut off: killed by the daemon"),
        (6, 0, Failed, "crashed"),
        (6, 1, Failed, "crashed: guest panicked"),
        (7, 0, Failed, "suspended by guest power management"),
        (8, 0, Failed, "unknown libvirt state 8 (reason 0)"),
        (-1, -1, Failed, "unknown libvirt state -1 (reason -1)"),
    ];

    #[test]
    fn state_table() {
        for &(state, reason, phase, detail) in TABLE {
            let v = classify_wire(state, reason);
            assert_eq!(v.phase, phase, "({state}, {reason})");
            assert_eq!(v.detail, detail, "({state}, {reason})");
            let expected = match phase {
                Starting => InstanceState::Provisioning,
                Running => InstanceState::Running,
                Stopped => InstanceState::Stopped,
                Failed => InstanceState::Failed {
                    reason: detail.to_owned(),
                },
            };
            assert_eq!(v.instance_state(), expected, "({state}, {reason})");
        }
    }

    /// The contract (`InstanceState` and docs/provider-contract.md §2):
    /// paused — by a user or by an error — and guest-suspended domains are
    /// Failed with a reason; only shut-off / shutting-down ones are Stopped.
    #[test]
    fn paused_and_suspended_are_failed_as_the_contract_says() {
        use libvirt_rpc::{PmSuspendedReason, ShutdownReason};
        for state in [
            StateReason::Paused(PausedReason::User),
            StateReason::Paused(PausedReason::IoError),
            StateReason::PmSuspended(PmSuspendedReason::Unspecified),
        ] {
            let v = classify(state).instance_state();
            assert!(
                matches!(v, InstanceState::Failed { ref reason } if !reason.is_empty()),
                "{state:?}: {v:?}"
            );
        }
        for state in [
            StateReason::Shutoff(ShutoffReason::Shutdown),
            StateReason::Shutoff(ShutoffReason::Destroyed),
            StateReason::Shutdown(ShutdownReason::Unspecified),
        ] {
            assert_eq!(
                classify(state).instance_state(),
                InstanceState::Stopped,
                "{state:?}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn classify_is_total(state: i32, reason: i32) {
            let v = classify_wire(state, reason);
            proptest::prop_assert!(!v.detail.is_empty());
        }
    }
}
