//! The handlers: thin, each calling what the `docket` commands call (the runtime, the
//! replay and evidence crates) and answering JSON, or an [`ApiError`].

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use serde::Deserialize;
use serde_json::{Value, json};

use docket_app::Store;
use docket_app::{ChoiceError, KillSwitches, KillSwitchesError};
use docket_decider::{RunEvent, RunHistory, RunId, RunState, RunStatus};
use docket_evidence::Sealing;
use docket_runtime::{
    HumanDecision, HumanOverride, KillSwitchFileError, ListedStatus, Recorded, RunOutcome,
    RunQuery, RuntimeError, SourceKind, Workflow,
};
use docket_store::{EventStore as _, StreamId};

use crate::error::ApiError;
use crate::tokens::Principal;
use crate::{AppState, routes};

type Shared = State<Arc<AppState>>;
type ApiResult = Result<Response, ApiError>;

/// Runs this server is driving right now (a run it started, resumed or continued after a
/// decision, until that drive ends): a running run not among them is interrupted.
pub(crate) type Driving = Mutex<BTreeSet<RunId>>;

pub(crate) fn routes() -> axum::Router<Arc<AppState>> {
    axum::Router::new()
        .route("/api/openapi.json", get(openapi))
        .route("/api/runs", get(list_runs).post(start_run))
        .route("/api/runs/{run}", get(run_summary))
        .route("/api/runs/{run}/events", get(events).post(signal))
        .route("/api/runs/{run}/events/stream", get(event_stream))
        .route("/api/runs/{run}/state", get(state_at))
        .route("/api/runs/{run}/verification", get(verification))
        .route("/api/runs/{run}/replay", get(replay))
        .route("/api/runs/{run}/what-if", post(what_if))
        .route("/api/runs/{run}/export", get(export))
        .route("/api/runs/{run}/resume", post(resume))
        .route("/api/runs/{run}/cancel", post(cancel))
        .route("/api/runs/{run}/messages", post(send_message))
        .route("/api/runs/{run}/pause", post(pause))
        .route("/api/runs/{run}/unpause", post(unpause))
        .route("/api/runs/{run}/domains/{domain}", post(write_domain))
        .route("/api/runs/{run}/tickets/{ticket}/approve", post(approve))
        .route("/api/runs/{run}/tickets/{ticket}/deny", post(deny))
        .route("/api/runs/{run}/tickets/{ticket}/answer", post(answer))
        .route("/api/runs/{run}/override", post(override_block))
        .route("/api/workers", get(workers))
        .route("/api/schedules", get(list_schedules).post(add_schedule))
        .route(
            "/api/schedules/{name}",
            get(show_schedule).delete(remove_schedule),
        )
        .route("/api/schedules/{name}/pause", post(pause_schedule))
        .route("/api/schedules/{name}/unpause", post(unpause_schedule))
        .route("/api/kill-switches", get(kill_switches))
        .route("/api/kill-switches/{switch}/engage", post(engage))
        .route("/api/kill-switches/{switch}/release", post(release))
        .route("/api/policies", get(policies))
        .route("/api/policies/diff", get(policy_diff))
        .route("/api/policies/{hash}", get(policy))
        .route("/api/policies/{hash}/explain", get(explain))
        .route(
            "/api/governance/handoff-rules",
            get(handoff_rules).put(replace_handoff_rules),
        )
        .route(
            "/api/governance/handoff-rules/{from_agent}/{to_agent}",
            get(pair_rules),
        )
        .route("/api/requests", get(requests))
}

// ---------------------------------------------------------------------------------------
// Extracting what a request says, each failure a 400 naming where.

fn body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    body.map(|Json(b)| b).map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            crate::limits::body_too_large()
        } else {
            ApiError::bad_request(format!("the request body: {}", e.body_text())).at("body")
        }
    })
}

fn path<T>(p: Result<Path<T>, PathRejection>) -> Result<T, ApiError> {
    p.map(|Path(p)| p)
        .map_err(|e| ApiError::bad_request(e.body_text()).at("path"))
}

type Params = BTreeMap<String, String>;

/// The query parameters, refusing any the route does not take.
fn query(q: Result<Query<Params>, QueryRejection>, known: &[&str]) -> Result<Params, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()).at("query"))?;
    if let Some(unknown) = q.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "unknown query parameter `{unknown}` (this route takes: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ))
        .at(format!("query.{unknown}")));
    }
    Ok(q)
}

fn parse_param<T: std::str::FromStr>(
    q: &Params,
    name: &str,
    what: &str,
) -> Result<Option<T>, ApiError> {
    q.get(name)
        .map(|v| {
            v.parse::<T>().map_err(|_| {
                ApiError::bad_request(format!("{name}={v}: not {what}")).at(format!("query.{name}"))
            })
        })
        .transpose()
}

fn run_id(run: &str) -> Result<RunId, ApiError> {
    RunId::parse(run).map_err(|e| ApiError::bad_request(e.to_string()).at(format!("run {run}")))
}

fn required(text: &str, field: &str, what: &str) -> Result<(), ApiError> {
    if text.trim().is_empty() {
        Err(
            ApiError::bad_request(format!("`{field}` is required: {what}"))
                .at(format!("body.{field}")),
        )
    } else {
        Ok(())
    }
}

fn ok(value: Value) -> ApiResult {
    Ok(Json(value).into_response())
}

// ---------------------------------------------------------------------------------------
// What a run looks like in answers.

fn status_word(status: RunStatus) -> Value {
    serde_json::to_value(status).unwrap_or(Value::Null)
}

fn run_json(state: &AppState, run: &RunId, s: &RunState) -> Value {
    let driven = state
        .driving
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .contains(run);
    let request = s.request();
    // Where workers drive the runs, whether one still does is their leases' to say
    // (`GET /api/workers`), not this server's. A run waiting on a timer is this server's
    // to fire when due.
    let timer_due_at_ms = s.waits_until_ms();
    let paused = s
        .paused()
        .map(|p| json!({ "by": p.by, "reason": p.reason, "at_ms": p.at_ms }));
    let scheduled_effects: Vec<Value> = s
        .timers()
        .values()
        .filter(|t| t.pending())
        .filter_map(|t| {
            let effect = s.effects().get(t.set.effect_id.as_ref()?)?;
            Some(json!({
                "effect_id": effect.requested.effect_id,
                "kind": effect.requested.effect_kind,
                "lane": effect.requested.lane,
                "not_before_ms": t.set.due_at_ms,
            }))
        })
        .collect();
    let waiting_for_events: Vec<Value> = s
        .signal_waits()
        .values()
        .map(|w| json!({ "agent": w.agent, "name": w.name, "reason": w.reason, "timeout": w.timeout }))
        .collect();
    let interrupted = s.status() == RunStatus::Running
        && !driven
        && timer_due_at_ms.is_none()
        && waiting_for_events.is_empty()
        && !state.app.shared();
    json!({
        "run_id": run,
        "workflow": request.map(|r| r.workflow.name.as_str()),
        "status": status_word(s.status()),
        "driven": driven,
        "interrupted": interrupted,
        "timer_due_at_ms": timer_due_at_ms,
        "paused": paused,
        "waiting_for_events": waiting_for_events,
        "scheduled_effects": scheduled_effects,
        "signals": s.signals().keys().map(|id| signal_json(s, id)).collect::<Vec<_>>(),
        "events": s.version(),
        "started_at_ms": request.map(|r| r.at_ms),
        "decider_version": request.map(|r| r.decider_version),
        "bundle_hash": request.map(|r| r.bundle_hash.as_str()),
        "forked_from": request.and_then(|r| r.forked_from.as_deref()),
        "scheduled": request.and_then(|r| r.scheduled.as_deref()),
        "session": s.session().map(|x| json!({
            "id": x.id, "turn": x.turn, "previous_run": x.previous_run, "by": x.by,
        })),
        "open_tickets": s.open_tickets().map(|(id, t)| json!({ "ticket": id, "reason": t.reason, "subject": t.subject })).collect::<Vec<_>>(),
        "pending_calls": s.pending_call_ids(),
        "output": s.output(),
        "stop_reason": s.stop_reason(),
        "blocked_by": s.blocked_by(),
        "overridable": s.overridable(),
    })
}

