#![allow(clippy::unwrap_used)]

use super::*;
use crate::{ConditionStatus, Timestamp};

fn pool(replicas: u32, surge: u32, unavailable: u32) -> ValidPool {
    let mut spec: ProxyPoolSpec = serde_json::from_value(serde_json::json!({
        "template": {"spec": {"provider": "kvm2-home", "image": "debian-12"}}
    }))
    .unwrap();
    spec.replicas = replicas;
    spec.strategy = RolloutStrategy {
        max_surge: surge,
        max_unavailable: unavailable,
    };
    spec.validate("egress").unwrap()
}

fn with_image(p: &ValidPool, image: &str) -> ValidPool {
    let mut spec = p.spec.clone();
    spec.template.spec.image = Some(image.into());
    spec.validate(&p.name).unwrap()
}

fn hosts(names: &[&str]) -> Vec<HostState> {
    names
        .iter()
        .map(|h| HostState {
            name: (*h).into(),
            ready: true,
        })
        .collect()
}

/// The members `plan` makes, as they exist once made (not yet healthy).
fn made(p: &ValidPool, plan: &Plan) -> Vec<Member> {
    plan.create
        .iter()
        .map(|m| Member {
            name: m.name.clone(),
            template_hash: Some(p.template_hash.clone()),
            host: m.spec.placement.host.clone(),
            ready: false,
            healthy: false,
            deleting: false,
        })
        .collect()
}

fn healthy(mut members: Vec<Member>) -> Vec<Member> {
    for m in &mut members {
        m.ready = true;
        m.healthy = true;
    }
    members
}

fn on_host(plan: &Plan, host: &str) -> usize {
    plan.create
        .iter()
        .filter(|m| m.spec.placement.host.as_deref() == Some(host))
        .count()
}

#[test]
fn scaling_up_names_members_and_spreads_them_over_ready_hosts() {
    let p = pool(7, 1, 0);
    let mut hs = hosts(&["host1", "host2", "host3"]);
    hs.push(HostState {
        name: "host4".into(),
        ready: false,
    });
    let plan = p.plan(&[], Some(&hs));
    let names: Vec<String> = plan.create.iter().map(|m| m.name.clone()).collect();
    let want: Vec<String> = (0..7)
        .map(|i| format!("egress-{}-{i}", p.template_hash))
        .collect();
    assert_eq!(names, want);
    let mut per_host: Vec<usize> = ["host1", "host2", "host3"]
        .iter()
        .map(|h| on_host(&plan, h))
        .collect();
    per_host.sort_unstable();
    assert_eq!(per_host, [2, 2, 3], "spread over the ready hosts only");
    assert_eq!(on_host(&plan, "host4"), 0);
    assert!(plan.create.iter().all(|m| {
        m.spec.placement.policy == crate::PlacementPolicy::Prefer && m.spec.image.is_some()
    }));
    assert_eq!(plan.progress, Progress::ScalingUp);
    assert!(plan.delete.is_empty());
}

#[test]
fn new_members_go_to_the_emptiest_host_and_skip_taken_names() {
    let p = pool(4, 1, 0);
    let h = p.template_hash.clone();
    let m = |i: u32, host: &str, deleting: bool| Member {
        name: format!("egress-{h}-{i}"),
        template_hash: Some(h.clone()),
        host: Some(host.into()),
        ready: true,
        healthy: true,
        deleting,
    };
    // Index 1 is being deleted: its name is still taken.
    let members = [
        m(0, "host1", false),
        m(1, "host1", true),
        m(2, "host1", false),
    ];
    let plan = p.plan(&members, Some(&hosts(&["host1", "host2"])));
    let names: Vec<&str> = plan.create.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, [format!("egress-{h}-3"), format!("egress-{h}-4")]);
    assert_eq!(on_host(&plan, "host2"), 2);
    assert_eq!(plan.skew(), Some(2), "the skew before the plan");
    assert_eq!(plan.counts.terminating, 1);
}

#[test]
fn hosts_unknown_or_pinned_leave_placement_to_the_template() {
    let p = pool(2, 1, 0);
    let plan = p.plan(&[], None);
    assert!(
        plan.create
            .iter()
            .all(|m| m.spec.placement == crate::PlacementSpec::default())
    );
    assert_eq!(plan.spread, None);
    let mut spec = p.spec.clone();
    spec.template.spec.placement.host = Some("host9".into());
    let pinned = spec.validate("egress").unwrap();
    let plan = pinned.plan(&[], Some(&hosts(&["host1", "host2"])));
    assert!(
        plan.create
            .iter()
            .all(|m| m.spec.placement.host.as_deref() == Some("host9"))
    );
    assert_eq!(plan.spread, None);
}

