//! Side effects through the public API (docs/governance.md#side-effects): an in-process executor that keeps
//! its own ledger (written by the executor, not by docket) shows the path dry run →
//! execute → verify, exactly one application per idempotency key across a crash between
//! `effect.started` and the result, the kill switch stopping a publish mid-run, and an
//! effect waiting for a human's approval.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::Notify;

use docket_decider::WorkflowSpec;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence};
use docket_decider::{DryRunReport, EffectCallError, EffectReceipt, EffectRequest, Verification};
use docket_decider::{RunEvent, RunStatus, TicketSubject, recorded_bundle, replay_check};
use docket_runtime::HumanDecision;
use docket_runtime::InProcessExecutor;
use docket_runtime::Runtime;
use docket_runtime::Workflow;
use docket_runtime::{
    EffectExecutor, EffectFuture, InMemoryKillSwitch, KillSwitchError, KillSwitchSource,
};
use docket_store::{EmbeddedStore, StoreConfig};

const BUNDLE: &str = r#"
bundle = { id = "effects" }
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish"]
[[agents]]
id = "checker"

[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = true
retry_cap = 1

[[side_effects]]
id = "publish-feed"
kind = "publish"
lane = "feed"
dry_run_required = false
verifier = "checker"

[[side_effects]]
id = "publish-browser"
kind = "publish"
lane = "browser"
dry_run_required = true
human_approval_required = true

[interactions]
allowed = [
  { from = "external", to = "publisher" },
  { from = "publisher", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const WORKFLOW: &str = r#"
name = "effects"
policy = "effects.toml"
entry = "publisher"
[agents.publisher]
in_process = true
[agents.checker]
in_process = true
"#;

fn workflow() -> Workflow {
    Workflow {
        spec: WorkflowSpec::parse(WORKFLOW, Path::new("effects.workflow.toml"))
            .expect("workflow parses"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "effects.toml".into(),
    }
}

/// What the executor saw and did, kept by the executor itself.
#[derive(Default)]
struct Ledger {
    /// Applications per idempotency key: the real-world count docket must keep at 1.
    applied: Mutex<BTreeMap<String, u32>>,
    /// Every call, in order: (operation, key).
    calls: Mutex<Vec<(String, String)>>,
}

impl Ledger {
    fn applied(&self, key: &str) -> u32 {
        self.applied
            .lock()
            .expect("ledger")
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    fn calls(&self) -> Vec<(String, String)> {
        self.calls.lock().expect("ledger").clone()
    }

    fn note(&self, op: &str, key: &str) {
        self.calls
            .lock()
            .expect("ledger")
            .push((op.to_owned(), key.to_owned()));
    }

    fn apply(&self, key: &str) {
        *self
            .applied
            .lock()
            .expect("ledger")
            .entry(key.to_owned())
            .or_default() += 1;
    }
}

/// How `execute` behaves.
#[derive(Clone, Copy, PartialEq)]
enum Execute {
    /// Applies and answers.
    Normally,
    /// Signals, then never answers, without applying (a crash before the platform call).
    HangBeforeApplying,
    /// Applies, signals, then never answers (a crash after the platform call).
    HangAfterApplying,
    /// The first call answers a timeout without applying; later calls apply.
    TimeOutFirst,
}

/// An in-process publish executor over a [`Ledger`]. It applies on every `execute` call
/// it gets (no idempotency of its own), so a count above 1 would be docket's fault.
struct Publisher {
    ledger: Arc<Ledger>,
    execute: Execute,
    entered: Arc<Notify>,
    /// Engaged (on the `api` lane) by the first execution, as an operator would.
    kill_on_execute: Option<Arc<InMemoryKillSwitch>>,
}

impl Publisher {
    fn new(ledger: &Arc<Ledger>) -> Self {
        Self {
            ledger: ledger.clone(),
            execute: Execute::Normally,
            entered: Arc::new(Notify::new()),
            kill_on_execute: None,
        }
    }
}

impl EffectExecutor for Publisher {
    fn supports_dry_run(&self) -> bool {
        true
    }

    fn dry_run<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, DryRunReport> {
        Box::pin(async move {
            self.ledger.note("dry_run", &request.idempotency_key);
            Ok(DryRunReport {
                ok: true,
                preview: json!({ "would_post": request.params["text"] }),
                message: None,
            })
        })
    }

    fn execute<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt> {
        Box::pin(async move {
            let key = request.idempotency_key.clone();
            self.ledger.note("execute", &key);
            if let Some(switch) = &self.kill_on_execute {
                switch.set("api", true);
            }
            match self.execute {
                Execute::Normally => self.ledger.apply(&key),
                Execute::HangBeforeApplying => {
                    self.entered.notify_one();
                    std::future::pending::<()>().await;
                }
                Execute::HangAfterApplying => {
                    self.ledger.apply(&key);
                    self.entered.notify_one();
                    std::future::pending::<()>().await;
                }
                Execute::TimeOutFirst => {
                    let executions = self
                        .ledger
                        .calls()
                        .iter()
                        .filter(|(op, _)| op == "execute")
                        .count();
                    if executions == 1 {
                        return Err(EffectCallError::Timeout {
                            effect_id: request.effect_id.clone(),
                            timeout_ms: request.timeout_ms,
                        });
                    }
                    self.ledger.apply(&key);
                }
            }
            Ok(EffectReceipt {
                result: json!({ "post_id": format!("post-{key}") }),
                drift: None,
            })
        })
    }

    fn verify<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, Verification> {
        Box::pin(async move {
            let key = request.idempotency_key.clone();
            self.ledger.note("verify", &key);
            // The feed lane cannot be checked by the executor: a verifier agent must look.
            if request.lane == "feed" {
                return Ok(Verification::Unknown {
                    message: "the feed API does not list posts".into(),
                });
            }
            Ok(if self.ledger.applied(&key) > 0 {
                Verification::Applied {
                    result: json!({ "post_id": format!("post-{key}") }),
                }
            } else {
                Verification::NotApplied
            })
        })
    }
}

/// A publisher agent: asks for one publish per entry of `posts` (lane, key), one at a
/// time, each after the previous result came back; then finishes with every result.
fn agent(posts: Vec<(&'static str, &'static str)>) -> Arc<InProcessExecutor> {
    Arc::new(InProcessExecutor::new(move |r: &AgentRequest| {
        let results: Vec<Value> = r
            .decision_inputs
            .iter()
            .filter(|i| i.output_type == "effect_result")
            .map(|i| Value::clone(&i.payload))
            .collect();
        let action = match posts.get(results.len()) {
            Some((lane, key)) => Action::RequestEffect {
                kind: "publish".into(),
                lane: (*lane).into(),
                idempotency_key: Some((*key).into()),
                params: json!({ "text": format!("hello {key}") }),
                not_before: None,
            },
            None => Action::Finish {
                output: json!({ "results": results }),
            },
        };
        AgentResponse::success(r.request_id.clone(), Confidence::High, vec![action])
    }))
}

async fn store(dir: &Path) -> EmbeddedStore {
    EmbeddedStore::open(dir, StoreConfig::default())
        .await
        .expect("store opens")
}

async fn log(runtime: &Runtime<EmbeddedStore>, run: &str) -> Vec<RunEvent> {
    runtime
        .events(&run.into())
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.event)
        .collect()
}

/// The log replays: every batch is what the decider makes of its input.
fn replays(events: &[RunEvent]) {
    let Some(RunEvent::RunRequested(run)) = events.first() else {
        panic!("the log starts with run.requested");
    };
    let bundle = recorded_bundle(run).expect("recorded bundle compiles");
    replay_check(events, &bundle).expect("the log replays");
}

fn kinds_of(events: &[RunEvent], prefix: &str) -> Vec<&'static str> {
    events
        .iter()
        .map(RunEvent::kind)
        .filter(|k| k.starts_with(prefix))
        .collect()
}

#[tokio::test]
async fn dry_run_then_execute_then_verify_applies_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = Runtime::new(store(dir.path()).await);
    let ledger = Arc::new(Ledger::default());
    runtime.register_effect("publish", Arc::new(Publisher::new(&ledger)));
    runtime.register_agent("publisher", agent(vec![("api", "post-1")]));

    let outcome = runtime
        .start(&workflow(), json!({}), Some("run-e1".into()))
        .await
        .expect("runs");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(
        ledger.calls(),
        [
            ("dry_run".to_owned(), "post-1".to_owned()),
            ("execute".to_owned(), "post-1".to_owned()),
            ("verify".to_owned(), "post-1".to_owned()),
        ]
    );
    assert_eq!(ledger.applied("post-1"), 1);
    let output = outcome.state.output().expect("output");
    assert_eq!(output["results"][0]["status"], "applied");
    assert_eq!(
        output["results"][0]["receipt"]["result"]["post_id"],
        "post-post-1"
    );

    let events = log(&runtime, "run-e1").await;
    assert_eq!(
        kinds_of(&events, "effect."),
        [
            "effect.requested",
            "effect.admitted",
            "effect.dry_run",
            "effect.ready",
            "effect.kill_switch_checked",
            "effect.started",
            "effect.applied",
            "effect.verified",
            "effect.settled",
        ]
    );
    replays(&events);

    // Two durable writes for the effect: the agent's answer asking for it, the dry run,
    // the kill-switch read and the start together (before execute), then the receipt
    // with its verification.
    let recorded = runtime.events(&"run-e1".into()).await.expect("events");
    let written_with = |kind: &str| {
        recorded
            .iter()
            .find(|e| e.event.kind() == kind)
            .map(|e| e.recorded_at_ns)
            .expect("event present")
    };
    let start_write = written_with("effect.dry_run");
    assert_eq!(written_with("agent.responded"), start_write);
    assert_eq!(written_with("effect.kill_switch_checked"), start_write);
    assert_eq!(written_with("effect.started"), start_write);
    let result_write = written_with("effect.applied");
    assert_eq!(written_with("effect.verified"), result_write);
    assert_eq!(written_with("effect.settled"), result_write);
    assert_ne!(start_write, result_write);
}

#[tokio::test]
async fn a_second_request_with_an_applied_key_gets_the_recorded_receipt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = Runtime::new(store(dir.path()).await);
    let ledger = Arc::new(Ledger::default());
    runtime.register_effect("publish", Arc::new(Publisher::new(&ledger)));
    runtime.register_agent(
        "publisher",
        agent(vec![("api", "post-1"), ("api", "post-1")]),
    );
    let outcome = runtime
        .start(&workflow(), json!({}), Some("run-dedup".into()))
        .await
        .expect("runs");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(ledger.applied("post-1"), 1);
    let executions = ledger
        .calls()
        .iter()
        .filter(|(op, _)| op == "execute")
        .count();
    assert_eq!(executions, 1, "never a second execution");
    let output = outcome.state.output().expect("output");
    assert_eq!(output["results"][1]["status"], "deduplicated");
    assert_eq!(
        output["results"][1]["receipt"],
        output["results"][0]["receipt"]
    );
    replays(&log(&runtime, "run-dedup").await);
}

/// Kills the run while `execute` is in progress (after `effect.started` is durable),
/// then resumes it with a fresh runtime on the same store; returns the resumed log.
async fn crash_during_execute(how: Execute, run: &str) -> (Arc<Ledger>, Vec<RunEvent>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path()).await;
    let ledger = Arc::new(Ledger::default());
    {
        let runtime = Runtime::new(store.clone());
        let mut hanging = Publisher::new(&ledger);
        hanging.execute = how;
        let entered = hanging.entered.clone();
        runtime.register_effect("publish", Arc::new(hanging));
        runtime.register_agent("publisher", agent(vec![("api", "post-1")]));
        let driving = runtime.clone();
        let run_id = run.to_owned();
        let task = tokio::spawn(async move {
            driving
                .start(&workflow(), json!({}), Some(run_id.into()))
                .await
                .map(|o| o.state.status())
        });
        entered.notified().await;
        task.abort();
        assert!(
            task.await.is_err_and(|e| e.is_cancelled()),
            "the run was cut off"
        );
        let events = log(&runtime, run).await;
        assert_eq!(
            events.last().map(RunEvent::kind),
            Some("effect.started"),
            "the crash left a started effect without a result"
        );
    }

    let runtime = Runtime::new(store);
    runtime.register_effect("publish", Arc::new(Publisher::new(&ledger)));
    runtime.register_agent("publisher", agent(vec![("api", "post-1")]));
    let outcome = runtime.resume(&run.into()).await.expect("resumes");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(
        ledger.applied("post-1"),
        1,
        "exactly one application of the key, by the executor's own ledger"
    );
    let events = log(&runtime, run).await;
    replays(&events);
    (ledger, events)
}

