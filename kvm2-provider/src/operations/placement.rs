//! Placement: which hosts a Create tries, in what order, and what it
//! answers when none takes the instance.
//!
//! ```text
//!  Require(h) ─▶ [h]
//!  Prefer(h)  ─▶ [h, rest by rendezvous weight]  ─┐
//!  Any        ─▶ [all by rendezvous weight]       ─┴▶ hosts in dial cool-down last,
//!                                                    hosts the request avoids after them
//!
//!  each candidate: dial ─▶ existing instance? ─▶ admission ─▶ build
//!                  └ refused (down, full, …) ─▶ next candidate
//!  none took it ─▶ Refusals::into_error: one class for all
//! ```
//!
//! Rendezvous weight is a hash of (owner UID, host name): a retried Create
//! goes to the same host while it is usable, and owners spread over the
//! hosts evenly. A host that cannot take the instance now — its dial
//! failed, or admission or the build answered QuotaExceeded (full, or at
//! its `max_instances`) — sends the Create on to the next candidate before
//! the operator ever waits.
//!
//! **Admission** ([`admit`]) runs on a dialled host before the image is
//! fetched to it: the entry's instances there against the host's
//! `max_instances`, and (unless the capacity check is off) the machine
//! type's vCPUs and memory against the host's CPUs and the memory it can
//! give minus its `reserved_memory`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use provider_api::config::{Kvm2Host, MachineType};
use provider_api::{Error as ApiError, ErrorClass, Identifier, OwnerUid, Placement};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::provider::Inner;
use crate::hosts::Connection;
use crate::hosts::capacity;

/// The hosts to try for `owner`'s instance, in order.
///
/// # Errors
/// Permanent when `Require` names a host the entry does not have, or the
/// entry has no hosts.
pub(crate) fn candidates<'a>(
    inner: &'a Inner,
    placement: &Placement,
    owner: &OwnerUid,
    avoid: &std::collections::BTreeSet<Identifier>,
) -> Result<Vec<&'a Kvm2Host>, ApiError> {
    let config = &inner.config;
    if config.hosts.is_empty() {
        return Err(ApiError::permanent("no hosts configured"));
    }
    let ranked = match placement {
        Placement::Require(h) => {
            return Ok(vec![config.host(h).ok_or_else(|| {
                ApiError::permanent(format!(
                    "placement requires host {h}, which is not configured"
                ))
            })?]);
        }
        Placement::Prefer(h) => {
            let mut ranked = ranked(config.hosts.iter(), owner);
            if let Some(pos) = ranked
                .iter()
                .position(|c| &c.name == h && !avoid.contains(h))
            {
                let preferred = ranked.remove(pos);
                ranked.insert(0, preferred);
            }
            ranked
        }
        _ => ranked(config.hosts.iter(), owner),
    };
    let cooldown = inner.options.dial_cooldown;
    let ordered = cooled_last(ranked, |h| inner.dial_failures.cooling(h, cooldown));
    Ok(avoided_last(ordered, avoid))
}

/// `ordered` with the hosts in `avoid` moved to the end, each part in its
/// order.
fn avoided_last<'a>(
    ordered: Vec<&'a Kvm2Host>,
    avoid: &std::collections::BTreeSet<Identifier>,
) -> Vec<&'a Kvm2Host> {
    let (avoided, rest): (Vec<_>, Vec<_>) =
        ordered.into_iter().partition(|h| avoid.contains(&h.name));
    rest.into_iter().chain(avoided).collect()
}

/// Checks that `host` may take one more instance of `machine` (see the
/// module's docs).
///
/// # Errors
/// QuotaExceeded naming what is short; the errors of the reads.
pub(crate) async fn admit(
    inner: &Inner,
    host: &Kvm2Host,
    conn: &Connection,
    machine: &MachineType,
) -> Result<(), ApiError> {
    if let Some(max) = host.max_instances {
        let held = super::list::ours_on(conn, &inner.name).await?.len();
        if held >= max as usize {
            return Err(ApiError::quota_exceeded(format!(
                "host {} holds {held} of this entry's instances, its max_instances is {max}",
                host.name
            )));
        }
    }
    if !inner.options.capacity_check {
        return Ok(());
    }
    let (cpus, memory) = capacity::cpus_and_free_memory(&host.name, conn.client()).await?;
    capacity::check_compute(
        &host.name,
        cpus,
        memory,
        host.reserved_memory.bytes(),
        machine,
    )
}

