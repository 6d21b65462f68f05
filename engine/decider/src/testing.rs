//! Random runs for property tests: a generator of bundles over three agents, of agent
//! actions by any path content can take (handoffs, capability requests, spawns, domain
//! writes, questions, finishes, failures), and a driver that records what `decide`
//! makes of a script of them. The decider's gate test (tests/gate.rs) and the replay
//! crate's property test (replay/tests/replay_any_run.rs, feature `testing`) share it.

use crate::{AgentResponded, HumanDecided};
use std::path::Path;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::{Command, RunEvent, RunRequested, RunState, RunStatus, WorkflowSpec, decide};
use docket_policies::PolicyBundle;
use docket_protocol::{Action, AgentResponse, Confidence, EpisodeResult, EpisodeStatus};

/// The agents of [`gate_source`]'s bundles.
pub const AGENTS: [&str; 3] = ["a", "b", "c"];

/// A bundle over `a`, `b`, `c` with the given extra decision edges (besides external → a
/// and each agent → external; a → c is forbidden), `secret` blocked on every handoff, a
/// capability and a `verify` child type for everyone, and a domain `a` writes and `b`,
/// `c` read. `mode` picks the scoping: full, minimal, or one scoped rule for every pair.
#[must_use]
pub fn gate_source(edges: &[(usize, usize)], mode: usize) -> String {
    let mut allowed = vec![r#"{ from = "external", to = "a" }"#.to_owned()];
    for agent in AGENTS {
        allowed.push(format!(r#"{{ from = "{agent}", to = "external" }}"#));
    }
    for &(f, t) in edges {
        if f != t && (f, t) != (0, 2) && f < AGENTS.len() && t < AGENTS.len() {
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
    format!(
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
    )
}

/// Payloads that may carry `secret` (a blocked field is a path from the payload's top:
/// docs/governance.md#handoff-rules-and-blocked-fields).
pub fn payload() -> impl Strategy<Value = Map<String, Value>> {
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

/// What the agent of the pending call does.
#[derive(Debug, Clone)]
pub enum Act {
    /// Hands `payload` off to agent `n` (3: `external`).
    Handoff(usize, Map<String, Value>),
    /// Asks agent `n` for `cap`.
    Ask(usize, Map<String, Value>),
    /// Spawns a `verify` child run by agent `n`.
    Spawn(usize, Map<String, Value>),
    /// Writes the domain `notes`.
    Write(Map<String, Value>),
    /// Asks a human.
    Escalate,
    /// Finishes with this output.
    Finish(Map<String, Value>),
    /// Finishes its episode, ok or failed.
    FinishEpisode(bool),
    /// Answers with an error.
    Fail,
}

/// Any [`Act`], weighted towards handoffs.
pub fn act() -> impl Strategy<Value = Act> {
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

/// The action `act` stands for (`None`: the agent fails instead).
#[must_use]
pub fn action(act: &Act) -> Option<Action> {
    let name = |i: usize| AGENTS.get(i).copied().unwrap_or("external");
    Some(match act.clone() {
        Act::Handoff(t, p) => Action::Handoff {
            to: name(t).into(),
            output_type: "t".into(),
            payload: Value::Object(p),
            task: None,
        },
        Act::Ask(t, p) => Action::RequestCapability {
            target_agent: name(t).into(),
            capability_code: "cap".into(),
            inputs: p,
            priority: None,
        },
        Act::Spawn(t, p) => Action::Spawn {
            agent: name(t).into(),
            episode_type: "verify".into(),
            goal: "check".into(),
            budget: Default::default(),
            inputs: p,
            trigger: Some("side_effect_attempted".into()),
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

/// `run-1` of a workflow over in-process `a`, `b`, `c` (entry `a`), under the bundle
/// `source`, its input carrying `secret`; `None` if `source` does not compile.
#[must_use]
pub fn gate_run(source: &str) -> Option<(PolicyBundle, RunRequested)> {
    let bundle = PolicyBundle::from_toml_str(source, "gate.toml").ok()?;
    let workflow = WorkflowSpec::parse(
        "name = \"t\"\npolicy = \"gate.toml\"\nentry = \"a\"\n[agents.a]\nin_process = true\n\
         [agents.b]\nin_process = true\n[agents.c]\nin_process = true\n",
        Path::new("t.toml"),
    )
    .ok()?;
    let run = RunRequested {
        run_id: "run-1".into(),
        workflow,
        bundle_source: source.to_owned(),
        bundle_source_name: "gate.toml".into(),
        bundle_hash: bundle.hash().to_hex(),
        input: json!({"x": 1, "secret": "s0"}),
        at_ms: 1_000,
        decider_version: crate::DECIDER_VERSION,
        forked_from: None,
        scheduled: None,
        session: None,
    };
    Some((bundle, run))
}

/// A run recorded by [`record`].
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Every event, batch after batch, as `decide` made them.
    pub log: Vec<RunEvent>,
    /// The fold of the log.
    pub state: RunState,
    /// Why the decider refused an input, if it did (recording stopped there).
    pub refused: Option<String>,
    /// Where each batch ends in the log (the next batch starts with its input's event).
    pub batch_ends: Vec<usize>,
}

impl Recorded {
    /// Every call and handoff decision of the log (the state keeps only what later
    /// decisions read).
    #[must_use]
    pub fn history(&self) -> crate::RunHistory {
        crate::RunHistory::fold(&self.log)
    }
}

/// Records `run` under `bundle`: each act of `script` answers the first pending call (at
/// 4 ms); an open ticket is first decided by the next of `approvals` (a question approved
/// is answered in words), at 5 ms. Stops when the run is over, nothing is pending, or
/// the decider refuses an input.
#[must_use]
pub fn record(
    bundle: &PolicyBundle,
    run: RunRequested,
    script: &[Act],
    approvals: &[bool],
) -> Recorded {
    let mut state = RunState::default();
    let mut log = Vec::new();
    let mut refused = None;
    let mut batch_ends = Vec::new();
    let mut step = |state: &mut RunState, command: Command| -> bool {
        match decide(state, bundle, command) {
            Ok(batch) => {
                for event in &batch {
                    state.apply(event);
                }
                log.extend(batch);
                batch_ends.push(log.len());
                true
            }
            Err(rejection) => {
                refused = Some(rejection.to_string());
                false
            }
        }
    };
    if !step(&mut state, Command::Start(run.into())) {
        return Recorded {
            log,
            state,
            refused,
            batch_ends,
        };
    }
    let mut approvals = approvals.iter().copied();
    for act in script {
        if state.status() == RunStatus::WaitingForHuman {
            let Some((ticket, question)) = state.open_tickets().next().map(|(id, t)| {
                (
                    id.clone(),
                    matches!(t.subject, crate::TicketSubject::Question { .. }),
                )
            }) else {
                break;
            };
            let approved = approvals.next().unwrap_or(true);
            let decided = Command::RecordHumanDecision(HumanDecided {
                ticket,
                approved,
                by: "p".into(),
                reason: "r".into(),
                choice: None,
                // A question is answered in words: they reach the agent through the gate.
                answer: (question && approved).then(|| "go on".to_owned()),
                at_ms: 5,
            });
            if !step(&mut state, decided) {
                break;
            }
        }
        if state.status() != RunStatus::Running {
            break;
        }
        let Some(id) = state
            .pending_requests()
            .first()
            .map(|r| r.request_id.clone())
        else {
            break;
        };
        let mut response = match action(act) {
            Some(action) => AgentResponse::success("", Confidence::Medium, vec![action]),
            None => AgentResponse::error("", "AGENT_FAILED", "no"),
        };
        response.request_id.clone_from(&id);
        let answered = Command::RecordResponse(AgentResponded {
            request_id: id,
            response: response.into(),
            at_ms: 4,
        });
        if !step(&mut state, answered) {
            break;
        }
    }
    Recorded {
        log,
        state,
        refused,
        batch_ends,
    }
}
