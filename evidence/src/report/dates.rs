//! Recorded times as people read them: RFC 3339 UTC with milliseconds. The report and the
//! CLI print every time this way, so a time in one can be found in the other.

/// Milliseconds since the Unix epoch as an RFC 3339 UTC date-time with milliseconds
/// (`2026-11-23T20:31:05.123Z`); out of the years 0 to 9999, the number itself.
#[must_use]
pub fn date_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return format!("{ms} ms after 1970-01-01T00:00:00Z");
    }
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// Nanoseconds since the Unix epoch as [`date_ms`] does (to the millisecond).
#[must_use]
pub fn date_ns(ns: i64) -> String {
    date_ms(ns.div_euclid(1_000_000))
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], from March
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both are in range by construction (1..=31, 1..=12).
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(date_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(date_ms(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(date_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(date_ms(1_795_465_865_123), "2026-11-23T20:31:05.123Z");
        assert_eq!(date_ms(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(
            date_ns(1_795_465_865_123_456_789),
            "2026-11-23T20:31:05.123Z"
        );
        assert!(date_ms(i64::MAX).contains("ms after"));
    }
}
