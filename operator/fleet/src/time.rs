//! [`Timestamp`]: a wall-clock instant with second precision that reads and
//! writes RFC 3339, as Kubernetes `metav1.Time` does.
//!
//! Status fields (`createdAt`, condition transition times) use it so the
//! status serializes to what a CRD schema with `format: date-time` expects,
//! without a date library.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, quoted};

/// Seconds from the Unix epoch to `0000-01-01T00:00:00Z`.
const MIN_SECS: i64 = -62_167_219_200;
/// Seconds from the Unix epoch to `9999-12-31T23:59:59Z`.
const MAX_SECS: i64 = 253_402_300_799;
const SECS_PER_DAY: i64 = 86_400;

/// An instant, in whole seconds since the Unix epoch, between years 0000 and
/// 9999 (what RFC 3339's four-digit year can write).
///
/// `Display` and serde use the RFC 3339 UTC form `2025-01-31T12:00:00Z`;
/// [`parse`](Self::parse) also reads fractions (dropped) and offsets.
///
/// ```
/// use fleet::Timestamp;
/// let t = Timestamp::parse("2025-01-31T13:30:00+01:30").unwrap();
/// assert_eq!(t.to_string(), "2025-01-31T12:00:00Z");
/// assert_eq!(t.unix_seconds(), 1_738_324_800);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The instant `secs` seconds after the Unix epoch, clamped to the
    /// representable range (years 0000 to 9999).
    pub fn from_unix_seconds(secs: i64) -> Self {
        Timestamp(secs.clamp(MIN_SECS, MAX_SECS))
    }

    /// `time`, truncated to whole seconds (towards the past) and clamped to
    /// the representable range.
    pub fn from_system_time(time: SystemTime) -> Self {
        let secs = match time.duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
            Err(before) => {
                let d = before.duration();
                let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                let round_down = i64::from(d.subsec_nanos() > 0);
                whole.saturating_add(round_down).saturating_neg()
            }
        };
        Self::from_unix_seconds(secs)
    }

    /// Seconds since the Unix epoch (negative before 1970).
    pub fn unix_seconds(self) -> i64 {
        self.0
    }

    /// The same instant as a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        let magnitude = Duration::from_secs(self.0.unsigned_abs());
        if self.0 >= 0 {
            UNIX_EPOCH + magnitude
        } else {
            UNIX_EPOCH - magnitude
        }
    }

    /// How long after `earlier` this instant is; zero if it is not after it.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_secs(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    /// This instant plus `d` (saturating at the end of year 9999).
    pub fn plus(self, d: Duration) -> Timestamp {
        let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        Self::from_unix_seconds(self.0.saturating_add(secs))
    }

    /// Parses an RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS`, an optional
    /// fraction (dropped), then `Z` or an offset `±HH:MM`. `T` and `Z` may be
    /// lower case. Leap seconds (`:60`) are refused.
    ///
    /// # Errors
    /// [`Error::InvalidTimestamp`] for anything else, including dates that do
    /// not exist (`2023-02-29`) and instants outside years 0000 to 9999.
    pub fn parse(s: &str) -> Result<Timestamp, Error> {
        parse_rfc3339(s.as_bytes()).ok_or_else(|| Error::InvalidTimestamp { text: quoted(s) })
    }
}

impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Self {
        Self::from_system_time(t)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(SECS_PER_DAY);
        let secs = self.0.rem_euclid(SECS_PER_DAY);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Timestamp::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A string with `format: date-time`, as Kubernetes schemas give
/// `metav1.Time`.
impl schemars::JsonSchema for Timestamp {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "format": "date-time"})
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (year, month, day) → days since 1970-01-01 (H. Hinnant's
/// `days_from_civil`). Inputs are range-checked by the caller.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `n` ASCII digits at `b[at..]` as a number.
fn digits(b: &[u8], at: usize, n: usize) -> Option<i64> {
    let field = b.get(at..at.checked_add(n)?)?;
    field.iter().try_fold(0i64, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn expect(b: &[u8], at: usize, allowed: &[u8]) -> Option<()> {
    allowed.contains(b.get(at)?).then_some(())
}

fn parse_rfc3339(b: &[u8]) -> Option<Timestamp> {
    let year = digits(b, 0, 4)?;
    expect(b, 4, b"-")?;
    let month = digits(b, 5, 2)?;
    expect(b, 7, b"-")?;
    let day = digits(b, 8, 2)?;
    expect(b, 10, b"Tt")?;
    let hour = digits(b, 11, 2)?;
    expect(b, 13, b":")?;
    let minute = digits(b, 14, 2)?;
    expect(b, 16, b":")?;
    let second = digits(b, 17, 2)?;
    if !(1..=12).contains(&month)
        || !(1..=days_in_month(year, month)).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut at = 19;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        if at == start {
            return None;
        }
    }
    let offset_secs = match b.get(at)? {
        b'Z' | b'z' => {
            at += 1;
            0
        }
        sign @ (b'+' | b'-') => {
            let oh = digits(b, at + 1, 2)?;
            expect(b, at + 3, b":")?;
            let om = digits(b, at + 4, 2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            at += 6;
            let magnitude = oh * 3600 + om * 60;
            if *sign == b'-' { -magnitude } else { magnitude }
        }
        _ => return None,
    };
    if at != b.len() {
        return None;
    }
    let local =
        days_from_civil(year, month, day) * SECS_PER_DAY + hour * 3600 + minute * 60 + second;
    let utc = local - offset_secs;
    (MIN_SECS..=MAX_SECS)
        .contains(&utc)
        .then_some(Timestamp(utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formats_known_instants() {
        for (secs, text) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_738_324_800, "2025-01-31T12:00:00Z"),
            (-1, "1969-12-31T23:59:59Z"),
            (MIN_SECS, "0000-01-01T00:00:00Z"),
            (MAX_SECS, "9999-12-31T23:59:59Z"),
        ] {
            assert_eq!(Timestamp::from_unix_seconds(secs).to_string(), text);
            assert_eq!(Timestamp::parse(text).unwrap().unix_seconds(), secs);
        }
    }

    #[test]
    fn parses_fractions_offsets_and_lower_case() {
        let t = |s| Timestamp::parse(s).unwrap().unix_seconds();
        assert_eq!(t("1970-01-01T00:00:00.999Z"), 0);
        assert_eq!(t("1970-01-01t01:00:00+01:00"), 0);
        assert_eq!(t("1969-12-31T23:00:00-01:00"), 0);
        assert_eq!(t("1970-01-01T00:00:00z"), 0);
    }

    #[test]
    fn refuses_what_is_not_rfc3339() {
        for bad in [
            "",
            "1970-01-01",
            "1970-01-01T00:00:00",
            "1970-01-01 00:00:00Z",
            "1970-1-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-04-31T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:60:00Z",
            "2024-01-01T00:00:60Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+0100",
            "2024-01-01T00:00:00+24:00",
            "2024-01-01T00:00:00Zjunk",
            "0000-01-01T00:00:00+00:01",
            "+024-01-01T00:00:00Z",
            "２０２４-01-01T00:00:00Z",
        ] {
            let err = Timestamp::parse(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidTimestamp { .. }), "{bad:?}");
        }
    }

    #[test]
    fn system_time_round_trips_and_truncates_towards_the_past() {
        let t = UNIX_EPOCH + Duration::from_millis(1_500);
        assert_eq!(Timestamp::from(t).unix_seconds(), 1);
        let before = UNIX_EPOCH - Duration::from_millis(500);
        assert_eq!(Timestamp::from(before).unix_seconds(), -1);
        let ts = Timestamp::from_unix_seconds(1_000);
        assert_eq!(Timestamp::from(ts.to_system_time()), ts);
        let far = UNIX_EPOCH + Duration::from_secs(u64::MAX / 2);
        assert_eq!(Timestamp::from(far).unix_seconds(), MAX_SECS);
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_unix_seconds(100);
        assert_eq!(
            t.since(Timestamp::from_unix_seconds(40)),
            Duration::from_secs(60)
        );
        assert_eq!(Timestamp::from_unix_seconds(40).since(t), Duration::ZERO);
        assert_eq!(t.plus(Duration::MAX).unix_seconds(), MAX_SECS);
    }

    #[test]
    fn serde_uses_the_string_form() {
        let t = Timestamp::from_unix_seconds(1_738_324_800);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2025-01-31T12:00:00Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(secs in MIN_SECS..=MAX_SECS) {
            let t = Timestamp::from_unix_seconds(secs);
            prop_assert_eq!(Timestamp::parse(&t.to_string()).unwrap(), t);
        }

        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = Timestamp::parse(&s);
        }

        #[test]
        fn parse_never_panics_on_near_misses(s in "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,3})?([Zz]|[+-][0-9]{2}:[0-9]{2})?") {
            let _ = Timestamp::parse(&s);
        }
    }
}
