//! [`Policy`]: every timing and limit the reconciler applies.

use std::time::Duration;

use crate::backoff::Backoff;
use crate::replace_cap::ReplaceCap;

/// The address grace: how long a running proxy whose provider reports it
/// provisioning (no address) keeps its address and `Provisioned`.
///
/// The proxy is demoted only once **both** bounds are passed: more than
/// `polls` consecutive address-less polls **and** at least `duration` since
/// the first of them. A guest agent restarting inside a running VM, or an
/// address read that raced a reconnect, therefore never demotes a healthy
/// proxy by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressGrace {
    /// Address-less polls tolerated.
    pub polls: u32,
    /// Time tolerated from the first address-less poll.
    pub duration: Duration,
}

/// Timings and limits of the reconcile step. [`Default`] gives the values
/// the operator ships with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Policy {
    /// Poll interval while the instance has no address (5 s).
    pub poll_provisioning: Duration,
    /// Poll interval while it runs (60 s).
    pub poll_running: Duration,
    /// Delays after consecutive transient failures (2 s doubling to 5 min).
    pub backoff: Backoff,
    /// Consecutive transient failures before `Ready` reports
    /// `ProviderUnavailable` (3); fewer change no status.
    pub transient_tolerance: u32,
    /// Wait after QuotaExceeded (5 min).
    pub quota_wait: Duration,
    /// Retry interval after a Permanent error (30 min); the operator also
    /// re-runs such proxies when their provider's health recovers.
    pub permanent_retry: Duration,
    /// Retry interval after a Secret problem or an unknown provider entry
    /// (2 min): those can be fixed without touching the Proxy.
    pub input_retry: Duration,
    /// The address grace (3 polls and 60 s).
    pub address_grace: AddressGrace,
    /// Replacements allowed per window (3 per hour).
    pub replace_cap: ReplaceCap,
    /// Replace a running instance whose `Healthy` verdict (about that
    /// instance) has been `False` for this long, within `replace_cap`
    /// (5 min; `None`: never for health alone).
    pub replace_unhealthy_after: Option<Duration>,
    /// Make a new instance on another host once the instance's host has
    /// failed every read (transiently: cut off, frozen, down) for this
    /// long; `None` waits for the host however long. Not for a Proxy that
    /// requires its host. The old instance is the GC's duplicate once its
    /// host answers again.
    pub host_loss_grace: Option<Duration>,
    /// The port a proxy is probed on when its `Instance` reports none (3128).
    pub proxy_port: u16,
    /// Largest cloud-init user data accepted, in bytes (256 KiB; kvm2's
    /// whole seed image is capped at 1 MiB).
    pub max_user_data: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            poll_provisioning: Duration::from_secs(5),
            poll_running: Duration::from_secs(60),
            backoff: Backoff::new(Duration::from_secs(2), Duration::from_secs(300)),
            transient_tolerance: 3,
            quota_wait: Duration::from_secs(300),
            permanent_retry: Duration::from_secs(1800),
            input_retry: Duration::from_secs(120),
            address_grace: AddressGrace {
                polls: 3,
                duration: Duration::from_secs(60),
            },
            replace_cap: ReplaceCap::new(3, Duration::from_secs(3600)),
            replace_unhealthy_after: Some(Duration::from_secs(300)),
            host_loss_grace: Some(Duration::from_secs(300)),
            proxy_port: 3128,
            max_user_data: 256 * 1024,
        }
    }
}
