//! The poll path: Get, the instance's state, the address grace, replacing a
//! failed instance and re-creating a vanished one.

use std::net::SocketAddr;

use provider_api::{Error as ProviderError, ErrorClass, Instance, InstanceState, ProviderId};

use super::draft::Draft;
use super::{Call, GraceStart, Next, Step, create};
use crate::event::{Event, EventReason};
use crate::reason::Reason;
use crate::replace_cap::CapVerdict;
use crate::spec::PlacementPolicy;
use crate::status::{ConditionStatus, ConditionType, Phase};
use crate::time::Timestamp;

/// An instance is recorded: read it (or report why it cannot be).
pub(super) fn start(d: Draft<'_>, id: &str) -> Step {
    match d.known_id(id) {
        Ok(id) => d.finish(Next::Call(Call::Get(id))),
        Err(msg) => d.input_error(Reason::UnknownProvider, msg),
    }
}

/// Get answered.
pub(super) fn after_get(d: Draft<'_>, result: Result<Instance, ProviderError>) -> Step {
    match result {
        Ok(instance) => self::instance(d, instance),
        Err(e) if e.is_not_found() => gone(d),
        Err(e) if e.class() == ErrorClass::Transient => unreachable(d, &e),
        Err(e) => {
            let what = format!("read instance {}", recorded_id(&d));
            d.provider_error(&what, &e, true)
        }
    }
}

/// Get failed transiently: the instance's host may be cut off, frozen or
/// down. Retried with backoff as any transient failure; once every read
/// failed for [`host_loss_grace`](crate::Policy::host_loss_grace), the
/// instance is given up for one on another host (unless the Proxy
/// requires its host). The retry never sleeps past the grace's end.
fn unreachable(mut d: Draft<'_>, e: &ProviderError) -> Step {
    let since = *d.memory.unreachable_since.get_or_insert(d.now);
    let movable = d.spec().placement.policy != PlacementPolicy::Require;
    let grace = d.r.policy.host_loss_grace.filter(|_| movable);
    if let Some(grace) = grace
        && d.now.since(since) >= grace
    {
        return host_lost(d, since);
    }
    let elapsed = d.now.since(since);
    let what = format!("read instance {}", recorded_id(&d));
    let mut step = d.provider_error(&what, e, true);
    if let (Some(grace), Next::Requeue(delay)) = (grace, &mut step.next) {
        let left = grace.saturating_sub(elapsed);
        *delay = (*delay).min(left.max(std::time::Duration::from_secs(1)));
    }
    step
}

/// The instance's host has not answered since `since`, past the grace:
/// count a replacement (the cap applies), forget the instance and make
/// one elsewhere, avoiding that host. The old instance stays recorded
/// nowhere: when its host answers again, the GC finds it under this
/// Proxy's tag beside the recorded one and deletes it (a duplicate).
fn host_lost(mut d: Draft<'_>, since: Timestamp) -> Step {
    let id = recorded_id(&d);
    let host = provider_api::ProviderId::parse(&id)
        .ok()
        .map(|p| p.host().clone());
    let host_name = host
        .as_ref()
        .map_or_else(|| "(unknown)".to_owned(), ToString::to_string);
    let silent = d.now.since(since).as_secs();
    let cap = d.r.policy.replace_cap;
    match cap.check(&d.status.recent_replacements, d.now) {
        CapVerdict::Allowed => {
            let msg = format!(
                "host {host_name} has not answered for {silent}s (instance {id}); making a \
                 new instance on another host (the old one is deleted when its host answers \
                 again)"
            );
            d.events
                .push(Event::warning(EventReason::HostLost, msg.clone()));
            d.memory.unreachable_since = None;
            d.memory.failures = 0;
            d.memory.avoid = host;
            d.provisioned(false, Reason::HostLost, msg.clone());
            remade(d, msg)
        }
        CapVerdict::Held { until } => {
            let msg = format!(
                "host {host_name} has not answered for {silent}s (instance {id}); {}",
                held(&d, until)
            );
            d.warn_once(
                Reason::ReplaceLimitReached,
                EventReason::ReplaceLimitReached,
                &msg,
            );
            d.status.phase = Some(Phase::Failed);
            d.provisioned(false, Reason::HostLost, msg.clone());
            d.ready(false, Reason::ReplaceLimitReached, msg);
            let next = d.requeue_at(until);
            d.finish(next)
        }
    }
}

