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
//! length, so a rewrite is one small upload) while it fills. A fill is
//! **provably abandoned** only when both hold (see [`Lease::abandoned`]):
//! its heartbeat is older than [`LeaseTiming::stale_after`], *and* it
//! started longer ago than the fill budget — past its budget the holder's
//! own timeout has ended its fill, so nothing of it can still write.
//! Only then may another process sweep it (the unmarked base, then the
//! lease). Clocks of the processes sharing a pool are assumed to agree to
//! within `stale_after`.
//!
//! A lease that cannot be parsed (created but not yet written, or damaged)
//! is treated as live until the reader has seen it unreadable, unchanged,
//! for the fill budget plus `stale_after` (by its own monotonic clock).
//!
//! Before its commit point (the marker) the holder re-reads the lease and
//! goes on only if it still names it: a fill whose lease was swept can
//! never publish.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// [module docs](self)): heartbeat older than `stale_after` and started
    /// longer ago than `fill_budget`.
    pub fn abandoned(&self, now: SystemTime, stale_after: Duration, fill_budget: Duration) -> bool {
        let now = unix_secs(now);
        let older_than = |at: u64, d: Duration| now.saturating_sub(at) > d.as_secs();
        older_than(self.heartbeat, stale_after) && older_than(self.started, fill_budget)
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
    fn abandoned_needs_a_stale_heartbeat_and_an_exhausted_budget() {
        let stale = Duration::from_secs(120);
        let budget = Duration::from_secs(2_700);
        let lease = Lease::new(7, at(10_000));
        // Fresh.
        assert!(!lease.abandoned(at(10_001), stale, budget));
        // Heartbeat stale but within the budget: the holder may still write.
        assert!(!lease.abandoned(at(10_000 + 600), stale, budget));
        // Past the budget but beating (a clock ahead): not provably dead.
        let beating = lease.beat(at(12_800));
        assert!(!beating.abandoned(at(12_801), stale, budget));
        // Both: abandoned.
        assert!(lease.abandoned(at(10_000 + 2_701), stale, budget));
        // A heartbeat from the future is not stale.
        assert!(!lease.beat(at(99_999)).abandoned(at(20_000), stale, budget));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = Lease::parse(&b);
        }
    }
}
