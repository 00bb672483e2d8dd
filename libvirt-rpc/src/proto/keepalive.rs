//! Keepalive bookkeeping, driven by the connection with clock readings.
//!
//! Semantics match libvirt's own client: after `interval` without receiving
//! anything a PING is sent, and another one every `interval` while the
//! silence lasts; when `count` PINGs in a row went unanswered for an
//! `interval` each, the link is dead. A silent link is therefore declared
//! dead `interval × (count + 1)` after the last packet arrived. Any received
//! packet (not only a PONG) resets the count.

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
    /// Starts tracking at `now`. `interval` must be non-zero; a zero interval
    /// is treated as one millisecond.
    pub fn new(interval: Duration, count: u32, now: Instant) -> Self {
        let interval = interval.max(Duration::from_millis(1));
        Self {
            interval,
            count,
            last_rx: now,
            unanswered: 0,
            next: now + interval,
        }
    }

    /// Records that a packet arrived.
    pub fn received(&mut self, now: Instant) {
        self.last_rx = now;
        self.unanswered = 0;
        self.next = now + self.interval;
    }

    /// When [`Keepalive::poll`] next has something to do.
    pub fn deadline(&self) -> Instant {
        self.next
    }

    /// PINGs sent since the last received packet.
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
        self.next = now + self.interval;
        Action::SendPing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn silent_link_dies_after_count_unanswered_pings() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(S, 2, t0);
        assert_eq!(k.poll(t0 + S / 2), Action::Wait);
        assert_eq!(k.poll(t0 + S), Action::SendPing);
        assert_eq!(k.poll(t0 + S + S / 2), Action::Wait);
        assert_eq!(k.poll(t0 + 2 * S), Action::SendPing);
        assert_eq!(k.poll(t0 + 3 * S), Action::Dead);
    }

    #[test]
    fn any_packet_counts_as_liveness() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(S, 1, t0);
        assert_eq!(k.poll(t0 + S), Action::SendPing);
        k.received(t0 + S + S / 2);
        assert_eq!(k.unanswered(), 0);
        assert_eq!(k.poll(t0 + 2 * S), Action::Wait);
        assert_eq!(k.deadline(), t0 + 2 * S + S / 2);
        assert_eq!(k.poll(t0 + 3 * S), Action::SendPing);
        assert_eq!(k.poll(t0 + 4 * S), Action::Dead);
    }

    #[test]
    fn busy_link_never_pings() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(S, 1, t0);
        for i in 1..100u32 {
            k.received(t0 + S / 2 * i);
            assert_eq!(k.poll(t0 + S / 2 * i + S / 4), Action::Wait);
        }
    }
}
