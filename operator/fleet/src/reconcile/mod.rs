//! The reconcile step: (spec, status, memory, last provider result, clock)
//! → the next provider call, the new status, events, requeue.
//!
//! Sans-IO. The operator drives it:
//!
//! ```text
//!  outcome = None
//!  loop {
//!      step = reconciler.step(StepInput { .., outcome })
//!      write step.status if it differs; record step.events; keep step.memory
//!      match step.next {
//!          Call(c)      => outcome = Some(execute c with a deadline)   // ≤ 3 per pass
//!          Requeue(d)   => return requeue after d
//!          AwaitChange  => return await change
//!          Release      => remove the finalizer; return
//!      }
//!  }
//! ```
//!
//! # What each situation leads to
//!
//! | situation | call | status | next |
//! |---|---|---|---|
//! | no providerID | Create | `Pending`, `Creating` | call |
//! | Create → instance | — | providerID, host, createdAt, appliedSpec recorded at once | poll |
//! | providerID | Get | — | call |
//! | Get → Running + IP | — | `Running`, `Provisioned`, `Ready` | poll (long) |
//! | Get → Provisioning, never had an IP | — | `Provisioning` | poll (short) |
//! | Get → Provisioning after Running (address grace) | — | unchanged within the grace, then `AddressLost` | poll (short) |
//! | Get → Failed/Stopped, under the cap | Delete, then Create | `Replacing` | call |
//! | Get → Failed/Stopped, at the cap | — | `Failed`, `ReplaceLimitReached` | when the cap frees |
//! | Get → NotFound | Create (cap applies) | `InstanceGone` event | call |
//! | Transient (any call) | — | unchanged, then `ProviderUnavailable` after `transient_tolerance` | backoff |
//! | QuotaExceeded | — | `QuotaWait` | `quota_wait` |
//! | Permanent | — | `ProviderRejected` | `permanent_retry`, and on provider recovery |
//! | bad spec / Secret / entry | — | `InvalidSpec`, `Secret*`, `UnknownProvider`; nothing made | await change / `input_retry` |
//! | spec edited after create | as before, with the applied spec | `Ready` = `SpecImmutable` | as before |
//! | deleting, no providerID | — | — | release |
//! | deleting | Delete | `Deleting` | release when gone; backoff on Transient |
//! | deleting, unknown entry or Permanent | — | `DeleteBlocked` warning | `permanent_retry`; release with [`ABANDON_ANNOTATION`] |
//!
//! Replacing a failed instance and re-creating a vanished one both count
//! against [`Policy::replace_cap`].

mod create;
mod deletion;
mod draft;
mod existing;
mod observe;
mod policy;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use provider_api::{CreateRequest, Error as ProviderError, Identifier, Instance, ProviderId};

use crate::backoff::Jitter;
use crate::cluster::ClusterIdentity;
use crate::event::Event;
use crate::reason::Reason;
use crate::spec::{ProxySpec, SecretRef};
use crate::status::{ConditionType, ProxyStatus};
use crate::time::Timestamp;
use crate::user_data::UserDataRead;

pub use policy::{AddressGrace, Policy};

use draft::{Draft, Inputs};

/// The annotation that releases a Proxy's finalizer without deleting its
/// instance (value `"true"`), for an instance whose provider entry is gone
/// from the config or whose provider refuses the delete. The instance is
/// left in place; if it carries this cluster's tag and outlives the Proxy,
/// the GC removes it once its provider lists it again.
pub const ABANDON_ANNOTATION: &str = "egress-proxies.io/abandon-instance";

/// The most provider calls one reconcile pass makes (replace: Get, Delete,
/// Create).
pub const MAX_CALLS_PER_PASS: usize = 3;

/// The parts of the `Proxy`'s metadata the step needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyMeta {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`: the owner of the instance.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// [`ABANDON_ANNOTATION`] is `"true"`.
    pub abandon: bool,
    /// A ProxyPool controls it (a member): its creation is announced by
    /// the pool's `MembersCreated` Event, so it records no `Created` Event
    /// of its own (every other Event it records as any Proxy does).
    pub pool_member: bool,
}

/// A provider call the operator makes for the step.
#[derive(Debug, Clone)]
pub enum Call {
    /// `create` on the provider entry `provider`.
    Create {
        /// The provider entry.
        provider: Identifier,
        /// The request (its `Debug` redacts the user data).
        request: Box<CreateRequest>,
    },
    /// `get` (the entry is the ID's provider).
    Get(ProviderId),
    /// `delete` (the entry is the ID's provider).
    Delete(ProviderId),
}

/// The result of the [`Call`] the previous step asked for.
#[derive(Debug)]
pub enum Outcome {
    /// What `create` returned.
    Created(Result<Instance, ProviderError>),
    /// What `get` returned.
    Got(Result<Instance, ProviderError>),
    /// What `delete` returned.
    Deleted(Result<(), ProviderError>),
}

/// What the operator does after writing the status and recording events.
#[derive(Debug, Clone)]
pub enum Next {
    /// Make this call, then step again with its [`Outcome`].
    Call(Call),
    /// Reconcile again after this delay.
    Requeue(Duration),
    /// Nothing to do until the Proxy (or the operator's config) changes.
    AwaitChange,
    /// Remove the finalizer: the Proxy may go.
    Release,
}

