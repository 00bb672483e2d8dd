//! Leases for consumers: a consumer asks for a healthy proxy no other
//! consumer holds, gets it for a TTL it renews, and releases it. This
//! module is the pure part: requests, the stored record, which proxy to
//! grant, and whether a renewal stands.
//!
//! ```text
//! POST   /leases?namespace=team-a&ttl=60      ─▶ 201 {"id":…,"proxy":{…},"ttlSeconds":60,"expiresAt":…}
//!                                              ─▶ 409 {"reason":"NoneFree",…}
//! PUT    /leases/team-a/egress-1/<id>?ttl=60  ─▶ 200 (same body, new expiresAt)
//!                                              ─▶ 410 {"reason":"ProxyUnhealthy"|"ProxyGone"|"Expired"|"Lost",…}
//! DELETE /leases/team-a/egress-1/<id>         ─▶ 204, or 410 with why it had ended
//! ```
//!
//! **Where a lease lives.** One `coordination.k8s.io` Lease per leased
//! Proxy, in the operator's own namespace (tenants cannot touch it), named
//! [`lease_name`] (a digest of the Proxy's namespace and name, so it fits
//! any name), labelled [`LABEL`], annotated with the Proxy and its UID. The
//! Lease's `holderIdentity` is the consumer's lease [`LeaseId`]; the
//! authenticated user who took it is annotated beside it ([`USER_ANNOTATION`])
//! and only that user renews or releases it. Every write is conditional
//! (a create, or an update carrying the resourceVersion read), so of two
//! consumers or two replicas racing for one proxy exactly one wins; the
//! loser tries the next candidate. State is in the API server only: leases
//! survive an operator restart and a leader change.
//!
//! **Ending.** A lease ends when its TTL passes without a renewal (no write:
//! [`Record::is_live`] is computed), when it is released, or when its
//! Proxy turns unhealthy or is deleted (the operator writes the reason into
//! the record, [`ENDED_ANNOTATION`]); the holder learns which on its next
//! renewal (410 and the [`Ended`] reason) and asks again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use provider_api::Identifier;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::discovery::DiscoveredProxy;
use crate::error::{Error, quoted};

/// The shortest TTL a consumer may ask for.
pub const MIN_TTL: Duration = Duration::from_secs(5);
/// The longest TTL a consumer may ask for.
pub const MAX_TTL: Duration = Duration::from_secs(3600);
/// The TTL of a request that names none.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

/// The label every consumer Lease carries (value `"true"`); the operator
/// watches only these.
pub const LABEL: &str = "egress-proxies.io/consumer-lease";
/// The leased Proxy, `namespace/name`.
pub const PROXY_ANNOTATION: &str = "egress-proxies.io/proxy";
/// The leased Proxy's UID (a Proxy deleted and made again is another).
pub const PROXY_UID_ANNOTATION: &str = "egress-proxies.io/proxy-uid";
/// The user who holds the lease (the one allowed to renew or release it).
pub const USER_ANNOTATION: &str = "egress-proxies.io/holder-user";
/// Why the last lease ended early, as `<lease id> <reason>` (read by that
/// lease's next renewal).
pub const ENDED_ANNOTATION: &str = "egress-proxies.io/ended";

/// The Lease that records leases of the Proxy `namespace/name`:
/// `consumer-` and 32 hex digits of the SHA-256 of `namespace/name` (a
/// valid name for any Proxy, unique in practice; the annotation is checked
/// on every read, so a collision reads as busy, never as another's lease).
pub fn lease_name(namespace: &str, proxy: &str) -> String {
    let digest = Sha256::digest(format!("{namespace}/{proxy}").as_bytes());
    let mut name = String::from("consumer-");
    for b in digest.iter().take(16) {
        name.push_str(&format!("{b:02x}"));
    }
    name
}

/// A lease's identity, handed to its holder: 32 lowercase hex digits (128
/// random bits).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(String);

