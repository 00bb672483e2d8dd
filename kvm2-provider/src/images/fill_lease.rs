//! The fill lease: how a base image fill in progress is visible to every
//! process sharing the pool (two operator replicas, an operator and a test
//! run), so none deletes another's upload and one image is downloaded once.
//!
//! A fill first creates the lease volume `base-<entry>.<key>.<fmt>.fill`.
//! libvirtd creates a volume name at most once (a second create of the same
//! name fails), so creating the lease is the lock; every process on the
//! host talks to the same daemon, which is the arbiter. The lease holds:
//!
//! ```text
//! kvm2-fill-lease 1
//! holder <16 hex digits, random per fill>
//! started <seconds since 1970, 20 digits>
//! heartbeat <seconds since 1970, 20 digits>
//! ```
//!
//! The holder rewrites it in place every [`LeaseTiming::heartbeat`] (same
//! length, so a rewrite is one small upload) while it fills, after reading
//! it back to check it still names the holder.
//!
//! **The holder fences itself.** A [`Fence`] records when the holder last
//! confirmed its lease. The fill stops writing — its upload source fails,
//! so the volume stream is aborted on the wire — as soon as the lease is
//! found gone or taken, or when no beat has been confirmed for
//! [`LeaseTiming::fence_after`] (half of `stale_after`). A process frozen
//! for longer fails its next read on waking, before another byte leaves it.
//!
//! So a fill is **provably abandoned** when its heartbeat is older than
//! [`LeaseTiming::stale_after`] ([`Lease::abandoned`]): by then its holder
//! has stopped writing for `stale_after - fence_after`, whatever happened to
//! it (killed, partitioned, frozen). Only then may another process sweep it
//! (the unmarked base, then the lease). Clocks of the processes sharing a
//! pool are assumed to agree to within `stale_after - fence_after` (1 min
//! by default). A killed holder's image is thus free again after about
//! `stale_after` (2 min), not after its whole fill budget.
//!
//! A lease that cannot be parsed (created but not yet written, or damaged)
//! is treated as live until the reader has seen it unreadable, unchanged,
//! for `stale_after` (by its own monotonic clock): a live holder would have
//! rewritten it many times over.
//!
//! Before its commit point (the marker) the holder re-reads the lease and
//! goes on only if it still names it: a fill whose lease was swept can
//! never publish.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// First line of every lease, with the format version.
pub const LEASE_MAGIC: &str = "kvm2-fill-lease 1";

/// Largest lease read; anything larger is not a lease.
pub const MAX_LEASE_LEN: usize = 256;

/// How leases are kept alive and judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseTiming {
    /// How often the holder rewrites its heartbeat (default 10 s).
    pub heartbeat: Duration,
    /// A heartbeat older than this is stale (default 2 min: many missed
    /// beats, and longer than a dead link takes to be noticed).
    pub stale_after: Duration,
    /// How often a process waiting on another's fill looks again
    /// (default 1 s).
    pub poll: Duration,
}

impl LeaseTiming {
    /// How long a holder goes on writing without a confirmed heartbeat:
    /// half of [`stale_after`](Self::stale_after), so that a lease others
    /// judge stale belongs to a fill that stopped writing long before.
    pub fn fence_after(&self) -> Duration {
        self.stale_after / 2
    }
}

impl Default for LeaseTiming {
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_secs(10),
            stale_after: Duration::from_secs(120),
            poll: Duration::from_secs(1),
        }
    }
}

/// A parsed lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The fill's random identity.
    pub holder: u64,
    /// When the fill started (seconds since 1970, the holder's clock).
    pub started: u64,
    /// The last heartbeat (seconds since 1970, the holder's clock).
    pub heartbeat: u64,
}

impl Lease {
    /// A new lease for `holder`, started and beating `now`.
    pub fn new(holder: u64, now: SystemTime) -> Self {
        let secs = unix_secs(now);
        Self {
            holder,
            started: secs,
            heartbeat: secs,
        }
    }

