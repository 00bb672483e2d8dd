//! [`Backoff`]: per-object exponential delays with a cap, and [`Jitter`]
//! passed in by the caller so every delay is reproducible in tests.

use std::time::Duration;

/// Exponential backoff: `base`, `2·base`, `4·base`, ... never above `cap`,
/// then shortened by up to half according to the [`Jitter`].
///
/// ```
/// use std::time::Duration;
/// use fleet::{Backoff, Jitter};
/// let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// assert_eq!(b.delay(1, Jitter::NONE), Duration::from_secs(1));
/// assert_eq!(b.delay(4, Jitter::NONE), Duration::from_secs(8));
/// assert_eq!(b.delay(4, Jitter::MAX), Duration::from_secs(4));
/// assert_eq!(b.delay(40, Jitter::NONE), Duration::from_secs(60));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
}

impl Backoff {
    /// A backoff starting at `base` and never above `cap` (a `cap` below
    /// `base` is raised to `base`).
    pub const fn new(base: Duration, cap: Duration) -> Self {
        let cap = if cap.as_nanos() < base.as_nanos() {
            base
        } else {
            cap
        };
        Backoff { base, cap }
    }

    /// The first delay.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The longest delay.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// The delay after `failures` consecutive failures (`0` and `1` both give
    /// the base), shortened by `jitter`: between half of and all of
    /// `min(cap, base · 2^(failures-1))`.
    pub fn delay(&self, failures: u32, jitter: Jitter) -> Duration {
        let mut d = self.base;
        for _ in 1..failures {
            if d >= self.cap {
                break;
            }
            d = d.saturating_mul(2);
        }
        let d = d.min(self.cap);
        // d · (2000 - j) / 2000 with j in 0..=1000: from d down to d/2.
        let nanos = d.as_nanos() * u128::from(2000 - jitter.0) / 2000;
        duration_from_nanos(nanos)
    }
}

fn duration_from_nanos(nanos: u128) -> Duration {
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    // The remainder is below 1e9 and always fits.
    let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Duration::new(secs, sub)
}

/// How much to shorten a delay, in thousandths of the largest shortening
/// (0 = none, 1000 = half the delay). The caller draws it (randomly in
/// production, fixed in tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Jitter(u32);

impl Jitter {
    /// No shortening.
    pub const NONE: Jitter = Jitter(0);
    /// The largest shortening (half the delay).
    pub const MAX: Jitter = Jitter(1000);

    /// From a fraction in `[0, 1]` (clamped; NaN is `0`).
    pub fn from_fraction(f: f64) -> Jitter {
        if f.is_nan() {
            return Jitter::NONE;
        }
        // Clamped to [0, 1000] before the cast, so the cast is exact enough
        // and cannot overflow.
        Jitter((f.clamp(0.0, 1.0) * 1000.0).round() as u32)
    }

    /// From thousandths (clamped to 1000).
    pub fn from_per_mille(p: u32) -> Jitter {
        Jitter(p.min(1000))
    }

    /// The thousandths.
    pub fn per_mille(self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn doubles_from_the_base_up_to_the_cap() {
        let b = Backoff::new(S(2), S(60));
        let delays: Vec<_> = (0..=8).map(|n| b.delay(n, Jitter::NONE)).collect();
        assert_eq!(
            delays,
            [S(2), S(2), S(4), S(8), S(16), S(32), S(60), S(60), S(60)]
        );
    }

    #[test]
    fn jitter_shortens_by_at_most_half() {
        let b = Backoff::new(S(2), S(60));
        assert_eq!(b.delay(3, Jitter::MAX), S(4));
        assert_eq!(
            b.delay(3, Jitter::from_fraction(0.5)),
            Duration::from_secs(6)
        );
        assert_eq!(b.delay(30, Jitter::MAX), S(30));
    }

    #[test]
    fn jitter_is_clamped() {
        assert_eq!(Jitter::from_fraction(7.0), Jitter::MAX);
        assert_eq!(Jitter::from_fraction(-1.0), Jitter::NONE);
        assert_eq!(Jitter::from_fraction(f64::NAN), Jitter::NONE);
        assert_eq!(Jitter::from_per_mille(5000), Jitter::MAX);
        assert_eq!(Jitter::from_fraction(0.25).per_mille(), 250);
    }

    #[test]
    fn a_cap_below_the_base_is_the_base() {
        let b = Backoff::new(S(10), S(1));
        assert_eq!((b.base(), b.cap()), (S(10), S(10)));
        assert_eq!(b.delay(5, Jitter::NONE), S(10));
    }

    #[test]
    fn huge_values_saturate_instead_of_panicking() {
        let b = Backoff::new(S(1), Duration::MAX);
        assert_eq!(b.delay(u32::MAX, Jitter::NONE), Duration::MAX);
        assert!(b.delay(u32::MAX, Jitter::MAX) >= Duration::MAX / 2);
    }

    proptest! {
        #[test]
        fn delays_stay_in_bounds_and_grow(
            base_ms in 1u64..10_000, cap_ms in 1u64..10_000_000,
            n in 0u32..100, j in 0u32..=1000,
        ) {
            let b = Backoff::new(Duration::from_millis(base_ms), Duration::from_millis(cap_ms));
            let jit = Jitter::from_per_mille(j);
            let d = b.delay(n, jit);
            prop_assert!(d <= b.cap());
            prop_assert!(d >= b.base() / 2);
            prop_assert!(b.delay(n + 1, jit) >= d);
        }
    }
}
