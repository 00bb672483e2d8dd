//! The garbage collector's plan: from a complete live set of Proxies and
//! every provider's listing by this cluster's tag, which instances to
//! delete.
//!
//! Deleted: **orphans** (no live Proxy owns them) and **duplicates** (a
//! live Proxy owns them but its status names another instance), each older
//! than the minimum age, at most a cap per round, oldest first.
//!
//! Guards, each of which makes the whole round delete nothing:
//! * the live set is partial (any page of the Proxy LIST failed);
//! * any provider's listing failed (providers list all or nothing, and one
//!   failure makes the view partial);
//! * the live set is empty while some listing is not (a LIST that came back
//!   empty through a misconfiguration must not wipe the fleet).
//!
//! Never deleted: instances without this cluster's tag (two clusters that
//! share a provider entry never sweep each other; the tag is checked on
//! every listed instance, not only trusted to the query), instances a
//! provider lists under another entry, instances without a creation time,
//! and the instances of a live Proxy whose status names none (a Create whose
//! ID is not recorded yet) or one that does not parse.
//!
//! Ordering that makes the plan safe: list the instances **first**, then the
//! Proxies (a fresh, paginated LIST, not a cache). Every instance in the
//! listings was then created for a Proxy that either shows in the later
//! LIST or is really gone. The minimum age covers the window between a
//! Create returning and its provider ID being written to the status.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use provider_api::{Error as ProviderError, Identifier, ListedInstance, OwnerUid, ProviderId};

use crate::cluster::ClusterIdentity;

/// One live Proxy as the GC sees it: its UID and the instance its status
/// names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveProxy {
    uid: String,
    named: Named,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Named {
    Nothing,
    Id(ProviderId),
    Unreadable,
}

impl LiveProxy {
    /// A Proxy with `metadata.uid` `uid` and `status.providerID`
    /// `provider_id`.
    pub fn new(uid: impl Into<String>, provider_id: Option<&str>) -> Self {
        let named = match provider_id {
            None => Named::Nothing,
            Some(s) => ProviderId::parse(s).map_or(Named::Unreadable, Named::Id),
        };
        LiveProxy {
            uid: uid.into(),
            named,
        }
    }
}

/// The Proxies that exist, as one fresh LIST saw them.
#[derive(Debug, Clone, Copy)]
pub enum LiveSet<'a> {
    /// Every page was read.
    Complete(&'a [LiveProxy]),
    /// Some page failed: the round is skipped.
    Partial,
}

/// One provider entry's answer to `list_by_tag(cluster tag)`.
#[derive(Debug)]
pub struct Listing {
    /// The provider entry.
    pub provider: Identifier,
    /// What `list_by_tag` returned.
    pub result: Result<Vec<ListedInstance>, ProviderError>,
}

/// The GC's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    /// Instances younger than this are never deleted (10 min by default).
    pub min_age: Duration,
    /// The most deletions per round (10 by default).
    pub max_deletes: usize,
}

impl Default for GcPolicy {
    fn default() -> Self {
        GcPolicy {
            min_age: Duration::from_secs(600),
            max_deletes: 10,
        }
    }
}

/// Whether the round sweeps, or why it deletes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcVerdict {
    /// The view is complete; [`GcPlan::deletes`] may be acted on.
    Sweep,
    /// The Proxy LIST was partial.
    SkipPartialLiveSet,
    /// These providers' listings failed.
    SkipListingFailed {
        /// The entries whose listing failed.
        providers: Vec<Identifier>,
    },
    /// No Proxy exists while instances are listed.
    SkipEmptyLiveSet,
}

impl GcVerdict {
    /// Every verdict's [`as_str`](Self::as_str) word (a metric's series
    /// exist from the start, at zero).
    pub const WORDS: [&'static str; 4] = [
        "sweep",
        "skip_partial_live_set",
        "skip_listing_failed",
        "skip_empty_live_set",
    ];

