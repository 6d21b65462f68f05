//! A schedule's instants (cron in a time zone across a daylight-saving change, intervals),
//! what a firing after downtime starts under each catch-up rule, its bound, and the
//! schedules file of a data directory.

use serde_json::json;

use super::*;

fn at(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn new(name: &str, cron: Option<&str>, every: Option<&str>, zone: Option<&str>) -> NewSchedule {
    NewSchedule {
        name: name.to_owned(),
        workflow: "/w/workflow.toml".to_owned(),
        input: json!({ "x": 1 }),
        cron: cron.map(str::to_owned),
        every: every.map(str::to_owned),
        time_zone: zone.map(str::to_owned),
        overlap: Overlap::Skip,
        catch_up: CatchUp::Latest,
        by: "ops".to_owned(),
    }
}

#[test]
fn a_cron_expression_is_read_in_its_time_zone_across_a_daylight_saving_change() {
    // Paris moves from UTC+1 to UTC+2 on 2026-03-29 at 02:00: 08:00 there is 07:00Z the
    // day before and 06:00Z from that day on.
    let s = Schedule::new(
        new("daily", Some("0 8 * * *"), None, Some("Europe/Paris")),
        at("2026-03-27T12:00:00Z"),
    )
    .expect("valid");
    assert_eq!(s.next_at_ms, at("2026-03-28T07:00:00Z"));
    let second = s.next_after(s.next_at_ms).expect("next");
    assert_eq!(second, at("2026-03-29T06:00:00Z"));
    assert_eq!(second - s.next_at_ms, 23 * 3_600_000, "the short day");
    assert_eq!(
        s.next_after(second).expect("next"),
        at("2026-03-30T06:00:00Z")
    );
    // 02:30 does not exist in Paris that night: that night has no firing, the next is
    // 02:30 CEST the day after (00:30Z), and none is fired twice.
    let gap = Schedule::new(
        new("gap", Some("30 2 * * *"), None, Some("Europe/Paris")),
        at("2026-03-28T12:00:00Z"),
    )
    .expect("valid");
    assert_eq!(gap.next_at_ms, at("2026-03-30T00:30:00Z"));
    assert_eq!(
        gap.next_after(gap.next_at_ms).expect("next"),
        at("2026-03-31T00:30:00Z")
    );
    // 02:30 happens twice in Paris on 2026-10-25 (03:00 CEST back to 02:00 CET): once, at
    // the first (00:30Z), then 02:30 CET the day after (01:30Z). Every 15 minutes, the
    // repeated hour's wall times are not fired again either: 02:45 CEST, then 03:00 CET.
    let twice = Schedule::new(
        new("twice", Some("30 2 * * *"), None, Some("Europe/Paris")),
        at("2026-10-24T12:00:00Z"),
    )
    .expect("valid");
    assert_eq!(twice.next_at_ms, at("2026-10-25T00:30:00Z"));
    assert_eq!(
        twice.next_after(twice.next_at_ms).expect("next"),
        at("2026-10-26T01:30:00Z")
    );
    let quarter = Schedule::new(
        new("quarter", Some("*/15 * * * *"), None, Some("Europe/Paris")),
        at("2026-10-25T00:40:00Z"),
    )
    .expect("valid");
    assert_eq!(quarter.next_at_ms, at("2026-10-25T00:45:00Z"));
    assert_eq!(
        quarter.next_after(quarter.next_at_ms).expect("next"),
        at("2026-10-25T02:00:00Z")
    );
    // The same expression in UTC.
    let utc = Schedule::new(
        new("u", Some("0 8 * * *"), None, None),
        at("2026-03-27T12:00:00Z"),
    )
    .expect("valid");
    assert_eq!(utc.next_at_ms, at("2026-03-28T08:00:00Z"));
}

#[test]
fn an_interval_counts_from_when_the_schedule_was_made() {
    let t0 = at("2026-11-29T08:00:00Z");
    let s = Schedule::new(new("every", None, Some("15m"), None), t0).expect("valid");
    assert_eq!(s.next_at_ms, t0 + 900_000);
    assert_eq!(s.next_after(t0 + 900_000).expect("next"), t0 + 1_800_000);
    assert_eq!(s.next_after(t0 + 960_000).expect("next"), t0 + 1_800_000);
    assert_eq!(s.run_id(t0 + 900_000), "every-20261129T081500Z");
    let iso = Schedule::new(new("iso", None, Some("PT2H"), None), t0).expect("valid");
    assert_eq!(iso.next_at_ms, t0 + 7_200_000);
}

fn down_for(catch_up: CatchUp, every: &str, down_ms: i64) -> (Schedule, Plan) {
    let t0 = at("2026-11-29T08:00:00Z");
    let mut n = new("s", None, Some(every), None);
    n.catch_up = catch_up;
    let s = Schedule::new(n, t0).expect("valid");
    let plan = s.plan(t0 + down_ms).expect("plan").expect("due");
    (s, plan)
}

#[test]
fn after_downtime_latest_starts_only_the_last_instant_and_all_starts_each() {
    let t0 = at("2026-11-29T08:00:00Z");
    let m = 60_000;
    let (s, latest) = down_for(CatchUp::Latest, "1m", 5 * m + 30_000);
    assert_eq!(latest.start, vec![t0 + 5 * m]);
    assert_eq!(
        latest.missed,
        vec![t0 + m, t0 + 2 * m, t0 + 3 * m, t0 + 4 * m]
    );
    assert_eq!(latest.older, None);
    assert_eq!(latest.next_at_ms, t0 + 6 * m);
    assert_eq!(s.plan(t0 + m - 1).expect("plan"), None, "not due yet");
    let (_, all) = down_for(CatchUp::All, "1m", 5 * m + 30_000);
    assert_eq!(
        all.start,
        vec![t0 + m, t0 + 2 * m, t0 + 3 * m, t0 + 4 * m, t0 + 5 * m]
    );
    assert!(all.missed.is_empty());
    // Due exactly now: one instant.
    let (_, one) = down_for(CatchUp::All, "1m", m);
    assert_eq!(one.start, vec![t0 + m]);
    assert_eq!(one.next_at_ms, t0 + 2 * m);
}

#[test]
fn catching_up_is_bounded_and_the_rest_are_missed_together() {
    let t0 = at("2026-11-29T08:00:00Z");
    let s = 1_000;
    // Down 1,000 s on a schedule of every second: 1,000 instants due.
    let (_, all) = down_for(CatchUp::All, "1s", 1_000 * s);
    assert_eq!(all.start.len(), MAX_CATCH_UP);
    assert_eq!(all.start.first(), Some(&(t0 + 901 * s)));
    assert_eq!(all.start.last(), Some(&(t0 + 1_000 * s)));
    assert_eq!(
        all.older,
        Some(Missed {
            from_ms: t0 + s,
            until_ms: t0 + 900 * s,
            count: 900
        })
    );
    let (_, latest) = down_for(CatchUp::Latest, "1s", 1_000 * s);
    assert_eq!(latest.start, vec![t0 + 1_000 * s]);
    assert_eq!(latest.missed.len(), MAX_CATCH_UP - 1);
    assert_eq!(latest.older.map(|m| m.count), Some(900));
    // A cron expression's instants are counted too.
    let mut n = new("c", Some("* * * * *"), None, None);
    n.catch_up = CatchUp::All;
    let c = Schedule::new(n, t0).expect("valid");
    let plan = c.plan(t0 + 150 * 60 * s).expect("plan").expect("due");
    assert_eq!(plan.start.len(), MAX_CATCH_UP);
    assert_eq!(plan.start.last(), Some(&(t0 + 150 * 60 * s)));
    assert_eq!(plan.older.map(|m| m.count), Some(50));
}

#[test]
fn bad_schedules_name_what_is_wrong() {
    let t0 = at("2026-11-29T08:00:00Z");
    for (n, field, says) in [
        (
            new("x", Some("61 * * * *"), None, None),
            "cron",
            "not a cron expression",
        ),
        (
            new("x", Some("every day"), None, None),
            "cron",
            "not a cron expression",
        ),
        (
            new("x", Some("0 8 * * *"), None, Some("Mars/Olympus")),
            "time_zone",
            "unknown time zone",
        ),
        (
            new("x", Some("0 8 * * *"), Some("1h"), None),
            "every",
            "not both",
        ),
        (
            new("x", None, None, None),
            "cron",
            "needs a cron expression",
        ),
        (
            new("x", None, Some("soon"), None),
            "every",
            "not a duration",
        ),
        (
            new("x", None, Some("500ms"), None),
            "every",
            "shorter than a second",
        ),
        (
            new("x", None, Some("1h"), Some("Europe/Paris")),
            "time_zone",
            "interval",
        ),
        (new("a b", None, Some("1h"), None), "name", "has ' '"),
        (new("-x", None, Some("1h"), None), "name", "start with"),
        (
            new(&"n".repeat(65), None, Some("1h"), None),
            "name",
            "longer",
        ),
    ] {
        match Schedule::new(n.clone(), t0) {
            Err(SchedulesError::Invalid { field: f, message }) => {
                assert_eq!(f, field, "{n:?}: {message}");
                assert!(message.contains(says), "{n:?}: {message}");
            }
            other => panic!("{n:?}: {other:?}"),
        }
    }
    let mut nobody = new("x", None, Some("1h"), None);
    nobody.by = " ".to_owned();
    assert!(matches!(
        Schedule::new(nobody, t0),
        Err(SchedulesError::Invalid { field: "by", .. })
    ));
}

fn firing(schedule: &str, due: i64, outcome: Outcome) -> Firing {
    Firing {
        schedule: schedule.to_owned(),
        due_at_ms: due,
        fired_at_ms: due + 5,
        late_ms: 5,
        fired_by: "test".to_owned(),
        outcome,
        run_id: None,
        previous_run: None,
        missed_until_ms: None,
        missed_count: None,
        error: None,
    }
}

#[tokio::test]
async fn the_schedules_file_keeps_changes_against_their_version_and_each_firing_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let schedules = Schedules::File(ScheduleFile::new(dir.path()));
    let t0 = at("2026-11-29T08:00:00Z");
    let s = Schedule::new(new("hourly", None, Some("1h"), None), t0).expect("valid");
    schedules.add(s.clone()).await.expect("added");
    assert!(matches!(
        schedules.add(s.clone()).await,
        Err(SchedulesError::Exists { removed: false, .. })
    ));
    // A change made against an older version is refused, not lost.
    let mut moved = schedules.get("hourly").await.expect("kept");
    moved.next_at_ms += 1;
    assert!(schedules.replace(&moved, true).await.expect("written"));
    assert!(
        !schedules.replace(&moved, true).await.expect("read"),
        "stale"
    );
    assert_eq!(schedules.get("hourly").await.expect("kept").version, 1);

    let paused = schedules
        .set_paused("hourly", true, "ann", t0 + 10)
        .await
        .expect("paused");
    assert_eq!(paused.state_word(), "paused");
    assert!(matches!(
        schedules.set_paused("hourly", true, "ann", t0 + 11).await,
        Err(SchedulesError::NotNow { .. })
    ));
    assert!(
        schedules
            .claim_due(t0 + 10 * 3_600_000, "me", 1)
            .await
            .expect("read")
            .is_empty()
    );
    // Unpaused, it is due at its first instant after the unpause: nothing is caught up.
    let back = schedules
        .set_paused("hourly", false, "bob", t0 + 5 * 3_600_000 + 1)
        .await
        .expect("unpaused");
    assert_eq!(back.next_at_ms, t0 + 6 * 3_600_000);
    assert_eq!(back.unpaused.as_ref().map(|c| c.by.as_str()), Some("bob"));
    let removed = schedules
        .remove("hourly", "cy", t0 + 20)
        .await
        .expect("removed");
    assert_eq!(removed.state_word(), "removed");
    assert!(matches!(
        schedules.add(s).await,
        Err(SchedulesError::Exists { removed: true, .. })
    ));
    assert!(matches!(
        schedules.remove("nope", "cy", t0).await,
        Err(SchedulesError::Unknown { .. })
    ));

    schedules
        .record(vec![
            firing("hourly", t0, Outcome::Started),
            firing("hourly", t0 + 1, Outcome::Missed),
        ])
        .await
        .expect("recorded");
    // The same firing again (fired again after a crash) is kept once.
    schedules
        .record(vec![
            firing("hourly", t0, Outcome::Started),
            firing("other", t0, Outcome::Skipped),
        ])
        .await
        .expect("recorded");
    let kept = schedules.firings(Some("hourly"), 100).await.expect("read");
    assert_eq!(kept.len(), 2);
    assert_eq!(schedules.firings(None, 100).await.expect("read").len(), 3);
    assert_eq!(
        schedules.firings(None, 1).await.expect("read")[0].schedule,
        "other"
    );
    // A torn last line (a crash while appending) is left out; a damaged earlier one is
    // corruption, named.
    let path = dir.path().join(SCHEDULE_FIRINGS_FILE);
    let mut text = std::fs::read_to_string(&path).expect("read");
    text.push_str("{\"schedule\":\"hou");
    std::fs::write(&path, &text).expect("write");
    assert_eq!(schedules.firings(None, 100).await.expect("read").len(), 3);
    std::fs::write(&path, format!("garbage\n{text}")).expect("write");
    assert!(matches!(
        schedules.firings(None, 100).await,
        Err(SchedulesError::Corrupt { .. })
    ));
    std::fs::write(dir.path().join(SCHEDULES_FILE), "{").expect("write");
    assert!(matches!(
        schedules.list().await,
        Err(SchedulesError::Corrupt { .. })
    ));
}
