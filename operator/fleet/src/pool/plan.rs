//! One reconcile of a pool: which members to make (named, each with its
//! host) and which to delete, from the members that exist and the entry's
//! hosts ([`ValidPool::plan`]).
//!
//! The rules, with `R` replicas, `S` = `maxSurge`, `U` = `maxUnavailable`
//! (members being deleted count for nothing):
//! - **Scaling** (every member is made from the current template): make
//!   `R - members`; delete `members - R`, in [victim order](#victim-order).
//! - **Rolling** (some members are from an older template): make new
//!   members while there are fewer than `R` new ones and at most `R + S`
//!   members in all. Old members go in two steps, as far as health allows:
//!   unhealthy ones while `members - (R - U) - unhealthy new` allows (they
//!   lose no health, but a new member that is not yet `Healthy` must not
//!   be counted on), then healthy ones while more than `R - U` members are
//!   `Healthy`. So the pool never has fewer than `R - U` healthy members
//!   because of the roll, and never more than `R + S` members.
//!
//! # Victim order
//! Outdated first, then not `Healthy`, then not `Ready`, then on the host
//! with the most members, then the highest index. Deterministic, so a
//! reconcile that sees a stale cache picks the same members again (a second
//! delete of a member is harmless; a different one would not be).
//!
//! # Spread
//! A new member of a template without `placement.host` asks for the ready
//! host with the fewest members (`Prefer`: the provider may still place it
//! elsewhere when that host is full); ties go by a hash of host and member
//! name, so pools do not all start on the same host. Members count on the
//! host in their status, or until they have one, the host they asked for.
//! Running members are never moved to fix a skew.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::pool::spec::ValidPool;
use crate::spec::{PlacementPolicy, PlacementSpec, ProxySpec};

/// One existing member of the pool, as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The Proxy's name.
    pub name: String,
    /// Its `egress-proxies.io/pool-template` label (the template hash it
    /// was made from).
    pub template_hash: Option<String>,
    /// The host it runs on (`status.host`), else the host its spec asks
    /// for.
    pub host: Option<String>,
    /// `Ready` is `True`.
    pub ready: bool,
    /// `Healthy` holds for its current instance
    /// ([`ProxyStatus::is_healthy`](crate::ProxyStatus::is_healthy)).
    pub healthy: bool,
    /// It has a deletion timestamp.
    pub deleting: bool,
}

/// One host of the pool's provider entry, from its latest check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostState {
    /// The host (target) name.
    pub name: String,
    /// The check reached it.
    pub ready: bool,
}

/// A member to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMember {
    /// Its name, `<pool>-<hash>-<index>`.
    pub name: String,
    /// Its spec: the template's, with the placement the pool chose.
    pub spec: ProxySpec,
}

/// What a pool is doing, as the plan saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Members from an older template remain.
    RollingOut,
    /// Fewer members than replicas.
    ScalingUp,
    /// More members than replicas.
    ScalingDown,
    /// The count is right; some members are not yet `Healthy`.
    WaitingForHealthy,
    /// Every member is current and `Healthy`.
    Complete,
}

/// The members counted by what they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Members not being deleted.
    pub members: u32,
    /// Of those, `Ready`.
    pub ready: u32,
    /// Of those, `Healthy`.
    pub healthy: u32,
    /// Of those, made from the current template.
    pub updated: u32,
    /// Members being deleted.
    pub terminating: u32,
}

/// One reconcile's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Members to make.
    pub create: Vec<NewMember>,
    /// Members to delete (names), in victim order.
    pub delete: Vec<String>,
    /// What the pool is doing.
    pub progress: Progress,
    /// The members before this plan is carried out.
    pub counts: Counts,
    /// Members per ready host (every ready host, also with 0), by name;
    /// `None` when the entry's hosts are not known or the template pins a
    /// host.
    pub spread: Option<BTreeMap<String, u32>>,
}