    /// The verdict's word, as logged and as the `operator_gc_rounds`
    /// metric's label: `sweep`, `skip_partial_live_set`,
    /// `skip_listing_failed`, `skip_empty_live_set`.
    pub fn as_str(&self) -> &'static str {
        match self {
            GcVerdict::Sweep => "sweep",
            GcVerdict::SkipPartialLiveSet => "skip_partial_live_set",
            GcVerdict::SkipListingFailed { .. } => "skip_listing_failed",
            GcVerdict::SkipEmptyLiveSet => "skip_empty_live_set",
        }
    }
}

/// Why an instance is to be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DoomReason {
    /// No live Proxy owns it.
    Orphan,
    /// Its owner's status names another instance, which is kept.
    Duplicate {
        /// The instance the owner's status names.
        kept: ProviderId,
    },
}

/// An instance the plan deletes (or defers past the cap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doomed {
    /// The instance.
    pub id: ProviderId,
    /// Its owner UID.
    pub owner_uid: OwnerUid,
    /// Why.
    pub why: DoomReason,
    /// Its age at planning time.
    pub age: Duration,
}

/// Why a listed instance that is not its owner's current one is spared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpareReason {
    /// Younger than the minimum age.
    TooYoung,
    /// No creation time recorded (age unknown).
    UnknownAge,
    /// It does not carry this cluster's tag.
    OtherCluster,
    /// Listed by one provider entry with the ID of another.
    WrongProvider,
    /// Its owner's status names no instance yet, or one that does not
    /// parse.
    OwnerUnsettled,
}

/// A listed instance the plan leaves alone although it is not claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spared {
    /// The instance.
    pub id: ProviderId,
    /// Why.
    pub why: SpareReason,
}

/// The round's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcPlan {
    /// Sweep or skip.
    pub verdict: GcVerdict,
    /// To delete this round, oldest first (empty unless the verdict is
    /// [`GcVerdict::Sweep`]). Re-check leadership before each.
    pub deletes: Vec<Doomed>,
    /// Due, but past the round's cap (left for later rounds).
    pub deferred: Vec<Doomed>,
    /// Unclaimed instances left alone, with the reason.
    pub spared: Vec<Spared>,
    /// Listed instances claimed by their owner's status.
    pub claimed: usize,
}

impl GcPlan {
    fn skip(verdict: GcVerdict) -> GcPlan {
        GcPlan {
            verdict,
            deletes: Vec::new(),
            deferred: Vec::new(),
            spared: Vec::new(),
            claimed: 0,
        }
    }
}

