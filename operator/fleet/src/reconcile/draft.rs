//! [`Draft`]: the step's working state (status, memory, events being
//! built) and the condition and error-class helpers every path shares.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use provider_api::{Error as ProviderError, ErrorClass, Identifier};

use super::{Memory, Next, ProxyMeta, Reconciler, Step};
use crate::backoff::Jitter;
use crate::event::{Event, EventReason};
use crate::reason::{Reason, ReasonCategory};
use crate::spec::ProxySpec;
use crate::status::{ConditionStatus, ConditionType, ConditionUpdate, Phase, ProxyStatus};
use crate::time::Timestamp;
use crate::user_data::UserDataRead;

/// The inputs a step reads, by reference.
pub(super) struct Inputs<'a> {
    pub meta: &'a ProxyMeta,
    pub spec: &'a ProxySpec,
    pub old: &'a ProxyStatus,
    pub user_data: &'a UserDataRead,
    pub providers: &'a BTreeSet<Identifier>,
    pub jitter: Jitter,
}

/// A step under construction.
pub(super) struct Draft<'a> {
    pub r: &'a Reconciler,
    pub inp: Inputs<'a>,
    pub status: ProxyStatus,
    pub memory: Memory,
    pub events: Vec<Event>,
    pub now: Timestamp,
    /// Spec fields edited after the instance was made.
    pub edited: Vec<&'static str>,
}