fn event_json(e: &docket_runtime::RecordedEvent) -> Value {
    json!({
        "seq": e.seq,
        "kind": e.event.kind(),
        "recorded_at_ns": e.recorded_at_ns,
        "policy": e.policy,
        "hash": e.hash,
        "payload": e.event.to_value(),
    })
}

// ---------------------------------------------------------------------------------------
// Runs: reading.

async fn openapi() -> Json<Value> {
    Json(routes::openapi())
}

const LIST_PARAMS: &[&str] = &[
    "status",
    "workflow",
    "started_after",
    "started_before",
    "waiting",
    "cursor",
    "limit",
];
const STATUSES: &[&str] = &[
    "running",
    "interrupted",
    "waiting_for_human",
    "completed",
    "blocked",
    "failed",
    "cancelled",
];

async fn list_runs(State(state): Shared, q: Result<Query<Params>, QueryRejection>) -> ApiResult {
    let q = query(q, LIST_PARAMS)?;
    let status = q.get("status").map(String::as_str);
    if let Some(s) = status
        && !STATUSES.contains(&s)
    {
        return Err(ApiError::bad_request(format!(
            "status={s}: not a status (one of {})",
            STATUSES.join(", ")
        ))
        .at("query.status"));
    }
    let after: Option<i64> = parse_param(&q, "started_after", "a time in ms since the Unix epoch")?;
    let before: Option<i64> =
        parse_param(&q, "started_before", "a time in ms since the Unix epoch")?;
    let waiting: Option<bool> = parse_param(&q, "waiting", "true or false")?;
    let limit: usize = parse_param(&q, "limit", "a number from 1 to 500")?.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(
            ApiError::bad_request(format!("limit={limit}: not from 1 to 500")).at("query.limit"),
        );
    }
    let cursor = match q.get("cursor") {
        Some(c) => Some(list_cursor(&state, c).await?),
        None => None,
    };
    let query = RunQuery {
        status: status.map(|s| match s {
            "interrupted" => ListedStatus::Interrupted,
            s => {
                ListedStatus::Is(serde_json::from_value(json!(s)).unwrap_or(RunStatus::NotStarted))
            }
        }),
        workflow: q.get("workflow").cloned(),
        started_after: after,
        started_before: before,
        waiting: waiting == Some(true),
        cursor,
        limit: Some(limit),
    };
    // One scan of the run list kept in memory (the runtime's `run_list.rs`), not a read of
    // every run's log.
    let driving = state
        .driving
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    // Where workers drive the runs, none is called interrupted here: their leases say
    // who drives what (`GET /api/workers`).
    let shared = state.app.shared();
    let page = state
        .rt
        .list_runs(&query, |run| {
            shared || driving.contains(run) || state.timers.contains(run)
        })
        .await?;
    let runs: Vec<Value> = page
        .runs
        .iter()
        .map(|r| {
            let s = &r.summary;
            let mut run = json!({
                "run_id": s.run_id,
                "workflow": s.workflow,
                "status": status_word(s.status),
                "interrupted": r.interrupted,
                "events": s.events,
                "open_tickets": s.open_tickets,
                "overridable": s.overridable,
                "paused": s.paused,
                "started_at_ms": s.started_at_ms,
            });
            if let Some(session) = &s.session {
                run["session"] = json!({ "id": session.id, "turn": session.turn });
            }
            if !s.timers.is_empty() {
                run["timers"] = json!(s.timers);
            }
            if !s.awaited_events.is_empty() {
                run["awaited_events"] = json!(s.awaited_events);
            }
            run
        })
        .collect();
    let mut answer = json!({ "runs": runs, "next_cursor": page.next_cursor });
    if !page.unreadable.is_empty() {
        answer["unreadable"] = page
            .unreadable
            .iter()
            .map(|(run, why)| json!({ "run_id": run, "error": why }))
            .collect();
    }
    ok(answer)
}

/// A page's cursor: the `next_cursor` of a previous page, the id of a run listed there;
/// anything else is refused rather than read as the first page.
async fn list_cursor(state: &AppState, cursor: &str) -> Result<String, ApiError> {
    let refused = || {
        ApiError::bad_request(format!(
            "cursor={cursor}: not a cursor of this list (give the next_cursor of a previous page, or no cursor for the first)"
        ))
        .at("query.cursor")
    };
    let run = RunId::parse(cursor).map_err(|_| refused())?;
    let stream = StreamId::new(run.as_str()).map_err(|_| refused())?;
    match state.rt.store().head(&stream).await {
        Ok(Some(_)) => Ok(run.to_string()),
        Ok(None) => Err(refused()),
        Err(e) => Err(ApiError::from(&e)),
    }
}

async fn run_summary(State(state): Shared, p: Result<Path<String>, PathRejection>) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let s = state.rt.state(&run).await?;
    let mut answer = run_json(&state, &run, &s);
    // Every handoff decision, from the log: the state keeps only what later decisions read.
    let events = state.rt.events(&run).await?;
    answer["handoffs"] = json!(RunHistory::fold(events.iter().map(|e| &e.event)).handoffs());
    ok(answer)
}

async fn events(
    State(state): Shared,
    p: Result<Path<String>, PathRejection>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let q = query(q, &["after"])?;
    let after: u64 = parse_param(&q, "after", "a sequence number")?.unwrap_or(0);
    let events: Vec<Value> = state
        .rt
        .events(&run)
        .await?
        .iter()
        .filter(|e| e.seq > after)
        .map(event_json)
        .collect();
    ok(json!({ "run_id": run, "events": events }))
}

