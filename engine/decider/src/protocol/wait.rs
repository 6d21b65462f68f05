//! A `wait` action's time (docs/agent-protocol.md#waiting-wait): `until`, an RFC 3339
//! instant with its offset, or `for`, a duration (`90s`, `2h 30m`, `1d`, ISO 8601 `PT2H`),
//! from the time the response was recorded; for a wait on an outside event (`event`), its
//! timeout, and optional. Parsed only: no clock, no time zone database.

use docket_protocol::Action;

/// The longest wait a `for` or `until` can say (100 years): beyond it, milliseconds
/// since the epoch would be no date anyone means.
const LONGEST_MS: i64 = 100 * 365 * 24 * 3_600_000;

/// When a `wait` action is due, in ms since the Unix epoch, for a response recorded at
/// `responded_at_ms` (`Ok(None)`: a wait on an event with no timeout); `None` for another
/// action.
///
/// # Errors
/// Which field is wrong and why: both `until` and `for`, neither without an `event`, an
/// empty event name, a time or duration that does not parse, a negative duration or one
/// over 100 years.
pub fn wait_due_ms(
    action: &Action,
    responded_at_ms: i64,
) -> Option<Result<Option<i64>, (&'static str, String)>> {
    let Action::Wait {
        until,
        duration,
        event,
        ..
    } = action
    else {
        return None;
    };
    if event.as_deref().is_some_and(|e| e.trim().is_empty()) {
        return Some(Err((
            "event",
            "name the event waited for (a name the bundle's [[signals]] declares)".to_owned(),
        )));
    }
    Some(match (until, duration) {
        (Some(_), Some(_)) => Err(("until", "give `until` or `for`, not both".to_owned())),
        (None, None) if event.is_some() => Ok(None),
        (None, None) => Err((
            "for",
            "a wait needs `until` (a time), `for` (a duration) or `event` (an outside event)"
                .to_owned(),
        )),
        (Some(until), None) => time_ms(until).map(Some).map_err(|why| ("until", why)),
        (None, Some(duration)) => duration_ms(duration)
            .map(|ms| Some(responded_at_ms.saturating_add(ms)))
            .map_err(|why| ("for", why)),
    })
}

/// An RFC 3339 instant with an offset (`2026-11-29T10:00:00Z`, `...+01:00`) in ms since
/// the epoch (a wait's `until`, an effect's `not_before`).
pub(crate) fn time_ms(text: &str) -> Result<i64, String> {
    let at: jiff::Timestamp = text.trim().parse().map_err(|e| {
        format!("{text:?} is not a time with its offset, as RFC 3339 writes it (2026-11-29T10:00:00Z): {e}")
    })?;
    let ms = at.as_millisecond();
    if !(0..=LONGEST_MS * 2).contains(&ms) {
        return Err(format!("{text:?} is not a time between 1970 and 2170"));
    }
    Ok(ms)
}

/// A duration (`90s`, `15m`, `2h 30m`, `1d`, `2w`, `PT2H`, `P1D`) in ms, from 0 to 100
/// years; a day is 24 hours, a week 7 days (months and years, of no fixed length, are
/// refused). Also the syntax of a schedule's interval (docs/schedules.md).
///
/// # Errors
/// Why the text is not such a duration, quoting it.
pub fn duration_ms(text: &str) -> Result<i64, String> {
    let bad = |e: jiff::Error| {
        format!("{text:?} is not a duration such as 90s, 15m, 2h 30m, 1d or PT2H: {e}")
    };
    let span: jiff::Span = text.trim().parse().map_err(bad)?;
    let span = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(bad)?;
    let ms = i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
    if ms < 0 {
        return Err(format!(
            "{text:?} is negative: a wait cannot end before it starts"
        ));
    }
    if ms > LONGEST_MS {
        return Err(format!("{text:?} is longer than 100 years"));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(until: Option<&str>, duration: Option<&str>) -> Action {
        Action::Wait {
            until: until.map(str::to_owned),
            duration: duration.map(str::to_owned),
            event: None,
            reason: "a slot".to_owned(),
        }
    }

    #[test]
    fn durations_and_times_give_the_due_time() {
        let at = 1_800_000_000_000;
        for (text, ms) in [
            ("90s", 90_000),
            ("15m", 900_000),
            ("2h 30m", 9_000_000),
            ("PT2H", 7_200_000),
            ("1d", 86_400_000),
            ("P1D", 86_400_000),
            ("2w", 1_209_600_000),
            ("0s", 0),
        ] {
            assert_eq!(
                wait_due_ms(&wait(None, Some(text)), at),
                Some(Ok(Some(at + ms))),
                "{text}"
            );
        }
        assert_eq!(
            wait_due_ms(&wait(Some("2027-01-15T09:30:00Z"), None), at),
            Some(Ok(Some(1_800_005_400_000)))
        );
        assert_eq!(
            wait_due_ms(&wait(Some("2027-01-15T10:30:00+01:00"), None), at),
            Some(Ok(Some(1_800_005_400_000)))
        );
        assert_eq!(
            wait_due_ms(
                &Action::Finish {
                    output: serde_json::Value::Null
                },
                at
            ),
            None
        );
    }

    fn on_event(event: &str, duration: Option<&str>) -> Action {
        Action::Wait {
            until: None,
            duration: duration.map(str::to_owned),
            event: Some(event.to_owned()),
            reason: "a comment".to_owned(),
        }
    }

    #[test]
    fn a_wait_on_an_event_has_an_optional_timeout() {
        let at = 1_800_000_000_000;
        assert_eq!(wait_due_ms(&on_event("comment", None), at), Some(Ok(None)));
        assert_eq!(
            wait_due_ms(&on_event("comment", Some("1h")), at),
            Some(Ok(Some(at + 3_600_000)))
        );
    }

    #[test]
    fn a_wait_that_does_not_say_when_names_its_field() {
        let at = 1_800_000_000_000;
        for (action, field, says) in [
            (wait(None, None), "for", "needs `until`"),
            (on_event(" ", None), "event", "name the event"),
            (on_event("comment", Some("soon")), "for", "not a duration"),
            (
                wait(Some("2027-01-15T09:30:00Z"), Some("1h")),
                "until",
                "not both",
            ),
            (wait(Some("tomorrow"), None), "until", "RFC 3339"),
            (wait(Some("2027-01-15T09:30:00"), None), "until", "offset"),
            (wait(None, Some("soon")), "for", "not a duration"),
            (wait(None, Some("1 month")), "for", "not a duration"),
            (wait(None, Some("-5m")), "for", "negative"),
            (wait(None, Some("1000000h")), "for", "100 years"),
        ] {
            let Some(Err((f, why))) = wait_due_ms(&action, at) else {
                panic!("{action:?} accepted");
            };
            assert_eq!(f, field, "{action:?}");
            assert!(why.contains(says), "{action:?}: {why}");
        }
    }
}