impl LeaseId {
    /// The id of 16 random bytes.
    pub fn from_random(bytes: [u8; 16]) -> LeaseId {
        LeaseId(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// `text` if it is 32 lowercase hex digits.
    pub fn parse(text: &str) -> Option<LeaseId> {
        let ok = text.len() == 32
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| LeaseId(text.to_owned()))
    }

    /// Its text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LeaseId({})", self.0)
    }
}

/// The TTL of a `ttl=<seconds>` parameter.
///
/// # Errors
/// [`Error::InvalidQuery`] unless it is whole seconds within
/// [`MIN_TTL`]..=[`MAX_TTL`].
pub fn parse_ttl(value: &str) -> Result<Duration, Error> {
    let secs: u64 = value.parse().map_err(|_| Error::InvalidQuery {
        reason: format!("ttl {:?} is not whole seconds", quoted(value)),
    })?;
    let ttl = Duration::from_secs(secs);
    if !(MIN_TTL..=MAX_TTL).contains(&ttl) {
        return Err(Error::InvalidQuery {
            reason: format!(
                "ttl {secs} is outside {}..={} seconds",
                MIN_TTL.as_secs(),
                MAX_TTL.as_secs()
            ),
        });
    }
    Ok(ttl)
}

/// The parameters of a grant (`POST /leases?namespace=…&ttl=…`) or, without
/// a namespace, of a renewal (`PUT …?ttl=…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseQuery {
    /// The namespace to lease in (required for a grant).
    pub namespace: Option<Identifier>,
    /// The TTL asked for ([`DEFAULT_TTL`] when not given).
    pub ttl: Duration,
}

impl LeaseQuery {
    /// Parses a URL query string (without the `?`): `namespace=<name>` and
    /// `ttl=<seconds>`, each at most once; empty parts are ignored.
    ///
    /// # Errors
    /// [`Error::InvalidQuery`] for an unknown or repeated parameter, one
    /// without `=`, a namespace that is not a DNS label, or a bad TTL.
    pub fn parse(query: &str) -> Result<LeaseQuery, Error> {
        let invalid = |reason: String| Error::InvalidQuery { reason };
        let mut namespace = None;
        let mut ttl = None;
        for part in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| invalid(format!("{:?} has no value", quoted(part))))?;
            match key {
                "namespace" if namespace.is_none() => {
                    namespace = Some(Identifier::parse(value).map_err(|e| {
                        invalid(format!("namespace {:?} {}", quoted(value), e.rule()))
                    })?);
                }
                "ttl" if ttl.is_none() => ttl = Some(parse_ttl(value)?),
                "namespace" | "ttl" => {
                    return Err(invalid(format!("{key} is given more than once")));
                }
                _ => {
                    return Err(invalid(format!(
                        "unknown parameter {:?} (known: namespace, ttl)",
                        quoted(key)
                    )));
                }
            }
        }
        Ok(LeaseQuery {
            namespace,
            ttl: ttl.unwrap_or(DEFAULT_TTL),
        })
    }
}

/// A lease named by a request's path: `/leases/<namespace>/<proxy>/<id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasePath {
    /// The Proxy's namespace.
    pub namespace: String,
    /// The Proxy's name.
    pub proxy: String,
    /// The lease.
    pub id: LeaseId,
}

impl LeasePath {
    /// The lease `path` names, if it has that form (the namespace a DNS
    /// label, the Proxy a DNS subdomain of at most 253 characters).
    pub fn parse(path: &str) -> Option<LeasePath> {
        let rest = path.strip_prefix("/leases/")?;
        let mut parts = rest.split('/');
        let (namespace, proxy, id) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || Identifier::parse(namespace).is_err() {
            return None;
        }
        let subdomain = !proxy.is_empty()
            && proxy.len() <= 253
            && proxy.split('.').all(|l| Identifier::parse(l).is_ok());
        subdomain.then_some(())?;
        Some(LeasePath {
            namespace: namespace.to_owned(),
            proxy: proxy.to_owned(),
            id: LeaseId::parse(id)?,
        })
    }