/// Why each candidate did not take the instance, and the one answer they
/// make together.
#[derive(Default)]
pub(crate) struct Refusals {
    each: Vec<(Identifier, ApiError)>,
}

impl Refusals {
    /// Records `host`'s refusal.
    pub(crate) fn push(&mut self, host: &Identifier, e: ApiError) {
        self.each.push((host.clone(), e));
    }

    /// The Create's answer when no candidate took it:
    /// * one candidate: its own error;
    /// * Transient when any host might take it soon (down, unreachable,
    ///   the deadline passed) — retried soon;
    /// * else QuotaExceeded when any host is full — retried after a long
    ///   wait;
    /// * Permanent only when every host refused for good (our key, its
    ///   host key).
    pub(crate) fn into_error(mut self) -> ApiError {
        if self.each.len() == 1
            && let Some((_, e)) = self.each.pop()
        {
            return e;
        }
        let class_of = |c| self.each.iter().any(|(_, e)| e.class() == c);
        let class = if self.each.is_empty() {
            ErrorClass::Permanent
        } else if class_of(ErrorClass::Transient) || class_of(ErrorClass::NotFound) {
            ErrorClass::Transient
        } else if class_of(ErrorClass::QuotaExceeded) {
            ErrorClass::QuotaExceeded
        } else {
            ErrorClass::Permanent
        };
        let why: Vec<String> = self
            .each
            .iter()
            .map(|(h, e)| format!("{h}: {}", e.message()))
            .collect();
        let message = format!("no host could take the instance ({})", why.join("; "));
        match self.each.into_iter().next() {
            Some((_, first)) => ApiError::wrap(class, message, first),
            None => ApiError::new(class, message),
        }
    }
}

/// When each host's dial last failed, for the cool-down ranking.
#[derive(Default)]
pub(crate) struct DialFailures {
    at: Mutex<HashMap<Identifier, Instant>>,
}

impl DialFailures {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Identifier, Instant>> {
        self.at.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts (or restarts) `host`'s cool-down.
    pub(crate) fn failed(&self, host: &Identifier) {
        self.lock().insert(host.clone(), Instant::now());
    }

    /// Ends `host`'s cool-down.
    pub(crate) fn dialled(&self, host: &Identifier) {
        self.lock().remove(host);
    }