#[test]
fn scaling_down_deletes_the_unhealthy_then_the_most_loaded_host_first() {
    let p = pool(6, 1, 0);
    let first = p.plan(&[], Some(&hosts(&["host1", "host2"])));
    let mut members = healthy(made(&p, &first));
    // host1 gets a seventh member; one member elsewhere turns unhealthy.
    let extra = Member {
        name: format!("egress-{}-6", p.template_hash),
        host: Some("host1".into()),
        ..members[0].clone()
    };
    members.push(extra);
    let sick = members
        .iter()
        .position(|m| m.host.as_deref() == Some("host2"))
        .unwrap();
    members[sick].healthy = false;
    let down = pool(4, 1, 0);
    let plan = down.plan(&members, Some(&hosts(&["host1", "host2"])));
    assert_eq!(plan.progress, Progress::ScalingDown);
    assert_eq!(plan.delete.len(), 3);
    assert_eq!(plan.delete[0], members[sick].name, "unhealthy first");
    for name in &plan.delete[1..] {
        let m = members.iter().find(|m| &m.name == name).unwrap();
        assert_eq!(m.host.as_deref(), Some("host1"), "{name}: the fuller host");
    }
    assert!(plan.create.is_empty());
    // The same input gives the same victims (a stale cache deletes the
    // same members again, never others).
    assert_eq!(down.plan(&members, Some(&hosts(&["host1", "host2"]))), plan);
}

/// Carries out plans until the pool settles: members made in one round
/// turn `Healthy` in the next unless `new_never_healthy`; asserts the
/// roll's bounds after every round. Returns the rounds taken.
fn roll(from: &ValidPool, to: &ValidPool, old_healthy: bool, new_never_healthy: bool) -> usize {
    let hs = hosts(&["host1", "host2", "host3"]);
    let mut members = made(from, &from.plan(&[], Some(&hs)));
    for m in &mut members {
        m.ready = old_healthy;
        m.healthy = old_healthy;
    }
    let r = to.spec.replicas as usize;
    let surge = to.spec.strategy.max_surge as usize;
    let floor = r.saturating_sub(to.spec.strategy.max_unavailable as usize);
    for round in 1..=100 {
        let plan = to.plan(&members, Some(&hs));
        if plan.create.is_empty() && plan.delete.is_empty() {
            return round;
        }
        let healthy_before = members.iter().filter(|m| m.healthy).count();
        members.retain(|m| !plan.delete.contains(&m.name));
        let healthy_after = members.iter().filter(|m| m.healthy).count();
        assert!(
            healthy_after >= floor.min(healthy_before),
            "round {round}: {healthy_after} healthy left, floor {floor}"
        );
        if !new_never_healthy {
            members = members
                .into_iter()
                .map(|mut m| {
                    m.healthy |= m.template_hash.as_deref() == Some(to.template_hash.as_str());
                    m.ready = m.healthy;
                    m
                })
                .collect();
        }
        members.extend(made(to, &plan));
        assert!(
            members.len() <= r + surge,
            "round {round}: {} members, at most {}",
            members.len(),
            r + surge
        );
    }
    panic!("the roll did not settle in 100 rounds");
}

#[test]
fn a_roll_keeps_its_bounds_and_ends_with_every_member_current() {
    for (surge, unavailable) in [(1, 0), (0, 1), (2, 1), (5, 5), (1, 2)] {
        let from = pool(5, surge, unavailable);
        let to = with_image(&from, "debian-13");
        let rounds = roll(&from, &to, true, false);
        assert!(rounds > 1, "surge {surge} unavailable {unavailable}");
    }
}

#[test]
fn a_roll_away_from_a_broken_template_progresses() {
    // Every old member is unhealthy (the reason to roll): with maxUnavailable
    // 0 they still go, each once a new member is Healthy.
    let from = pool(3, 1, 0);
    let to = with_image(&from, "fixed");
    roll(&from, &to, false, false);
    // Step by step: an unhealthy old member waits for a Healthy new one (it
    // may be only briefly unhealthy; a new one is not yet worth more).
    let hs = hosts(&["host1"]);
    let mut members = made(&from, &from.plan(&[], Some(&hs)));
    let plan = to.plan(&members, Some(&hs));
    assert_eq!((plan.create.len(), plan.delete.len()), (1, 0));
    members.extend(made(&to, &plan));
    let plan = to.plan(&members, Some(&hs));
    assert_eq!((plan.create.len(), plan.delete.len()), (0, 0));
    members = members
        .into_iter()
        .map(|mut m| {
            m.healthy = m.template_hash.as_deref() == Some(to.template_hash.as_str());
            m
        })
        .collect();
    let plan = to.plan(&members, Some(&hs));
    assert_eq!((plan.create.len(), plan.delete.len()), (0, 1));
}