    /// The path of a lease.
    pub fn render(namespace: &str, proxy: &str, id: &LeaseId) -> String {
        format!("/leases/{namespace}/{proxy}/{}", id.as_str())
    }
}

/// Why a lease ended before its holder released it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ended {
    /// Its proxy is no longer healthy.
    ProxyUnhealthy,
    /// Its Proxy was deleted (or deleted and made again).
    ProxyGone,
    /// Its TTL passed without a renewal.
    Expired,
    /// Someone else holds the proxy now, or the lease was released.
    Lost,
}

impl Ended {
    /// Its word in responses, the record and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::ProxyUnhealthy => "ProxyUnhealthy",
            Ended::ProxyGone => "ProxyGone",
            Ended::Expired => "Expired",
            Ended::Lost => "Lost",
        }
    }

    /// The reason a word names.
    pub fn parse(word: &str) -> Option<Ended> {
        [
            Ended::ProxyUnhealthy,
            Ended::ProxyGone,
            Ended::Expired,
            Ended::Lost,
        ]
        .into_iter()
        .find(|e| e.as_str() == word)
    }

    /// What the holder reads.
    pub fn message(self) -> &'static str {
        match self {
            Ended::ProxyUnhealthy => "the leased proxy is no longer healthy; ask for another",
            Ended::ProxyGone => "the leased Proxy was deleted; ask for another",
            Ended::Expired => "the lease was not renewed within its TTL; ask again",
            Ended::Lost => "this lease is not held (released, or taken after it ended); ask again",
        }
    }
}

/// What a stored consumer Lease says, read off the object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// `namespace/name` of the Proxy it is for.
    pub proxy: Option<String>,
    /// That Proxy's UID when it was leased.
    pub proxy_uid: Option<String>,
    /// The lease held (`holderIdentity`), if any.
    pub holder: Option<LeaseId>,
    /// The user holding it.
    pub user: Option<String>,
    /// When it was last granted or renewed, in milliseconds since the Unix
    /// epoch.
    pub renewed_ms: Option<i64>,
    /// Its TTL.
    pub ttl_secs: Option<i32>,
    /// Why the last lease ended early: the lease and the reason.
    pub ended: Option<(LeaseId, Ended)>,
}

impl Record {
    /// Whether a lease is held and its TTL has not passed at `now_ms`.
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.holder.is_some() && self.within_ttl(now_ms)
    }

    /// Whether the last grant or renewal's TTL has not passed at `now_ms`
    /// (held or not).
    pub fn within_ttl(&self, now_ms: i64) -> bool {
        match (self.renewed_ms, self.ttl_secs) {
            (Some(renewed), Some(ttl)) => {
                now_ms < renewed.saturating_add(i64::from(ttl).saturating_mul(1000))
            }
            _ => false,
        }
    }

    /// The `ended` annotation's value for `id` ending for `why`.
    pub fn ended_annotation(id: &LeaseId, why: Ended) -> String {
        format!("{} {}", id.as_str(), why.as_str())
    }

    /// Reads an `ended` annotation's value.
    pub fn parse_ended(value: &str) -> Option<(LeaseId, Ended)> {
        let (id, why) = value.split_once(' ')?;
        Some((LeaseId::parse(id)?, Ended::parse(why)?))
    }
}

/// The proxy a renewal is about, as the watch cache shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyNow<'a> {
    /// Its UID.
    pub uid: &'a str,
    /// Whether discovery lists it as healthy (and dialable).
    pub healthy: bool,
}

/// What a renewal (or release) of `id` by `user` does, given the stored
/// record and the proxy now (`None`: not in the watch cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// The lease stands: renew (or release) it.
    Stands,
    /// It ended for this reason; `write` says whether the record must be
    /// updated to say so (the proxy's state ends it now).
    Ended {
        /// Why.
        why: Ended,
        /// Record the end (drop the holder) first.
        write: bool,
    },
}