/// Per-object state kept in memory between passes (not in the status):
/// consecutive transient failures and the address grace. A new leader starts from
/// [`Default`], which only lengthens a backoff or a grace, never shortens
/// one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    failures: u32,
    grace: Option<GraceStart>,
    /// Since when every read of the instance failed transiently.
    unreachable_since: Option<Timestamp>,
    /// The host the next Create avoids (where an instance was lost).
    avoid: Option<provider_api::Identifier>,
}

impl Memory {
    /// Consecutive transient failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether the address grace is running (a running proxy reported without an
    /// address).
    pub fn in_address_grace(&self) -> bool {
        self.grace.is_some()
    }

    /// Since when every read of the instance failed transiently, if they
    /// do.
    pub fn unreachable_since(&self) -> Option<Timestamp> {
        self.unreachable_since
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GraceStart {
    since: Timestamp,
    polls: u32,
}

/// Everything one step looks at.
#[derive(Debug)]
pub struct StepInput<'a> {
    /// The Proxy's metadata.
    pub meta: &'a ProxyMeta,
    /// The Proxy's spec as stored.
    pub spec: &'a ProxySpec,
    /// The status: the stored one on the first step of a pass, then the one
    /// the previous step returned.
    pub status: &'a ProxyStatus,
    /// The memory the previous step returned ([`Default`] at first).
    pub memory: &'a Memory,
    /// The cloud-init Secret as read for
    /// [`Reconciler::secret_to_read`] (only looked at before a Create).
    pub user_data: &'a UserDataRead,
    /// The provider entries configured in this operator.
    pub providers: &'a BTreeSet<Identifier>,
    /// The result of the previous step's call; `None` on a pass's first
    /// step.
    pub outcome: Option<Outcome>,
    /// The clock.
    pub now: SystemTime,
    /// The jitter applied to a backoff delay, drawn by the caller.
    pub jitter: Jitter,
}

/// What one step decided.
#[derive(Debug)]
pub struct Step {
    /// The new status (write it if it differs from the stored one).
    pub status: ProxyStatus,
    /// The memory to keep for this object.
    pub memory: Memory,
    /// Events to record, in order.
    pub events: Vec<Event>,
    /// What to do next.
    pub next: Next,
}

/// The reconcile step with its [`Policy`] and this cluster's identity.
#[derive(Debug, Clone)]
pub struct Reconciler {
    policy: Policy,
    cluster: ClusterIdentity,
}

impl Reconciler {
    /// A reconciler applying `policy`, tagging instances with `cluster`.
    pub fn new(policy: Policy, cluster: ClusterIdentity) -> Self {
        Reconciler { policy, cluster }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The cloud-init Secret the operator should read before a step: the one
    /// named by the spec in force (the applied spec once an instance was
    /// made, whatever later edits say).
    pub fn secret_to_read<'s>(
        &self,
        spec: &'s ProxySpec,
        status: &'s ProxyStatus,
    ) -> Option<&'s SecretRef> {
        status
            .applied_spec
            .as_ref()
            .unwrap_or(spec)
            .cloud_init
            .as_ref()
    }

    /// Decides the next move. Total: every input, however wrong, gives a
    /// step (bad input becomes a condition).
    pub fn step(&self, input: StepInput<'_>) -> Step {
        let StepInput {
            meta,
            spec,
            status,
            memory,
            user_data,
            providers,
            outcome,
            now,
            jitter,
        } = input;
        let inputs = Inputs {
            meta,
            spec,
            old: status,
            user_data,
            providers,
            jitter,
        };
        let mut d = Draft::new(self, inputs, memory, now);
        if meta.deleting {
            return deletion::step(d, outcome);
        }
        d.check_immutability();
        match (d.spec().existing_address(), &outcome) {
            (Ok(Some(addr)), None) => return existing::step(d, addr),
            (Err(issues), _) => {
                let msg = issues
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ");
                return d.input_error(Reason::InvalidSpec, msg);
            }
            _ => {}
        }
        match outcome {
            None => match d.status.provider_id.clone() {
                None => create::start(d),
                Some(id) => observe::start(d, &id),
            },
            Some(Outcome::Created(result)) => create::after(d, result),
            Some(Outcome::Got(result)) => observe::after_get(d, result),
            Some(Outcome::Deleted(result)) => observe::after_replace_delete(d, result),
        }
    }
}

/// Whether the Proxy waits on its provider (a Permanent refusal or repeated
/// transient failures): the operator re-runs such Proxies when their
/// provider's health recovers (see
/// [`ProviderHealthStatus::recovered_from`](crate::ProviderHealthStatus::recovered_from)),
/// since SSH keys are re-read on every dial and a fixed Secret heals them.
pub fn awaits_provider_recovery(status: &ProxyStatus) -> bool {
    matches!(
        status.condition_reason(ConditionType::Ready),
        Some(Reason::ProviderRejected | Reason::ProviderUnavailable)
    )
}
