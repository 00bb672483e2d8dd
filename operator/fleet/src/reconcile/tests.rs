//! Tables for the reconcile step: operation × error class × state, the address
//! grace, the replacement cap, backoff, inputs, immutability, deletion.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use provider_api::{
    Error as ProviderError, ErrorClass, Identifier, Instance, InstanceState, Placement, ProviderId,
};

use super::*;
use crate::event::EventReason;
use crate::replace_cap::ReplaceCap;
use crate::spec::{PlacementPolicy, PlacementSpec};
use crate::status::{ConditionStatus, ConditionUpdate, Phase};

const ID: &str = "kvm2://kvm2-home/host1/ep-e7749fc11676e12e";
const T0: u64 = 1_750_000_000;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ip() -> IpAddr {
    "10.0.0.7".parse().unwrap()
}

fn pid() -> ProviderId {
    ProviderId::parse(ID).unwrap()
}

fn instance(state: InstanceState, ip: Option<IpAddr>) -> Instance {
    Instance::new(pid(), state, ip, Some(UNIX_EPOCH + secs(T0)))
}

fn running() -> Instance {
    instance(InstanceState::Running, Some(ip()))
}

fn provisioning() -> Instance {
    instance(InstanceState::Provisioning, None)
}

fn err(class: ErrorClass) -> ProviderError {
    ProviderError::new(class, format!("provider says {}", class.as_str()))
}

/// One Proxy, its stored status and memory, the operator's config, a clock.
struct World {
    r: Reconciler,
    meta: ProxyMeta,
    spec: ProxySpec,
    status: ProxyStatus,
    memory: Memory,
    user_data: UserDataRead,
    providers: BTreeSet<Identifier>,
    now: SystemTime,
    jitter: Jitter,
}

impl World {
    fn new() -> Self {
        World {
            r: Reconciler::new(
                Policy::default(),
                ClusterIdentity::parse("cluster-a").unwrap(),
            ),
            meta: ProxyMeta {
                namespace: "team-a".into(),
                name: "egress-1".into(),
                uid: "6f1c2a3e-1b2c-4d5e-8f90-0123456789ab".into(),
                generation: 1,
                deleting: false,
                abandon: false,
                pool_member: false,
            },
            spec: ProxySpec {
                provider: "kvm2-home".into(),
                ..ProxySpec::default()
            },
            status: ProxyStatus::default(),
            memory: Memory::default(),
            user_data: UserDataRead::NotRequested,
            providers: [Identifier::parse("kvm2-home").unwrap()].into(),
            now: UNIX_EPOCH + secs(T0),
            jitter: Jitter::NONE,
        }
    }

    /// A world whose Proxy runs at `ip()` (after Create → Running).
    fn running() -> Self {
        let mut w = World::new();
        w.pass(&mut [Ok(running())].into_iter().map(Outcome::Created));
        assert_eq!(w.status.phase, Some(Phase::Running));
        w
    }

    fn step(&self, outcome: Option<Outcome>) -> Step {
        self.r.step(StepInput {
            meta: &self.meta,
            spec: &self.spec,
            status: &self.status,
            memory: &self.memory,
            user_data: &self.user_data,
            providers: &self.providers,
            outcome,
            now: self.now,
            jitter: self.jitter,
        })
    }

    /// Steps and keeps the result as the new stored state.
    fn apply(&mut self, outcome: Option<Outcome>) -> Step {
        let step = self.step(outcome);
        self.status = step.status.clone();
        self.memory = step.memory.clone();
        step
    }

    /// One reconcile pass: steps, answering each call with the next
    /// scripted outcome, until the step stops calling. Returns the calls
    /// made, the events and the final next.
    fn pass(&mut self, outcomes: &mut dyn Iterator<Item = Outcome>) -> Pass {
        let mut calls = Vec::new();
        let mut events = Vec::new();
        let mut outcome = None;
        for _ in 0..=MAX_CALLS_PER_PASS {
            let step = self.apply(outcome.take());
            events.extend(step.events.iter().map(|e| e.reason));
            match step.next {
                Next::Call(c) => {
                    calls.push(call_kind(&c));
                    outcome = Some(
                        outcomes
                            .next()
                            .unwrap_or_else(|| panic!("no outcome scripted for {c:?}")),
                    );
                }
                next => {
                    return Pass {
                        calls,
                        events,
                        next,
                    };
                }
            }
        }
        panic!("more than {MAX_CALLS_PER_PASS} calls in one pass: {calls:?}");
    }

    fn advance(&mut self, s: u64) {
        self.now += secs(s);
    }

    fn ready(&self) -> Option<Reason> {
        self.status.condition_reason(ConditionType::Ready)
    }

    fn provisioned(&self) -> Option<Reason> {
        self.status.condition_reason(ConditionType::Provisioned)
    }

    fn ready_status(&self) -> Option<ConditionStatus> {
        self.status.condition_status(ConditionType::Ready)
    }
}

#[derive(Debug)]
struct Pass {
    calls: Vec<&'static str>,
    events: Vec<EventReason>,
    next: Next,
}

fn call_kind(c: &Call) -> &'static str {
    match c {
        Call::Create { .. } => "create",
        Call::Get(_) => "get",
        Call::Delete(_) => "delete",
    }
}

fn requeue(n: &Next) -> Option<Duration> {
    match n {
        Next::Requeue(d) => Some(*d),
        _ => None,
    }
}

fn got(r: Result<Instance, ProviderError>) -> Outcome {
    Outcome::Got(r)
}

// ---------------------------------------------------------------- create

#[test]
fn create_when_absent_then_record_the_provider_id_at_once() {
    let mut w = World::new();
    let first = w.apply(None);
    let Next::Call(Call::Create { provider, request }) = &first.next else {
        panic!("{:?}", first.next);
    };
    assert_eq!(provider.as_str(), "kvm2-home");
    assert_eq!(request.owner_uid.as_str(), w.meta.uid);
    assert_eq!(request.proxy_name.as_str(), "egress-1");
    assert_eq!(request.proxy_namespace.as_str(), "team-a");
    assert_eq!(w.status.phase, Some(Phase::Pending));
    assert_eq!(w.ready(), Some(Reason::Creating));
    assert_eq!(w.status.observed_generation, Some(1));

    let step = w.apply(Some(Outcome::Created(Ok(provisioning()))));
    assert_eq!(w.status.provider_id.as_deref(), Some(ID));
    assert_eq!(w.status.host.as_deref(), Some("host1"));
    assert_eq!(
        w.status.created_at,
        Some(crate::Timestamp::from_unix_seconds(T0 as i64))
    );
    assert_eq!(w.status.applied_spec.as_ref(), Some(&w.spec));
    assert_eq!(w.status.phase, Some(Phase::Provisioning));
    assert_eq!(w.provisioned(), Some(Reason::Provisioning));
    assert_eq!(requeue(&step.next), Some(w.r.policy().poll_provisioning));
    assert_eq!(step.events[0].reason, EventReason::Created);
}