impl<'a> Draft<'a> {
    pub fn new(r: &'a Reconciler, inp: Inputs<'a>, memory: &Memory, now: SystemTime) -> Draft<'a> {
        let mut status = inp.old.clone();
        status.observed_generation = Some(inp.meta.generation);
        Draft {
            r,
            inp,
            status,
            memory: memory.clone(),
            events: Vec::new(),
            now: Timestamp::from(now),
            edited: Vec::new(),
        }
    }

    /// The spec in force: the applied one once an instance was made.
    pub fn spec(&self) -> ProxySpec {
        self.status
            .applied_spec
            .clone()
            .unwrap_or_else(|| self.inp.spec.clone())
    }

    /// Notes spec edits made after the instance was made; adopts the spec
    /// as applied when an instance exists without a recorded one.
    pub fn check_immutability(&mut self) {
        match &self.status.applied_spec {
            Some(applied) => self.edited = applied.changed_fields(self.inp.spec),
            None if self.status.provider_id.is_some() => {
                self.status.applied_spec = Some(self.inp.spec.clone());
            }
            None => {}
        }
    }

    pub fn set(&mut self, t: ConditionType, status: ConditionStatus, reason: Reason, msg: String) {
        let generation = Some(self.inp.meta.generation);
        self.status.set_condition(
            t,
            ConditionUpdate::new(status, reason, msg, generation),
            self.now,
        );
    }

    pub fn provisioned(&mut self, ok: bool, reason: Reason, msg: String) {
        self.set(
            ConditionType::Provisioned,
            ConditionStatus::from_bool(ok),
            reason,
            msg,
        );
    }

    pub fn ready(&mut self, ok: bool, reason: Reason, msg: String) {
        self.set(
            ConditionType::Ready,
            ConditionStatus::from_bool(ok),
            reason,
            msg,
        );
    }

    /// Sets both reconciler conditions to `False` with one reason.
    pub fn not_provisioned(&mut self, reason: Reason, msg: String) {
        self.provisioned(false, reason, msg.clone());
        self.ready(false, reason, msg);
    }

    /// Records a Warning event unless the stored `Ready` reason already was
    /// `reason` (one event per episode, not per retry).
    pub fn warn_once(&mut self, reason: Reason, event: EventReason, msg: &str) {
        if self.inp.old.condition_reason(ConditionType::Ready) != Some(reason) {
            self.events.push(Event::warning(event, msg));
        }
    }

    /// Forgets the instance (after it was deleted or found gone).
    pub fn clear_instance(&mut self) {
        self.status.provider_id = None;
        self.status.host = None;
        self.status.ip = None;
        self.status.port = None;
        self.status.created_at = None;
        self.memory.grace = None;
    }

    /// The provider entry of a recorded provider ID, if the ID parses and the
    /// entry is configured; otherwise why not.
    pub fn known_id(&self, id: &str) -> Result<provider_api::ProviderId, String> {
        let parsed = provider_api::ProviderId::parse(id)
            .map_err(|e| format!("status.providerID {id:?} {}", e.rule()))?;
        if self.inp.providers.contains(parsed.provider()) {
            Ok(parsed)
        } else {
            Err(format!(
                "status.providerID {id} names provider entry {:?}, which is not in the \
                 providers config",
                parsed.provider().as_str()
            ))
        }
    }

    /// A provider error: the class alone decides. `what` names the call
    /// ("create", "read instance ...").
    pub fn provider_error(mut self, what: &str, err: &ProviderError, instance: bool) -> Step {
        let msg = format!("{what}: {}", provider_api::error::chain(err));
        match err.class() {
            ErrorClass::Permanent => {
                self.memory.failures = 0;
                self.warn_once(
                    Reason::ProviderRejected,
                    EventReason::ProviderRejected,
                    &msg,
                );
                if !instance {
                    self.status.phase = Some(Phase::Pending);
                    self.provisioned(false, Reason::ProviderRejected, msg.clone());
                }
                self.ready(false, Reason::ProviderRejected, msg);
                let next = Next::Requeue(self.r.policy.permanent_retry);
                self.finish(next)
            }
            ErrorClass::QuotaExceeded if !instance => {
                self.memory.failures = 0;
                self.warn_once(Reason::QuotaWait, EventReason::QuotaWait, &msg);
                self.status.phase = Some(Phase::Pending);
                self.not_provisioned(Reason::QuotaWait, msg);
                let next = Next::Requeue(self.r.policy.quota_wait);
                self.finish(next)
            }
            // Transient, NotFound where the contract rules it out, quota on
            // calls other than create, and classes added later: retry.
            _ => self.transient(msg),
        }
    }

    /// A transient failure: back off; report `ProviderUnavailable` once
    /// `transient_tolerance` failures in a row are reached.
    pub fn transient(mut self, msg: String) -> Step {
        self.memory.failures = self.memory.failures.saturating_add(1);
        let failures = self.memory.failures;
        if failures >= self.r.policy.transient_tolerance {
            self.warn_once(
                Reason::ProviderUnavailable,
                EventReason::ProviderUnavailable,
                &msg,
            );
            self.ready(false, Reason::ProviderUnavailable, msg);
        }
        let delay = self.r.policy.backoff.delay(failures, self.inp.jitter);
        self.finish(Next::Requeue(delay))
    }

    /// An input error: nothing is made; `Ready` (and `Provisioned`, when
    /// there is no instance) say why.
    pub fn input_error(mut self, reason: Reason, msg: String) -> Step {
        self.memory.failures = 0;
        self.warn_once(reason, EventReason::of_input_error(reason), &msg);
        if self.status.provider_id.is_none() {
            self.status.phase = Some(Phase::Pending);
            self.provisioned(false, reason, msg.clone());
        }
        self.ready(false, reason, msg);
        let next = match reason {
            Reason::InvalidSpec => Next::AwaitChange,
            _ => Next::Requeue(self.r.policy.input_retry),
        };
        self.finish(next)
    }

    /// Completes the step. A spec edited after the instance was made turns a
    /// progress `Ready` into `SpecImmutable` (real trouble keeps its own
    /// reason).
    pub fn finish(mut self, next: Next) -> Step {
        if !self.edited.is_empty() {
            let progress = self
                .status
                .condition_reason(ConditionType::Ready)
                .is_none_or(|r| r.category() == ReasonCategory::Progress);
            if progress {
                let msg = format!(
                    "{} changed after the instance was made; the spec is immutable and the \
                     edit is ignored (restore it, or delete and recreate the Proxy)",
                    self.edited.join(", ")
                );
                self.warn_once(Reason::SpecImmutable, EventReason::SpecImmutable, &msg);
                self.ready(false, Reason::SpecImmutable, msg);
            }
        }
        // Transition times compare with the stored status, not with values
        // set and overridden within this step.
        for c in &mut self.status.conditions {
            if let Some(o) = self.inp.old.conditions.iter().find(|o| o.type_ == c.type_)
                && o.status == c.status
            {
                c.last_transition_time = o.last_transition_time;
            }
        }
        Step {
            status: self.status,
            memory: self.memory,
            events: self.events,
            next,
        }
    }

    pub fn poll(&self, running: bool) -> Next {
        Next::Requeue(if running {
            self.r.policy.poll_running
        } else {
            self.r.policy.poll_provisioning
        })
    }

    pub fn requeue_at(&self, until: Option<Timestamp>) -> Next {
        match until {
            Some(t) => Next::Requeue(t.since(self.now).max(Duration::from_secs(1))),
            None => Next::Requeue(self.r.policy.permanent_retry),
        }
    }
}