#[test]
fn a_roll_to_a_broken_template_stops_at_the_surge_and_deletes_nothing_healthy() {
    let from = pool(3, 1, 0);
    let to = with_image(&from, "broken");
    let hs = hosts(&["host1", "host2", "host3"]);
    let mut members = healthy(made(&from, &from.plan(&[], Some(&hs))));
    for _ in 0..5 {
        let plan = to.plan(&members, Some(&hs));
        assert!(plan.delete.is_empty(), "{:?}", plan.delete);
        members.extend(made(&to, &plan));
    }
    assert_eq!(members.len(), 4, "replicas + maxSurge");
    assert_eq!(to.plan(&members, Some(&hs)).progress, Progress::RollingOut);
}

#[test]
fn lowering_replicas_during_a_roll_deletes_surplus_new_members() {
    let from = pool(4, 4, 0);
    let to = with_image(&from, "debian-13");
    let hs = hosts(&["host1"]);
    let old = healthy(made(&from, &from.plan(&[], Some(&hs))));
    let new = healthy(made(&to, &to.plan(&old, Some(&hs))));
    assert_eq!(new.len(), 4);
    let mut spec = to.spec.clone();
    spec.replicas = 2;
    let smaller = spec.validate("egress").unwrap();
    let members: Vec<Member> = old.into_iter().chain(new).collect();
    let plan = smaller.plan(&members, Some(&hs));
    assert_eq!(
        plan.delete.len(),
        6,
        "4 old and 2 of the new: {:?}",
        plan.delete
    );
    assert!(plan.create.is_empty());
}

#[test]
fn zero_replicas_deletes_everything() {
    let p = pool(3, 1, 0);
    let members = healthy(made(&p, &p.plan(&[], None)));
    let plan = pool(0, 1, 0).plan(&members, None);
    assert_eq!(plan.delete.len(), 3);
}

#[test]
fn the_status_counts_and_conditions_follow_the_plan() {
    let p = pool(3, 1, 0);
    let hs = hosts(&["host1", "host2"]);
    let mut members = made(&p, &p.plan(&[], Some(&hs)));
    members[0].healthy = true;
    members[0].ready = true;
    let plan = p.plan(&members, Some(&hs));
    let now = Timestamp::from_unix_seconds(10);
    let s = ProxyPoolStatus::default().observe(&p, &plan, None, Some(2), now);
    assert_eq!(
        (
            s.replicas,
            s.ready_replicas,
            s.healthy_replicas,
            s.updated_replicas
        ),
        (3, 1, 1, 3)
    );
    assert_eq!(s.selector.as_deref(), Some("egress-proxies.io/pool=egress"));
    assert_eq!(s.skew, Some(1));
    let c = |s: &ProxyPoolStatus, t: &str| {
        let c = s.condition(t).unwrap();
        (c.status, c.reason.clone())
    };
    assert_eq!(
        c(&s, "Available"),
        (ConditionStatus::False, "BelowMinimumHealthy".into())
    );
    assert_eq!(
        c(&s, "Progressing"),
        (ConditionStatus::True, "WaitingForHealthy".into())
    );
    assert_eq!(
        c(&s, "Spread"),
        (ConditionStatus::True, "WithinMaxSkew".into())
    );
    // All healthy later: Available flips and gets a new transition time;
    // Spread keeps its own.
    let later = Timestamp::from_unix_seconds(20);
    let plan = p.plan(&healthy(members), Some(&hs));
    let s2 = s.observe(&p, &plan, None, Some(2), later);
    assert_eq!(
        c(&s2, "Available"),
        (ConditionStatus::True, "MinimumHealthy".into())
    );
    assert_eq!(c(&s2, "Progressing").1, "Complete");
    assert_eq!(
        s2.condition("Available").unwrap().last_transition_time,
        later
    );
    assert_eq!(s2.condition("Spread").unwrap().last_transition_time, now);
    let failed = s2.observe(
        &p,
        &plan,
        Some("create egress-x: forbidden"),
        Some(2),
        later,
    );
    assert_eq!(
        c(&failed, "Progressing"),
        (ConditionStatus::False, "MemberWriteFailed".into())
    );
}

#[test]
fn an_invalid_spec_is_reported_and_keeps_the_counts() {
    let mut spec = pool(3, 1, 0).spec;
    spec.strategy.max_surge = 0;
    let issues = spec.validate("egress").unwrap_err();
    let before = ProxyPoolStatus {
        replicas: 3,
        ..ProxyPoolStatus::default()
    };
    let s = before.invalid(&issues, Some(4), Timestamp::from_unix_seconds(1));
    assert_eq!(s.replicas, 3);
    let c = s.condition("Progressing").unwrap();
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, "InvalidSpec")
    );
    assert!(c.message.contains("spec.strategy"), "{}", c.message);
}