#[tokio::test]
async fn a_crash_after_the_platform_applied_is_recovered_without_executing_again() {
    let (ledger, events) =
        crash_during_execute(Execute::HangAfterApplying, "run-crash-applied").await;
    let executions = ledger
        .calls()
        .iter()
        .filter(|(op, _)| op == "execute")
        .count();
    assert_eq!(executions, 1, "resume verified instead of executing");
    let recovered = events.iter().find_map(|e| match e {
        RunEvent::EffectRecovered(r) => Some(r.verification.clone()),
        _ => None,
    });
    assert!(
        matches!(recovered, Some(Verification::Applied { .. })),
        "{recovered:?}"
    );
    assert_eq!(kinds_of(&events, "effect.started").len(), 1);
}

#[tokio::test]
async fn a_crash_before_the_platform_applied_executes_once_after_verify_says_not_applied() {
    let (ledger, events) =
        crash_during_execute(Execute::HangBeforeApplying, "run-crash-not-applied").await;
    let ops: Vec<String> = ledger.calls().into_iter().map(|(op, _)| op).collect();
    assert_eq!(
        ops,
        ["dry_run", "execute", "verify", "execute", "verify"],
        "resume asks verify before executing again"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        RunEvent::EffectReady(r)
            if r.because == docket_decider::ReadyBecause::NotAppliedOnResume
    )));
    assert_eq!(kinds_of(&events, "effect.started").len(), 2);
}