    /// True while `host`'s last failure is younger than `cooldown`.
    fn cooling(&self, host: &Identifier, cooldown: Duration) -> bool {
        self.lock()
            .get(host)
            .is_some_and(|at| at.elapsed() < cooldown)
    }
}

/// `ranked` with the hosts in their cool-down moved last (order otherwise
/// kept).
fn cooled_last(ranked: Vec<&Kvm2Host>, cooling: impl Fn(&Identifier) -> bool) -> Vec<&Kvm2Host> {
    let (cold, warm): (Vec<_>, Vec<_>) = ranked.into_iter().partition(|h| cooling(&h.name));
    warm.into_iter().chain(cold).collect()
}

/// Hosts by descending rendezvous weight for `owner`.
fn ranked<'a>(hosts: impl Iterator<Item = &'a Kvm2Host>, owner: &OwnerUid) -> Vec<&'a Kvm2Host> {
    let weight = |h: &Kvm2Host| -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(owner.as_str().as_bytes());
        hasher.update([0]);
        hasher.update(h.name.as_str().as_bytes());
        hasher.finalize().into()
    };
    let mut v: Vec<(&Kvm2Host, [u8; 32])> = hosts.map(|h| (h, weight(h))).collect();
    v.sort_by_key(|(_, w)| std::cmp::Reverse(*w));
    v.into_iter().map(|(h, _)| h).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::ProvidersConfig;

    fn three_hosts() -> ProvidersConfig {
        let yaml = "providers:\n  - name: kvm2-t\n    type: kvm2\n    kvm2:\n      ssh:\n        user: root\n        key_file: /k\n        insecure_ignore_host_key: true\n      hosts:\n        - {name: h1, address: 10.0.0.1, bridge: br0, pool: default}\n        - {name: h2, address: 10.0.0.2, bridge: br0, pool: default}\n        - {name: h3, address: 10.0.0.3, bridge: br0, pool: default}\n      images:\n        i:\n          url: http://x/i\n          sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n          format: raw\n      machine_types:\n        m: {vcpus: 1, memory: 128MiB, disk: 1GiB}\n";
        ProvidersConfig::from_yaml_str(yaml).unwrap()
    }

    #[test]
    fn hosts_in_their_cool_down_go_last_in_order() {
        let config = three_hosts();
        let kvm2 = config.providers[0].kvm2().unwrap();
        let hosts: Vec<&Kvm2Host> = kvm2.hosts.iter().collect();
        let names = |v: Vec<&Kvm2Host>| v.iter().map(|h| h.name.to_string()).collect::<Vec<_>>();
        let failures = DialFailures::default();
        let h1 = Identifier::parse("h1").unwrap();
        let h2 = Identifier::parse("h2").unwrap();
        failures.failed(&h1);
        failures.failed(&h2);
        let cooldown = Duration::from_secs(3600);
        let order = cooled_last(hosts.clone(), |h| failures.cooling(h, cooldown));
        assert_eq!(names(order), ["h3", "h1", "h2"]);
        failures.dialled(&h1);
        let order = cooled_last(hosts.clone(), |h| failures.cooling(h, cooldown));
        assert_eq!(names(order), ["h1", "h3", "h2"]);
        // A zero cool-down never reorders.
        let order = cooled_last(hosts, |h| failures.cooling(h, Duration::ZERO));
        assert_eq!(names(order), ["h1", "h2", "h3"]);
    }

    #[test]
    fn avoided_hosts_go_last_and_are_not_preferred() {
        let config = three_hosts();
        let kvm2 = config.providers[0].kvm2().unwrap();
        let hosts: Vec<&Kvm2Host> = kvm2.hosts.iter().collect();
        let names = |v: Vec<&Kvm2Host>| v.iter().map(|h| h.name.to_string()).collect::<Vec<_>>();
        let avoid = [Identifier::parse("h1").unwrap()].into();
        assert_eq!(
            names(avoided_last(hosts.clone(), &avoid)),
            ["h2", "h3", "h1"]
        );
        assert_eq!(
            names(avoided_last(hosts, &Default::default())),
            ["h1", "h2", "h3"]
        );
    }

    #[test]
    fn rendezvous_ranking_is_stable_and_spreads() {
        let config = three_hosts();
        let kvm2 = config.providers[0].kvm2().unwrap();
        let mut firsts = std::collections::BTreeSet::new();
        for i in 0..30 {
            let owner = OwnerUid::parse(&format!("uid-{i}")).unwrap();
            let a: Vec<_> = ranked(kvm2.hosts.iter(), &owner)
                .iter()
                .map(|h| h.name.clone())
                .collect();
            let b: Vec<_> = ranked(kvm2.hosts.iter().rev(), &owner)
                .iter()
                .map(|h| h.name.clone())
                .collect();
            assert_eq!(a, b, "ranking must not depend on config order");
            assert_eq!(a.len(), 3);
            firsts.insert(a[0].clone());
        }
        assert_eq!(firsts.len(), 3, "30 owners should land on every host");
    }
    #[test]
    fn refusals_answer_by_the_most_hopeful_class() {
        let h = |s: &str| Identifier::parse(s).unwrap();
        let full = || ApiError::quota_exceeded("full");
        let down = || ApiError::transient("down");
        let refused = || ApiError::permanent("host key");
        let answer = |each: Vec<(&str, ApiError)>| {
            let mut r = Refusals::default();
            for (host, e) in each {
                r.push(&h(host), e);
            }
            r.into_error()
        };
        // One candidate: its own error, unchanged.
        let one = answer(vec![("h1", full())]);
        assert_eq!(
            (one.class(), one.message()),
            (ErrorClass::QuotaExceeded, "full")
        );
        // Every host full: wait long; the message names each.
        let all_full = answer(vec![("h1", full()), ("h2", full())]);
        assert_eq!(all_full.class(), ErrorClass::QuotaExceeded);
        assert_eq!(
            all_full.message(),
            "no host could take the instance (h1: full; h2: full)"
        );
        // One full, one down: the down one may be back soon.
        let e = answer(vec![("h1", full()), ("h2", down())]);
        assert_eq!(e.class(), ErrorClass::Transient);
        // Full and refusing for good: waiting can still help.
        let e = answer(vec![("h1", refused()), ("h2", full())]);
        assert_eq!(e.class(), ErrorClass::QuotaExceeded);
        // Permanent only when every host refuses for good.
        let e = answer(vec![("h1", refused()), ("h2", refused())]);
        assert_eq!(e.class(), ErrorClass::Permanent);
    }
}