/// A pool member's creation is its pool's `MembersCreated`: the member
/// records no `Created` Event (one write per member fewer in a fill), and
/// otherwise takes the same steps.
#[test]
fn a_pool_member_records_no_created_event() {
    let mut w = World::new();
    w.meta.pool_member = true;
    w.apply(None);
    let step = w.apply(Some(Outcome::Created(Ok(provisioning()))));
    assert_eq!(w.status.provider_id.as_deref(), Some(ID));
    assert_eq!(w.status.phase, Some(Phase::Provisioning));
    assert!(step.events.is_empty(), "{:?}", step.events);
}

#[test]
fn create_request_carries_the_cluster_tag_spec_and_user_data() {
    let mut w = World::new();
    w.spec.machine_type = Some("small".into());
    w.spec.image = Some("debian-12".into());
    w.spec.placement = PlacementSpec {
        host: Some("host2".into()),
        policy: PlacementPolicy::Require,
    };
    w.spec.cloud_init = Some(SecretRef {
        name: "ci".into(),
        key: "user-data".into(),
    });
    w.user_data = UserDataRead::Found(b"#cloud-config\n".to_vec());
    let Next::Call(Call::Create { request, .. }) = w.step(None).next else {
        panic!("no create");
    };
    let tag = ClusterIdentity::parse("cluster-a").unwrap().tag();
    assert_eq!(request.tags.get(&tag.key), Some(&tag.value));
    assert_eq!(request.machine_type.unwrap().as_str(), "small");
    assert_eq!(request.image.unwrap().as_str(), "debian-12");
    assert_eq!(
        request.placement,
        Placement::Require(Identifier::parse("host2").unwrap())
    );
    assert_eq!(
        request.user_data.unwrap().expose_secret(),
        "#cloud-config\n"
    );
}

#[test]
fn create_straight_to_running_polls_long() {
    let mut w = World::new();
    let pass = w.pass(&mut [Ok(running())].into_iter().map(Outcome::Created));
    assert_eq!(pass.calls, ["create"]);
    assert_eq!(w.status.phase, Some(Phase::Running));
    assert_eq!(w.status.ip, Some(ip()));
    assert_eq!(w.status.port, Some(3128));
    assert_eq!(w.provisioned(), Some(Reason::Running));
    assert_eq!(w.ready_status(), Some(ConditionStatus::True));
    assert_eq!(requeue(&pass.next), Some(secs(60)));
}

#[test]
fn the_port_is_the_one_the_instance_reports() {
    let mut w = World::new();
    let on_8080 = running().with_proxy_port(8080);
    w.pass(&mut [Ok(on_8080.clone())].into_iter().map(Outcome::Created));
    assert_eq!(w.status.port, Some(8080));
    let provisioned = w.status.condition(ConditionType::Provisioned).unwrap();
    assert!(
        provisioned.message.ends_with("10.0.0.7:8080"),
        "{provisioned:?}"
    );
    // A later Get reporting another port moves the status with it.
    w.advance(60);
    w.pass(&mut [got(Ok(running().with_proxy_port(3129)))].into_iter());
    assert_eq!(w.status.port, Some(3129));
}

// ------------------------------------------- operation × error class × state

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    /// Create for a Proxy without an instance.
    Create,
    /// Get of a running instance.
    Get,
    /// Delete of a failed instance (replacement).
    ReplaceDelete,
    /// Delete while the Proxy is being deleted.
    Delete,
}