#[tokio::test]
async fn the_kill_switch_engaged_mid_run_blocks_the_next_publish() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = Runtime::new(store(dir.path()).await);
    let ledger = Arc::new(Ledger::default());
    let switch = Arc::new(InMemoryKillSwitch::default());
    runtime.set_kill_switch(switch.clone());
    let mut publisher = Publisher::new(&ledger);
    publisher.kill_on_execute = Some(switch.clone());
    runtime.register_effect("publish", Arc::new(publisher));
    runtime.register_agent(
        "publisher",
        agent(vec![("api", "post-1"), ("api", "post-2")]),
    );

    let outcome = runtime
        .start(&workflow(), json!({}), Some("run-kill".into()))
        .await
        .expect("runs");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(ledger.applied("post-1"), 1);
    assert_eq!(ledger.applied("post-2"), 0, "the second publish never ran");
    assert!(
        !ledger
            .calls()
            .contains(&("execute".to_owned(), "post-2".to_owned())),
        "the executor was never asked"
    );
    let output = outcome.state.output().expect("output");
    assert_eq!(output["results"][1]["status"], "refused");
    assert_eq!(output["results"][1]["rule_id"], "kill_switch.api");

    let events = log(&runtime, "run-kill").await;
    let checks: Vec<Vec<String>> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::EffectKillSwitchChecked(c) => Some(c.engaged.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(checks, [vec![], vec!["api".to_owned()]], "recorded as read");
    replays(&events);
}