/// The provider reported `instance`: act on its state.
pub(super) fn instance(mut d: Draft<'_>, instance: Instance) -> Step {
    d.memory.failures = 0;
    d.memory.unreachable_since = None;
    d.status.host = Some(instance.host.to_string());
    match (&instance.state, instance.ip) {
        (InstanceState::Running, Some(ip)) => {
            let port = instance.proxy_port.unwrap_or(d.r.policy.proxy_port);
            running(d, &instance.id, SocketAddr::new(ip, port))
        }
        (InstanceState::Failed { reason }, _) => {
            let what = format!("failed ({reason})");
            failed(d, instance.id, &what)
        }
        (InstanceState::Stopped, _) => failed(d, instance.id, "stopped"),
        // Provisioning, Running without an address (a contract slip), Unknown
        // and states added later: never destructive.
        (state, _) => no_address(d, &instance.id, state.as_str()),
    }
}

/// The instance Create just returned. One that is already failed or
/// stopped is judged on the next pass's Get, so a pass never chains more
/// than [`MAX_CALLS_PER_PASS`](super::MAX_CALLS_PER_PASS) calls.
pub(super) fn created(mut d: Draft<'_>, instance: Instance) -> Step {
    let what = match &instance.state {
        InstanceState::Failed { reason } => format!("failed ({reason})"),
        InstanceState::Stopped => "stopped".to_owned(),
        _ => return self::instance(d, instance),
    };
    d.memory.failures = 0;
    d.status.ip = None;
    d.status.phase = Some(Phase::Provisioning);
    let msg = format!(
        "instance {} {what} right after Create; checking again",
        instance.id
    );
    d.not_provisioned(Reason::InstanceFailed, msg);
    let next = d.poll(false);
    d.finish(next)
}

/// Running at `addr`: the instance's address and the port it reports
/// (the policy's default when it reports none). An instance whose own
/// `Healthy` verdict has been `False` for longer than the policy allows is
/// replaced like a failed one.
fn running(mut d: Draft<'_>, id: &ProviderId, addr: SocketAddr) -> Step {
    d.memory.grace = None;
    d.status.phase = Some(Phase::Running);
    d.status.ip = Some(addr.ip());
    d.status.port = Some(addr.port());
    if let Some(why) = unhealthy_too_long(&d) {
        return replace(
            d,
            id.clone(),
            &why,
            EventReason::ReplacingUnhealthy,
            Reason::Unhealthy,
        );
    }
    let msg = format!("instance {id} runs at {addr}");
    d.provisioned(true, Reason::Running, msg.clone());
    d.ready(true, Reason::Running, msg);
    let next = d.poll(true);
    d.finish(next)
}

/// No address. A proxy that was running keeps its address and conditions
/// through the address grace (address sources restart, reads race reconnects);
/// only past both of its bounds is it demoted.
fn no_address(mut d: Draft<'_>, id: &ProviderId, state: &str) -> Step {
    let had_address = d.status.phase == Some(Phase::Running) && d.status.ip.is_some();
    if had_address {
        let bounds = d.r.policy.address_grace;
        let now = d.now;
        let grace = d.memory.grace.get_or_insert(GraceStart {
            since: now,
            polls: 0,
        });
        grace.polls = grace.polls.saturating_add(1);
        let (polls, elapsed) = (grace.polls, now.since(grace.since));
        if polls <= bounds.polls || elapsed < bounds.duration {
            let next = d.poll(false);
            return d.finish(next);
        }
        let msg = format!(
            "instance {id} ({state}) has reported no address for {polls} polls over {}s; \
             its address was withdrawn",
            elapsed.as_secs()
        );
        d.memory.grace = None;
        d.status.ip = None;
        d.status.phase = Some(Phase::Provisioning);
        d.events
            .push(Event::warning(EventReason::AddressLost, msg.clone()));
        d.not_provisioned(Reason::AddressLost, msg);
        let next = d.poll(false);
        return d.finish(next);
    }
    d.memory.grace = None;
    d.status.ip = None;
    d.status.phase = Some(Phase::Provisioning);
    // After a demotion, keep saying why until the address is back.
    if d.status.condition_reason(ConditionType::Provisioned) != Some(Reason::AddressLost) {
        let msg = format!("instance {id} is {state}; no address yet");
        d.not_provisioned(Reason::Provisioning, msg);
    }
    let next = d.poll(false);
    d.finish(next)
}

/// Why the current instance is to be replaced for its health: its own
/// `Healthy` verdict (`probedInstance` is this instance at this address)
/// has been `False` for at least the policy's
/// [`replace_unhealthy_after`](super::Policy::replace_unhealthy_after), and
/// the replacement cap allows one (at the cap, a running instance keeps
/// serving what it can).
fn unhealthy_too_long(d: &Draft<'_>) -> Option<String> {
    let after = d.r.policy.replace_unhealthy_after?;
    if !matches!(
        d.r.policy
            .replace_cap
            .check(&d.status.recent_replacements, d.now),
        CapVerdict::Allowed
    ) {
        return None;
    }
    let endpoint = d.status.instance_endpoint()?;
    if d.status.probed_instance.as_deref() != Some(endpoint.as_str()) {
        return None;
    }
    let c = d.status.condition(ConditionType::Healthy)?;
    if c.status != ConditionStatus::False {
        return None;
    }
    let for_ = d.now.since(c.last_transition_time);
    (for_ >= after).then(|| {
        format!(
            "is unhealthy for {}s ({}: {})",
            for_.as_secs(),
            c.reason,
            c.message
        )
    })
}

