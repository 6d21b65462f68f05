//! `decide/domain.rs` (docs/governance.md#a-person-writes-a-domain): a person writes a
//! domain in a role of the registry, the domain's content rules and redaction hold for it
//! as for any writer, and a refused write records nothing.

use std::collections::BTreeMap;

use docket_policies::{DecisionKind, PolicyBundle, PolicyDecision, RuleStep, StepOutcome, Verdict};
use serde_json::json;

use super::*;
use crate::events::workflow::WorkflowSpec;
use crate::{Command, DECIDER_VERSION, HumanWroteDomain, Rejection, RunEvent, RunRequested};
use docket_protocol::Action;

/// Conversation summaries: written by the engage agent and by an operator, raw pointers
/// redacted; the plan is the planner's alone.
const BUNDLE: &str = r#"
bundle = { id = "summaries" }
[[agents]]
id = "external"
[[agents]]
id = "operator"
authority = "human"
write_scopes = ["summaries"]
[[agents]]
id = "engage"
write_scopes = ["summaries"]
[[agents]]
id = "planner"
write_scopes = ["plan"]
[[domains]]
id = "summaries"
exclusive = false
redact = ["threads.raw_ref"]
max_bytes = 200
[[domains]]
id = "plan"
[interactions]
allowed = [{ from = "external", to = "engage" }, { from = "engage", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// Given a run under the bundle `source` whose entry agent `agents[0]` is called first,
/// recorded by decider `version`.
fn started(source: &str, agents: [&str; 2], version: u32) -> History {
    let b = PolicyBundle::from_toml_str(source, "d.toml").expect("bundle is valid");
    let workflow = WorkflowSpec {
        name: "domains".into(),
        policy: "d.toml".into(),
        entry: agents[0].into(),
        input_type: None,
        input: None,
        goal: None,
        budget: Default::default(),
        agents: agents
            .into_iter()
            .map(|a| (a.into(), in_process()))
            .collect::<BTreeMap<_, _>>(),
        effects: Default::default(),
        tools: Default::default(),
        evidence: Default::default(),
    };
    let run = RunRequested {
        run_id: "run-d".into(),
        workflow,
        bundle_source: source.into(),
        bundle_source_name: "d.toml".into(),
        bundle_hash: b.hash().to_hex(),
        input: json!({"task": "x"}),
        at_ms: 1_000,
        decider_version: version,
        forked_from: None,
        scheduled: None,
        session: None,
    };
    let given = start_events(&b, run);
    History::new(b).given(&given).clock(2_000, 0)
}

/// Given a run of the engage agent recorded by decider `version`: its call is pending.
fn engaging(version: u32) -> History {
    started(BUNDLE, ["engage", "planner"], version)
}

fn person_writes(role: &str, domain: &str, content: serde_json::Value) -> Command {
    Command::WriteDomain(HumanWroteDomain {
        by: "ana".to_owned(),
        role: role.to_owned(),
        domain: domain.to_owned(),
        content,
        reason: "summarised the call with the customer".to_owned(),
        at_ms: 2_500,
    })
}

#[test]
pub(crate) fn a_person_writes_a_domain_in_their_role_redacted_as_the_domain_says() {
    let mut run = engaging(DECIDER_VERSION);
    let written =
        json!({"threads": [{"summary": "wants a refund", "raw_ref": "s3://raw/t-1.json"}]});
    let input = person_writes("operator", "summaries", written);
    let Command::WriteDomain(recorded) = input.clone() else {
        unreachable!()
    };
    run.when(input).then(|events| {
        assert_eq!(
            events,
            [
                RunEvent::HumanWroteDomain(recorded.clone()),
                RunEvent::DomainWritten {
                    domain: "summaries".to_owned(),
                    version: 1,
                    agent: "operator".into(),
                    episode_id: "ep-1".into(),
                    content: json!({"threads": [{"summary": "wants a refund", "raw_ref": "[redacted]"}]}),
                    decision: PolicyDecision {
                        kind: DecisionKind::DomainWrite,
                        verdict: Verdict::Allow,
                        rule_id: "agents.operator.write_scopes".into(),
                        reason: "`operator` writes `summaries` (append-only: a new version, history unchanged)"
                            .into(),
                        bundle_hash: run_bundle_hash(),
                        chain: vec![
                            RuleStep::new(
                                "agents.operator.write_scopes",
                                StepOutcome::Applied,
                                "`summaries` in write_scopes"
                            ),
                            RuleStep::new(
                                "human.wrote_domain",
                                StepOutcome::Applied,
                                "ana writes as operator: summarised the call with the customer"
                            ),
                            RuleStep::new(
                                "domains.summaries.max_bytes",
                                StepOutcome::Applied,
                                "65 of at most 200 bytes"
                            ),
                            RuleStep::new(
                                "domains.summaries.redact",
                                StepOutcome::Applied,
                                "redacted /threads/0/raw_ref"
                            ),
                        ],
                    },
                    by: Some("ana".to_owned()),
                },
            ]
        );
    });
    // The agent writing the same domain in the root episode is not refused by the
    // single-owner rule: a person writes beside the episode's agent.
    run.when(respond(vec![Action::WriteDomain {
        domain: "summaries".into(),
        content: json!({"threads": []}),
    }]))
    .then(|events| {
        assert!(
            events.iter().any(|e| matches!(
                e,
                RunEvent::DomainWritten {
                    version: 2,
                    by: None,
                    ..
                }
            )),
            "{events:?}"
        );
    });
    run.replays();
}

fn run_bundle_hash() -> docket_policies::BundleHash {
    PolicyBundle::from_toml_str(BUNDLE, "d.toml")
        .expect("bundle is valid")
        .hash()
}

#[test]
pub(crate) fn a_persons_write_the_bundle_does_not_allow_records_nothing() {
    let mut run = engaging(DECIDER_VERSION);
    let before = run.log.len();
    let refused = |run: &mut History, cmd: Command| run.when_rejected(cmd).to_string();
    // Not a person's role.
    let e = refused(&mut run, person_writes("engage", "summaries", json!({})));
    assert!(
        e.contains("`engage` is not a person's role") && e.contains("roles that may: operator"),
        "{e}"
    );
    // A domain outside the role's write scopes.
    let e = refused(&mut run, person_writes("operator", "plan", json!({})));
    assert!(e.contains("`plan`"), "{e}");
    // Content the domain's rules refuse, the place named.
    let e = refused(
        &mut run,
        person_writes("operator", "summaries", json!({"text": "x".repeat(300)})),
    );
    assert!(
        e.contains("domains.summaries.max_bytes") || e.contains("more than the 200 allowed"),
        "{e}"
    );
    // Nobody, or no reason.
    let mut nameless = person_writes("operator", "summaries", json!({}));
    if let Command::WriteDomain(w) = &mut nameless {
        w.by = " ".to_owned();
    }
    assert!(matches!(
        run.when_rejected(nameless),
        Rejection::Unnamed(crate::PersonAct::DomainWrite)
    ));
    assert_eq!(run.log.len(), before, "nothing recorded");
    // A run of version 14 takes no person's write.
    let mut old = engaging(14);
    let e = refused(&mut old, person_writes("operator", "summaries", json!({})));
    assert!(e.contains("decider version 14"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Attached fields (decider version 15): an agent that does not write a domain may attach
// its fields to the latest version, and changes nothing else.

/// The creator writes the assets; the publisher attaches its snapshot refs.
const ASSETS: &str = r#"
bundle = { id = "assets" }
[[agents]]
id = "external"
[[agents]]
id = "creator"
write_scopes = ["assets"]
[[agents]]
id = "publisher"
read_scopes = ["assets"]
[[domains]]
id = "assets"
attachers = [{ agent = "publisher", fields = ["assets.snapshot_ref"] }]
[interactions]
allowed = [{ from = "external", to = "creator" }, { from = "creator", to = "publisher" },
           { from = "publisher", to = "creator" }, { from = "creator", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// Given the creator's call in a run under [`ASSETS`] recorded by decider `version`.
fn creating(version: u32) -> History {
    started(ASSETS, ["creator", "publisher"], version)
}

fn write_assets(content: serde_json::Value) -> Action {
    Action::WriteDomain {
        domain: "assets".into(),
        content,
    }
}

/// The rule and verdict of the domain write the last input decided.
fn written(run: &History) -> (String, bool, String) {
    run.decided()
        .iter()
        .find_map(|e| match e {
            RunEvent::DomainWritten { decision, .. }
            | RunEvent::DomainWriteDenied { decision, .. } => Some((
                decision.rule_id.to_string(),
                decision.is_allowed(),
                decision.reason.to_string(),
            )),
            _ => None,
        })
        .expect("a domain write was decided")
}

#[test]
pub(crate) fn an_attacher_sets_its_fields_on_the_latest_version_and_nothing_else() {
    let mut run = creating(DECIDER_VERSION);
    let asset = json!({"assets": [{"id": "a1", "hash": "h1"}]});
    run.when(respond(vec![
        write_assets(asset),
        super::handoff("publisher", "assets", json!({})),
    ]));
    // Its snapshot ref alone: version 2.
    let attached = json!({"assets": [{"id": "a1", "hash": "h1", "snapshot_ref": "snap-1"}]});
    run.when(respond(vec![
        write_assets(attached.clone()),
        super::handoff("creator", "assets", json!({})),
    ]));
    let (rule, allowed, _) = written(&run);
    assert_eq!(
        (rule.as_str(), allowed),
        ("domains.assets.attachers.publisher", true)
    );
    assert_eq!(run.state.episodes.domains["assets"][1].content, attached);
    // The creator writes on in the same episode: the attacher owns nothing.
    run.when(respond(vec![write_assets(json!({"assets": []}))]));
    let (rule, allowed, _) = written(&run);
    assert_eq!(
        (rule.as_str(), allowed),
        ("agents.creator.write_scopes", true)
    );
    run.replays();
}

#[test]
pub(crate) fn an_attacher_changing_anything_else_or_with_nothing_to_attach_to_is_refused() {
    // Changing the creator's hash is no attachment: refused, naming the place.
    let mut run = creating(DECIDER_VERSION);
    run.when(respond(vec![
        write_assets(json!({"assets": [{"id": "a1", "hash": "h1"}]})),
        super::handoff("publisher", "assets", json!({})),
    ]));
    run.when(respond(vec![write_assets(
        json!({"assets": [{"id": "a1", "hash": "h2", "snapshot_ref": "snap-1"}]}),
    )]));
    let (rule, allowed, reason) = written(&run);
    assert_eq!(
        (rule.as_str(), allowed),
        ("domains.assets.attachers.publisher", false)
    );
    assert!(
        reason.contains(
            "may only attach assets.snapshot_ref to `assets`: /assets/0/hash differs from version 1"
        ),
        "{reason}"
    );
    assert_eq!(run.state.episodes.domains["assets"].len(), 1);
    run.replays();
    // Before the creator wrote anything, there is nothing to attach to.
    let mut early = creating(DECIDER_VERSION);
    early.when(respond(vec![super::handoff(
        "publisher",
        "assets",
        json!({}),
    )]));
    early.when(respond(vec![write_assets(json!({"assets": []}))]));
    let (rule, allowed, reason) = written(&early);
    assert_eq!(
        (rule.as_str(), allowed),
        ("domains.assets.attachers.publisher", false)
    );
    assert!(reason.contains("no version yet to attach to"), "{reason}");
    early.replays();
}