/// Plans one GC round. Pure: the caller lists, then deletes what
/// [`GcPlan::deletes`] says.
pub fn plan(
    live: LiveSet<'_>,
    listings: &[Listing],
    cluster: &ClusterIdentity,
    policy: &GcPolicy,
    now: SystemTime,
) -> GcPlan {
    let LiveSet::Complete(live) = live else {
        return GcPlan::skip(GcVerdict::SkipPartialLiveSet);
    };
    let failed: Vec<Identifier> = listings
        .iter()
        .filter(|l| l.result.is_err())
        .map(|l| l.provider.clone())
        .collect();
    if !failed.is_empty() {
        return GcPlan::skip(GcVerdict::SkipListingFailed { providers: failed });
    }
    let listed = listings.iter().filter_map(|l| {
        l.result
            .as_ref()
            .ok()
            .map(|instances| (&l.provider, instances))
    });
    if live.is_empty() && listed.clone().any(|(_, instances)| !instances.is_empty()) {
        return GcPlan::skip(GcVerdict::SkipEmptyLiveSet);
    }

    let owners: BTreeMap<&str, &Named> = live.iter().map(|p| (p.uid.as_str(), &p.named)).collect();
    let mut plan = GcPlan::skip(GcVerdict::Sweep);
    let mut due = Vec::new();
    let mut seen = BTreeSet::new();
    for (provider, instance) in listed.flat_map(|(p, is)| is.iter().map(move |i| (p, i))) {
        if !seen.insert(&instance.id) {
            continue;
        }
        let spare = |why| Spared {
            id: instance.id.clone(),
            why,
        };
        if !cluster.marks(&instance.tags) {
            plan.spared.push(spare(SpareReason::OtherCluster));
            continue;
        }
        if instance.id.provider() != provider {
            plan.spared.push(spare(SpareReason::WrongProvider));
            continue;
        }
        let why = match owners.get(instance.owner_uid.as_str()) {
            None => DoomReason::Orphan,
            Some(Named::Id(kept)) if *kept == instance.id => {
                plan.claimed += 1;
                continue;
            }
            Some(Named::Id(kept)) => DoomReason::Duplicate { kept: kept.clone() },
            Some(Named::Nothing | Named::Unreadable) => {
                plan.spared.push(spare(SpareReason::OwnerUnsettled));
                continue;
            }
        };
        let Some(created) = instance.created_at else {
            plan.spared.push(spare(SpareReason::UnknownAge));
            continue;
        };
        // A creation time in the future (clock skew) is age zero: too young.
        let age = now.duration_since(created).unwrap_or(Duration::ZERO);
        if age < policy.min_age {
            plan.spared.push(spare(SpareReason::TooYoung));
            continue;
        }
        due.push(Doomed {
            id: instance.id.clone(),
            owner_uid: instance.owner_uid.clone(),
            why,
            age,
        });
    }
    due.sort_by(|a, b| b.age.cmp(&a.age).then_with(|| a.id.cmp(&b.id)));
    let cut = due.len().min(policy.max_deletes);
    plan.deferred = due.split_off(cut);
    plan.deletes = due;
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::{ErrorClass, Tags};
    use std::time::UNIX_EPOCH;

    const NOW: u64 = 1_750_000_000;
    const HOUR: u64 = 3600;

    fn cluster(name: &str) -> ClusterIdentity {
        ClusterIdentity::parse(name).unwrap()
    }

    fn id(entry: &str, n: u32) -> ProviderId {
        ProviderId::parse(&format!("kvm2://{entry}/host1/ep-{n}")).unwrap()
    }

    /// An instance of `entry` owned by `owner`, `age` seconds old, tagged
    /// for `cluster`.
    fn listed(entry: &str, n: u32, owner: &str, age: u64, cluster_name: &str) -> ListedInstance {
        let mut tags = Tags::new();
        let tag = cluster(cluster_name).tag();
        tags.insert(tag.key, tag.value);
        ListedInstance::new(
            id(entry, n),
            OwnerUid::parse(owner).unwrap(),
            tags,
            Some(UNIX_EPOCH + Duration::from_secs(NOW - age)),
        )
    }

    fn ok(entry: &str, instances: Vec<ListedInstance>) -> Listing {
        Listing {
            provider: Identifier::parse(entry).unwrap(),
            result: Ok(instances),
        }
    }

    fn run(live: &[LiveProxy], listings: &[Listing]) -> GcPlan {
        run_as("cluster-a", live, listings, &GcPolicy::default())
    }

    fn run_as(c: &str, live: &[LiveProxy], listings: &[Listing], policy: &GcPolicy) -> GcPlan {
        plan(
            LiveSet::Complete(live),
            listings,
            &cluster(c),
            policy,
            UNIX_EPOCH + Duration::from_secs(NOW),
        )
    }

    fn deleted(p: &GcPlan) -> Vec<String> {
        p.deletes.iter().map(|d| d.id.to_string()).collect()
    }

    fn live(uid: &str, id: Option<ProviderId>) -> LiveProxy {
        LiveProxy::new(uid, id.map(|i| i.to_string()).as_deref())
    }

    #[test]
    fn orphans_older_than_min_age_are_deleted_claimed_ones_kept() {
        let p = run(
            &[live("u1", Some(id("e", 1)))],
            &[ok(
                "e",
                vec![
                    listed("e", 1, "u1", HOUR, "cluster-a"),
                    listed("e", 2, "gone", HOUR, "cluster-a"),
                ],
            )],
        );
        assert_eq!(p.verdict, GcVerdict::Sweep);
        assert_eq!(deleted(&p), ["kvm2://e/host1/ep-2"]);
        assert_eq!(p.deletes[0].why, DoomReason::Orphan);
        assert_eq!(p.claimed, 1);
    }

    #[test]
    fn duplicates_are_deleted_keeping_the_one_the_status_names() {
        let p = run(
            &[live("u1", Some(id("e", 2)))],
            &[ok(
                "e",
                vec![
                    listed("e", 1, "u1", HOUR, "cluster-a"),
                    listed("e", 2, "u1", HOUR, "cluster-a"),
                    listed("e", 3, "u1", 2 * HOUR, "cluster-a"),
                ],
            )],
        );
        assert_eq!(deleted(&p), ["kvm2://e/host1/ep-3", "kvm2://e/host1/ep-1"]);
        assert_eq!(p.deletes[0].why, DoomReason::Duplicate { kept: id("e", 2) });
        assert_eq!(p.claimed, 1);
    }

    #[test]
    fn an_owner_without_a_settled_status_keeps_all_its_instances() {
        for status in [None, Some("not a provider id")] {
            let p = run(
                &[LiveProxy::new("u1", status)],
                &[ok(
                    "e",
                    vec![
                        listed("e", 1, "u1", HOUR, "cluster-a"),
                        listed("e", 2, "u1", HOUR, "cluster-a"),
                    ],
                )],
            );
            assert!(p.deletes.is_empty(), "{status:?}");
            assert!(
                p.spared
                    .iter()
                    .all(|s| s.why == SpareReason::OwnerUnsettled)
            );
            assert_eq!(p.spared.len(), 2);
        }
    }

    #[test]
    fn a_partial_live_set_skips_the_round() {
        let p = plan(
            LiveSet::Partial,
            &[ok("e", vec![listed("e", 2, "gone", HOUR, "cluster-a")])],
            &cluster("cluster-a"),
            &GcPolicy::default(),
            UNIX_EPOCH + Duration::from_secs(NOW),
        );
        assert_eq!(p.verdict, GcVerdict::SkipPartialLiveSet);
        assert!(p.deletes.is_empty());
    }

    #[test]
    fn any_failed_listing_skips_the_whole_round() {
        let p = run(
            &[live("u1", Some(id("a", 1)))],
            &[
                ok("a", vec![listed("a", 2, "gone", HOUR, "cluster-a")]),
                Listing {
                    provider: Identifier::parse("b").unwrap(),
                    result: Err(ProviderError::new(ErrorClass::Transient, "host2 down")),
                },
            ],
        );
        assert_eq!(
            p.verdict,
            GcVerdict::SkipListingFailed {
                providers: vec![Identifier::parse("b").unwrap()]
            }
        );
        assert!(p.deletes.is_empty() && p.deferred.is_empty());
    }

    #[test]
    fn an_empty_live_set_with_listed_instances_deletes_nothing() {
        let p = run(
            &[],
            &[ok("e", vec![listed("e", 1, "u1", HOUR, "cluster-a")])],
        );
        assert_eq!(p.verdict, GcVerdict::SkipEmptyLiveSet);
        assert!(p.deletes.is_empty());
        // Empty and empty is a quiet, complete round.
        let p = run(&[], &[ok("e", vec![])]);
        assert_eq!(p.verdict, GcVerdict::Sweep);
    }

    #[test]
    fn two_clusters_sharing_an_entry_never_sweep_each_other() {
        // Both clusters' instances on one entry; a provider that ignored the
        // tag filter returns all of them to each cluster.
        let all = || {
            vec![
                listed("e", 1, "a-uid", HOUR, "cluster-a"),
                listed("e", 2, "b-uid", HOUR, "cluster-b"),
                listed("e", 3, "a-gone", HOUR, "cluster-a"),
                listed("e", 4, "b-gone", HOUR, "cluster-b"),
            ]
        };
        let a = run_as(
            "cluster-a",
            &[live("a-uid", Some(id("e", 1)))],
            &[ok("e", all())],
            &GcPolicy::default(),
        );
        assert_eq!(deleted(&a), ["kvm2://e/host1/ep-3"]);
        let b = run_as(
            "cluster-b",
            &[live("b-uid", Some(id("e", 2)))],
            &[ok("e", all())],
            &GcPolicy::default(),
        );
        assert_eq!(deleted(&b), ["kvm2://e/host1/ep-4"]);
        assert!(
            a.spared
                .iter()
                .filter(|s| s.why == SpareReason::OtherCluster)
                .count()
                == 2
        );
        // An instance without any cluster tag (made before tags) is spared.
        let mut untagged = listed("e", 5, "gone", HOUR, "cluster-a");
        untagged.tags.clear();
        let p = run(&[live("x", None)], &[ok("e", vec![untagged])]);
        assert_eq!(p.spared[0].why, SpareReason::OtherCluster);
        assert!(p.deletes.is_empty());
    }

    #[test]
    fn min_age_and_unknown_age_spare() {
        let mut no_time = listed("e", 3, "gone", HOUR, "cluster-a");
        no_time.created_at = None;
        let mut future = listed("e", 4, "gone", 0, "cluster-a");
        future.created_at = Some(UNIX_EPOCH + Duration::from_secs(NOW + HOUR));
        let p = run(
            &[live("u1", None)],
            &[ok(
                "e",
                vec![
                    listed("e", 1, "gone", 599, "cluster-a"),
                    listed("e", 2, "gone", 600, "cluster-a"),
                    no_time,
                    future,
                ],
            )],
        );
        assert_eq!(deleted(&p), ["kvm2://e/host1/ep-2"]);
        let why: Vec<_> = p.spared.iter().map(|s| s.why).collect();
        assert_eq!(
            why,
            [
                SpareReason::TooYoung,
                SpareReason::UnknownAge,
                SpareReason::TooYoung
            ]
        );
    }

    #[test]
    fn the_cap_takes_the_oldest_and_defers_the_rest() {
        let instances = (1..=5)
            .map(|n| listed("e", n, "gone", HOUR * u64::from(n), "cluster-a"))
            .collect();
        let policy = GcPolicy {
            max_deletes: 2,
            ..GcPolicy::default()
        };
        let p = run_as(
            "cluster-a",
            &[live("u", None)],
            &[ok("e", instances)],
            &policy,
        );
        assert_eq!(deleted(&p), ["kvm2://e/host1/ep-5", "kvm2://e/host1/ep-4"]);
        assert_eq!(p.deferred.len(), 3);
        assert_eq!(p.deletes[0].age, Duration::from_secs(5 * HOUR));
    }

    #[test]
    fn an_instance_listed_under_another_entry_is_spared_and_repeats_count_once() {
        let p = run(
            &[live("u", None)],
            &[ok(
                "a",
                vec![
                    listed("b", 1, "gone", HOUR, "cluster-a"),
                    listed("a", 2, "gone", HOUR, "cluster-a"),
                    listed("a", 2, "gone", HOUR, "cluster-a"),
                ],
            )],
        );
        assert_eq!(p.spared[0].why, SpareReason::WrongProvider);
        assert_eq!(deleted(&p), ["kvm2://a/host1/ep-2"]);
    }

    #[test]
    fn every_verdict_has_one_of_the_words() {
        let all = [
            GcVerdict::Sweep,
            GcVerdict::SkipPartialLiveSet,
            GcVerdict::SkipListingFailed { providers: vec![] },
            GcVerdict::SkipEmptyLiveSet,
        ];
        let words: Vec<&str> = all.iter().map(GcVerdict::as_str).collect();
        assert_eq!(words, GcVerdict::WORDS);
    }
}