#[derive(Debug, PartialEq)]
enum Then {
    Backoff,
    Requeue(Duration),
    Call(&'static str),
    Release,
}

struct Row {
    op: Op,
    class: ErrorClass,
    then: Then,
    ready: Option<Reason>,
    events: &'static [EventReason],
}

/// Brings a world to the point where `op` is the call being answered.
fn world_at(op: Op) -> World {
    match op {
        Op::Create => World::new(),
        Op::Get => World::running(),
        Op::ReplaceDelete => {
            let mut w = World::running();
            w.apply(None);
            let step = w.apply(Some(got(Ok(instance(
                InstanceState::Failed {
                    reason: "crashed".into(),
                },
                None,
            )))));
            assert!(matches!(step.next, Next::Call(Call::Delete(_))));
            w
        }
        Op::Delete => {
            let mut w = World::running();
            w.meta.deleting = true;
            w
        }
    }
}

fn answer(op: Op, e: ProviderError) -> Outcome {
    match op {
        Op::Create => Outcome::Created(Err(e)),
        Op::Get => Outcome::Got(Err(e)),
        Op::ReplaceDelete | Op::Delete => Outcome::Deleted(Err(e)),
    }
}

#[test]
fn operation_by_error_class_table() {
    use ErrorClass::*;
    use EventReason as E;
    use Op::*;
    #[rustfmt::skip]
    let rows = [
        // Create: NotFound is not in its contract and is retried like Transient.
        Row { op: Create, class: Transient, then: Then::Backoff, ready: Some(Reason::Creating), events: &[] },
        Row { op: Create, class: NotFound, then: Then::Backoff, ready: Some(Reason::Creating), events: &[] },
        Row { op: Create, class: QuotaExceeded, then: Then::Requeue(secs(300)), ready: Some(Reason::QuotaWait), events: &[E::QuotaWait] },
        Row { op: Create, class: Permanent, then: Then::Requeue(secs(1800)), ready: Some(Reason::ProviderRejected), events: &[E::ProviderRejected] },
        // Get of a running instance: a blip changes nothing.
        Row { op: Get, class: Transient, then: Then::Backoff, ready: Some(Reason::Running), events: &[] },
        Row { op: Get, class: QuotaExceeded, then: Then::Backoff, ready: Some(Reason::Running), events: &[] },
        Row { op: Get, class: Permanent, then: Then::Requeue(secs(1800)), ready: Some(Reason::ProviderRejected), events: &[E::ProviderRejected] },
        Row { op: Get, class: NotFound, then: Then::Call("create"), ready: Some(Reason::Creating), events: &[E::InstanceGone] },
        // Delete of a failed instance.
        Row { op: ReplaceDelete, class: Transient, then: Then::Backoff, ready: Some(Reason::Replacing), events: &[] },
        Row { op: ReplaceDelete, class: QuotaExceeded, then: Then::Backoff, ready: Some(Reason::Replacing), events: &[] },
        Row { op: ReplaceDelete, class: Permanent, then: Then::Requeue(secs(1800)), ready: Some(Reason::ProviderRejected), events: &[E::ProviderRejected] },
        Row { op: ReplaceDelete, class: NotFound, then: Then::Call("create"), ready: Some(Reason::Creating), events: &[] },
        // Delete with the Proxy.
        Row { op: Delete, class: Transient, then: Then::Backoff, ready: Some(Reason::Deleting), events: &[] },
        Row { op: Delete, class: QuotaExceeded, then: Then::Backoff, ready: Some(Reason::Deleting), events: &[] },
        Row { op: Delete, class: Permanent, then: Then::Requeue(secs(1800)), ready: Some(Reason::ProviderRejected), events: &[E::DeleteBlocked] },
        Row { op: Delete, class: NotFound, then: Then::Release, ready: Some(Reason::Deleting), events: &[E::Deleted] },
    ];
    assert_eq!(rows.len(), 16, "every operation × every class");
    for row in rows {
        let label = format!("{:?} × {:?}", row.op, row.class);
        let mut w = world_at(row.op);
        if row.op == Op::Create || row.op == Op::Delete {
            // The first step of the pass asks for the call being answered.
            assert!(matches!(w.apply(None).next, Next::Call(_)), "{label}");
        }
        let before = w.status.clone();
        let step = w.apply(Some(answer(row.op, err(row.class))));
        let then = match &step.next {
            Next::Requeue(d) if *d == w.r.policy().backoff.base() => {
                assert_eq!(w.memory.failures(), 1, "{label}");
                Then::Backoff
            }
            Next::Requeue(d) => Then::Requeue(*d),
            Next::Call(c) => Then::Call(call_kind(c)),
            Next::Release => Then::Release,
            Next::AwaitChange => panic!("{label}: await change"),
        };
        assert_eq!(then, row.then, "{label}");
        assert_eq!(w.ready(), row.ready, "{label}");
        let events: Vec<_> = step.events.iter().map(|e| e.reason).collect();
        assert_eq!(events, row.events, "{label}");
        if then == Then::Backoff {
            // One blip writes nothing.
            assert_eq!(w.status, before, "{label}");
        }
        if row.class == Permanent {
            assert!(awaits_provider_recovery(&w.status), "{label}");
        }
    }
}

#[test]
fn quota_wait_and_rejection_are_retried_without_flapping_the_status() {
    for class in [ErrorClass::QuotaExceeded, ErrorClass::Permanent] {
        let mut w = World::new();
        w.pass(&mut [Outcome::Created(Err(err(class)))].into_iter());
        let waiting = w.status.clone();
        // The retry's first step leaves the status as it is: no write.
        let retry = w.apply(None);
        assert!(matches!(retry.next, Next::Call(Call::Create { .. })));
        assert_eq!(w.status, waiting, "{class:?}");
        assert!(retry.events.is_empty());
        // The same answer again: still no change and no second event.
        let again = w.apply(Some(Outcome::Created(Err(err(class)))));
        assert_eq!(w.status, waiting, "{class:?}");
        assert!(again.events.is_empty(), "{class:?}");
    }
}

#[test]
fn a_new_spec_after_a_rejection_shows_creating_again() {
    let mut w = World::new();
    w.pass(&mut [Outcome::Created(Err(err(ErrorClass::Permanent)))].into_iter());
    w.spec.image = Some("debian-13".into());
    w.meta.generation = 2;
    w.apply(None);
    assert_eq!(w.ready(), Some(Reason::Creating));
}

// ---------------------------------------------------------------- backoff

#[test]
fn transient_failures_back_off_per_object_then_report_provider_unavailable() {
    let mut w = World::running();
    let mut delays = Vec::new();
    for n in 1..=4u32 {
        w.apply(None);
        let step = w.apply(Some(got(Err(err(ErrorClass::Transient)))));
        delays.push(requeue(&step.next).unwrap());
        assert_eq!(w.memory.failures(), n);
        let expected = if n < 3 {
            Reason::Running
        } else {
            Reason::ProviderUnavailable
        };
        assert_eq!(w.ready(), Some(expected), "after {n}");
        // The instance is presumably fine: address and Provisioned stay.
        assert_eq!(w.status.ip, Some(ip()));
        assert_eq!(w.provisioned(), Some(Reason::Running));
        let events: Vec<_> = step.events.iter().map(|e| e.reason).collect();
        let expected_events: &[EventReason] = if n == 3 {
            &[EventReason::ProviderUnavailable]
        } else {
            &[]
        };
        assert_eq!(events, expected_events, "after {n}");
    }
    assert_eq!(delays, [secs(2), secs(4), secs(8), secs(16)]);
    assert!(awaits_provider_recovery(&w.status));
    // One success resets the count and the condition.
    w.apply(None);
    w.apply(Some(got(Ok(running()))));
    assert_eq!(w.memory.failures(), 0);
    assert_eq!(w.ready(), Some(Reason::Running));
    assert!(!awaits_provider_recovery(&w.status));
}

#[test]
fn jitter_shortens_the_backoff() {
    let mut w = World::running();
    w.jitter = Jitter::MAX;
    w.apply(None);
    let step = w.apply(Some(got(Err(err(ErrorClass::Transient)))));
    assert_eq!(requeue(&step.next), Some(secs(1)));
}

// -------------------------------------------------------------- steady state

#[test]
fn steady_state_changes_nothing() {
    let mut w = World::running();
    let before = w.status.clone();
    for _ in 0..3 {
        w.advance(60);
        let pass = w.pass(&mut [got(Ok(running()))].into_iter());
        assert_eq!(pass.calls, ["get"]);
        assert!(pass.events.is_empty());
        assert_eq!(requeue(&pass.next), Some(secs(60)));
        assert_eq!(w.status, before);
    }
}

#[test]
fn provisioning_without_an_address_polls_short() {
    let mut w = World::new();
    w.pass(&mut [Outcome::Created(Ok(provisioning()))].into_iter());
    let before = w.status.clone();
    let pass = w.pass(&mut [got(Ok(provisioning()))].into_iter());
    assert_eq!(requeue(&pass.next), Some(secs(5)));
    assert_eq!(w.status, before);
    let pass = w.pass(&mut [got(Ok(running()))].into_iter());
    assert_eq!(requeue(&pass.next), Some(secs(60)));
    assert_eq!(w.status.phase, Some(Phase::Running));
}

#[test]
fn unknown_state_and_running_without_address_are_never_destructive() {
    for inst in [
        instance(InstanceState::Unknown, None),
        instance(InstanceState::Running, None),
    ] {
        let mut w = World::new();
        w.pass(&mut [Outcome::Created(Ok(provisioning()))].into_iter());
        let pass = w.pass(&mut [got(Ok(inst.clone()))].into_iter());
        assert_eq!(pass.calls, ["get"], "{inst:?}");
        assert_eq!(w.status.phase, Some(Phase::Provisioning));
        assert_eq!(w.status.provider_id.as_deref(), Some(ID));
    }
}

// ------------------------------------------------- address grace

#[test]
fn address_grace_running_then_provisioning_keeps_ip_and_provisioned_for_n_polls_and_t_seconds() {
    let mut w = World::running();
    let before = w.status.clone();
    // Grace: 3 polls and 60 s; polls every 5 s.
    let mut demoted_at = None;
    for poll in 1..=20u32 {
        w.advance(5);
        let pass = w.pass(&mut [got(Ok(provisioning()))].into_iter());
        assert_eq!(requeue(&pass.next), Some(secs(5)));
        if w.status.ip.is_none() {
            demoted_at = Some(poll);
            assert_eq!(pass.events, [EventReason::AddressLost]);
            break;
        }
        assert_eq!(
            w.status, before,
            "poll {poll}: nothing changes inside the grace"
        );
        assert!(w.memory.in_address_grace());
    }
    // First address-less poll at +5 s; the 13th is 60 s after it.
    assert_eq!(demoted_at, Some(13));
    assert_eq!(w.status.phase, Some(Phase::Provisioning));
    assert_eq!(w.provisioned(), Some(Reason::AddressLost));
    assert_eq!(w.ready(), Some(Reason::AddressLost));
    assert_eq!(w.status.provider_id.as_deref(), Some(ID));
    // Still no address: the reason stays, nothing is written.
    let after = w.status.clone();
    w.pass(&mut [got(Ok(provisioning()))].into_iter());
    assert_eq!(w.status, after);
    // The address comes back.
    w.pass(&mut [got(Ok(running()))].into_iter());
    assert_eq!(w.status.ip, Some(ip()));
    assert_eq!(w.ready(), Some(Reason::Running));
}

#[test]
fn address_grace_needs_both_bounds_passed() {
    // Many polls in a short time: kept.
    let mut w = World::running();
    for _ in 0..10 {
        w.advance(1);
        w.pass(&mut [got(Ok(provisioning()))].into_iter());
    }
    assert_eq!(w.status.ip, Some(ip()), "10 polls in 10 s");
    // Few polls over a long time: kept.
    let mut w = World::running();
    w.advance(1);
    w.pass(&mut [got(Ok(provisioning()))].into_iter());
    w.advance(600);
    w.pass(&mut [got(Ok(provisioning()))].into_iter());
    assert_eq!(w.status.ip, Some(ip()), "2 polls over 600 s");
    w.advance(1);
    w.pass(&mut [got(Ok(provisioning()))].into_iter());
    assert_eq!(w.status.ip, Some(ip()), "3 polls");
    w.advance(1);
    w.pass(&mut [got(Ok(provisioning()))].into_iter());
    assert_eq!(w.status.ip, None, "4 polls over 602 s");
}

#[test]
fn address_grace_restarts_after_the_address_returns() {
    let mut w = World::running();
    for _ in 0..3 {
        w.advance(30);
        w.pass(&mut [got(Ok(provisioning()))].into_iter());
    }
    assert!(w.memory.in_address_grace());
    w.pass(&mut [got(Ok(running()))].into_iter());
    assert!(!w.memory.in_address_grace());
    // A fresh episode: one poll long after the first episode began is kept.
    w.advance(30);
    w.pass(&mut [got(Ok(provisioning()))].into_iter());
    assert_eq!(w.status.ip, Some(ip()));
}

#[test]
fn a_transient_during_the_grace_does_not_reset_it() {
    let mut w = World::running();
    w.advance(5);
    w.pass(&mut [got(Ok(provisioning()))].into_iter());
    w.pass(&mut [got(Err(err(ErrorClass::Transient)))].into_iter());
    assert!(w.memory.in_address_grace());
    assert_eq!(w.status.ip, Some(ip()));
}

// --------------------------------------------------------------- replace

fn failed() -> Instance {
    instance(
        InstanceState::Failed {
            reason: "crashed".into(),
        },
        None,
    )
}

#[test]
fn failed_is_replaced_delete_then_create() {
    let mut w = World::running();
    let pass = w.pass(
        &mut [
            got(Ok(failed())),
            Outcome::Deleted(Ok(())),
            Outcome::Created(Ok(provisioning())),
        ]
        .into_iter(),
    );
    assert_eq!(pass.calls, ["get", "delete", "create"]);
    assert_eq!(pass.events, [EventReason::Replacing, EventReason::Created]);
    assert_eq!(w.status.replacements, 1);
    assert_eq!(w.status.recent_replacements.len(), 1);
    assert_eq!(w.status.phase, Some(Phase::Provisioning));
    assert_eq!(w.status.provider_id.as_deref(), Some(ID));
}

/// `w`'s running instance judged `healthy` by the health engine at the
/// current clock (its `probedInstance` names `probed`).
fn judged(w: &mut World, healthy: bool, probed: Option<String>) {
    w.status.probed_instance = probed;
    w.status.set_condition(
        ConditionType::Healthy,
        ConditionUpdate::new(
            ConditionStatus::from_bool(healthy),
            if healthy {
                Reason::ProbeSucceeded
            } else {
                Reason::ProbeTimeout
            },
            "3 consecutive CONNECT probes failed",
            None,
        ),
        Timestamp::from(w.now),
    );
}

#[test]
fn unhealthy_past_the_policy_is_replaced_within_the_cap() {
    let mut w = World::running();
    let endpoint = w.status.instance_endpoint();
    judged(&mut w, false, endpoint);
    // Under the threshold: polled, kept.
    w.advance(299);
    let pass = w.pass(&mut [got(Ok(running()))].into_iter());
    assert_eq!(pass.calls, ["get"]);
    assert_eq!(w.status.phase, Some(Phase::Running));
    // Past it: replaced, with its own event and reason.
    w.advance(1);
    let pass = w.pass(
        &mut [
            got(Ok(running())),
            Outcome::Deleted(Ok(())),
            Outcome::Created(Ok(provisioning())),
        ]
        .into_iter(),
    );
    assert_eq!(pass.calls, ["get", "delete", "create"]);
    assert_eq!(
        pass.events,
        [EventReason::ReplacingUnhealthy, EventReason::Created]
    );
    assert_eq!(w.status.replacements, 1);
}

#[test]
fn health_replacement_needs_the_current_instances_own_false_verdict() {
    // Healthy, another instance's verdict, or the policy off: kept.
    let mut cases: Vec<World> = Vec::new();
    let mut healthy = World::running();
    let endpoint = healthy.status.instance_endpoint();
    judged(&mut healthy, true, endpoint.clone());
    cases.push(healthy);
    let mut stale = World::running();
    judged(
        &mut stale,
        false,
        Some("kvm2://kvm2-home/host1/old#0@10.0.0.9:3128".into()),
    );
    cases.push(stale);
    let mut off = World::running();
    judged(&mut off, false, endpoint);
    let policy = Policy {
        replace_unhealthy_after: None,
        ..Policy::default()
    };
    off.r = Reconciler::new(policy, ClusterIdentity::parse("cluster-a").unwrap());
    cases.push(off);
    for (i, mut w) in cases.into_iter().enumerate() {
        w.advance(3600);
        let pass = w.pass(&mut [got(Ok(running()))].into_iter());
        assert_eq!(pass.calls, ["get"], "case {i}");
        assert_eq!(w.status.phase, Some(Phase::Running), "case {i}");
    }
}

/// A minute later, the instance failed and was replaced.
fn fail_and_replace(w: &mut World) {
    w.advance(60);
    w.pass(
        &mut [
            got(Ok(failed())),
            Outcome::Deleted(Ok(())),
            Outcome::Created(Ok(running())),
        ]
        .into_iter(),
    );
}

#[test]
fn at_the_cap_an_unhealthy_instance_keeps_running() {
    let mut w = World::running();
    for _ in 1..=3u32 {
        fail_and_replace(&mut w);
    }
    let endpoint = w.status.instance_endpoint();
    judged(&mut w, false, endpoint);
    w.advance(600);
    let pass = w.pass(&mut [got(Ok(running()))].into_iter());
    assert_eq!(pass.calls, ["get"]);
    assert_eq!(w.status.phase, Some(Phase::Running));
    assert_eq!(w.status.ip, Some(ip()));
}

#[test]
fn stopped_is_replaced_too() {
    let mut w = World::running();
    let pass = w.pass(
        &mut [
            got(Ok(instance(InstanceState::Stopped, None))),
            Outcome::Deleted(Ok(())),
            Outcome::Created(Ok(running())),
        ]
        .into_iter(),
    );
    assert_eq!(pass.calls, ["get", "delete", "create"]);
}

#[test]
fn replace_cap_holds_after_max_per_hour_then_frees() {
    let mut w = World::running();
    for n in 1..=3u32 {
        fail_and_replace(&mut w);
        assert_eq!(w.status.replacements, n);
    }
    // The fourth failure within the hour is held.
    w.advance(60);
    let pass = w.pass(&mut [got(Ok(failed()))].into_iter());
    assert_eq!(pass.calls, ["get"]);
    assert_eq!(pass.events, [EventReason::ReplaceLimitReached]);
    assert_eq!(w.status.phase, Some(Phase::Failed));
    assert_eq!(w.ready(), Some(Reason::ReplaceLimitReached));
    assert_eq!(w.provisioned(), Some(Reason::InstanceFailed));
    assert_eq!(w.status.ip, None);
    // Requeued for when the first replacement (at +60 s) leaves the hour.
    assert_eq!(requeue(&pass.next), Some(secs(3600 - 180)));
    // Held again before that: no new event, no change.
    let held = w.status.clone();
    w.advance(60);
    let pass = w.pass(&mut [got(Ok(failed()))].into_iter());
    assert!(pass.events.is_empty());
    assert_eq!(w.status, held);
    // After it: replaced.
    w.advance(3600);
    let pass = w.pass(
        &mut [
            got(Ok(failed())),
            Outcome::Deleted(Ok(())),
            Outcome::Created(Ok(running())),
        ]
        .into_iter(),
    );
    assert_eq!(pass.calls, ["get", "delete", "create"]);
    assert_eq!(w.status.replacements, 4);
    assert_eq!(w.status.phase, Some(Phase::Running));
}

#[test]
fn not_found_recreates_with_an_event_and_counts_against_the_cap() {
    let mut w = World::running();
    let pass = w.pass(
        &mut [
            got(Err(err(ErrorClass::NotFound))),
            Outcome::Created(Ok(provisioning())),
        ]
        .into_iter(),
    );
    assert_eq!(pass.calls, ["get", "create"]);
    assert_eq!(
        pass.events,
        [EventReason::InstanceGone, EventReason::Created]
    );
    assert_eq!(w.status.replacements, 1);

    // At the cap, a vanished instance keeps its stale ID: the next pass
    // asks again instead of creating outside the cap.
    let mut w = World::running();
    w.r = Reconciler::new(
        Policy {
            replace_cap: ReplaceCap::new(0, secs(3600)),
            ..Policy::default()
        },
        ClusterIdentity::parse("cluster-a").unwrap(),
    );
    let pass = w.pass(&mut [got(Err(err(ErrorClass::NotFound)))].into_iter());
    assert_eq!(pass.calls, ["get"]);
    assert_eq!(w.status.provider_id.as_deref(), Some(ID));
    assert_eq!(w.provisioned(), Some(Reason::InstanceGone));
    assert_eq!(w.ready(), Some(Reason::ReplaceLimitReached));
    assert_eq!(requeue(&pass.next), Some(secs(1800)));
    let pass = w.pass(&mut [got(Err(err(ErrorClass::NotFound)))].into_iter());
    assert_eq!(pass.calls, ["get"]);
}

#[test]
fn a_failed_replacement_delete_retries_from_get() {
    let mut w = World::running();
    let pass = w.pass(
        &mut [
            got(Ok(failed())),
            Outcome::Deleted(Err(err(ErrorClass::Transient))),
        ]
        .into_iter(),
    );
    assert_eq!(pass.calls, ["get", "delete"]);
    assert_eq!(w.status.replacements, 0, "counted only once deleted");
    assert_eq!(w.status.provider_id.as_deref(), Some(ID));
    let pass = w.pass(
        &mut [
            got(Ok(failed())),
            Outcome::Deleted(Ok(())),
            Outcome::Created(Ok(running())),
        ]
        .into_iter(),
    );
    assert_eq!(pass.calls, ["get", "delete", "create"]);
    assert_eq!(w.status.replacements, 1);
}

// ---------------------------------------------------------------- inputs

#[test]
fn secret_problems_are_conditions_and_nothing_is_made() {
    let cases = [
        (UserDataRead::SecretNotFound, Reason::SecretMissing),
        (UserDataRead::KeyNotFound, Reason::SecretMissing),
        (
            UserDataRead::Found(vec![b'x'; 256 * 1024 + 1]),
            Reason::SecretTooLarge,
        ),
        (UserDataRead::Found(vec![0xc3, 0x28]), Reason::SecretInvalid),
    ];
    for (read, reason) in cases {
        let mut w = World::new();
        w.spec.cloud_init = Some(SecretRef {
            name: "ci".into(),
            key: "user-data".into(),
        });
        w.user_data = read;
        let pass = w.pass(&mut std::iter::empty());
        assert!(pass.calls.is_empty(), "{reason:?}");
        assert_eq!(
            pass.events,
            [EventReason::of_input_error(reason)],
            "{reason:?}"
        );
        assert_eq!(
            EventReason::of_input_error(reason).as_str(),
            reason.as_str(),
            "the Event names the condition's reason"
        );
        assert_eq!(w.ready(), Some(reason));
        assert_eq!(w.provisioned(), Some(reason));
        assert_eq!(w.status.phase, Some(Phase::Pending));
        assert_eq!(requeue(&pass.next), Some(secs(120)), "{reason:?}");
        // Once fixed, the create goes ahead.
        w.user_data = UserDataRead::Found(b"ok".to_vec());
        assert!(matches!(w.step(None).next, Next::Call(Call::Create { .. })));
    }
}

#[test]
fn a_secret_that_could_not_be_read_is_transient() {
    for read in [
        UserDataRead::Unavailable("apiserver timeout".into()),
        UserDataRead::NotRequested,
    ] {
        let mut w = World::new();
        w.spec.cloud_init = Some(SecretRef {
            name: "ci".into(),
            key: "user-data".into(),
        });
        w.user_data = read;
        let pass = w.pass(&mut std::iter::empty());
        assert!(pass.calls.is_empty());
        assert_eq!(requeue(&pass.next), Some(secs(2)));
        assert_eq!(w.memory.failures(), 1);
    }
}

#[test]
fn invalid_spec_waits_for_a_change_and_makes_nothing() {
    let mut w = World::new();
    w.spec.machine_type = Some("Big Box".into());
    let pass = w.pass(&mut std::iter::empty());
    assert!(pass.calls.is_empty());
    assert!(matches!(pass.next, Next::AwaitChange));
    assert_eq!(w.ready(), Some(Reason::InvalidSpec));
    let msg = &w.status.condition(ConditionType::Ready).unwrap().message;
    assert!(msg.contains("spec.machineType"), "{msg}");
}

#[test]
fn unknown_provider_entry_is_an_input_error() {
    let mut w = World::new();
    w.spec.provider = "elsewhere".into();
    let pass = w.pass(&mut std::iter::empty());
    assert!(pass.calls.is_empty());
    assert_eq!(w.ready(), Some(Reason::UnknownProvider));
    // A recorded ID whose entry left the config: no Get either.
    let mut w = World::running();
    w.providers.clear();
    let pass = w.pass(&mut std::iter::empty());
    assert!(pass.calls.is_empty());
    assert_eq!(w.ready(), Some(Reason::UnknownProvider));
    assert_eq!(w.status.ip, Some(ip()), "the instance is not forgotten");
    // And an unparsable one.
    let mut w = World::running();
    w.status.provider_id = Some("kvm2://nope".into());
    let pass = w.pass(&mut std::iter::empty());
    assert!(pass.calls.is_empty());
    assert_eq!(w.ready(), Some(Reason::UnknownProvider));
}

#[test]
fn bad_metadata_is_an_input_error() {
    let mut w = World::new();
    w.meta.namespace = "Not_A_Label".into();
    let pass = w.pass(&mut std::iter::empty());
    assert!(pass.calls.is_empty());
    assert_eq!(w.ready(), Some(Reason::InvalidSpec));
}

// ----------------------------------------------------------- immutability

#[test]
fn spec_edit_after_create_is_a_condition_and_the_applied_spec_stays_in_force() {
    let mut w = World::running();
    w.spec.image = Some("debian-13".into());
    w.meta.generation = 2;
    let pass = w.pass(&mut [got(Ok(running()))].into_iter());
    assert_eq!(pass.events, [EventReason::SpecImmutable]);
    assert_eq!(w.ready(), Some(Reason::SpecImmutable));
    assert_eq!(w.ready_status(), Some(ConditionStatus::False));
    assert_eq!(
        w.provisioned(),
        Some(Reason::Running),
        "the proxy still works"
    );
    assert_eq!(w.status.observed_generation, Some(2));
    let msg = &w.status.condition(ConditionType::Ready).unwrap().message;
    assert!(msg.contains("spec.image"), "{msg}");
    // Steady: no second event, no change, however much later.
    let held = w.status.clone();
    w.advance(600);
    let pass = w.pass(&mut [got(Ok(running()))].into_iter());
    assert!(pass.events.is_empty());
    assert_eq!(w.status, held);
    // A replacement is made from the applied spec, not the edit.
    let first = w.apply(None);
    assert!(matches!(first.next, Next::Call(Call::Get(_))));
    w.apply(Some(got(Ok(failed()))));
    let step = w.apply(Some(Outcome::Deleted(Ok(()))));
    let Next::Call(Call::Create { request, .. }) = step.next else {
        panic!("{:?}", step.next);
    };
    assert_eq!(request.image, None, "applied spec had no image");
    // Reverting the edit clears the condition.
    w.apply(Some(Outcome::Created(Ok(running()))));
    w.spec.image = None;
    w.meta.generation = 3;
    w.pass(&mut [got(Ok(running()))].into_iter());
    assert_eq!(w.ready(), Some(Reason::Running));
}

#[test]
fn trouble_outranks_the_immutability_condition() {
    let mut w = World::running();
    w.spec.image = Some("debian-13".into());
    w.pass(&mut [got(Err(err(ErrorClass::Permanent)))].into_iter());
    assert_eq!(w.ready(), Some(Reason::ProviderRejected));
}

#[test]
fn an_instance_without_an_applied_spec_adopts_the_current_one() {
    let mut w = World::running();
    w.status.applied_spec = None;
    w.pass(&mut [got(Ok(running()))].into_iter());
    assert_eq!(w.status.applied_spec.as_ref(), Some(&w.spec));
    assert_eq!(w.ready(), Some(Reason::Running));
}

// --------------------------------------------------------------- deletion

#[test]
fn deletion_deletes_then_releases() {
    let mut w = World::running();
    w.meta.deleting = true;
    let pass = w.pass(&mut [Outcome::Deleted(Ok(()))].into_iter());
    assert_eq!(pass.calls, ["delete"]);
    assert_eq!(pass.events, [EventReason::Deleted]);
    assert!(matches!(pass.next, Next::Release));
}

#[test]
fn deletion_without_an_instance_releases_at_once() {
    let mut w = World::new();
    w.meta.deleting = true;
    let pass = w.pass(&mut std::iter::empty());
    assert!(pass.calls.is_empty());
    assert!(matches!(pass.next, Next::Release));
}

#[test]
fn deletion_transient_keeps_the_finalizer_and_backs_off() {
    let mut w = World::running();
    w.meta.deleting = true;
    let mut delays = Vec::new();
    for _ in 0..3 {
        let pass = w.pass(&mut [Outcome::Deleted(Err(err(ErrorClass::Transient)))].into_iter());
        delays.push(requeue(&pass.next).unwrap());
    }
    assert_eq!(delays, [secs(2), secs(4), secs(8)]);
    assert_eq!(w.ready(), Some(Reason::ProviderUnavailable));
    assert_eq!(w.status.phase, Some(Phase::Deleting));
}

#[test]
fn deletion_of_an_unknown_entry_warns_and_waits_for_the_abandon_annotation() {
    let mut w = World::running();
    w.meta.deleting = true;
    w.providers.clear();
    let pass = w.pass(&mut std::iter::empty());
    assert!(pass.calls.is_empty());
    assert_eq!(pass.events, [EventReason::DeleteBlocked]);
    assert_eq!(requeue(&pass.next), Some(secs(1800)));
    let msg = &w.status.condition(ConditionType::Ready).unwrap().message;
    assert!(msg.contains(ABANDON_ANNOTATION), "{msg}");
    w.meta.abandon = true;
    let pass = w.pass(&mut std::iter::empty());
    assert!(pass.calls.is_empty(), "abandoning deletes nothing");
    assert_eq!(pass.events, [EventReason::Abandoned]);
    assert!(matches!(pass.next, Next::Release));
}

#[test]
fn a_create_that_returns_after_deletion_began_is_deleted() {
    let mut w = World::new();
    let first = w.apply(None);
    assert!(matches!(first.next, Next::Call(Call::Create { .. })));
    w.meta.deleting = true;
    let step = w.apply(Some(Outcome::Created(Ok(provisioning()))));
    let Next::Call(Call::Delete(id)) = step.next else {
        panic!("{:?}", step.next);
    };
    assert_eq!(id, pid());
}

#[test]
fn no_pass_makes_more_than_the_documented_number_of_calls() {
    // The longest chain: Get → Delete → Create, even when the new instance
    // comes back failed (it is judged on the next pass).
    let mut w = World::running();
    let pass = w.pass(
        &mut [
            got(Ok(failed())),
            Outcome::Deleted(Ok(())),
            Outcome::Created(Ok(failed())),
        ]
        .into_iter(),
    );
    assert_eq!(pass.calls.len(), MAX_CALLS_PER_PASS);
    assert_eq!(requeue(&pass.next), Some(secs(5)));
    assert_eq!(w.provisioned(), Some(Reason::InstanceFailed));
    assert_eq!(w.status.provider_id.as_deref(), Some(ID));
    let pass = w.pass(
        &mut [got(Ok(failed())), Outcome::Deleted(Ok(()))]
            .into_iter()
            .chain([Outcome::Created(Ok(running()))]),
    );
    assert_eq!(pass.calls, ["get", "delete", "create"]);
    assert_eq!(w.status.replacements, 2);
}

#[test]
fn secret_to_read_follows_the_spec_in_force() {
    let r = Reconciler::new(Policy::default(), ClusterIdentity::parse("c").unwrap());
    let spec = ProxySpec {
        cloud_init: Some(SecretRef {
            name: "new".into(),
            key: "user-data".into(),
        }),
        ..ProxySpec::default()
    };
    let mut status = ProxyStatus::default();
    assert_eq!(r.secret_to_read(&spec, &status).unwrap().name, "new");
    let mut applied = spec.clone();
    applied.cloud_init = Some(SecretRef {
        name: "old".into(),
        key: "user-data".into(),
    });
    status.applied_spec = Some(applied);
    assert_eq!(r.secret_to_read(&spec, &status).unwrap().name, "old");
}

#[test]
fn a_provider_errors_condition_and_event_carry_its_whole_chain() {
    let e = |class| {
        ProviderError::new(class, "host h1: define domain ep-1")
            .with_source(std::io::Error::other("libvirt: the pool is full"))
    };
    // Create rejected: the Ready condition and the event.
    let mut w = World::new();
    w.apply(None);
    let step = w.apply(Some(Outcome::Created(Err(e(ErrorClass::Permanent)))));
    let whole = "host h1: define domain ep-1: libvirt: the pool is full";
    let ready = w.status.condition(ConditionType::Ready).unwrap();
    assert!(ready.message.contains(whole), "{}", ready.message);
    assert!(
        step.events.iter().any(|ev| ev.message.contains(whole)),
        "{:?}",
        step.events
    );
    // Delete rejected.
    let mut w = World::running();
    w.meta.deleting = true;
    w.apply(None);
    w.apply(Some(Outcome::Deleted(Err(e(ErrorClass::Permanent)))));
    let ready = w.status.condition(ConditionType::Ready).unwrap();
    assert!(ready.message.contains(whole), "{}", ready.message);
}

// ------------------------------------------------------------- host loss

/// A running Proxy whose host stops answering: reads fail transiently;
/// returns the steps of each failed read, `every` seconds apart, until
/// the step stops asking to Get (or `reads` reads).
fn reads_fail(w: &mut World, every: u64, reads: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    for _ in 0..reads {
        let get = w.apply(None);
        if !matches!(get.next, Next::Call(Call::Get(_))) {
            steps.push(get);
            break;
        }
        let step = w.apply(Some(got(Err(err(ErrorClass::Transient)))));
        let done = !matches!(step.next, Next::Requeue(_));
        steps.push(step);
        if done {
            break;
        }
        w.advance(every);
    }
    steps
}

#[test]
fn a_host_silent_past_the_grace_gets_its_instance_made_elsewhere() {
    let mut w = World::running();
    w.r.policy.host_loss_grace = Some(secs(60));
    let steps = reads_fail(&mut w, 20, 10);
    // Reads at 0, 20, 40 s back off but never past the grace's end; the
    // read at 60 s gives the host up.
    let delays: Vec<Duration> = steps.iter().filter_map(|s| requeue(&s.next)).collect();
    assert_eq!(delays, [secs(2), secs(4), secs(8)]);
    let last = steps.last().unwrap();
    let Next::Call(Call::Create { request, .. }) = &last.next else {
        panic!("expected a Create, got {:?}", last.next);
    };
    assert_eq!(
        request
            .avoid
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["host1"],
        "the lost host is tried last"
    );
    let events: Vec<EventReason> = last.events.iter().map(|e| e.reason).collect();
    assert_eq!(events, [EventReason::HostLost]);
    assert!(
        last.events[0].message.contains("host1"),
        "{}",
        last.events[0].message
    );
    assert_eq!(w.status.replacements, 1);
    assert_eq!(w.status.provider_id, None, "the old instance is forgotten");
    assert_eq!(w.provisioned(), Some(Reason::Creating));
    // The new instance lands: the avoidance is spent.
    let step = w.apply(Some(Outcome::Created(Ok(provisioning()))));
    assert!(step.memory.avoid.is_none());
}

#[test]
fn the_grace_caps_the_backoff_and_restarts_after_an_answer() {
    let mut w = World::running();
    w.r.policy.host_loss_grace = Some(secs(10));
    w.r.policy.backoff = crate::Backoff::new(secs(30), secs(300));
    let steps = reads_fail(&mut w, 0, 1);
    assert_eq!(
        requeue(&steps[0].next),
        Some(secs(10)),
        "not past the grace"
    );
    assert!(w.memory.unreachable_since().is_some());
    w.apply(None);
    w.apply(Some(got(Ok(running()))));
    assert_eq!(w.memory.unreachable_since(), None, "an answer ends it");
}

#[test]
fn a_proxy_that_requires_its_host_waits_for_it() {
    let mut w = World::new();
    w.spec.placement = PlacementSpec {
        host: Some("host1".into()),
        policy: PlacementPolicy::Require,
    };
    w.pass(&mut [Ok(running())].into_iter().map(Outcome::Created));
    w.r.policy.host_loss_grace = Some(secs(10));
    let steps = reads_fail(&mut w, 30, 5);
    assert_eq!(steps.len(), 5);
    assert!(steps.iter().all(|s| matches!(s.next, Next::Requeue(_))));
    assert_eq!(w.status.provider_id.as_deref(), Some(ID));
}

#[test]
fn host_loss_is_under_the_replacement_cap_and_can_be_off() {
    let mut w = World::running();
    w.r.policy.host_loss_grace = Some(secs(10));
    w.r.policy.replace_cap = ReplaceCap::new(0, secs(3600));
    let steps = reads_fail(&mut w, 10, 5);
    let last = steps.last().unwrap();
    assert!(matches!(last.next, Next::Requeue(_)), "{:?}", last.next);
    assert_eq!(w.status.phase, Some(Phase::Failed));
    assert_eq!(w.ready(), Some(Reason::ReplaceLimitReached));
    assert_eq!(w.provisioned(), Some(Reason::HostLost));

    let mut off = World::running();
    off.r.policy.host_loss_grace = None;
    let steps = reads_fail(&mut off, 600, 5);
    assert!(steps.iter().all(|s| matches!(s.next, Next::Requeue(_))));
    assert_eq!(off.status.provider_id.as_deref(), Some(ID));
}

/// Kubernetes accepts a 253-character object name without a dot; so does
/// the reconciler (the create request carries it).
#[test]
fn the_longest_kubernetes_name_is_created() {
    let mut w = World::new();
    w.meta.name = "a".repeat(253);
    let step = w.apply(None);
    let Next::Call(Call::Create { request, .. }) = &step.next else {
        panic!("expected a Create, got {:?} ({:?})", step.next, w.ready());
    };
    assert_eq!(request.proxy_name.as_str().len(), 253);
}

// ---------------------------------------------------- existing proxies

fn existing_world() -> World {
    let mut w = World::new();
    w.spec = ProxySpec {
        existing: Some(crate::spec::ExistingProxy {
            address: "10.0.0.50".into(),
            port: 3128,
        }),
        ..ProxySpec::default()
    };
    w
}

#[test]
fn an_existing_proxy_runs_without_any_provider_call() {
    let mut w = existing_world();
    let step = w.apply(None);
    assert!(matches!(step.next, Next::AwaitChange), "{:?}", step.next);
    assert!(step.events.is_empty());
    assert_eq!(w.status.phase, Some(Phase::Running));
    assert_eq!(w.status.ip, Some("10.0.0.50".parse().unwrap()));
    assert_eq!(w.status.port, Some(3128));
    assert_eq!(w.status.provider_id, None, "nothing for the GC to claim");
    assert_eq!(w.ready(), Some(Reason::Existing));
    assert_eq!(w.provisioned(), Some(Reason::Existing));
    // Probed like any proxy: the verdict is about its address.
    let endpoint = w.status.instance_endpoint().unwrap();
    assert_eq!(endpoint, "existing#0@10.0.0.50:3128");
    // Steady: the next pass changes nothing.
    let before = w.status.clone();
    w.apply(None);
    assert_eq!(w.status, before);
    // Deleting releases at once.
    w.meta.deleting = true;
    let step = w.apply(None);
    assert!(matches!(step.next, Next::Release), "{:?}", step.next);
}

#[test]
fn an_existing_proxy_with_a_provider_too_is_an_input_error() {
    let mut w = existing_world();
    w.spec.provider = "kvm2-home".into();
    let step = w.apply(None);
    assert!(!matches!(step.next, Next::Call(_)), "{:?}", step.next);
    assert_eq!(w.ready(), Some(Reason::InvalidSpec));
    let ready = w.status.condition(ConditionType::Ready).unwrap();
    assert!(ready.message.contains("spec.provider"), "{}", ready.message);
}