    /// This lease with its heartbeat at `now`.
    #[must_use]
    pub fn beat(self, now: SystemTime) -> Self {
        Self {
            heartbeat: unix_secs(now),
            ..self
        }
    }

    /// The lease's bytes; always [`RENDERED_LEN`] long, so a heartbeat
    /// overwrites the previous one exactly.
    pub fn render(&self) -> Vec<u8> {
        format!(
            "{LEASE_MAGIC}\nholder {:016x}\nstarted {:020}\nheartbeat {:020}\n",
            self.holder, self.started, self.heartbeat
        )
        .into_bytes()
    }

    /// Parses lease bytes; `None` for anything [`render`](Self::render)
    /// would not have written.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != RENDERED_LEN {
            return None;
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.strip_suffix('\n')?.split('\n');
        if lines.next()? != LEASE_MAGIC {
            return None;
        }
        let mut field =
            |name: &str| -> Option<&str> { lines.next()?.strip_prefix(name)?.strip_prefix(' ') };
        let holder = field("holder")?;
        let holder = (holder.len() == 16 && holder.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(holder, 16).ok())??;
        let number = |s: &str| {
            (s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
        };
        let started = number(field("started")?)?;
        let heartbeat = number(field("heartbeat")?)?;
        if lines.next().is_some() {
            return None;
        }
        Some(Self {
            holder,
            started,
            heartbeat,
        })
    }

    /// True when the fill is provably abandoned at `now` (see the
    /// [module docs](self)): its heartbeat is older than `stale_after`, so
    /// its holder, which fences itself at half that, has stopped writing.
    pub fn abandoned(&self, now: SystemTime, stale_after: Duration) -> bool {
        unix_secs(now).saturating_sub(self.heartbeat) > stale_after.as_secs()
    }

    /// Seconds since the last heartbeat at `now` (0 for one from the
    /// future), for log lines.
    pub fn heartbeat_age(&self, now: SystemTime) -> u64 {
        unix_secs(now).saturating_sub(self.heartbeat)
    }
}

/// The holder's side of a lease: when it last confirmed the lease as its
/// own, and whether it found it lost. Shared by the heartbeat and the
/// fill's upload source, which fails once [`check`](Self::check) does.
#[derive(Debug)]
pub struct Fence {
    /// `None` once the lease was found gone or taken.
    confirmed: std::sync::Mutex<Option<Instant>>,
    limit: Duration,
}

/// Why a fill stopped writing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Fenced {
    /// The lease was gone or named another holder at a heartbeat.
    #[error("the fill lease was lost (gone or taken by another fill)")]
    Lost,
    /// No heartbeat was confirmed for longer than the fence allows.
    #[error("no fill heartbeat confirmed for {0:?} (the fence is {1:?})")]
    Silent(Duration, Duration),
}

impl Fence {
    /// A fence for a lease just written at `at`, allowing `limit` without
    /// a confirmed beat.
    pub fn new(at: Instant, limit: Duration) -> Self {
        Self {
            confirmed: std::sync::Mutex::new(Some(at)),
            limit,
        }
    }

    /// Records a beat written at `at` and read back as ours.
    pub fn confirm(&self, at: Instant) {
        let mut confirmed = self.lock();
        if let Some(last) = confirmed.as_mut() {
            *last = (*last).max(at);
        }
    }

    /// Records that the lease is no longer ours; every later check fails.
    pub fn lose(&self) {
        *self.lock() = None;
    }