impl Plan {
    /// The largest difference in members between two ready hosts.
    pub fn skew(&self) -> Option<u32> {
        let spread = self.spread.as_ref()?;
        let max = spread.values().max()?;
        let min = spread.values().min()?;
        Some(max - min)
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl ValidPool {
    /// The members to make and delete now, from the members that exist and
    /// the entry's hosts (`None` when unknown: new members then take the
    /// template's placement, i.e. the provider's own choice).
    pub fn plan(&self, members: &[Member], hosts: Option<&[HostState]>) -> Plan {
        let r = self.spec.replicas as usize;
        let surge = self.spec.strategy.max_surge as usize;
        let min_healthy = r.saturating_sub(self.spec.strategy.max_unavailable as usize);
        let live: Vec<&Member> = members.iter().filter(|m| !m.deleting).collect();
        let current = |m: &Member| m.template_hash.as_deref() == Some(self.template_hash.as_str());
        let (new, old): (Vec<&Member>, Vec<&Member>) = live.iter().partition(|m| current(m));
        let healthy = live.iter().filter(|m| m.healthy).count();
        let counts = Counts {
            members: count(live.len()),
            ready: count(live.iter().filter(|m| m.ready).count()),
            healthy: count(healthy),
            updated: count(new.len()),
            terminating: count(members.len() - live.len()),
        };

        let pinned = self.spec.template.spec.placement.host.is_some();
        let spread = match hosts {
            Some(hosts) if !pinned => {
                let mut by_host: BTreeMap<String, u32> = hosts
                    .iter()
                    .filter(|h| h.ready)
                    .map(|h| (h.name.clone(), 0))
                    .collect();
                for m in &live {
                    if let Some(n) = m.host.as_ref().and_then(|h| by_host.get_mut(h)) {
                        *n += 1;
                    }
                }
                Some(by_host)
            }
            _ => None,
        };

        // Victim order over the live members (see the module docs).
        let host_load = |m: &Member| {
            m.host
                .as_ref()
                .and_then(|h| spread.as_ref()?.get(h).copied())
                .unwrap_or(0)
        };
        let victim_key = |m: &&Member| {
            (
                current(m),
                m.healthy,
                m.ready,
                Reverse(host_load(m)),
                Reverse(self.index_of(&m.name)),
                m.name.clone(),
            )
        };

        let want_new = r.saturating_sub(new.len());
        let to_make = if old.is_empty() {
            want_new
        } else {
            want_new.min((r + surge).saturating_sub(live.len()))
        };

        let mut delete: Vec<&Member> = Vec::new();
        if old.is_empty() {
            let mut by_order = new.clone();
            by_order.sort_by_key(victim_key);
            delete.extend(by_order.into_iter().take(live.len().saturating_sub(r)));
        } else {
            let new_unhealthy = new.iter().filter(|m| !m.healthy).count();
            let (mut old_unhealthy, mut old_healthy): (Vec<&Member>, Vec<&Member>) =
                old.iter().partition(|m| !m.healthy);
            old_unhealthy.sort_by_key(victim_key);
            old_healthy.sort_by_key(victim_key);
            let unhealthy_budget = live
                .len()
                .saturating_sub(min_healthy)
                .saturating_sub(new_unhealthy);
            delete.extend(old_unhealthy.into_iter().take(unhealthy_budget));
            delete.extend(
                old_healthy
                    .into_iter()
                    .take(healthy.saturating_sub(min_healthy)),
            );
            // Replicas lowered during a roll: new members beyond them go too.
            let mut surplus_new = new.clone();
            surplus_new.sort_by_key(victim_key);
            delete.extend(surplus_new.into_iter().take(new.len().saturating_sub(r)));
        }

        // Placement counts each new member on its host as it is chosen; the
        // spread reported is the members before this plan's changes.
        let mut placing = spread.clone();
        let create = self.name_and_place(members, to_make, placing.as_mut());

        let progress = if !old.is_empty() {
            Progress::RollingOut
        } else if live.len() < r {
            Progress::ScalingUp
        } else if live.len() > r {
            Progress::ScalingDown
        } else if healthy < r {
            Progress::WaitingForHealthy
        } else {
            Progress::Complete
        };
        Plan {
            create,
            delete: delete.into_iter().map(|m| m.name.clone()).collect(),
            progress,
            counts,
            spread,
        }
    }

    /// The index in a member name of the current template
    /// (`<pool>-<hash>-<index>`); 0 for a name of another form.
    fn index_of(&self, name: &str) -> u32 {
        name.rsplit_once('-')
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(0)
    }

    /// `n` members of the current template: the lowest free indexes (no
    /// existing member, also one being deleted, has the name), each asking
    /// for the ready host with the fewest members when `spread` is known.
    fn name_and_place(
        &self,
        members: &[Member],
        n: usize,
        mut spread: Option<&mut BTreeMap<String, u32>>,
    ) -> Vec<NewMember> {
        let prefix = format!("{}-{}-", self.name, self.template_hash);
        let taken: BTreeSet<u32> = members
            .iter()
            .filter_map(|m| m.name.strip_prefix(&prefix)?.parse().ok())
            .collect();
        let free = (0..).filter(|i| !taken.contains(i));
        free.take(n)
            .map(|i| {
                let name = format!("{prefix}{i}");
                let mut spec = self.spec.template.spec.clone();
                if let Some(by_host) = spread.as_deref_mut()
                    && let Some(host) = by_host
                        .iter()
                        .min_by_key(|(host, n)| (**n, tiebreak(host, &name)))
                        .map(|(host, _)| host.clone())
                {
                    if let Some(n) = by_host.get_mut(&host) {
                        *n += 1;
                    }
                    spec.placement = PlacementSpec {
                        host: Some(host),
                        policy: PlacementPolicy::Prefer,
                    };
                }
                NewMember { name, spec }
            })
            .collect()
    }
}

/// A stable pseudo-random order of hosts for one member name.
fn tiebreak(host: &str, member: &str) -> [u8; 8] {
    let mut h = Sha256::new();
    h.update(host.as_bytes());
    h.update([0]);
    h.update(member.as_bytes());
    let digest = h.finalize();
    let mut out = [0; 8];
    out.copy_from_slice(&digest[..8]);
    out
}