#[tokio::test]
async fn an_effect_needing_approval_waits_durably_and_runs_once_approved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path()).await;
    let ledger = Arc::new(Ledger::default());
    let runtime = Runtime::new(store.clone());
    runtime.register_effect("publish", Arc::new(Publisher::new(&ledger)));
    runtime.register_agent("publisher", agent(vec![("browser", "post-b")]));

    let outcome = runtime
        .start(&workflow(), json!({}), Some("run-approve".into()))
        .await
        .expect("runs");
    assert_eq!(outcome.state.status(), RunStatus::WaitingForHuman);
    assert_eq!(
        ledger.applied("post-b"),
        0,
        "nothing executed before approval"
    );
    let (ticket, t) = outcome.state.open_tickets().next().expect("a ticket");
    assert!(matches!(t.subject, TicketSubject::Effect { .. }));
    assert!(t.reason.contains("needs human approval"), "{}", t.reason);
    let ticket = ticket.clone();
    drop(runtime);

    // Another process approves: the wait is in the log, not in memory.
    let runtime = Runtime::new(store);
    runtime.register_effect("publish", Arc::new(Publisher::new(&ledger)));
    runtime.register_agent("publisher", agent(vec![("browser", "post-b")]));
    let outcome = runtime
        .decide_ticket(
            &"run-approve".into(),
            &ticket,
            HumanDecision::approve("ana", "copy checked"),
        )
        .await
        .expect("approves");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(ledger.applied("post-b"), 1);
    let output = outcome.state.output().expect("output");
    assert_eq!(output["results"][0]["status"], "applied");
    replays(&log(&runtime, "run-approve").await);
}

#[tokio::test]
async fn a_denied_effect_is_refused_and_the_agent_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = Runtime::new(store(dir.path()).await);
    let ledger = Arc::new(Ledger::default());
    runtime.register_effect("publish", Arc::new(Publisher::new(&ledger)));
    runtime.register_agent("publisher", agent(vec![("browser", "post-b")]));
    runtime
        .start(&workflow(), json!({}), Some("run-deny".into()))
        .await
        .expect("runs");
    let outcome = runtime
        .decide_ticket(
            &"run-deny".into(),
            "ticket-1",
            HumanDecision::deny("ana", "off-brand"),
        )
        .await
        .expect("denies");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(ledger.applied("post-b"), 0);
    let output = outcome.state.output().expect("output");
    assert_eq!(output["results"][0]["status"], "refused");
    assert_eq!(output["results"][0]["rule_id"], "human");
    replays(&log(&runtime, "run-deny").await);
}

