//! The deletion path: delete the instance, then release the finalizer;
//! keep it (with a Warning) when the instance cannot be deleted, until the
//! abandon annotation says to let go.

use provider_api::Error as ProviderError;

use super::draft::Draft;
use super::{ABANDON_ANNOTATION, Call, Next, Outcome, Step};
use crate::event::{Event, EventReason};
use crate::reason::Reason;
use crate::status::{ConditionType, Phase};

pub(super) fn step(mut d: Draft<'_>, outcome: Option<Outcome>) -> Step {
    d.status.phase = Some(Phase::Deleting);
    match outcome {
        Some(Outcome::Deleted(Ok(()))) => deleted(d),
        Some(Outcome::Deleted(Err(e))) if e.is_not_found() => deleted(d),
        Some(Outcome::Deleted(Err(e))) => failed(d, &e),
        // A Create that returned after deletion began: record what it made
        // so that it is deleted too.
        Some(Outcome::Created(Ok(instance))) => {
            d.status.provider_id = Some(instance.id.to_string());
            d.status.host = Some(instance.host.to_string());
            start(d)
        }
        _ => start(d),
    }
}

fn start(mut d: Draft<'_>) -> Step {
    if d.inp.meta.abandon {
        let msg = match &d.status.provider_id {
            Some(id) => format!(
                "{ABANDON_ANNOTATION} is set: released without deleting instance {id}; \
                 delete it by hand if the GC cannot"
            ),
            None => format!("{ABANDON_ANNOTATION} is set: released (no instance recorded)"),
        };
        d.events.push(Event::warning(EventReason::Abandoned, msg));
        return d.finish(Next::Release);
    }
    let Some(id) = d.status.provider_id.clone() else {
        // Nothing recorded, nothing to delete. An instance whose Create was
        // cut short before its ID was recorded is an orphan for the GC.
        return d.finish(Next::Release);
    };
    match d.known_id(&id) {
        Ok(pid) => {
            // While retrying a failing delete, keep saying so (no flip to
            // Deleting and back on every retry).
            let retrying = d.status.condition_reason(ConditionType::Ready)
                == Some(Reason::ProviderUnavailable);
            if !retrying {
                d.ready(false, Reason::Deleting, format!("deleting instance {id}"));
            }
            d.finish(Next::Call(Call::Delete(pid)))
        }
        Err(msg) => blocked(d, Reason::UnknownProvider, msg),
    }
}

fn deleted(mut d: Draft<'_>) -> Step {
    if let Some(id) = &d.status.provider_id {
        let msg = format!("deleted instance {id}");
        d.events.push(Event::normal(EventReason::Deleted, msg));
    }
    d.memory.failures = 0;
    d.clear_instance();
    d.finish(Next::Release)
}

fn failed(d: Draft<'_>, e: &ProviderError) -> Step {
    let id = d.status.provider_id.clone().unwrap_or_default();
    let msg = format!("delete instance {id}: {}", provider_api::error::chain(e));
    if e.is_permanent() {
        blocked(d, Reason::ProviderRejected, msg)
    } else {
        d.transient(msg)
    }
}

/// The instance cannot be deleted: keep the finalizer, say how to let go.
fn blocked(mut d: Draft<'_>, reason: Reason, why: String) -> Step {
    let msg = format!(
        "{why}; the finalizer stays. Fix the providers config, or set the annotation \
         {ABANDON_ANNOTATION}=true to release the Proxy and leave the instance in place"
    );
    d.memory.failures = 0;
    d.events
        .push(Event::warning(EventReason::DeleteBlocked, msg.clone()));
    d.ready(false, reason, msg);
    let next = Next::Requeue(d.r.policy.permanent_retry);
    d.finish(next)
}
