//! libvirt domain state and reason → instance state.
//!
//! libvirt reports a domain's state as two numbers: a `virDomainState` and a
//! per-state reason (`virDomainRunningReason`, `virDomainPausedReason`, ...),
//! both from `include/libvirt/libvirt-domain.h`. [`classify`] maps the pair
//! to what the operator needs: is the proxy VM coming up, serving, going
//! away, or broken (and why).
//!
//! A running domain is only [`DomainPhase::Running`] here; whether it has an
//! address yet (and so is really serving) is decided by the address lookup,
//! not by this table.
//!
//! Numbers libvirt adds in later versions fall through to the state's
//! generic row, with the raw reason number in the text.

use provider_api::InstanceState;

/// `virDomainState` numbers.
pub mod libvirt_state {
    /// `VIR_DOMAIN_NOSTATE`
    pub const NOSTATE: i32 = 0;
    /// `VIR_DOMAIN_RUNNING`
    pub const RUNNING: i32 = 1;
    /// `VIR_DOMAIN_BLOCKED`
    pub const BLOCKED: i32 = 2;
    /// `VIR_DOMAIN_PAUSED`
    pub const PAUSED: i32 = 3;
    /// `VIR_DOMAIN_SHUTDOWN`
    pub const SHUTDOWN: i32 = 4;
    /// `VIR_DOMAIN_SHUTOFF`
    pub const SHUTOFF: i32 = 5;
    /// `VIR_DOMAIN_CRASHED`
    pub const CRASHED: i32 = 6;
    /// `VIR_DOMAIN_PMSUSPENDED`
    pub const PMSUSPENDED: i32 = 7;
}

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

/// Maps a libvirt `(state, reason)` pair to a [`StateVerdict`]. Total: any
/// pair, including numbers libvirt has not defined yet, gets an answer.
pub fn classify(state: i32, reason: i32) -> StateVerdict {
    use DomainPhase::*;
    use libvirt_state as s;
    let (phase, state_name, reason_name) = match state {
        s::NOSTATE => (Starting, "no state", None),
        s::RUNNING => (Running, "running", running_reason(reason)),
        // Xen's "blocked on a resource" is a running guest waiting for I/O.
        s::BLOCKED => (Running, "blocked", None),
        s::PAUSED => {
            let phase = match reason {
                // STARTING_UP: libvirt starts domains paused, then resumes.
                11 => Starting,
                // SHUTTING_DOWN
                8 => Stopped,
                // MIGRATION, SAVE, DUMP, SNAPSHOT, POSTCOPY: a host-side job
                // that ends by itself (resumed, or shut off).
                2 | 3 | 4 | 9 | 12 => Starting,
                // UNKNOWN, USER, IOERROR, WATCHDOG, FROM_SNAPSHOT, CRASHED,
                // POSTCOPY_FAILED, API_ERROR and anything newer.
                _ => Failed,
            };
            (phase, "paused", paused_reason(reason))
        }
        s::SHUTDOWN => (Stopped, "shutting down", None),
        s::SHUTOFF => {
            let phase = match reason {
                // CRASHED, FAILED (to start), DAEMON (killed on reconnect)
                3 | 6 | 8 => Failed,
                _ => Stopped,
            };
            (phase, "shut off", shutoff_reason(reason))
        }
        s::CRASHED => (
            Failed,
            "crashed",
            match reason {
                1 => Some("guest panicked"),
                _ => None,
            },
        ),
        // The guest suspended itself (S3/S4): it serves nothing until woken.
        s::PMSUSPENDED => (Failed, "suspended by guest power management", None),
        _ => (Failed, "unknown libvirt state", None),
    };
    let detail = match (state, reason_name) {
        (_, Some(r)) => format!("{state_name}: {r}"),
        (s::NOSTATE..=s::PMSUSPENDED, None) if reason == 0 => state_name.to_owned(),
        (s::NOSTATE..=s::PMSUSPENDED, None) => format!("{state_name} (reason {reason})"),
        _ => format!("{state_name} {state} (reason {reason})"),
    };
    StateVerdict { phase, detail }
}

fn running_reason(reason: i32) -> Option<&'static str> {
    Some(match reason {
        1 => "booted",
        2 => "migrated",
        3 => "restored",
        4 => "from snapshot",
        5 => "unpaused",
        6 => "migration canceled",
        7 => "save canceled",
        8 => "woken up",
        9 => "resumed from crash",
        10 => "post-copy migration",
        _ => return None,
    })
}

fn paused_reason(reason: i32) -> Option<&'static str> {
    Some(match reason {
        1 => "paused by user",
        2 => "migration",
        3 => "save",
        4 => "core dump",
        5 => "I/O error",
        6 => "watchdog",
        7 => "restored from snapshot",
        8 => "shutting down",
        9 => "snapshot",
        10 => "guest crashed",
        11 => "starting up",
        12 => "post-copy migration",
        13 => "post-copy migration failed",
        14 => "API error",
        _ => return None,
    })
}

fn shutoff_reason(reason: i32) -> Option<&'static str> {
    Some(match reason {
        1 => "shut down",
        2 => "destroyed",
        3 => "crashed",
        4 => "migrated",
        5 => "saved",
        6 => "failed to start",
        7 => "restored from snapshot",
        8 => "killed by the daemon",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::DomainPhase::*;
    use super::*;

    /// One row per libvirt state and reason (libvirt 11 header), plus
    /// out-of-range numbers.
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
            let v = classify(state, reason);
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
        use libvirt_state as s;
        for (state, reason) in [(s::PAUSED, 1), (s::PAUSED, 5), (s::PMSUSPENDED, 0)] {
            let v = classify(state, reason).instance_state();
            assert!(
                matches!(v, InstanceState::Failed { ref reason } if !reason.is_empty()),
                "({state}, {reason}): {v:?}"
            );
        }
        for (state, reason) in [(s::SHUTOFF, 1), (s::SHUTOFF, 2), (s::SHUTDOWN, 0)] {
            assert_eq!(
                classify(state, reason).instance_state(),
                InstanceState::Stopped,
                "({state}, {reason})"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn classify_is_total(state: i32, reason: i32) {
            let v = classify(state, reason);
            proptest::prop_assert!(!v.detail.is_empty());
        }
    }
}
