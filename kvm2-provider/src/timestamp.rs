//! UTC timestamps in the one RFC 3339 form the ownership mark uses:
//! `YYYY-MM-DDTHH:MM:SSZ`.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A whole-second UTC instant at or after 1970-01-01 and before year 10000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    unix_seconds: u64,
}

/// 9999-12-31T23:59:59Z: the last instant with a four-digit year.
const MAX_UNIX_SECONDS: u64 = 253_402_300_799;

impl Timestamp {
    /// The instant `unix_seconds` after the epoch, or `None` past year 9999.
    pub fn from_unix_seconds(unix_seconds: u64) -> Option<Self> {
        (unix_seconds <= MAX_UNIX_SECONDS).then_some(Self { unix_seconds })
    }

    /// `time` truncated to whole seconds; `None` before 1970 or after 9999.
    pub fn from_system_time(time: SystemTime) -> Option<Self> {
        let secs = time.duration_since(UNIX_EPOCH).ok()?.as_secs();
        Self::from_unix_seconds(secs)
    }

    /// Seconds since the Unix epoch.
    pub fn unix_seconds(self) -> u64 {
        self.unix_seconds
    }

    /// As a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.unix_seconds)
    }

    /// Parses exactly `YYYY-MM-DDTHH:MM:SSZ`, as [`Display`](fmt::Display)
    /// writes it. Anything else (offsets, fractions, lowercase) is `None`.
    pub fn parse(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        if b.len() != 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
            || b[19] != b'Z'
        {
            return None;
        }
        let num = |range: std::ops::Range<usize>| -> Option<u64> {
            let digits = b.get(range)?;
            digits.iter().try_fold(0u64, |acc, &d| {
                d.is_ascii_digit().then(|| acc * 10 + u64::from(d - b'0'))
            })
        };
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if year < 1970
            || !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let days = days_from_civil(year, month, day);
        Self::from_unix_seconds(days * 86_400 + hour * 3600 + minute * 60 + second)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.unix_seconds / 86_400;
        let rem = self.unix_seconds % 86_400;
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )
    }
}

fn is_leap(year: u64) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date at or after 1970.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let days_before_year: u64 = (1970..year)
        .map(|y| if is_leap(y) { 366 } else { 365 })
        .sum();
    let days_before_month: u64 = (1..month).map(|m| days_in_month(year, m)).sum();
    days_before_year + days_before_month + day - 1
}

/// The date `days` after 1970-01-01.
fn civil_from_days(mut days: u64) -> (u64, u64, u64) {
    let mut year = 1970;
    loop {
        let len = if is_leap(year) { 366 } else { 365 };
        if days < len {
            break;
        }
        days -= len;
        year += 1;
    }
    let mut month = 1;
    while days >= days_in_month(year, month) {
        days -= days_in_month(year, month);
        month += 1;
    }
    (year, month, days + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_instants() {
        let t = Timestamp::from_unix_seconds(0).unwrap();
        assert_eq!(t.to_string(), "1970-01-01T00:00:00Z");
        let t = Timestamp::from_unix_seconds(1_796_202_916).unwrap();
        assert_eq!(t.to_string(), "2026-12-02T09:15:16Z");
        let t = Timestamp::parse("2024-02-29T23:59:59Z").unwrap();
        assert_eq!(t.unix_seconds(), 1_709_251_199);
        assert_eq!(
            Timestamp::from_unix_seconds(MAX_UNIX_SECONDS)
                .unwrap()
                .to_string(),
            "9999-12-31T23:59:59Z"
        );
        assert!(Timestamp::from_unix_seconds(MAX_UNIX_SECONDS + 1).is_none());
    }

    #[test]
    fn rejects_other_forms() {
        for bad in [
            "",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01t00:00:00Z",
            "2024-01-01T00:00:00+00:00",
            "2024-01-01T00:00:00.5Z",
            "1969-12-31T23:59:59Z",
            "+024-01-01T00:00:00Z",
            "2024-01-01T00:00:0ÿ",
        ] {
            assert!(Timestamp::parse(bad).is_none(), "{bad:?} accepted");
        }
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(secs in 0u64..=MAX_UNIX_SECONDS) {
            let t = Timestamp::from_unix_seconds(secs).unwrap();
            prop_assert_eq!(Timestamp::parse(&t.to_string()), Some(t));
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,24}") {
            let _ = Timestamp::parse(&s);
        }
    }
}
