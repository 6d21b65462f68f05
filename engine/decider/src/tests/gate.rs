//! One gate for everything that reaches an agent (docs/governance.md#handoff-rules-and-blocked-fields):
//! whatever agents do, by any path (handoffs, capability requests and answers, spawn
//! inputs and child results, domain reads, approvals and answers, the handoff context),
//! no blocked field reaches any agent's request, and no decision handoff crosses a pair
//! the matrix forbids.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use docket_policies::{DecisionKind, InputKind};

use super::*;
use crate::protocol::{Action, AgentResponse, Confidence, EpisodeResult, EpisodeStatus};
use crate::{RunEvent, RunStatus, replay_check};

const AGENTS: [&str; 3] = ["a", "b", "c"];

/// A bundle over `a`, `b`, `c` with the given extra decision edges (besides external → a
/// and each agent → external; a → c is forbidden), `secret` blocked on every handoff, a
/// capability and a `verify` child type for everyone, and a domain `a` writes and `b`,
/// `c` read.
fn gate_source(edges: &[(usize, usize)], mode: usize) -> String {
    let mut allowed = vec![r#"{ from = "external", to = "a" }"#.to_owned()];
    for agent in AGENTS {
        allowed.push(format!(r#"{{ from = "{agent}", to = "external" }}"#));
    }
    for &(f, t) in edges {
        if f != t && (f, t) != (0, 2) {
            let edge = format!(r#"{{ from = "{}", to = "{}" }}"#, AGENTS[f], AGENTS[t]);
            if !allowed.contains(&edge) {
                allowed.push(edge);
            }
        }
    }
    let scoping = match mode {
        0 => "default_handoff_mode = \"full\"".to_owned(),
        1 => "default_handoff_mode = \"minimal\"\nminimal_context_fields = [\"x\", \"secret\"]".to_owned(),
        _ => "default_handoff_mode = \"full\"\n[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"all-scoped\"\nfrom_agent_id = \"*\"\nto_agent_id = \"*\"\nhandoff_mode = \"scoped\"\nallowed_context_fields = [\"x\", \"y\", \"secret\"]".to_owned(),
    };
    let text = format!(
        r#"bundle = {{ id = "gate" }}
[[agents]]
id = "external"
[[agents]]
id = "a"
write_scopes = ["notes"]
[[agents.capabilities]]
code = "cap"
[[agents]]
id = "b"
read_scopes = ["notes"]
[[agents.capabilities]]
code = "cap"
[[agents]]
id = "c"
read_scopes = ["notes"]
[[agents.capabilities]]
code = "cap"
[[domains]]
id = "notes"
[interactions]
allowed = [{}]
forbidden = [{{ from = "a", to = "c", reason = "a may not reach c" }}]
[recursion.default]
allowed_child_types = ["verify"]
[multi_agent_handoffs]
blocked_context_fields = ["secret"]
{scoping}
"#,
        allowed.join(", ")
    );
    text
}

fn gate_run(edges: &[(usize, usize)], mode: usize) -> History {
    started_under(&gate_source(edges, mode), "gate.toml", |run| {
        run.input = json!({"x": 1, "secret": "s0"});
    })
}

/// Payloads that may carry `secret` (a blocked field is a path from the payload's top:
/// docs/governance.md#handoff-rules-and-blocked-fields).
fn payload() -> impl Strategy<Value = Map<String, Value>> {
    let leaf = prop_oneof![Just(json!(1)), Just(json!("s")), Just(json!({"y": 2}))];
    prop::collection::btree_map(
        prop_oneof![
            Just("x".to_owned()),
            Just("y".to_owned()),
            Just("secret".to_owned())
        ],
        leaf,
        0..3,
    )
    .prop_map(|m| m.into_iter().collect())
}

#[derive(Debug, Clone)]
enum Act {
    Handoff(usize, Map<String, Value>),
    Ask(usize, Map<String, Value>),
    Spawn(usize, Map<String, Value>),
    Write(Map<String, Value>),
    Escalate,
    Finish(Map<String, Value>),
    FinishEpisode(bool),
    Fail,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => (0..4usize, payload()).prop_map(|(t, p)| Act::Handoff(t, p)),
        2 => (0..3usize, payload()).prop_map(|(t, p)| Act::Ask(t, p)),
        2 => (0..3usize, payload()).prop_map(|(t, p)| Act::Spawn(t, p)),
        1 => payload().prop_map(Act::Write),
        1 => Just(Act::Escalate),
        2 => payload().prop_map(Act::Finish),
        2 => any::<bool>().prop_map(Act::FinishEpisode),
        1 => Just(Act::Fail),
    ]
}

fn action(act: &Act) -> Option<Action> {
    let name = |i: usize| AGENTS.get(i).copied().unwrap_or("external");
    Some(match act.clone() {
        Act::Handoff(t, p) => handoff(name(t), "t", Value::Object(p)),
        Act::Ask(t, p) => Action::RequestCapability {
            target_agent: name(t).into(),
            capability_code: "cap".into(),
            inputs: p,
        },
        Act::Spawn(t, p) => Action::Spawn {
            agent: name(t).into(),
            episode_type: "verify".into(),
            goal: "check".into(),
            budget: Default::default(),
            inputs: p,
        },
        Act::Write(p) => Action::WriteDomain {
            domain: "notes".into(),
            content: Value::Object(p),
        },
        Act::Escalate => Action::Escalate {
            reason: "?".into(),
            choices: Vec::new(),
        },
        Act::Finish(p) => Action::Finish {
            output: Value::Object(p),
        },
        Act::FinishEpisode(ok) => Action::FinishEpisode {
            result: EpisodeResult {
                decisions: vec![json!({"y": "s3"})],
                ..EpisodeResult::new(
                    if ok {
                        EpisodeStatus::Ok
                    } else {
                        EpisodeStatus::Failed
                    },
                    "done",
                )
            },
        },
        Act::Fail => return None,
    })
}

/// Where a request carries `secret` at the top of content an agent wrote: an input's
/// payload, or the spawn inputs, child result or effect result the engine frames.
fn secrets(request: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for list in ["decision_inputs", "context_inputs"] {
        for (i, input) in request[list].as_array().into_iter().flatten().enumerate() {
            let payload = &input["payload"];
            for (at, content) in [
                ("", payload),
                ("/inputs", &payload["inputs"]),
                ("/result", &payload["result"]),
            ] {
                if content.get("secret").is_some() {
                    found.push(format!("/{list}/{i}/payload{at}/secret"));
                }
            }
        }
    }
    // The handoff context's original request (the run's input carries `secret`).
    if request["context"]["handoff"]["original_request"]
        .get("secret")
        .is_some()
    {
        found.push("/context/handoff/original_request/secret".to_owned());
    }
    found
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn no_blocked_field_reaches_any_agent_and_no_handoff_crosses_a_forbidden_pair(
        edges in prop::collection::vec((0..3usize, 0..3usize), 0..6),
        mode in 0..3usize,
        script in prop::collection::vec(act(), 1..25),
        approvals in prop::collection::vec(any::<bool>(), 25),
    ) {
        let mut run = gate_run(&edges, mode);
        let mut approvals = approvals.into_iter();
        for act in &script {
            if run.state.status == RunStatus::WaitingForHuman {
                let (ticket, question) = run.state.open_tickets().next()
                    .map(|(id, t)| (id.clone(), matches!(t.subject, crate::TicketSubject::Question { .. })))
                    .unwrap_or_default();
                let approved = approvals.next().unwrap_or(true);
                let decided = decision(Some(&ticket), approved).by("p").because("r").at(5);
                // A question is answered in words: they reach the agent through the gate.
                run.when(if question && approved { decided.answer("go on") } else { decided });
            }
            if run.state.status != RunStatus::Running {
                break;
            }
            let Some(request) = run.state.pending_requests().first().map(|r| (*r).clone()) else {
                break;
            };
            let id = request.request_id.clone();
            match action(act) {
                Some(action) => run.when(respond_with(AgentResponse::success("", Confidence::Medium, vec![action])).to(&id).at(4)),
                None => run.when(respond_with(AgentResponse::error("", "AGENT_FAILED", "no")).to(&id).at(4)),
            };
        }
        for call in run.state.calls.values() {
            let request = serde_json::to_value(&*call.request).expect("a request encodes");
            let found = secrets(&request);
            prop_assert!(found.is_empty(), "{} received a blocked field at {found:?}: {request}", call.request.target_agent);
        }
        for event in &run.log {
            // Matrix decisions; content crossing by another rule names that rule instead.
            if let RunEvent::HandoffAllowed { from, to, input: InputKind::Decision, decision, .. } = event
                && decision.kind == DecisionKind::Handoff
            {
                let matrix = run.bundle.decide_handoff(from, to, InputKind::Decision);
                prop_assert!(matrix.decision.is_allowed(), "{from} → {to} crossed: {:?}", matrix.decision.reason);
            }
        }
        // Nor does a spawn: no child is an agent its spawner is forbidden to reach.
        for event in &run.log {
            if let RunEvent::EpisodeStarted { agent, spawned_by, .. } = event {
                let spawner = &run.state.calls[spawned_by].request.target_agent;
                prop_assert!(!(spawner == "a" && agent == "c"), "a spawned c");
            }
        }
        prop_assert!(replay_check(&run.log, &run.bundle).is_ok());
    }
}

#[test]
pub(crate) fn a_spawn_cannot_reach_an_agent_the_spawner_is_forbidden_to_reach() {
    let mut run = gate_run(&[], 0);
    run.when(respond(vec![
        action(&Act::Spawn(2, Map::new())).expect("a spawn"),
    ]))
    .then(|events| {
        let denied = events.iter().find_map(|e| match e {
            RunEvent::EpisodeActionDenied {
                action, decision, ..
            } => Some((action.clone(), decision.reason.to_string())),
            _ => None,
        });
        assert_eq!(
            denied,
            Some(("spawn".to_owned(), "a may not reach c".to_owned()))
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, RunEvent::EpisodeStarted { .. }))
        );
    });
    // A pair without an edge may spawn (the recursion policy decides): b is a's child.
    let mut run = gate_run(&[], 0);
    run.when(respond(vec![
        action(&Act::Spawn(1, Map::new())).expect("a spawn"),
    ]))
    .then(|events| {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, RunEvent::EpisodeStarted { .. }))
        );
    });
}