/// The instance failed or stopped: delete it to make it again, unless the
/// replacement cap holds.
fn failed(d: Draft<'_>, id: ProviderId, what: &str) -> Step {
    replace(d, id, what, EventReason::Replacing, Reason::InstanceFailed)
}

/// Deletes instance `id` (which `what`) to make it again, unless the
/// replacement cap holds; `event` and `reason` say why.
fn replace(
    mut d: Draft<'_>,
    id: ProviderId,
    what: &str,
    event: EventReason,
    reason: Reason,
) -> Step {
    d.memory.grace = None;
    d.status.ip = None;
    let cap = d.r.policy.replace_cap;
    match cap.check(&d.status.recent_replacements, d.now) {
        CapVerdict::Allowed => {
            let msg = format!("instance {id} {what}; replacing it");
            d.events.push(Event::warning(event, msg.clone()));
            d.status.phase = Some(Phase::Pending);
            d.provisioned(false, reason, msg.clone());
            d.ready(false, Reason::Replacing, msg);
            d.finish(Next::Call(Call::Delete(id)))
        }
        CapVerdict::Held { until } => {
            let msg = format!("instance {id} {what}; {}", held(&d, until));
            d.warn_once(
                Reason::ReplaceLimitReached,
                EventReason::ReplaceLimitReached,
                &msg,
            );
            d.status.phase = Some(Phase::Failed);
            d.provisioned(false, reason, msg.clone());
            d.ready(false, Reason::ReplaceLimitReached, msg);
            let next = d.requeue_at(until);
            d.finish(next)
        }
    }
}

/// Get answered NotFound: the instance vanished. Make it again (the cap
/// applies); until then the stale ID stays recorded, so the next pass asks
/// again rather than creating outside the cap.
fn gone(mut d: Draft<'_>) -> Step {
    let id = recorded_id(&d);
    let cap = d.r.policy.replace_cap;
    match cap.check(&d.status.recent_replacements, d.now) {
        CapVerdict::Allowed => {
            let msg = format!("instance {id} no longer exists; making a new one");
            d.events
                .push(Event::warning(EventReason::InstanceGone, msg.clone()));
            remade(d, msg)
        }
        CapVerdict::Held { until } => {
            let msg = format!("instance {id} no longer exists; {}", held(&d, until));
            d.warn_once(
                Reason::ReplaceLimitReached,
                EventReason::ReplaceLimitReached,
                &msg,
            );
            d.memory.grace = None;
            d.status.ip = None;
            d.status.phase = Some(Phase::Failed);
            d.provisioned(false, Reason::InstanceGone, msg.clone());
            d.ready(false, Reason::ReplaceLimitReached, msg);
            let next = d.requeue_at(until);
            d.finish(next)
        }
    }
}

/// Delete of a failed instance answered.
pub(super) fn after_replace_delete(d: Draft<'_>, result: Result<(), ProviderError>) -> Step {
    match result {
        Ok(()) => {
            let msg = format!("instance {} deleted; making a new one", recorded_id(&d));
            remade(d, msg)
        }
        Err(e) if e.is_not_found() => {
            let msg = format!("instance {} is gone; making a new one", recorded_id(&d));
            remade(d, msg)
        }
        Err(e) => {
            let what = format!("delete failed instance {}", recorded_id(&d));
            d.provider_error(&what, &e, true)
        }
    }
}

/// Counts a replacement, forgets the old instance and goes on to Create.
fn remade(mut d: Draft<'_>, msg: String) -> Step {
    let cap = d.r.policy.replace_cap;
    d.status.replacements = d.status.replacements.saturating_add(1);
    d.status.recent_replacements = cap.record(&d.status.recent_replacements, d.now);
    d.clear_instance();
    // Progress again: the create that follows reports Creating.
    d.ready(false, Reason::Replacing, msg);
    create::start(d)
}

fn held(d: &Draft<'_>, until: Option<crate::Timestamp>) -> String {
    let cap = d.r.policy.replace_cap;
    match until {
        Some(t) => format!(
            "{} instances were made in the last {}s (the cap); the next is allowed at {t}",
            cap.max(),
            cap.window().as_secs()
        ),
        None => "replacements are disabled (cap 0)".to_owned(),
    }
}

fn recorded_id(d: &Draft<'_>) -> String {
    d.status
        .provider_id
        .clone()
        .unwrap_or_else(|| "(none recorded)".to_owned())
}