/// Judges a renewal or release of `id` by `user` at `now_ms`.
pub fn judge(
    record: Option<&Record>,
    key: &str,
    id: &LeaseId,
    user: &str,
    proxy: Option<ProxyNow<'_>>,
    now_ms: i64,
) -> Renewal {
    let ended = |why| Renewal::Ended { why, write: false };
    let Some(record) = record.filter(|r| r.proxy.as_deref() == Some(key)) else {
        return ended(Ended::Lost);
    };
    if record.holder.as_ref() != Some(id) || record.user.as_deref() != Some(user) {
        return match &record.ended {
            Some((ended_id, why)) if ended_id == id => ended(*why),
            _ => ended(Ended::Lost),
        };
    }
    if !record.is_live(now_ms) {
        return ended(Ended::Expired);
    }
    let why = match proxy {
        None => Ended::ProxyGone,
        Some(p) if record.proxy_uid.as_deref() != Some(p.uid) => Ended::ProxyGone,
        Some(p) if !p.healthy => Ended::ProxyUnhealthy,
        Some(_) => return Renewal::Stands,
    };
    Renewal::Ended { why, write: true }
}

/// What the sweeper does with a stored record, given its proxy now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Nothing.
    Keep,
    /// End the live lease: drop the holder, record why.
    End(Ended),
    /// Delete the record: its Proxy is gone and no holder has yet to learn
    /// why its lease ended.
    Delete,
}

/// The sweeper's verdict on `record` at `now_ms`. A live lease of a Proxy
/// that is gone or unhealthy is ended with the reason; the record of a
/// gone Proxy is deleted once no lease on it is live and an early end's
/// reason has been kept for the rest of that lease's TTL (so its holder
/// learns it on its next renewal).
pub fn sweep(record: &Record, proxy: Option<ProxyNow<'_>>, now_ms: i64) -> Sweep {
    let gone = match proxy {
        None => true,
        Some(p) => record.proxy_uid.as_deref() != Some(p.uid),
    };
    let live = record.is_live(now_ms);
    match proxy {
        _ if gone && live => Sweep::End(Ended::ProxyGone),
        _ if gone && record.ended.is_some() && record.within_ttl(now_ms) => Sweep::Keep,
        _ if gone => Sweep::Delete,
        Some(p) if !p.healthy && live => Sweep::End(Ended::ProxyUnhealthy),
        _ => Sweep::Keep,
    }
}

/// Where a proxy runs, for spreading leases: its provider entry and host
/// (a proxy without a host is a host of its own).
fn spread_key(p: &DiscoveredProxy) -> (String, String) {
    match &p.host {
        Some(h) => (p.provider.clone(), h.clone()),
        None => (p.provider.clone(), format!("{}/{}", p.namespace, p.name)),
    }
}

/// The proxies a grant may take, best first: healthy, dialable, in the
/// asked namespace and not held by a live lease (`held`: `namespace/name`
/// keys). Proxies on hosts with fewer live leases come first (`leased`:
/// every leased proxy, any namespace, so a host's load counts whoever
/// holds it); ties are broken by a hash of `seed` and the name, so racing
/// requests with different seeds start at different proxies.
pub fn candidates(
    proxies: impl IntoIterator<Item = DiscoveredProxy>,
    namespace: &str,
    held: &BTreeSet<String>,
    seed: u64,
) -> Vec<DiscoveredProxy> {
    let all: Vec<DiscoveredProxy> = proxies.into_iter().collect();
    let mut load: BTreeMap<(String, String), usize> = BTreeMap::new();
    for p in &all {
        if held.contains(&format!("{}/{}", p.namespace, p.name)) {
            *load.entry(spread_key(p)).or_default() += 1;
        }
    }
    let mut free: Vec<(usize, u64, DiscoveredProxy)> = all
        .into_iter()
        .filter(|p| {
            p.namespace == namespace
                && p.healthy
                && p.address.is_some()
                && !held.contains(&format!("{}/{}", p.namespace, p.name))
        })
        .map(|p| {
            let on_host = load.get(&spread_key(&p)).copied().unwrap_or(0);
            (on_host, tie_break(seed, &p.name), p)
        })
        .collect();
    free.sort_by_key(|c| (c.0, c.1));
    free.into_iter().map(|(_, _, p)| p).collect()
}