/// Server-sent events: one per log event, `id:` its sequence, `event:` its kind, `data:`
/// the JSON of `GET /api/runs/{run}/events`; from `?after=`, else `Last-Event-ID`.
async fn event_stream(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
    q: Result<Query<Params>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let q = query(q, &["after"])?;
    let after = match parse_param::<u64>(&q, "after", "a sequence number")? {
        Some(after) => after,
        None => match headers.get("last-event-id") {
            Some(v) => v
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| {
                    ApiError::bad_request("Last-Event-ID: not a sequence number")
                        .at("header.last-event-id")
                })?,
            None => 0,
        },
    };
    let stream = StreamId::new(run.as_str())
        .map_err(|e| ApiError::bad_request(e.to_string()).at(format!("run {run}")))?;
    if state
        .rt
        .store()
        .head(&stream)
        .await
        .map_err(RuntimeError::Store)?
        .is_none()
    {
        return Err(RuntimeError::UnknownRun(run.to_string()).into());
    }
    // Counted from here until the connection ends (the slot goes with the stream).
    let slot = state.streams.open(&who.name)?;
    let events = state.rt.follow(&run, after)?;
    let mut stopping = state.stopping.subscribe();
    // An event that cannot be read ends the stream with an `error` event saying why; the
    // server stopping ends it.
    let sse = events
        .take_until(async move {
            let _ = stopping.wait_for(|stopping| *stopping).await;
        })
        .scan((false, slot), |(failed, _slot), item| {
            if *failed {
                return futures::future::ready(None);
            }
            let event = match item {
                Ok(e) => SseEvent::default()
                    .id(e.seq.to_string())
                    .event(e.event.kind())
                    .data(event_json(&e).to_string()),
                Err(e) => {
                    *failed = true;
                    SseEvent::default()
                        .event("error")
                        .data(json!({ "error": { "code": "internal", "message": e.to_string(), "where": null } }).to_string())
                }
            };
            futures::future::ready(Some(Ok::<_, Infallible>(event)))
        });
    Ok(Sse::new(sse)
        .keep_alive(KeepAlive::default())
        .into_response())
}

async fn state_at(
    State(state): Shared,
    p: Result<Path<String>, PathRejection>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let q = query(q, &["at"])?;
    let at = q.get("at").map_or("last", String::as_str);
    let recorded = state.rt.events(&run).await?;
    let events: Vec<RunEvent> = recorded.iter().map(|e| e.event.clone()).collect();
    let seq = docket_replay::point_in(&events, at)
        .map_err(|why| ApiError::bad_request(format!("at={at}: {why}")).at("query.at"))?;
    let base = state.rt.state_at(&run, Some(seq as u64)).await?;
    let found = docket_replay::inspect_from(base, &events, seq);
    let mut value = serde_json::to_value(&found).map_err(|e| ApiError::internal(e.to_string()))?;
    if let Some(object) = value.as_object_mut() {
        object.insert("run".to_owned(), json!(run.as_str()));
        object.insert("hash".to_owned(), json!(recorded[seq - 1].hash));
    }
    ok(value)
}

async fn verification(State(state): Shared, p: Result<Path<String>, PathRejection>) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let stream = StreamId::new(run.as_str())
        .map_err(|e| ApiError::bad_request(e.to_string()).at(format!("run {run}")))?;
    if state
        .rt
        .store()
        .head(&stream)
        .await
        .map_err(RuntimeError::Store)?
        .is_none()
    {
        return Err(RuntimeError::UnknownRun(run.to_string()).into());
    }
    let report = state
        .rt
        .store()
        .verify(&stream)
        .await
        .map_err(RuntimeError::Store)?;
    let chain = match &report.first_break {
        None => json!({ "sound": true, "events": report.verified }),
        Some(b) => {
            json!({ "sound": false, "verified": report.verified, "seq": b.seq(), "what": b.to_string() })
        }
    };
    ok(json!({ "run_id": run, "chain": chain }))
}

/// A run's events, and the sequence numbers of those holding a shredded value's marker
/// (replay takes what was decided of them as recorded: docs/replay.md#shredded-values).
fn split_shredded(
    recorded: Vec<docket_runtime::RecordedEvent>,
) -> (Vec<RunEvent>, std::collections::BTreeSet<u64>) {
    let shredded = recorded
        .iter()
        .filter(|e| !e.shredded.is_empty())
        .map(|e| e.seq)
        .collect();
    (recorded.into_iter().map(|e| e.event).collect(), shredded)
}