    /// Ok while the holder may write at `now`.
    ///
    /// # Errors
    /// [`Fenced`] once the lease was lost or the last confirmed beat is
    /// older than the limit.
    pub fn check(&self, now: Instant) -> Result<(), Fenced> {
        match *self.lock() {
            None => Err(Fenced::Lost),
            Some(at) => {
                let silent = now.saturating_duration_since(at);
                if silent > self.limit {
                    Err(Fenced::Silent(silent, self.limit))
                } else {
                    Ok(())
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        // The guarded value is a plain Option<Instant>, valid whatever a
        // panicking holder left: a poisoned lock is taken as it is.
        self.confirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The length of every rendered lease.
pub const RENDERED_LEN: usize = LEASE_MAGIC.len() + 1 + 7 + 16 + 1 + 8 + 20 + 1 + 10 + 20 + 1;

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_lease_round_trips_at_a_fixed_length() {
        let lease = Lease::new(0xdead_beef, at(1_000));
        let bytes = lease.render();
        assert_eq!(bytes.len(), RENDERED_LEN);
        assert_eq!(Lease::parse(&bytes), Some(lease));
        let beaten = lease.beat(at(u64::MAX / 2));
        assert_eq!(beaten.render().len(), RENDERED_LEN);
        assert_eq!(Lease::parse(&beaten.render()), Some(beaten));
        assert_eq!(beaten.started, 1_000);
    }

    #[test]
    fn anything_else_is_not_a_lease() {
        let good = Lease::new(1, at(5)).render();
        assert_eq!(Lease::parse(&[]), None);
        assert_eq!(Lease::parse(&[0; RENDERED_LEN]), None);
        let mut bad = good.clone();
        bad[0] = b'K';
        assert_eq!(Lease::parse(&bad), None);
        let text = String::from_utf8(good).unwrap();
        let swapped = text.replace("holder 0000000000000001", "holder 000000000000000g");
        assert_eq!(Lease::parse(swapped.as_bytes()), None);
        let signed = text.replace("started 0000", "started +000");
        assert_eq!(Lease::parse(signed.as_bytes()), None);
    }

    #[test]
    fn abandoned_is_a_heartbeat_older_than_the_staleness_window() {
        let stale = Duration::from_secs(120);
        let lease = Lease::new(7, at(10_000));
        // Fresh, and at the edge.
        assert!(!lease.abandoned(at(10_001), stale));
        assert!(!lease.abandoned(at(10_120), stale));
        // Stale: the holder fenced itself at 60 s.
        assert!(lease.abandoned(at(10_121), stale));
        // A long fill that keeps beating is never abandoned.
        let beating = lease.beat(at(12_800));
        assert!(!beating.abandoned(at(12_801), stale));
        assert_eq!(beating.heartbeat_age(at(12_810)), 10);
        // A heartbeat from the future is not stale.
        assert!(!lease.beat(at(99_999)).abandoned(at(20_000), stale));
        assert_eq!(lease.beat(at(99_999)).heartbeat_age(at(20_000)), 0);
    }

    #[test]
    fn the_fence_closes_well_before_others_judge_the_lease_stale() {
        let timing = LeaseTiming::default();
        assert!(timing.fence_after() < timing.stale_after);
        assert!(
            timing.fence_after() > timing.heartbeat * 3,
            "several beats may fail first"
        );
    }

    #[test]
    fn a_fence_fails_when_silent_too_long_or_lost() {
        let t0 = Instant::now();
        let limit = Duration::from_secs(60);
        let fence = Fence::new(t0, limit);
        assert_eq!(fence.check(t0 + limit), Ok(()));
        assert!(matches!(
            fence.check(t0 + limit + Duration::from_secs(1)),
            Err(Fenced::Silent(..))
        ));
        // A confirmed beat re-opens it; an older one never moves it back.
        fence.confirm(t0 + Duration::from_secs(50));
        fence.confirm(t0 + Duration::from_secs(10));
        assert_eq!(fence.check(t0 + Duration::from_secs(110)), Ok(()));
        assert!(fence.check(t0 + Duration::from_secs(111)).is_err());
        // Lost is for good.
        fence.lose();
        fence.confirm(t0 + Duration::from_secs(100));
        assert_eq!(
            fence.check(t0 + Duration::from_secs(100)),
            Err(Fenced::Lost)
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = Lease::parse(&b);
        }
    }
}
