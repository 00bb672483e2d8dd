//! Keepalive bookkeeping, driven by the connection with clock readings.
//!
//! The rule: a link on which **nothing** (not only no PONG) was received for
//! `interval × count` is dead. To give a live but idle peer something to
//! answer within that window, PINGs go out on a schedule anchored at the
//! last received packet: the first after `interval / 2` of silence, then one
//! every `interval`, so `count` PINGs are sent before the deadline
//! (at `½, 1½, … , count − ½` intervals) and the last of them still has
//! `interval / 2` to be answered. Any received packet restarts the
//! schedule. `count` is at least 1 (0 is treated as 1).
//!
//! Example: interval 1 s, count 3: PINGs at 0.5 s, 1.5 s and 2.5 s of
//! silence, dead at 3 s — within the required bound of
//! `interval × count + 1 s` with the whole second to spare for timer and
//! scheduling delays.
//!
//! When the connection polls late (a starved process), every PING still gets
//! at least `interval / 2` to be answered before the link is declared dead:
//! lateness delays the verdict rather than skipping PINGs.
//!
//! libvirt's own client pings after `interval` and declares death after
//! `interval × (count + 1)`; ours answers the tighter bound required here with the
//! same number of PINGs.

use std::time::{Duration, Instant};

/// What the connection must do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until [`Keepalive::deadline`].
    Wait,
    /// Send a PING.
    SendPing,
    /// The peer stopped answering: the link is dead.
    Dead,
}

pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(2);
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(24 * 3600);
pub(crate) const MAX_COUNT: u32 = 1000;

/// Keepalive state for one connection.
#[derive(Debug, Clone)]
pub struct Keepalive {
    interval: Duration,
    count: u32,
    last_rx: Instant,
    unanswered: u32,
    next: Instant,
}

impl Keepalive {
    /// Starts tracking at `now` (as if a packet had just arrived).
    /// `interval` is clamped to [2 ms, 1 day] and `count` to [1, 1000], so
    /// that no deadline overflows the clock.
    pub fn new(interval: Duration, count: u32, now: Instant) -> Self {
        let interval = interval.clamp(MIN_INTERVAL, MAX_INTERVAL);
        Self {
            interval,
            count: count.clamp(1, MAX_COUNT),
            last_rx: now,
            unanswered: 0,
            next: now + interval / 2,
        }
    }

    /// Records that a packet arrived.
    pub fn received(&mut self, now: Instant) {
        self.last_rx = now;
        self.unanswered = 0;
        self.next = now + self.interval / 2;
    }

    /// When [`Keepalive::poll`] next has something to do.
    pub fn deadline(&self) -> Instant {
        self.next
    }

    /// When a link silent from now on will be declared dead (if polled on
    /// time): `interval × count` after the last received packet.
    pub fn dead_at(&self) -> Instant {
        self.last_rx + self.interval * self.count
    }

    /// PINGs sent since the last received packet.
    #[cfg(test)]
    pub fn unanswered(&self) -> u32 {
        self.unanswered
    }

    /// Advances the state to `now`.
    pub fn poll(&mut self, now: Instant) -> Action {
        if now < self.next {
            return Action::Wait;
        }
        if self.unanswered >= self.count {
            return Action::Dead;
        }
        self.unanswered += 1;
        // The next PING is due half an interval into the next interval of
        // silence; after the count-th, the verdict is due at `dead_at`.
        let scheduled = if self.unanswered < self.count {
            self.last_rx + self.interval * self.unanswered + self.interval / 2
        } else {
            self.dead_at()
        };
        // Polled late: still give this PING half an interval.
        self.next = scheduled.max(now + self.interval / 2);
        Action::SendPing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_settings_are_clamped_instead_of_overflowing() {
        let t0 = Instant::now();
        let mut ka = Keepalive::new(Duration::MAX, u32::MAX, t0);
        assert_eq!(ka.dead_at(), t0 + MAX_INTERVAL * MAX_COUNT);
        assert_eq!(ka.poll(t0), Action::Wait);
        ka.received(t0 + Duration::from_secs(1));
        assert_eq!(
            ka.deadline(),
            t0 + Duration::from_secs(1) + MAX_INTERVAL / 2
        );
    }

    const S: Duration = Duration::from_secs(1);

    /// Polls at every deadline, as the connection does, until dead; returns
    /// the PINGs sent and when the link died.
    fn silence(k: &mut Keepalive) -> (u32, Instant) {
        let mut pings = 0;
        loop {
            let at = k.deadline();
            match k.poll(at) {
                Action::SendPing => pings += 1,
                Action::Dead => return (pings, at),
                Action::Wait => panic!("deadline() said it was time"),
            }
        }
    }

    #[test]
    fn silent_link_dies_after_interval_times_count() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(S, 2, t0);
        assert_eq!(k.poll(t0 + S / 4), Action::Wait);
        assert_eq!(k.poll(t0 + S / 2), Action::SendPing);
        assert_eq!(k.poll(t0 + S), Action::Wait);
        assert_eq!(k.poll(t0 + S + S / 2), Action::SendPing);
        assert_eq!(k.deadline(), t0 + 2 * S);
        assert_eq!(k.poll(t0 + 2 * S - S / 10), Action::Wait);
        assert_eq!(k.poll(t0 + 2 * S), Action::Dead);
    }

    #[test]
    fn count_pings_then_dead_at_exactly_interval_times_count() {
        for count in 1..=8 {
            let t0 = Instant::now();
            let mut k = Keepalive::new(S, count, t0);
            let (pings, dead) = silence(&mut k);
            assert_eq!(pings, count, "count {count}");
            assert_eq!(dead, t0 + S * count, "count {count}");
            assert_eq!(k.dead_at(), t0 + S * count);
        }
    }

    #[test]
    fn any_packet_counts_as_liveness() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(S, 1, t0);
        assert_eq!(k.poll(t0 + S / 2), Action::SendPing);
        // Not a PONG, but a packet: the schedule restarts from it.
        k.received(t0 + S - S / 10);
        assert_eq!(k.unanswered(), 0);
        assert_eq!(k.poll(t0 + S), Action::Wait);
        assert_eq!(k.deadline(), t0 + S - S / 10 + S / 2);
        assert_eq!(k.poll(k.deadline()), Action::SendPing);
        assert_eq!(k.deadline(), t0 + 2 * S - S / 10);
        assert_eq!(k.poll(k.deadline()), Action::Dead);
    }

    #[test]
    fn late_poll_still_gives_each_ping_half_an_interval() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(S, 2, t0);
        // Starved until long past the deadline: ping, don't die unheard.
        let late = t0 + 10 * S;
        assert_eq!(k.poll(late), Action::SendPing);
        assert_eq!(k.deadline(), late + S / 2);
        assert_eq!(k.poll(late + S / 2), Action::SendPing);
        assert_eq!(k.deadline(), late + S);
        assert_eq!(k.poll(late + S), Action::Dead);
    }

    #[test]
    fn count_zero_is_treated_as_one() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(S, 0, t0);
        assert_eq!(silence(&mut k), (1, t0 + S));
    }

    #[test]
    fn busy_link_never_pings() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(S, 1, t0);
        for i in 1..100u32 {
            k.received(t0 + S / 4 * i);
            assert_eq!(k.poll(t0 + S / 4 * i + S / 8), Action::Wait);
        }
    }
}
