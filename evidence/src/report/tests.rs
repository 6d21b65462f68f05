//! The report of a canned run, recorded by the decider as the runtime would drive it:
//! a refused effect, an effect approved by a person and applied, a handoff that withholds
//! a field, agent content carrying markup.

use docket_decider::{AgentResponded, HumanDecided};
use std::path::Path;

use docket_decider::{
    Action, AgentResponse, Command, Confidence, DryRunOutcome, DryRunReport, EffectApplied,
    EffectDryRun, EffectInput, EffectKillSwitchChecked, EffectReceipt, EffectVerification,
    EffectWork, RunEvent, RunRequested, RunState, RunStatus, Verification as Verified,
    WorkflowSpec, decide,
};
use docket_policies::PolicyBundle;
use serde_json::json;

use super::*;

const BUNDLE: &str = r#"
bundle = { id = "report-test", version = "3" }
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish"]
[[agents]]
id = "writer"
[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
human_approval_required = true
[interactions]
allowed = [{ from = "external", to = "publisher" }, { from = "publisher", to = "writer" }, { from = "writer", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
blocked_context_fields = ["secret"]
"#;

/// What an agent's content may try: markup that would run if it were not escaped.
const SCRIPT: &str = "<script>document.body.setAttribute('data-pwned','1')</script>";
const IMG: &str = "<img src=x onerror=\"alert('x')\">";

/// The publisher's answers in order, then the writer's.
fn actions() -> Vec<Action> {
    vec![
        Action::RequestEffect {
            kind: "delete".into(),
            lane: "api".into(),
            idempotency_key: Some("del-1".into()),
            params: json!({}),
            not_before: None,
        },
        Action::RequestEffect {
            kind: "publish".into(),
            lane: "api".into(),
            idempotency_key: Some(format!("post-1{IMG}")),
            params: json!({ "text": SCRIPT }),
            not_before: None,
        },
        Action::Handoff {
            to: "writer".into(),
            output_type: "draft".into(),
            payload: json!({ "text": SCRIPT, "secret": "s3cr3t" }),
            task: None,
        },
        Action::Finish {
            output: json!({ "done": IMG }),
        },
    ]
}

/// Records the canned run as the runtime would: answers each pending call with the next
/// scripted action, approves each ticket, and carries out each effect step.
fn canned() -> Vec<LoggedEvent> {
    let bundle = PolicyBundle::from_toml_str(BUNDLE, "report.toml").expect("bundle");
    let workflow = WorkflowSpec::parse(
        "name = \"report <b>test</b>\"\npolicy = \"report.toml\"\nentry = \"publisher\"\n\
         [agents.publisher]\nin_process = true\n[agents.writer]\nin_process = true\n",
        Path::new("w.toml"),
    )
    .expect("workflow");
    let run = RunRequested {
        run_id: "run-1".into(),
        workflow,
        bundle_source: BUNDLE.to_owned(),
        bundle_source_name: "report.toml".into(),
        bundle_hash: bundle.hash().to_hex(),
        input: json!({ "topic": SCRIPT }),
        at_ms: 1_000,
        decider_version: docket_decider::DECIDER_VERSION,
        forked_from: None,
        scheduled: Some(Box::new(docket_decider::Scheduled {
            schedule: "nightly <b>".into(),
            made_by: "ops".into(),
            due_at_ms: 900,
        })),
        session: None,
    };
    let mut state = RunState::default();
    let mut log: Vec<RunEvent> = Vec::new();
    let mut step = |state: &mut RunState, command: Command| {
        let batch = decide(state, &bundle, command).expect("decided");
        for e in &batch {
            state.apply(e);
        }
        log.extend(batch);
    };
    step(&mut state, Command::Start(run.into()));
    // An operator pauses and lets it go on; an outside event the bundle does not declare
    // is refused.
    let pause = docket_decider::RunPause {
        by: "ops".into(),
        reason: "look <i>first</i>".into(),
        at_ms: 1_500,
    };
    step(&mut state, Command::Pause(pause.clone()));
    step(&mut state, Command::Unpause(pause));
    step(
        &mut state,
        Command::ReceiveSignal(docket_decider::SignalReceived {
            name: "comment".into(),
            payload: json!({ "text": IMG }),
            by: "ingestion".into(),
            idempotency_key: None,
            at_ms: 1_600,
        }),
    );
    let mut script = actions().into_iter();
    for at_ms in 2_000.. {
        if state.status() == RunStatus::WaitingForHuman {
            let ticket = state.open_tickets().next().expect("a ticket").0.clone();
            step(
                &mut state,
                Command::RecordHumanDecision(HumanDecided {
                    ticket,
                    approved: true,
                    by: "alice <admin>".into(),
                    reason: "checked the <b>text</b>".into(),
                    choice: None,
                    answer: None,
                    at_ms,
                }),
            );
        } else if let Some((effect, work)) = state
            .pending_effects()
            .first()
            .map(|(e, w)| (e.requested.effect_id.clone(), *w))
        {
            let input = match work {
                // The kill switches read, `effect.started` is recorded; the runtime
                // executes in the same step and records the receipt.
                EffectWork::Execute => EffectInput::KillSwitchChecked(EffectKillSwitchChecked {
                    effect_id: effect,
                    engaged: Vec::new(),
                    error: None,
                    at_ms,
                }),
                EffectWork::Recover => EffectInput::Applied(EffectApplied {
                    effect_id: effect,
                    receipt: EffectReceipt {
                        result: json!({ "post_id": "p-1", "echo": SCRIPT }),
                        drift: None,
                    },
                    at_ms,
                    reused_from: None,
                }),
                EffectWork::Verify => EffectInput::Verified(EffectVerification {
                    effect_id: effect,
                    verification: Verified::Applied {
                        result: json!({ "post_id": "p-1" }),
                    },
                    cause: None,
                    at_ms,
                }),
                // The script's bundle marks no browser lane; a sandbox run passes.
                EffectWork::Sandbox => EffectInput::SandboxRan(docket_decider::EffectSandboxRan {
                    effect_id: effect,
                    outcome: docket_decider::SandboxOutcome::Receipt {
                        receipt: EffectReceipt {
                            result: json!({ "sandbox": true }),
                            drift: Some(docket_decider::DriftEvidence {
                                screenshot_sha256: "0".repeat(64),
                                dom_sha256: "0".repeat(64),
                            }),
                        },
                    },
                    at_ms,
                }),
                EffectWork::DryRun => EffectInput::DryRun(EffectDryRun {
                    effect_id: effect,
                    outcome: DryRunOutcome::Report {
                        report: DryRunReport {
                            ok: true,
                            preview: json!({ "text": SCRIPT }),
                            message: Some("would post <i>1</i>".into()),
                        },
                    },
                    at_ms,
                }),
            };
            step(&mut state, Command::RecordEffect(input));
        } else if let Some(id) = state
            .pending_requests()
            .first()
            .map(|r| r.request_id.clone())
        {
            let action = script.next().expect("a scripted answer");
            let mut response = AgentResponse::success("", Confidence::High, vec![action]);
            response.request_id.clone_from(&id);
            step(
                &mut state,
                Command::RecordResponse(AgentResponded {
                    request_id: id,
                    response: response.into(),
                    at_ms,
                }),
            );
        } else {
            break;
        }
    }
    assert_eq!(state.status(), RunStatus::Completed, "{log:#?}");
    log.into_iter()
        .enumerate()
        .map(|(i, event)| LoggedEvent {
            seq: i as u64 + 1,
            recorded_at_ns: 1_795_465_865_000_000_000 + i as i64 * 1_000_000,
            hash: format!("{:064x}", i + 1),
            event,
        })
        .collect()
}

fn sound(events: &[LoggedEvent]) -> ReportVerification {
    ReportVerification {
        chain: ChainCheck::Sound {
            events: events.len() as u64,
        },
        checkpoint: None,
    }
}

/// The element with `id`, up to the end of its definition or code (`</dd>`, `</code>`).
fn element<'a>(page: &'a str, id: &str) -> &'a str {
    let at = page
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no element {id}"));
    let rest = &page[at..];
    let end = ["</dd>", "</code>"]
        .iter()
        .filter_map(|tag| rest.find(tag))
        .min()
        .unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn the_canned_run_has_what_the_report_shows() {
    let kinds: Vec<&str> = canned().iter().map(|e| e.event.kind()).collect();
    for kind in [
        "effect.refused",
        "human.escalated",
        "human.decided",
        "effect.applied",
        "handoff.allowed",
        "run.completed",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
}

#[test]
fn every_section_is_present_and_filled_for_a_canned_run() {
    let events = canned();
    let page = html_report(&events, &sound(&events)).expect("report");
    // The header: run id, workflow, status, bundle, decider version, times.
    assert!(element(&page, "run-id").ends_with(">run-1"));
    assert!(element(&page, "status").contains("completed"));
    assert!(page.contains("report-test version 3"));
    let run = match &events[0].event {
        RunEvent::RunRequested(r) => r.clone(),
        _ => unreachable!(),
    };
    assert!(page.contains(&run.bundle_hash));
    assert!(page.contains(&format!(
        "<dt>Decider version</dt><dd>{}</dd>",
        docket_decider::DECIDER_VERSION
    )));
    assert!(page.contains("<dt>Started</dt><dd><time datetime=\"2026-11-23T20:31:05.000Z\">"));
    assert!(page.contains("<dt>Finished</dt><dd><time datetime=\"2026-11-23T20:31:05"));
    assert!(page.contains(
        "<dt>Started by</dt><dd>schedule <code>nightly &lt;b&gt;</code> (made by ops), \
         its firing due <time datetime=\"1970-01-01T00:00:00.900Z\">"
    ));
    for id in [
        "verification",
        "denials",
        "episodes",
        "handoffs",
        "decisions",
        "effects",
        "humans",
        "budgets",
        "events",
    ] {
        assert!(
            page.contains(&format!("<section id=\"{id}\"")),
            "no section {id}"
        );
        assert!(
            page.contains(&format!("<a href=\"#{id}\">")),
            "{id} not in the contents"
        );
    }
    // Verification: the chain as given, no checkpoint, the replay reproduced.
    assert!(element(&page, "chain").contains(&format!(
        "every link and hash of events 1 to {}",
        events.len()
    )));
    assert!(element(&page, "checkpoint").contains("no signed checkpoint"));
    assert!(page.contains("every decision reproduced"));
    // The two refusals (an outside event the bundle does not declare, an effect), each
    // as the policy decision and the refusal it records (both are denials to `docket
    // inspect --at last-denial`), with its rule and reason.
    let denials =
        &page[page.find("id=\"denials\"").unwrap()..page.find("id=\"episodes\"").unwrap()];
    assert!(
        denials.contains("<code>deny_by_default</code>"),
        "{denials}"
    );
    assert!(denials.contains("no side-effect policy for `delete` in lane `api`"));
    assert!(denials.contains("effect run-1/effect-1 refused"));
    assert_eq!(denials.matches("<tr><td>").count(), 4, "{denials}");
    // The handoff that withheld `secret`, and what crossed.
    let handoffs =
        &page[page.find("id=\"handoffs\"").unwrap()..page.find("id=\"decisions\"").unwrap()];
    assert!(handoffs.contains("<code>publisher</code> → <code>writer</code> (draft)"));
    assert!(
        handoffs.contains("<dt>Withheld</dt><dd><code>secret</code>"),
        "{handoffs}"
    );
    assert!(
        handoffs.contains("<dt>Crossed</dt><dd><code>text</code>"),
        "{handoffs}"
    );
    assert!(
        !handoffs.contains("s3cr3t"),
        "the withheld value is not shown as delivered"
    );
    // The effect with its key and receipt; the person who approved it.
    let effects = &page[page.find("id=\"effects\"").unwrap()..page.find("id=\"humans\"").unwrap()];
    assert!(effects.contains("post-1&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;"));
    assert!(effects.contains("&quot;post_id&quot;: &quot;p-1&quot;"));
    assert!(effects.contains("applied at event"));
    let humans = &page[page.find("id=\"humans\"").unwrap()..page.find("id=\"budgets\"").unwrap()];
    assert!(humans.contains("alice &lt;admin&gt;"));
    assert!(humans.contains("approved"));
    assert!(humans.contains("checked the &lt;b&gt;text&lt;/b&gt;"));
    assert!(humans.contains("<time datetime=\"1970-01-01T00:00:"));
    // Budgets: the root episode's, in a chart and a table.
    let budgets = &page[page.find("id=\"budgets\"").unwrap()..page.find("id=\"events\"").unwrap()];
    assert!(budgets.contains("<svg"), "{budgets}");
    assert!(budgets.contains("<polyline"));
    // Every event, with its hash, as an anchor.
    for e in &events {
        assert!(page.contains(&format!("<tr id=\"e{}\">", e.seq)));
        assert!(page.contains(&e.hash));
    }
}

#[test]
fn pauses_and_outside_events_are_among_what_people_did_and_a_refused_event_is_a_denial() {
    let events = canned();
    let page = html_report(&events, &sound(&events)).expect("report");
    let humans = &page[page.find("id=\"humans\"").expect("humans")..];
    for said in [
        "paused",
        "unpaused",
        "sent the event `comment`",
        "ingestion",
    ] {
        assert!(humans.contains(said), "{said} not in the people section");
    }
    let denials = &page[page.find("id=\"denials\"").expect("denials")..];
    assert!(
        denials.contains("outside event") && denials.contains("declares no signal"),
        "the refused event is a denial"
    );
}

#[test]
fn agent_content_is_escaped_everywhere() {
    let events = canned();
    let page = html_report(&events, &sound(&events)).expect("report");
    // The page has no script element at all, and no markup from the run.
    assert!(!page.to_lowercase().contains("<script"), "a script element");
    assert!(!page.contains("<img"), "an img element");
    assert!(
        !page.contains("<b>"),
        "markup from the workflow's name or a reason"
    );
    // Yet every value shows, as text.
    assert!(page.contains(
        "&lt;script&gt;document.body.setAttribute(&#39;data-pwned&#39;,&#39;1&#39;)&lt;/script&gt;"
    ));
    assert!(page.contains("report &lt;b&gt;test&lt;/b&gt;"));
    // And a CSP forbids scripts and loads, in case.
    assert!(page.contains("default-src 'none'"));
}

#[test]
fn the_text_escape_covers_content_and_attributes() {
    let mut p = html::Page::new();
    p.text("<a href='x'>\"&amp;\"</a>");
    assert_eq!(
        p.finish(),
        "&lt;a href=&#39;x&#39;&gt;&quot;&amp;amp;&quot;&lt;/a&gt;"
    );
}

#[test]
fn a_broken_chain_and_a_checkpoint_show_as_given() {
    let events = canned();
    let verification = ReportVerification {
        chain: ChainCheck::Broken {
            verified: 6,
            seq: 7,
            what: "event at sequence 7 hashes to <x>, but records <y>".into(),
        },
        checkpoint: Some(CheckpointCheck {
            note: "docket.example/run-1\n12\nroot=\n\n— key <sig>".into(),
            outcome: "signature by key docket.example verified".into(),
            sound: true,
        }),
    };
    let page = html_report(&events, &verification).expect("report");
    let chain = element(&page, "chain");
    assert!(chain.contains("BROKEN"), "{chain}");
    let from_chain = &page[page.find("id=\"chain\"").unwrap()..];
    assert!(from_chain.contains(" at event 7: event at sequence 7 hashes to &lt;x&gt;, but records &lt;y&gt; (6 events checked sound before it)"));
    let checkpoint = &page[page.find("id=\"checkpoint\"").unwrap()..];
    assert!(checkpoint.contains("signature by key docket.example verified"));
    assert!(checkpoint.contains("— key &lt;sig&gt;"));
}

#[test]
fn a_log_that_is_not_a_whole_run_is_refused() {
    let events = canned();
    let nothing = sound(&[]);
    assert_eq!(
        html_report(&[], &nothing).unwrap_err(),
        ReportError::NotARun
    );
    assert_eq!(
        html_report(&events[1..], &nothing).unwrap_err(),
        ReportError::NotARun
    );
    let mut gap = events.clone();
    gap.remove(3);
    assert_eq!(
        html_report(&gap, &nothing).unwrap_err(),
        ReportError::OutOfOrder {
            position: 4,
            seq: 5
        }
    );
}

#[test]
fn a_run_without_denials_effects_or_people_says_so() {
    let events: Vec<LoggedEvent> = canned().into_iter().take(1).collect();
    let page = html_report(&events, &sound(&events)).expect("report");
    assert!(page.contains("Nothing was denied in this run."));
    assert!(page.contains("No side effect was requested."));
    assert!(page.contains("No person decided anything in this run."));
    assert!(page.contains("not finished"));
}

#[test]
fn long_runs_sample_their_budget_rows_evenly_keeping_the_ends() {
    let rows: Vec<u32> = (1..=1000).collect();
    let kept = model::sample(rows, 10);
    assert_eq!(kept.len(), 10);
    assert_eq!(kept.first(), Some(&1));
    assert_eq!(kept.last(), Some(&1000));
    assert!(
        kept.windows(2)
            .all(|w| w[1] - w[0] >= 100 && w[1] - w[0] <= 112)
    );
    assert_eq!(model::sample(vec![1, 2, 3], 10), [1, 2, 3]);
}