fn tie_break(seed: u64, name: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update(name.as_bytes());
    let d = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    u64::from_le_bytes(first)
}

/// A granted or renewed lease, as the consumer receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseGrant {
    /// The lease (renew and release name it).
    pub id: String,
    /// Where to renew (`PUT`) and release (`DELETE`) it.
    pub path: String,
    /// The proxy leased.
    pub proxy: DiscoveredProxy,
    /// Its TTL in seconds.
    pub ttl_seconds: u64,
    /// When it ends unless renewed (RFC 3339).
    pub expires_at: String,
}

/// An answer that is not a lease: why, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRefusal {
    /// A word to branch on: `NoneFree`, an [`Ended`] reason, `BadRequest`,
    /// `Unavailable`.
    pub reason: String,
    /// What happened, for people.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> LeaseId {
        LeaseId::from_random([n; 16])
    }

    fn proxy(ns: &str, name: &str, host: Option<&str>, healthy: bool) -> DiscoveredProxy {
        DiscoveredProxy {
            namespace: ns.into(),
            name: name.into(),
            phase: None,
            provider: "kvm2-home".into(),
            host: host.map(Into::into),
            ip: Some("10.0.0.7".parse().unwrap()),
            port: Some(3128),
            address: Some("10.0.0.7:3128".into()),
            healthy,
            ready: true,
        }
    }

    fn live(holder: &LeaseId, user: &str) -> Record {
        Record {
            proxy: Some("a/p1".into()),
            proxy_uid: Some("u1".into()),
            holder: Some(holder.clone()),
            user: Some(user.into()),
            renewed_ms: Some(1_000_000),
            ttl_secs: Some(60),
            ended: None,
        }
    }

    #[test]
    fn lease_names_are_valid_and_distinct() {
        let a = lease_name("a", "p1");
        let long = "x".repeat(253);
        let b = lease_name("team-b", &long);
        assert_eq!(a.len(), "consumer-".len() + 32);
        assert_eq!(b.len(), a.len());
        assert_ne!(a, lease_name("a", "p2"));
        assert_ne!(lease_name("a-b", "c"), lease_name("a", "b-c"));
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        );
    }

    #[test]
    fn lease_ids_round_trip_and_reject_other_text() {
        let i = id(0xab);
        assert_eq!(i.as_str(), "ab".repeat(16));
        assert_eq!(LeaseId::parse(i.as_str()), Some(i));
        for bad in ["", "AB", &"A".repeat(32), &"g".repeat(32), &"a".repeat(33)] {
            assert_eq!(LeaseId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn query_table() {
        let ok = |q: &str| LeaseQuery::parse(q).unwrap();
        assert_eq!(ok("").ttl, DEFAULT_TTL);
        assert_eq!(ok("").namespace, None);
        let q = ok("namespace=team-a&ttl=5");
        assert_eq!(q.namespace.unwrap().as_str(), "team-a");
        assert_eq!(q.ttl, Duration::from_secs(5));
        assert_eq!(ok("ttl=3600").ttl, MAX_TTL);
        for bad in [
            "ttl=4",
            "ttl=3601",
            "ttl=1.5",
            "ttl=-1",
            "ttl=",
            "ttl=1&ttl=2",
            "namespace=A",
            "namespace=a&namespace=b",
            "healthy=true",
            "ttl",
        ] {
            let e = LeaseQuery::parse(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidQuery { .. }), "{bad:?}: {e}");
        }
    }

    #[test]
    fn path_table() {
        let good = format!("/leases/team-a/egress.one/{}", id(1).as_str());
        let p = LeasePath::parse(&good).unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.proxy.as_str()),
            ("team-a", "egress.one")
        );
        assert_eq!(LeasePath::render("team-a", "egress.one", &p.id), good);
        let i = id(1);
        for bad in [
            "/leases".to_owned(),
            "/leases/".to_owned(),
            "/leases/team-a/egress".to_owned(),
            format!("/leases/team-a/egress/{}/x", i.as_str()),
            format!("/leases/Team/egress/{}", i.as_str()),
            format!("/leases/team-a//{}", i.as_str()),
            format!("/leases/team-a/eg..x/{}", i.as_str()),
            "/leases/team-a/egress/nothex".to_owned(),
            format!("/leasesx/team-a/egress/{}", i.as_str()),
        ] {
            assert_eq!(LeasePath::parse(&bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ended_words_round_trip() {
        for e in [
            Ended::ProxyUnhealthy,
            Ended::ProxyGone,
            Ended::Expired,
            Ended::Lost,
        ] {
            assert_eq!(Ended::parse(e.as_str()), Some(e));
            let text = Record::ended_annotation(&id(3), e);
            assert_eq!(Record::parse_ended(&text), Some((id(3), e)));
        }
        assert_eq!(Record::parse_ended("x Lost"), None);
        assert_eq!(Ended::parse("lost"), None);
    }

    #[test]
    fn liveness_follows_the_ttl() {
        let r = live(&id(1), "u");
        assert!(r.is_live(1_000_000));
        assert!(r.is_live(1_059_999));
        assert!(!r.is_live(1_060_000));
        let released = Record {
            holder: None,
            ..r.clone()
        };
        assert!(!released.is_live(1_000_000));
        let no_time = Record {
            renewed_ms: None,
            ..r
        };
        assert!(!no_time.is_live(1_000_000));
    }

    #[test]
    fn judge_table() {
        let me = id(1);
        let healthy = Some(ProxyNow {
            uid: "u1",
            healthy: true,
        });
        let sick = Some(ProxyNow {
            uid: "u1",
            healthy: false,
        });
        let remade = Some(ProxyNow {
            uid: "u2",
            healthy: true,
        });
        let r = live(&me, "alice");
        let stands = Renewal::Stands;
        let ended = |why| Renewal::Ended { why, write: false };
        let end_now = |why| Renewal::Ended { why, write: true };
        let mut taken = live(&id(2), "bob");
        taken.ended = Some((me.clone(), Ended::ProxyUnhealthy));
        let mut ended_record = r.clone();
        ended_record.holder = None;
        ended_record.ended = Some((me.clone(), Ended::ProxyGone));
        let t = 1_000_500;
        for (record, user, proxy, now, expected, case) in [
            (Some(&r), "alice", healthy, t, stands, "live and healthy"),
            (None, "alice", healthy, t, ended(Ended::Lost), "no record"),
            (
                Some(&r),
                "bob",
                healthy,
                t,
                ended(Ended::Lost),
                "another user",
            ),
            (
                Some(&r),
                "alice",
                healthy,
                1_060_000,
                ended(Ended::Expired),
                "expired",
            ),
            (
                Some(&r),
                "alice",
                sick,
                t,
                end_now(Ended::ProxyUnhealthy),
                "unhealthy",
            ),
            (
                Some(&r),
                "alice",
                None,
                t,
                end_now(Ended::ProxyGone),
                "deleted",
            ),
            (
                Some(&r),
                "alice",
                remade,
                t,
                end_now(Ended::ProxyGone),
                "made again",
            ),
            (
                Some(&taken),
                "alice",
                healthy,
                t,
                ended(Ended::ProxyUnhealthy),
                "taken after ending",
            ),
            (
                Some(&ended_record),
                "alice",
                healthy,
                t,
                ended(Ended::ProxyGone),
                "ended",
            ),
        ] {
            assert_eq!(
                judge(record, "a/p1", &me, user, proxy, now),
                expected,
                "{case}"
            );
        }
        assert_eq!(
            judge(Some(&r), "a/other", &me, "alice", healthy, t),
            ended(Ended::Lost),
            "a record for another proxy (digest collision)"
        );
    }

    #[test]
    fn sweep_table() {
        let r = live(&id(1), "alice");
        let now = |uid, healthy| Some(ProxyNow { uid, healthy });
        let t = 1_000_500;
        let ended = Record {
            holder: None,
            ended: Some((id(1), Ended::ProxyGone)),
            ..r.clone()
        };
        let released = Record {
            holder: None,
            ..r.clone()
        };
        for (record, proxy, at, expected, case) in [
            (&r, now("u1", true), t, Sweep::Keep, "live, healthy"),
            (
                &r,
                now("u1", false),
                t,
                Sweep::End(Ended::ProxyUnhealthy),
                "live, unhealthy",
            ),
            (
                &r,
                now("u1", false),
                2_000_000,
                Sweep::Keep,
                "expired, unhealthy",
            ),
            (
                &r,
                now("u2", true),
                t,
                Sweep::End(Ended::ProxyGone),
                "live, made again",
            ),
            (&r, None, t, Sweep::End(Ended::ProxyGone), "live, deleted"),
            (
                &ended,
                None,
                t,
                Sweep::Keep,
                "ended, its holder yet to learn",
            ),
            (
                &ended,
                None,
                2_000_000,
                Sweep::Delete,
                "ended, past its TTL",
            ),
            (&released, None, t, Sweep::Delete, "released, deleted"),
            (&r, None, 2_000_000, Sweep::Delete, "expired, deleted"),
            (
                &released,
                now("u1", true),
                t,
                Sweep::Keep,
                "released, healthy",
            ),
        ] {
            assert_eq!(sweep(record, proxy, at), expected, "{case}");
        }
    }

    #[test]
    fn candidates_skip_held_sick_and_foreign_and_spread_over_hosts() {
        let proxies = vec![
            proxy("a", "p1", Some("h1"), true),
            proxy("a", "p2", Some("h1"), true),
            proxy("a", "p3", Some("h2"), true),
            proxy("a", "sick", Some("h2"), false),
            proxy("b", "other", Some("h2"), true),
            proxy("b", "held-elsewhere", Some("h2"), true),
        ];
        let held = BTreeSet::from(["a/p1".to_owned(), "b/held-elsewhere".to_owned()]);
        // h1 and h2 carry one live lease each: p2 and p3 tie on load.
        let names = |seed| -> Vec<String> {
            candidates(proxies.clone(), "a", &held, seed)
                .into_iter()
                .map(|p| p.name)
                .collect()
        };
        for seed in 0..20 {
            let mut got = names(seed);
            got.sort();
            assert_eq!(got, ["p2", "p3"], "seed {seed}");
        }
        let firsts: BTreeSet<String> = (0..20).map(|s| names(s)[0].clone()).collect();
        assert_eq!(firsts.len(), 2, "seeds start at different proxies");
        // A second lease on h2: h1's p2 comes first whatever the seed.
        let held = BTreeSet::from([
            "a/p1".to_owned(),
            "b/held-elsewhere".to_owned(),
            "b/other".to_owned(),
        ]);
        for seed in 0..20 {
            let got = candidates(proxies.clone(), "a", &held, seed);
            assert_eq!(got[0].name, "p2", "seed {seed}");
        }
        let no_address = DiscoveredProxy {
            address: None,
            ..proxy("a", "p4", None, true)
        };
        assert!(candidates([no_address], "a", &BTreeSet::new(), 0).is_empty());
    }
}