async fn replay(State(state): Shared, p: Result<Path<String>, PathRejection>) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let (events, shredded) = split_shredded(state.rt.events(&run).await?);
    let report = docket_replay::replay_with_shredded(&events, &shredded, |_| {})
        .map_err(|e| ApiError::refused(format!("run {run}: {e}")).at(format!("run {run}")))?;
    ok(serde_json::to_value(&report).map_err(|e| ApiError::internal(e.to_string()))?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WhatIfBody {
    policies: String,
}

async fn what_if(
    State(state): Shared,
    p: Result<Path<String>, PathRejection>,
    b: Result<Json<WhatIfBody>, JsonRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let b = body(b)?;
    let name = b.policies.clone();
    let sources = state.sources.clone();
    let read = tokio::task::spawn_blocking(move || {
        sources.read(std::path::Path::new(&b.policies), SourceKind::Bundle)
    })
    .await
    .map_err(|e| ApiError::internal(format!("reading the bundle {name}: {e}")))?;
    let (_, source) = read.map_err(|e| ApiError::source(&e, "body.policies"))?;
    let format = docket_policies::Format::from_name(&name).unwrap_or(docket_policies::Format::Toml);
    let bundle = docket_policies::parse(&source, &name, format)
        .map_err(|e| ApiError::bad_request(e.to_string()).at("body.policies"))?;
    let (events, shredded) = split_shredded(state.rt.events(&run).await?);
    let report = docket_replay::what_if_with_shredded(&events, &shredded, &bundle, &source, &name)
        .map_err(|e| ApiError::refused(format!("run {run}: {e}")).at(format!("run {run}")))?;
    ok(serde_json::to_value(&report).map_err(|e| ApiError::internal(e.to_string()))?)
}

async fn export(
    State(state): Shared,
    p: Result<Path<String>, PathRejection>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let q = query(q, &["format", "redact"])?;
    let format = q.get("format").map_or("jsonl", String::as_str);
    let redact = q
        .get("redact")
        .map(|list| {
            list.split(',')
                .map(|one| {
                    one.parse::<docket_evidence::Redaction>().map_err(|why| {
                        ApiError::bad_request(format!("redact={list}: {why}")).at("query.redact")
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?
        .unwrap_or_default();
    let wanted = match format {
        "jsonl" => crate::export::Wanted::Jsonl(redact),
        "html" if redact.is_empty() => crate::export::Wanted::Html,
        "html" => {
            return Err(ApiError::bad_request(
                "redact applies to format=jsonl: an HTML report shows the run's values as they are",
            )
            .at("query.redact"));
        }
        _ => {
            return Err(
                ApiError::bad_request(format!("format={format}: jsonl or html")).at("query.format"),
            );
        }
    };
    let (bytes, sealing) = crate::export::export(&state.rt, &state.data, &run, wanted).await?;
    let content_type = if format == "html" {
        "text/html; charset=utf-8"
    } else {
        "application/x-ndjson"
    };
    // Whether the export carries a signed checkpoint, for a client that does not parse it.
    let seal = match &sealing {
        Sealing::Signed(seal) => format!("signed by {}", seal.key.label()),
        Sealing::Unsealed => "unsigned: no checkpoint at this size".to_owned(),
        Sealing::Unverified { why, .. } => format!("unsigned: {why}"),
    };
    let seal = header::HeaderValue::from_str(&seal)
        .unwrap_or_else(|_| header::HeaderValue::from_static("unsigned"));
    Ok((
        [
            (
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(content_type),
            ),
            (header::HeaderName::from_static("docket-seal"), seal),
        ],
        bytes,
    )
        .into_response())
}

// ---------------------------------------------------------------------------------------
// Runs: driving. The work goes on in the background; the answer comes once its first
// event is recorded (202, the run still driven) or once it stops (200), whichever first.

/// Drives a run whose input `recorded` holds on, answering 200 when the drive stops
/// before it records anything more, else 202 once it records its next event.
async fn drive_recorded(
    state: &Arc<AppState>,
    run: &RunId,
    recorded: Recorded<Store>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if state.app.shared() {
        return hand_to_workers(state, run, recorded).await;
    }
    let version = recorded.state().version();
    drive(state, run, version, recorded.drive()).await
}

/// Where workers share the runs (a PostgreSQL store), the server drives none: what a
/// request recorded is handed to them, queued (202, `queued: true`), or, when the input
/// settled the run by itself, answered as it stands (200).
async fn hand_to_workers(
    state: &Arc<AppState>,
    run: &RunId,
    recorded: Recorded<Store>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let handed = state
        .app
        .hand_on(recorded)
        .await
        .map_err(|e| ApiError::from(e).after_recording(run.as_str()))?;
    Ok(match handed {
        docket_app::HandedOn::Queued(s) => {
            let mut answer = run_json(state, run, &s);
            answer["queued"] = json!(true);
            (StatusCode::ACCEPTED, Json(answer))
        }
        docket_app::HandedOn::Settled(s)
        | docket_app::HandedOn::Driven(RunOutcome { state: s, .. }) => {
            (StatusCode::OK, Json(run_json(state, run, &s)))
        }
    })
}

/// Drives `work` for `run`, answering as said above; the drive's end is traced and, when
/// the data directory has a signing key, finished runs are sealed as after a command.
async fn drive(
    state: &Arc<AppState>,
    run: &RunId,
    recorded_after: u64,
    work: impl Future<Output = Result<RunOutcome, RuntimeError>> + Send + 'static,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let stream = StreamId::new(run.as_str())
        .map_err(|e| ApiError::bad_request(e.to_string()).at(format!("run {run}")))?;
    let mut handle = spawn_drive(state, run, work);
    let mut tail = Box::pin(state.rt.store().tail(&stream, recorded_after + 1));
    tokio::select! {
        biased;
        joined = &mut handle => {
            let outcome = joined
                .map_err(|e| ApiError::internal(format!("the drive of run {run} stopped: {e}")))?
                // What the request asked for was recorded before the drive began: the
                // run is in the log, stopped where the failure found it.
                .map_err(|e| ApiError::from(e).after_recording(run.as_str()))?;
            Ok((StatusCode::OK, Json(run_json(state, run, &outcome.state))))
        }
        _ = tail.next() => {
            let s = state.rt.state(run).await?;
            Ok((StatusCode::ACCEPTED, Json(run_json(state, run, &s))))
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    workflow: String,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    run_id: Option<String>,
}

/// Reads the workflow a request names, and its default input when the request gives
/// none, from under the server's root (docs/api.md#files-the-api-reads), off the API's
/// threads.
async fn load_workflow(
    state: &Arc<AppState>,
    workflow: &str,
    input: Option<Value>,
) -> Result<(Workflow, Value), ApiError> {
    let sources = state.sources.clone();
    let path = PathBuf::from(workflow);
    let loaded = tokio::task::spawn_blocking(move || {
        let wf = Workflow::load_within(&path, &sources).map_err(|e| ApiError::workflow(&e))?;
        let input = match input {
            Some(input) => input,
            None => {
                let file = wf.spec.input.as_deref().ok_or_else(|| {
                    ApiError::bad_request("no `input` given and the workflow names no `input` file")
                        .at("body.input")
                })?;
                let (_, text) = sources
                    .read(std::path::Path::new(file), SourceKind::Input)
                    .map_err(|e| ApiError::source(&e, "body.input"))?;
                serde_json::from_str(&text).map_err(|e| {
                    ApiError::bad_request(format!("the workflow's input {file} is not JSON: {e}"))
                        .at("body.input")
                })?
            }
        };
        Ok((wf, input))
    });
    loaded
        .await
        .map_err(|e| ApiError::internal(format!("reading the workflow {workflow}: {e}")))?
}

async fn start_run(State(state): Shared, b: Result<Json<StartBody>, JsonRejection>) -> ApiResult {
    let b = body(b)?;
    let (wf, input) = load_workflow(&state, &b.workflow, b.input).await?;
    let problems = state.rt.unregistered(&wf.spec);
    if !problems.is_empty() {
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(ApiError::refused(format!(
            "{} cannot run, nothing was recorded: {}",
            b.workflow,
            text.join("; ")
        ))
        .at("body.workflow"));
    }
    let run = match &b.run_id {
        Some(id) => {
            RunId::parse(id).map_err(|e| ApiError::bad_request(e.to_string()).at("body.run_id"))?
        }
        None => state.rt.new_run_id(),
    };
    // Content off the interaction matrix the bundle would empty: said, not refused
    // (docs/governance.md#content-that-is-not-a-handoff), as `docket run` says it.
    let warnings = wf.emptied_content();
    for w in &warnings {
        tracing::warn!(run = %run, "{w}");
    }
    // Recorded before anything is answered: an id taken, even at the same moment, is a
    // 409 and nothing of this request is recorded.
    let recorded = state.rt.record_start(&wf, input, Some(run.clone())).await?;
    let mut answer = drive_recorded(&state, &run, recorded).await?;
    if !warnings.is_empty() {
        answer.1["warnings"] = json!(warnings);
    }
    Ok(answer.into_response())
}

async fn resume(State(state): Shared, p: Result<Path<String>, PathRejection>) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let s = state.rt.state(&run).await?;
    if state.app.shared() {
        state.app.queue(&run).await?;
        let mut answer = run_json(&state, &run, &s);
        answer["queued"] = json!(true);
        return Ok((StatusCode::ACCEPTED, Json(answer)).into_response());
    }
    let rt = state.rt.clone();
    let id = run.clone();
    let answer = drive(
        &state,
        &run,
        s.version(),
        async move { rt.resume(&id).await },
    )
    .await?;
    Ok(answer.into_response())
}

/// Drives `work` for `run` on the runs' runtime (this handler's threads serve the API
/// only), with the run counted as driven until it stops; the drive's end is traced, and
/// the runs that finished are sealed.
fn spawn_drive(
    state: &Arc<AppState>,
    run: &RunId,
    work: impl Future<Output = Result<RunOutcome, RuntimeError>> + Send + 'static,
) -> tokio::task::JoinHandle<Result<RunOutcome, RuntimeError>> {
    state
        .driving
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(run.clone());
    let watcher = state.clone();
    let who = run.clone();
    state.drives.spawn(async move {
        let outcome = work.await;
        watcher
            .driving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&who);
        if let Err(e) = &outcome {
            tracing::warn!(run = %who, "drive ended: {e}");
        }
        watcher.app.seal_run(&who).await;
        if let Ok(o) = &outcome
            && let Some(due) = o.state.waits_until_ms()
        {
            watcher
                .timers
                .insert(who, due, run_priority(&watcher, &o.state));
        }
        outcome
    })
}

/// A run's priority among those whose timers fell due: its bundle's `[defaults] priority`
/// (`NORMAL` for a bundle that no longer compiles, whose drive then says so).
fn run_priority(state: &AppState, run: &RunState) -> docket_policies::Priority {
    run.request()
        .and_then(|r| state.rt.run_priority(r).ok())
        .unwrap_or_default()
}

/// Drives of runs whose timer fell due, at most at once.
const TIMER_DRIVES_AT_ONCE: usize = 32;

/// Fires this server's timers: every run left waiting on one when the server starts
/// (its process stopped while it waited) is kept until its timer is due, as is every run
/// whose drive here ends at a timer; when due, the run is driven again and records the
/// firing, late when it fell due while no process drove it. Runs of a PostgreSQL store are
/// the workers'.
pub(crate) async fn fire_timers(state: Arc<AppState>) {
    if state.app.shared() {
        return;
    }
    let runs = match state.rt.run_summaries().await {
        Ok(runs) => runs,
        Err(e) => {
            tracing::warn!("runs waiting on timers not looked for: {e}");
            Vec::new()
        }
    };
    for summary in runs.iter().filter(|r| r.status == RunStatus::Running) {
        let run = &summary.run_id;
        match state.rt.state(run).await {
            Ok(s) => {
                let due = s.waits_until_ms();
                if let Some(due) = due {
                    state
                        .timers
                        .insert(run.clone(), due, run_priority(&state, &s));
                }
                // This server drives the run when its timer is due or its event comes: a
                // `docket runs` beside it lists it as waiting, not interrupted.
                let waits = due.is_some() || s.awaits_signal();
                if waits
                    && let Some(store) = state.rt.store().embedded()
                    && let Ok(stream) = docket_store::StreamId::new(run.as_str())
                {
                    store.note_driven(&stream);
                }
            }
            Err(e) => tracing::warn!(run = %run, "not read for its timers: {e}"),
        }
    }
    // A burst of timers due together is driven a few at a time: thousands of drives at
    // once only contend (bench/RESULTS.md, timer_runs). A run is taken when there is room
    // for its drive, the first due in the claim order (docs/postgres.md#claim-order).
    let at_once = Arc::new(tokio::sync::Semaphore::new(TIMER_DRIVES_AT_ONCE));
    loop {
        let Ok(permit) = at_once.clone().acquire_owned().await else {
            return;
        };
        let run = state.timers.due(|| state.rt.now_ms()).await;
        // A drive going on keeps the run again if it ends at a timer.
        let driven = state
            .driving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&run);
        if driven {
            continue;
        }
        tracing::info!(run = %run, "driven again: its timer is due");
        let rt = state.rt.clone();
        let id = run.clone();
        drop(spawn_drive(&state, &run, async move {
            let _permit = permit;
            rt.resume(&id).await
        }));
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonBody {
    reason: String,
}

async fn cancel(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
    b: Result<Json<ReasonBody>, JsonRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let b = body(b)?;
    required(&b.reason, "reason", "why the run is cancelled")?;
    let outcome = state.app.cancel(&run, &who.name, &b.reason).await?;
    ok(run_json(&state, &run, &outcome.state))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    message: String,
}

/// The user's next message to a finished run: records its session's next turn, a new
/// run, the token's name as who sent it, and drives it in the background; 201 naming the
/// new run (docs/agent-protocol.md#sessions). A run not finished, or not the session's
/// latest turn, or whose next turn another message started first, is a 409.
async fn send_message(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
    b: Result<Json<MessageBody>, JsonRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let b = body(b)?;
    required(&b.message, "message", "the user's message")?;
    let recorded = state.rt.record_turn(&run, &b.message, &who.name).await?;
    let turn = recorded.state().run_id().cloned().unwrap_or_default();
    let (_, Json(answer)) = drive_recorded(&state, &turn, recorded).await?;
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    reason: String,
    #[serde(default)]
    choose: Option<u32>,
}

/// Records the pause; the drive going on, if any, stops at its next step.
async fn pause(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
    b: Result<Json<ReasonBody>, JsonRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let b = body(b)?;
    required(&b.reason, "reason", "why the run is paused")?;
    let recorded = state
        .rt
        .record_pause(&run, &who.name, &b.reason, true)
        .await?;
    ok(run_json(&state, &run, recorded.state()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DomainWriteBody {
    role: String,
    reason: String,
    content: Value,
}

/// Records a person's write of a domain, by the token's holder in a role of the run's
/// bundle (docs/governance.md#a-person-writes-a-domain): 201 with the run and the version
/// written; a write the bundle refuses is a 422 naming the rule, and records nothing.
async fn write_domain(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<(String, String)>, PathRejection>,
    b: Result<Json<DomainWriteBody>, JsonRejection>,
) -> ApiResult {
    let (run, domain) = path(p)?;
    let run = run_id(&run)?;
    let b = body(b)?;
    required(&b.role, "role", "the role of the run's bundle you write in")?;
    required(&b.reason, "reason", "why you write the domain")?;
    let write = docket_decider::HumanWroteDomain {
        by: who.name.clone(),
        role: b.role.clone(),
        domain: domain.clone(),
        content: b.content,
        reason: b.reason,
        at_ms: 0,
    };
    let recorded = state.rt.record_domain_write(&run, write).await?;
    let s = recorded.state();
    let version = s
        .episodes()
        .domains
        .get(&domain)
        .and_then(|v| v.last())
        .map(|v| json!({"version": v.version, "content": v.content}));
    let mut answer = run_json(&state, &run, s);
    answer["domain"] = json!({
        "domain": domain, "by": who.name, "role": b.role, "written": version,
    });
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalBody {
    name: String,
    #[serde(default)]
    payload: Value,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// Records an outside event sent by the token's holder, then drives the run on, as
/// after a decision; `signal` says what became of the event. Sent again with its key,
/// it is answered 200 naming the event first recorded, and nothing more is recorded.
async fn signal(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
    b: Result<Json<SignalBody>, JsonRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let b = body(b)?;
    required(&b.name, "name", "the event's name")?;
    if let Some(key) = &b.idempotency_key {
        required(key, "idempotency_key", "your key for this event")?;
    }
    let received = docket_decider::SignalReceived {
        name: b.name,
        payload: b.payload,
        by: who.name.clone(),
        idempotency_key: b.idempotency_key,
        at_ms: 0,
    };
    let recorded = match state.rt.record_signal(&run, received).await {
        Ok(recorded) => recorded,
        Err(docket_runtime::RuntimeError::Rejected {
            rejection: docket_decider::Rejection::SignalRecorded { signal_id },
            ..
        }) => {
            let s = state.rt.state(&run).await?;
            let mut answer = run_json(&state, &run, &s);
            answer["signal"] = signal_json(&s, &signal_id);
            answer["duplicate"] = json!(true);
            return ok(answer);
        }
        Err(e) => return Err(e.into()),
    };
    let signal_id = recorded.state().signals().keys().next_back().cloned();
    let told = signal_id
        .as_ref()
        .map(|id| signal_json(recorded.state(), id));
    let (status, Json(mut answer)) = drive_recorded(&state, &run, recorded).await?;
    answer["signal"] = told.unwrap_or(Value::Null);
    Ok((status, Json(answer)).into_response())
}

/// What became of an outside event: kept, delivered (to whom), or refused (why).
fn signal_json(s: &RunState, id: &docket_decider::SignalId) -> Value {
    let Some(signal) = s.signals().get(id) else {
        return json!({ "signal_id": id });
    };
    json!({
        "signal_id": id,
        "name": signal.name,
        "by": signal.by,
        "received_at_ms": signal.at_ms,
        "phase": signal.phase,
        "delivered_to": signal.delivered_to,
        "refused": signal.refused,
    })
}

/// Records the end of the pause and drives the run on, as after a decision.
async fn unpause(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
    b: Result<Json<ReasonBody>, JsonRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let b = body(b)?;
    required(&b.reason, "reason", "why the run goes on")?;
    let recorded = state
        .rt
        .record_pause(&run, &who.name, &b.reason, false)
        .await?;
    let answer = drive_recorded(&state, &run, recorded).await?;
    Ok(answer.into_response())
}

async fn decide(
    state: &Arc<AppState>,
    run: RunId,
    ticket: String,
    decision: HumanDecision,
) -> ApiResult {
    // Recorded before anything is answered: of two decisions at once, one is recorded
    // and answered 2xx, the other is answered 409 naming the one recorded.
    let recorded = state.rt.record_decision(&run, &ticket, decision).await?;
    let answer = drive_recorded(state, &run, recorded).await?;
    Ok(answer.into_response())
}

async fn approve(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<(String, String)>, PathRejection>,
    b: Result<Json<ApproveBody>, JsonRejection>,
) -> ApiResult {
    let (run, ticket) = path(p)?;
    let run = run_id(&run)?;
    let b = body(b)?;
    required(&b.reason, "reason", "why it is approved")?;
    let decision = HumanDecision::approve(&who.name, &b.reason).choosing(b.choose);
    decide(&state, run, ticket, decision).await
}

async fn deny(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<(String, String)>, PathRejection>,
    b: Result<Json<ReasonBody>, JsonRejection>,
) -> ApiResult {
    let (run, ticket) = path(p)?;
    let run = run_id(&run)?;
    let b = body(b)?;
    required(&b.reason, "reason", "why it is denied")?;
    decide(
        &state,
        run,
        ticket,
        HumanDecision::deny(&who.name, &b.reason),
    )
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    #[serde(default)]
    choice: Option<Value>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    reason: String,
}

async fn answer(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<(String, String)>, PathRejection>,
    b: Result<Json<AnswerBody>, JsonRejection>,
) -> ApiResult {
    let (run, ticket) = path(p)?;
    let run = run_id(&run)?;
    let b = body(b)?;
    if b.choice.is_none() && b.text.as_deref().is_none_or(|t| t.trim().is_empty()) {
        return Err(ApiError::bad_request("an answer needs `choice` or `text`").at("body"));
    }
    let choice = match &b.choice {
        None => None,
        Some(Value::Number(n)) => Some(n.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(
            || ApiError::bad_request(format!("choice {n}: not an option number")).at("body.choice"),
        )?),
        Some(Value::String(text)) => {
            let s = state.rt.state(&run).await?;
            Some(option_number(&s, &ticket, text)?)
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "choice {other}: give the option's number (from 1) or its text"
            ))
            .at("body.choice"));
        }
    };
    let decision = HumanDecision::approve(&who.name, &b.reason)
        .choosing(choice)
        .answering(b.text);
    decide(&state, run, ticket, decision).await
}

/// A question's option given as its text, as its number; the error where it is.
fn option_number(state: &RunState, ticket: &str, choice: &str) -> Result<u32, ApiError> {
    docket_app::option_number(state, ticket, choice).map_err(|e| match &e {
        ChoiceError::UnknownTicket { ticket } => {
            ApiError::not_found(e.to_string()).at(format!("ticket {ticket}"))
        }
        _ => ApiError::bad_request(e.to_string()).at("body.choice"),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OverrideBody {
    role: String,
    reason: String,
    #[serde(default)]
    rule: Option<String>,
}

async fn override_block(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
    b: Result<Json<OverrideBody>, JsonRejection>,
) -> ApiResult {
    let run = run_id(&path(p)?)?;
    let b = body(b)?;
    required(&b.reason, "reason", "why the rule is overridden")?;
    required(
        &b.role,
        "role",
        "the role of the bundle's registry you act in",
    )?;
    let o = HumanOverride {
        by: who.name.clone(),
        role: b.role,
        reason: b.reason,
        rule_id: b.rule,
    };
    if state.app.shared() {
        let recorded = state.rt.record_override(&run, o).await?;
        let answer = hand_to_workers(&state, &run, recorded).await?;
        return Ok(answer.into_response());
    }
    let version = state.rt.state(&run).await?.version();
    let rt = state.rt.clone();
    let id = run.clone();
    let answer = drive(&state, &run, version, async move {
        rt.override_block(&id, o).await
    })
    .await?;
    Ok(answer.into_response())
}

// ---------------------------------------------------------------------------------------
// Kill switches.

/// A kill switch's failure: a name that is not a switch is the request's fault; the
/// switches' file or database failing is the server's, named.
fn switch_error(e: KillSwitchesError, switch: &str) -> ApiError {
    let message = e.to_string();
    match &e {
        KillSwitchesError::InvalidSwitch { .. }
        | KillSwitchesError::File(KillSwitchFileError::InvalidSwitch { .. }) => {
            ApiError::bad_request(message).at(format!("switch {switch}"))
        }
        KillSwitchesError::File(KillSwitchFileError::Io { path, source, .. }) => {
            ApiError::io(message, source).at(format!("file {}", path.display()))
        }
        KillSwitchesError::File(KillSwitchFileError::Corrupt { path, .. }) => {
            ApiError::internal(message).at(format!("file {}", path.display()))
        }
        KillSwitchesError::Database(_) => ApiError::internal(message).at("database"),
        _ => ApiError::internal(message),
    }
}

// ---------------------------------------------------------------------------------------
// Workers.

/// The workers of a shared store and the runs' leases; nothing on a data directory.
async fn workers(State(state): Shared) -> ApiResult {
    let Some(shared) = state.rt.store().postgres() else {
        return ok(json!({
            "shared": false,
            "workers": [],
            "leases": [],
            "note": "this server records in a data directory and drives its runs itself: workers share only the runs of a PostgreSQL store (docs/postgres.md)",
        }));
    };
    let workers = shared.workers().await.map_err(RuntimeError::Store)?;
    let leases = shared.leases().await.map_err(RuntimeError::Store)?;
    ok(json!({
        "shared": true,
        "workers": workers.iter().map(|w| json!({
            "holder": w.holder,
            "name": w.name,
            "alive": !w.stopped,
            "runs_held": w.holds,
            "renewed_ms_ago": w.renewed_ms_ago,
        })).collect::<Vec<_>>(),
        "leases": leases.iter().map(|l| json!({
            "run_id": l.stream.as_str(),
            "queued": l.runnable,
            "priority": l.priority.as_str(),
            "epoch": l.epoch,
            "holder": l.holder,
            "expires_in_ms": l.expires_in_ms,
            "due_in_ms": l.due_in_ms,
        })).collect::<Vec<_>>(),
    }))
}

/// The switches of the store this server records in: its data directory's file, or the
/// database every worker reads.
fn switches(state: &AppState) -> KillSwitches {
    KillSwitches::of(state.rt.store(), &state.data)
}

async fn kill_switches(State(state): Shared) -> ApiResult {
    let switches = switches(&state);
    let engaged = switches
        .state()
        .await
        .map_err(|e| switch_error(e, "global"))?;
    let history = switches
        .history()
        .await
        .map_err(|e| switch_error(e, "global"))?;
    ok(json!({ "engaged": engaged.engaged, "history": history }))
}

async fn flip(
    state: &AppState,
    who: &Principal,
    switch: &str,
    on: bool,
    reason: &str,
) -> ApiResult {
    required(reason, "reason", "why (kept with the flip)")?;
    let flip = switches(state)
        .set(switch, on, &who.name, reason, state.rt.now_ms())
        .await
        .map_err(|e| switch_error(e, switch))?;
    ok(json!({ "switch": switch, "flip": flip }))
}

async fn engage(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
    b: Result<Json<ReasonBody>, JsonRejection>,
) -> ApiResult {
    let switch = path(p)?;
    let b = body(b)?;
    flip(&state, &who, &switch, true, &b.reason).await
}

async fn release(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
    b: Result<Json<ReasonBody>, JsonRejection>,
) -> ApiResult {
    let switch = path(p)?;
    let b = body(b)?;
    flip(&state, &who, &switch, false, &b.reason).await
}

// ---------------------------------------------------------------------------------------
// Policy bundles, as recorded in runs.

/// Every bundle recorded in a run, by hash: the `run.requested` that first recorded it,
/// and how many runs did.
async fn recorded_bundles(
    state: &AppState,
) -> Result<BTreeMap<String, (Arc<docket_decider::RunRequested>, usize)>, ApiError> {
    let mut bundles: BTreeMap<String, (Arc<docket_decider::RunRequested>, usize)> = BTreeMap::new();
    for run in state.rt.run_summaries().await? {
        let Ok((request, _)) = state.rt.requested(&run.run_id).await else {
            continue;
        };
        bundles
            .entry(request.bundle_hash.clone())
            .and_modify(|(first, n)| {
                *n += 1;
                if request.at_ms < first.at_ms {
                    *first = request.clone();
                }
            })
            .or_insert((request.clone(), 1));
    }
    Ok(bundles)
}

async fn policies(State(state): Shared) -> ApiResult {
    let bundles = recorded_bundles(&state).await?;
    let list: Vec<Value> = bundles
        .iter()
        .map(|(hash, (r, runs))| {
            let b = docket_decider::recorded_bundle(r).ok();
            json!({
                "hash": hash,
                "name": r.bundle_source_name,
                "bundle": b.as_ref().map(|b| b.spec().bundle.id.clone()),
                "version": b.as_ref().map(|b| b.spec().bundle.version.clone()),
                "runs": runs,
                "first_recorded_ms": r.at_ms,
            })
        })
        .collect();
    ok(json!({ "bundles": list }))
}

async fn bundle_by_hash(
    state: &AppState,
    hash: &str,
    at: &str,
) -> Result<
    (
        Arc<docket_decider::RunRequested>,
        docket_policies::PolicyBundle,
    ),
    ApiError,
> {
    let bundles = recorded_bundles(state).await?;
    let (request, _) = bundles.get(hash).ok_or_else(|| {
        ApiError::not_found(format!(
            "no run recorded a bundle with hash {hash} (GET /api/policies lists them)"
        ))
        .at(at.to_owned())
    })?;
    let bundle = docket_decider::recorded_bundle(request)
        .map_err(|e| ApiError::internal(format!("bundle {hash}: {e}")))?;
    Ok((request.clone(), bundle))
}

async fn policy(State(state): Shared, p: Result<Path<String>, PathRejection>) -> ApiResult {
    let hash = path(p)?;
    let (request, bundle) = bundle_by_hash(&state, &hash, &format!("bundle {hash}")).await?;
    ok(json!({
        "hash": hash,
        "name": request.bundle_source_name,
        "bundle": bundle.spec().bundle.id,
        "version": bundle.spec().bundle.version,
        "agents": bundle.agent_ids().collect::<Vec<_>>(),
        "source": request.bundle_source,
    }))
}

async fn policy_diff(State(state): Shared, q: Result<Query<Params>, QueryRejection>) -> ApiResult {
    let q = query(q, &["old", "new"])?;
    let hash = |name: &str| {
        q.get(name).cloned().ok_or_else(|| {
            ApiError::bad_request(format!("`{name}` is required: a bundle hash"))
                .at(format!("query.{name}"))
        })
    };
    let (old, new) = (hash("old")?, hash("new")?);
    let (_, a) = bundle_by_hash(&state, &old, "query.old").await?;
    let (_, b) = bundle_by_hash(&state, &new, "query.new").await?;
    ok(serde_json::to_value(docket_policies::diff(&a, &b))
        .map_err(|e| ApiError::internal(e.to_string()))?)
}

async fn explain(
    State(state): Shared,
    p: Result<Path<String>, PathRejection>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult {
    let hash = path(p)?;
    let q = query(q, &["from", "to", "context"])?;
    let (_, bundle) = bundle_by_hash(&state, &hash, &format!("bundle {hash}")).await?;
    let context: bool = parse_param(&q, "context", "true or false")?.unwrap_or(false);
    let mut agents = Vec::new();
    for name in ["from", "to"] {
        let agent = q.get(name).ok_or_else(|| {
            ApiError::bad_request(format!("`{name}` is required: an agent of the bundle"))
                .at(format!("query.{name}"))
        })?;
        if !bundle.agent_ids().any(|a| a == agent) {
            return Err(ApiError::bad_request(format!(
                "{name}={agent}: the bundle declares no agent `{agent}` (its agents: {})",
                bundle.agent_ids().collect::<Vec<_>>().join(", ")
            ))
            .at(format!("query.{name}")));
        }
        agents.push(agent.clone());
    }
    let input = if context {
        docket_policies::InputKind::Context
    } else {
        docket_policies::InputKind::Decision
    };
    let decision = bundle.decide_handoff(&agents[0], &agents[1], input);
    ok(json!({ "bundle": hash, "handoff": decision }))
}

// ---------------------------------------------------------------------------------------
// The request log.

async fn requests(State(state): Shared) -> ApiResult {
    let lines = state.access.requests().await.map_err(|e| e.answer())?;
    ok(json!({ "requests": lines }))
}

// ---------------------------------------------------------------------------------------
// Handoff rules of the registered bundle versions (seed 001's governance API, docs/api.md
// #handoff-rules): reads of the latest version, and a replacement that registers the next.

const RULES_PARAMS: &[&str] = &["bundle"];

async fn handoff_rules(
    State(state): Shared,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult {
    let q = query(q, RULES_PARAMS)?;
    let rules = state
        .rt
        .handoff_rules(q.get("bundle").map(String::as_str))
        .await?;
    ok(json!(rules))
}

async fn pair_rules(
    State(state): Shared,
    p: Result<Path<(String, String)>, PathRejection>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult {
    let (from, to) = path(p)?;
    let q = query(q, RULES_PARAMS)?;
    let rules = state
        .rt
        .pair_rules(q.get("bundle").map(String::as_str), &from, &to)
        .await?;
    ok(json!(rules))
}

/// The body is the seed's bare list of rules, or an object with `rules` (and `reason`);
/// the reason may come as `?reason=` instead. Who is the token's principal.
async fn replace_handoff_rules(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    q: Result<Query<Params>, QueryRejection>,
    b: Result<Json<Value>, JsonRejection>,
) -> ApiResult {
    let q = query(q, &["bundle", "reason"])?;
    let b = body(b)?;
    let reason = q
        .get("reason")
        .map(String::as_str)
        .or_else(|| b.get("reason").and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned();
    if reason.trim().is_empty() {
        return Err(ApiError::bad_request(
            "why the rules change is required: give `?reason=TEXT`, or `reason` beside `rules` in the body",
        )
        .at("query.reason"));
    }
    let replaced = docket_app::replace_handoff_rules(
        &state.rt,
        q.get("bundle").map(String::as_str),
        &b,
        &who.name,
        &reason,
    )
    .await?;
    ok(json!(replaced))
}

// ---------------------------------------------------------------------------------------
// Schedules (docs/schedules.md).

/// Fires the schedules of this server's data directory when due: each run a firing
/// starts is driven here, as a `POST /api/runs` would be. The schedules are read again at
/// least every second, so a change made meanwhile from a terminal (`docket schedule`) is
/// followed. The schedules of a PostgreSQL store are the workers'.
pub(crate) async fn fire_schedules(state: Arc<AppState>) {
    if state.app.shared() {
        return;
    }
    let firer = docket_app::ScheduleFirer::new(state.app.clone(), "docket serve")
        .reading_under(state.sources.clone());
    loop {
        match firer.fire_due().await {
            Ok(fired) => {
                for (name, e) in &fired.failed {
                    tracing::warn!(schedule = %name, "not fired: {e}");
                }
                for f in &fired.firings {
                    tracing::info!(
                        schedule = %f.schedule,
                        due_at_ms = f.due_at_ms,
                        late_ms = f.late_ms,
                        outcome = f.outcome.as_str(),
                        run = f.run_id.as_deref().unwrap_or(""),
                        "schedule fired"
                    );
                }
                for recorded in fired.started {
                    let run = recorded.state().run_id().cloned().unwrap_or_default();
                    drop(spawn_drive(&state, &run, recorded.drive()));
                }
                // Started by a firing cut short (this server stopped before driving them).
                for run in fired.unfinished {
                    let driven = state
                        .driving
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .contains(&run);
                    if !driven && !state.timers.contains(&run) {
                        let app = state.app.clone();
                        let id = run.clone();
                        drop(spawn_drive(
                            &state,
                            &run,
                            async move { app.resume(&id).await },
                        ));
                    }
                }
            }
            Err(e) => tracing::warn!("schedules not read: {e}"),
        }
        let now = state.rt.now_ms();
        let wait = match firer.next_due_ms(now).await {
            Ok(Some(at)) => at.saturating_sub(now).clamp(10, 1_000),
            _ => 1_000,
        };
        tokio::time::sleep(std::time::Duration::from_millis(
            u64::try_from(wait).unwrap_or(1_000),
        ))
        .await;
    }
}

fn schedules_of(state: &AppState) -> docket_app::Schedules {
    docket_app::Schedules::of(state.rt.store(), &state.data)
}

/// A schedule's failure in the API's terms.
fn schedule_error(e: docket_app::SchedulesError) -> ApiError {
    use docket_app::SchedulesError as E;
    let message = e.to_string();
    match e {
        E::Invalid { field, .. } => ApiError::bad_request(message).at(format!("body.{field}")),
        E::Exists { name, .. } => ApiError::conflict(message).at(format!("schedule {name}")),
        E::NotNow { name, .. } | E::Busy { name } => {
            ApiError::conflict(message).at(format!("schedule {name}"))
        }
        E::Unknown { name } => ApiError::not_found(message).at(format!("schedule {name}")),
        E::Full { .. } => ApiError::conflict(message).at("body.name"),
        _ => ApiError::internal(message),
    }
}

fn schedule_json(s: &docket_app::Schedule) -> Value {
    let mut v = serde_json::to_value(s).unwrap_or_default();
    v["state"] = json!(s.state_word());
    v
}

async fn list_schedules(State(state): Shared) -> ApiResult {
    let schedules = schedules_of(&state);
    let all = schedules.list().await.map_err(schedule_error)?;
    let firings = schedules.firings(None, 50).await.map_err(schedule_error)?;
    ok(json!({
        "schedules": all.iter().map(schedule_json).collect::<Vec<_>>(),
        "firings": firings,
    }))
}

async fn show_schedule(State(state): Shared, p: Result<Path<String>, PathRejection>) -> ApiResult {
    let name = path(p)?;
    let schedules = schedules_of(&state);
    let s = schedules.get(&name).await.map_err(schedule_error)?;
    let firings = schedules
        .firings(Some(&name), 200)
        .await
        .map_err(schedule_error)?;
    let mut answer = schedule_json(&s);
    answer["firings"] = json!(firings);
    ok(answer)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleBody {
    name: String,
    workflow: String,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    every: Option<String>,
    #[serde(default)]
    time_zone: Option<String>,
    #[serde(default)]
    overlap: Option<String>,
    #[serde(default)]
    catch_up: Option<String>,
}

async fn add_schedule(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    b: Result<Json<ScheduleBody>, JsonRejection>,
) -> ApiResult {
    let b = body(b)?;
    let overlap = match b.overlap.as_deref() {
        None => docket_app::Overlap::Skip,
        Some(w) => docket_app::Overlap::parse(w).ok_or_else(|| {
            ApiError::bad_request(format!("overlap {w:?}: skip, queue-one or cancel-previous"))
                .at("body.overlap")
        })?,
    };
    let catch_up = match b.catch_up.as_deref() {
        None => docket_app::CatchUp::Latest,
        Some(w) => docket_app::CatchUp::parse(w).ok_or_else(|| {
            ApiError::bad_request(format!("catch_up {w:?}: all or latest")).at("body.catch_up")
        })?,
    };
    // The workflow as POST /api/runs reads it (under the server's root), named by its
    // real path: it is read again at each firing.
    let (wf, input) = load_workflow(&state, &b.workflow, b.input).await?;
    let problems = state.rt.unregistered(&wf.spec);
    if !problems.is_empty() {
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(
            ApiError::refused(format!("{} cannot run: {}", b.workflow, text.join("; ")))
                .at("body.workflow"),
        );
    }
    let real = std::fs::canonicalize(state.sources.dir().join(&b.workflow))
        .map_err(|e| ApiError::bad_request(format!("{}: {e}", b.workflow)).at("body.workflow"))?;
    let new = docket_app::NewSchedule {
        name: b.name,
        workflow: real.display().to_string(),
        input,
        cron: b.cron,
        every: b.every,
        time_zone: b.time_zone,
        overlap,
        catch_up,
        by: who.name.clone(),
    };
    let schedule = docket_app::Schedule::new(new, state.rt.now_ms()).map_err(schedule_error)?;
    let s = schedules_of(&state)
        .add(schedule)
        .await
        .map_err(schedule_error)?;
    Ok((StatusCode::CREATED, Json(schedule_json(&s))).into_response())
}

async fn set_schedule_paused(
    state: &AppState,
    who: &Principal,
    name: String,
    on: bool,
) -> ApiResult {
    let s = schedules_of(state)
        .set_paused(&name, on, &who.name, state.rt.now_ms())
        .await
        .map_err(schedule_error)?;
    ok(schedule_json(&s))
}

async fn pause_schedule(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
) -> ApiResult {
    set_schedule_paused(&state, &who, path(p)?, true).await
}

async fn unpause_schedule(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
) -> ApiResult {
    set_schedule_paused(&state, &who, path(p)?, false).await
}

async fn remove_schedule(
    State(state): Shared,
    Extension(who): Extension<Principal>,
    p: Result<Path<String>, PathRejection>,
) -> ApiResult {
    let s = schedules_of(&state)
        .remove(&path(p)?, &who.name, state.rt.now_ms())
        .await
        .map_err(schedule_error)?;
    ok(schedule_json(&s))
}