#[tokio::test]
async fn an_execute_call_without_an_answer_is_verified_before_executing_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = Runtime::new(store(dir.path()).await);
    let ledger = Arc::new(Ledger::default());
    let mut publisher = Publisher::new(&ledger);
    publisher.execute = Execute::TimeOutFirst;
    runtime.register_effect("publish", Arc::new(publisher));
    runtime.register_agent("publisher", agent(vec![("api", "post-1")]));
    let outcome = runtime
        .start(&workflow(), json!({}), Some("run-timeout".into()))
        .await
        .expect("runs");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    let ops: Vec<String> = ledger.calls().into_iter().map(|(op, _)| op).collect();
    assert_eq!(ops, ["dry_run", "execute", "verify", "execute", "verify"]);
    assert_eq!(ledger.applied("post-1"), 1);
    let events = log(&runtime, "run-timeout").await;
    let cause = events.iter().find_map(|e| match e {
        RunEvent::EffectRecovered(r) => r.cause.clone(),
        _ => None,
    });
    assert!(
        cause
            .as_deref()
            .is_some_and(|c| c.contains("EFFECT_TIMEOUT") || c.contains("did not answer")),
        "{cause:?}"
    );
    replays(&events);
}

/// Kill switches that cannot be read.
struct Unreadable;

impl KillSwitchSource for Unreadable {
    fn engaged(&self) -> docket_runtime::KillSwitchFuture<'_> {
        Box::pin(std::future::ready(Err(KillSwitchError {
            location: "/var/lib/docket/kill-switches".into(),
            message: "permission denied".into(),
        })))
    }
}

#[tokio::test]
async fn unreadable_kill_switches_stop_every_effect() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = Runtime::new(store(dir.path()).await);
    let ledger = Arc::new(Ledger::default());
    runtime.set_kill_switch(Arc::new(Unreadable));
    runtime.register_effect("publish", Arc::new(Publisher::new(&ledger)));
    runtime.register_agent("publisher", agent(vec![("api", "post-1")]));
    let outcome = runtime
        .start(&workflow(), json!({}), Some("run-unreadable".into()))
        .await
        .expect("runs");
    assert_eq!(ledger.applied("post-1"), 0);
    let output = outcome.state.output().expect("output");
    assert_eq!(output["results"][0]["rule_id"], "kill_switch.global");
    let events = log(&runtime, "run-unreadable").await;
    let error = events.iter().find_map(|e| match e {
        RunEvent::EffectKillSwitchChecked(c) => c.error.clone(),
        _ => None,
    });
    assert!(
        error
            .as_deref()
            .is_some_and(|m| m.contains("permission denied")),
        "{error:?}"
    );
    replays(&events);
}

#[tokio::test]
async fn an_unverifiable_effect_is_rechecked_by_the_verifier_never_republished() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = Runtime::new(store(dir.path()).await);
    let ledger = Arc::new(Ledger::default());
    runtime.register_effect("publish", Arc::new(Publisher::new(&ledger)));
    runtime.register_agent("publisher", agent(vec![("feed", "post-f")]));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let checker_saw = seen.clone();
    runtime.register_agent(
        "checker",
        Arc::new(InProcessExecutor::new(move |r: &AgentRequest| {
            checker_saw.lock().expect("seen").push((
                r.capability_code.clone(),
                r.decision_inputs[0].payload.clone(),
            ));
            AgentResponse::success(
                r.request_id.clone(),
                Confidence::High,
                vec![Action::Finish {
                    output: json!({ "verified": true, "reason": "post visible on the feed" }),
                }],
            )
        })),
    );
    let outcome = runtime
        .start(&workflow(), json!({}), Some("run-verifier".into()))
        .await
        .expect("runs");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(ledger.applied("post-f"), 1);
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 1, "the verifier was called once");
    assert_eq!(seen[0].0, "verify_effect");
    assert_eq!(seen[0].1["receipt"]["result"]["post_id"], "post-post-f");
    let output = outcome.state.output().expect("output");
    assert_eq!(output["results"][0]["status"], "applied");
    assert_eq!(output["results"][0]["verified_by"], "verifier");
    replays(&log(&runtime, "run-verifier").await);
}
