//! The social example (examples/social, seed 004's agent recursion contracts) run through
//! the binary: the orchestrator's child episodes (plan, create, publish with its verify
//! child, engage, document) under their recursion policies and budgets, each domain
//! written by its single owner, the post, reply and DM as side effects to the outbox
//! executor (dry run first, one message per idempotency key, also after a resume and a
//! second run), a person's approval before the DM, the kill switch engaged between two
//! effects, and each of the document's six stop conditions reached from its input file.
//! Every run replays and exports.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use docket_tests::{
    docket_bin, events_of_kind, example_agents_built, exit_code, replays_and_exports, run_events,
    stdout_text, workspace_root,
};
use serde_json::Value;

fn social_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| example_agents_built("docket-example-social"));
}

/// A data directory and the outbox its runs post to.
struct Agency {
    _dir: tempfile::TempDir,
    data: PathBuf,
    outbox: PathBuf,
}

impl Agency {
    fn new() -> Self {
        social_built();
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let outbox = dir.path().join("outbox.jsonl");
        Self {
            _dir: dir,
            data,
            outbox,
        }
    }

    /// `docket ARGS --data DATA`, its effect executors posting to this agency's outbox.
    fn docket(&self, args: &[&str]) -> Output {
        Command::new(docket_bin())
            .args(args)
            .arg("--data")
            .arg(&self.data)
            .env("SOCIAL_OUTBOX", &self.outbox)
            .output()
            .expect("docket runs")
    }

    /// Runs the campaign of `examples/social/input/{input}.json` as run `id`.
    fn run(&self, input: &str, id: &str) -> i32 {
        let example = workspace_root().join("examples/social");
        let input = example.join("input").join(format!("{input}.json"));
        let out = self.docket(&[
            "run",
            example.join("workflow.toml").to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--run-id",
            id,
        ]);
        self.code(&out)
    }

    /// Runs `workflow` (a copy of the example's, on its default input) as run `id`.
    fn run_workflow(&self, workflow: &std::path::Path, id: &str) -> i32 {
        let out = self.docket(&["run", workflow.to_str().expect("utf-8"), "--run-id", id]);
        self.code(&out)
    }

    fn code(&self, out: &Output) -> i32 {
        let code = exit_code(out);
        assert!(
            matches!(code, 0 | 1 | 3),
            "{}{}",
            stdout_text(out),
            String::from_utf8_lossy(&out.stderr)
        );
        code
    }

    fn approve(&self, run: &str, ticket: &str) -> i32 {
        let out = self.docket(&[
            "approve",
            run,
            ticket,
            "--by",
            "ana",
            "--reason",
            "the early-bird code may go out",
        ]);
        self.code(&out)
    }

    /// Every line of the outbox.
    fn outbox(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.outbox)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("each outbox line is JSON"))
            .collect()
    }

    /// The agency's own directory (the data directory's parent).
    fn dir(&self) -> PathBuf {
        self.data
            .parent()
            .expect("the agency's directory")
            .to_owned()
    }

    /// A copy of the example's workflow in the agency's directory, as it is but for the
    /// `outbox_lookup` tool: run by `lookup` (a program path), or with no executor at all
    /// when `None`.
    fn workflow_with_lookup(&self, lookup: Option<&std::path::Path>) -> PathBuf {
        let example = workspace_root().join("examples/social");
        let text = std::fs::read_to_string(example.join("workflow.toml")).expect("workflow");
        let section = "[tools.outbox_lookup]\ncommand = \"social-outbox\"";
        assert!(text.contains(section), "the example's lookup section moved");
        let text = match lookup {
            Some(program) => text.replace(
                section,
                &format!(
                    "[tools.outbox_lookup]\ncommand = {:?}",
                    program.display().to_string()
                ),
            ),
            None => text[..text.find("[tools.outbox_lookup]").expect("the section")].to_owned(),
        };
        let text = text
            .replace(
                "policy = \"policy.toml\"",
                &format!(
                    "policy = {:?}",
                    example.join("policy.toml").display().to_string()
                ),
            )
            .replace(
                "input = \"input/",
                &format!("input = \"{}/input/", example.display()),
            );
        let workflow = self.dir().join("workflow.toml");
        std::fs::write(&workflow, text).expect("workflow copy");
        workflow
    }

    /// An executable shell script `name` in the agency's directory.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("script");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        path
    }

    fn outbox_keys(&self) -> Vec<String> {
        self.outbox()
            .iter()
            .map(|l| l["idempotency_key"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// A kill while the verifier's outbox lookup is under way (issue 28 row 15): the lookup
/// only reads, so the example's `[tools.outbox_lookup]` says `read_only`, and a resume runs
/// it again instead of telling the verifier it failed. The example's workflow is run as
/// it is, but for the lookup's program: a wrapper whose first process never answers (the
/// moment of the kill) and whose later ones are the real `social-outbox`.
#[test]
fn a_kill_during_the_verifiers_lookup_is_resumed_by_looking_again() {
    let agency = Agency::new();
    let marker = agency.dir().join("lookup-started");
    let real = docket_tests::workspace_bin("docket-example-social", "social-outbox");
    let wrapper = agency.script(
        "lookup-wrapper.sh",
        &format!(
            "if [ ! -e '{marker}' ]; then echo $$ > '{marker}.tmp'; mv '{marker}.tmp' '{marker}'; exec sleep 600; fi\nexec '{real}' \"$@\"",
            marker = marker.display(),
            real = real.display(),
        ),
    );
    let workflow = agency.workflow_with_lookup(Some(&wrapper));

    let mut run = Command::new(docket_bin())
        .args([
            "run",
            workflow.to_str().expect("utf-8"),
            "--run-id",
            "killed",
        ])
        .arg("--data")
        .arg(&agency.data)
        .env("SOCIAL_OUTBOX", &agency.outbox)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("docket runs");
    // The lookup's first process says its pid once it is the call under way.
    let started = std::time::Instant::now();
    let lookup_pid = loop {
        if let Ok(pid) = std::fs::read_to_string(&marker) {
            break pid.trim().to_owned();
        }
        if let Some(status) = run.try_wait().expect("wait") {
            panic!("docket ended ({status}) before the verifier's lookup");
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "no lookup within two minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    run.kill().expect("SIGKILL");
    run.wait().expect("reaped");
    let _ = Command::new("kill").args(["-9", &lookup_pid]).status();
    let events = run_events(&agency.data, "killed");
    let started_calls = events_of_kind(&events, "tool.call_scheduled");
    assert!(
        !started_calls.is_empty(),
        "the lookup was recorded as scheduled"
    );
    assert!(
        events_of_kind(&events, "tool.returned").len() < started_calls.len(),
        "the kill came while a lookup was under way"
    );

    let out = agency.docket(&["resume", "killed"]);
    assert_eq!(agency.code(&out), 3, "{}", stdout_text(&out));
    let events = run_events(&agency.data, "killed");
    let failed = events_of_kind(&events, "tool.failed");
    assert!(failed.is_empty(), "{failed:?}");
    let stopped = stops(&events);
    assert!(
        stopped.iter().all(|(_, c)| c == "success_achieved"),
        "{stopped:?}"
    );
    assert!(
        stopped.iter().any(|(e, _)| e == "ep-5"),
        "the verify episode ended: {stopped:?}"
    );
    assert_eq!(agency.approve("killed", "ticket-1"), 0);
    assert_eq!(
        agency.outbox_keys(),
        [
            "publish:spring-launch:a5722ef529842960",
            "comment:evt-101",
            "dm:evt-102"
        ]
    );
}

/// The outbox's keys after the campaign, in order, once each.
const CAMPAIGN_KEYS: [&str; 3] = [
    "publish:spring-launch:a5722ef529842960",
    "comment:evt-101",
    "dm:evt-102",
];

/// The campaign's output, as the README's "What a run must output" states it (post ids
/// of a fresh outbox).
fn assert_campaign_output(events: &[Value]) {
    assert_output_of(events, "spring-launch", "published and verified");
}

/// The campaign's output when a person, not the outbox lookup, accepted the post's
/// visibility on review.
fn assert_campaign_output_reviewed(events: &[Value]) {
    assert_output_of(
        events,
        "spring-launch",
        "published (its visibility accepted by a person on review)",
    );
}

/// The output of a completed campaign named `campaign` (`spring-launch`, or the day's
/// `spring-live`), post ids of a fresh outbox; `published` says how the post's visibility
/// was established.
fn assert_output_of(events: &[Value], campaign: &str, published: &str) {
    let completed = events_of_kind(events, "run.completed");
    assert_eq!(completed.len(), 1, "the campaign completed");
    assert_eq!(
        completed[0]["payload"]["output"],
        serde_json::json!({
            "status": "ok",
            "summary": format!("{campaign}: planned, created, {published}; engagement answered; journaled"),
            "artifacts_created": [
                format!("plan_graph:plan-{campaign}-1"),
                "asset_graph:asset-a5722ef529842960",
                "outbox:publish-1",
                "outbox:comment-2",
                "outbox:dm-3",
                format!("journal:{campaign}"),
            ],
            "decisions": [
                { "episode": "ep-2", "status": "ok", "type": "plan" },
                { "episode": "ep-3", "status": "ok", "type": "create" },
                { "episode": "ep-4", "status": "ok", "type": "publish" },
                { "episode": "ep-6", "status": "ok", "type": "engage" },
                // ep-7 and ep-8 verified the engage episode's two replies.
                { "episode": "ep-9", "status": "ok", "type": "document" },
            ],
            "next_actions": [],
        })
    );
}

/// The result the root episode (the orchestrator's, `ep-1`) finished with: the output of
/// a campaign that failed.
fn root_result(events: &[Value]) -> &Value {
    events_of_kind(events, "episode.finished")
        .into_iter()
        .find(|e| e["payload"]["episode_id"] == "ep-1")
        .map(|e| &e["payload"]["result"])
        .expect("the root episode finished")
}

/// The summary the episode of `agent` finished with (its last one).
fn finished_summary<'a>(events: &'a [Value], agent: &str) -> &'a str {
    events_of_kind(events, "episode.finished")
        .into_iter()
        .filter(|e| e["payload"]["agent"] == agent)
        .map(|e| e["payload"]["result"]["summary"].as_str().unwrap_or(""))
        .next_back()
        .expect("the agent's episode finished")
}

/// The summaries the verifier wrote to `verification_reports`.
fn verification_reports(events: &[Value]) -> Vec<&str> {
    events_of_kind(events, "domain.written")
        .into_iter()
        .filter(|e| e["payload"]["domain"] == "verification_reports")
        .map(|e| e["payload"]["content"]["summary"].as_str().unwrap_or(""))
        .collect()
}

/// Why each ticket was opened, in order.
fn tickets(events: &[Value]) -> Vec<&str> {
    events_of_kind(events, "human.escalated")
        .into_iter()
        .map(|e| e["payload"]["reason"].as_str().unwrap_or(""))
        .collect()
}

/// A lookup that read nothing is not a post found 0 times: a refused lookup (the workflow
/// has no executor for it) and one that keeps failing each send the verify episode to a
/// person, who approves it, and the campaign completes; a lookup that fails once is
/// asked for again and verifies the post.
#[test]
fn a_lookup_that_reads_nothing_asks_a_person_instead_of_failing_the_campaign() {
    let post = "publish:spring-launch:a5722ef529842960";
    let dm = "engagement asks for `dm` in lane `api` (key dm:evt-102";

    // Refused: no executor for `outbox_lookup`.
    let agency = Agency::new();
    let workflow = agency.workflow_with_lookup(None);
    assert_eq!(agency.run_workflow(&workflow, "refused"), 3);
    assert_eq!(agency.outbox_keys(), [post]);
    let events = run_events(&agency.data, "refused");
    assert!(events_of_kind(&events, "run.failed").is_empty());
    assert_eq!(
        tickets(&events),
        [format!(
            "episode ep-5 (verify, run by verifier) needs review: visibility of {post} not checked: the outbox lookup was refused [workflow.tools]: the workflow declares no executor for tool `outbox_lookup` (a [tools.outbox_lookup] section, or `SECTION:TOOL` for an mcp section); check the platform for the post"
        )]
    );
    // The person is asked to check the platform for the post the receipt names.
    let review = &events_of_kind(&events, "human.escalated")[0]["payload"]["subject"];
    assert_eq!(
        review["result"]["next_actions"],
        serde_json::json!([{ "for": "human", "task": format!("check the platform for outbox:publish-1 ({post})") }]),
        "{review}"
    );
    assert_eq!(agency.approve("refused", "ticket-1"), 3);
    assert_eq!(agency.approve("refused", "ticket-2"), 3);
    // Verification first: each reply's verification reads nothing either, and goes to a
    // person too.
    assert_eq!(agency.approve("refused", "ticket-3"), 3);
    assert_eq!(agency.approve("refused", "ticket-4"), 0);
    let events = run_events(&agency.data, "refused");
    assert_eq!(
        tickets(&events)[2..]
            .iter()
            .map(|t| t
                .split(": visibility of ")
                .nth(1)
                .unwrap_or_default()
                .split(' ')
                .next()
                .unwrap_or_default())
            .collect::<Vec<_>>(),
        ["comment:evt-101", "dm:evt-102"]
    );
    assert!(
        tickets(&events)[1].starts_with(dm),
        "{:?}",
        tickets(&events)
    );
    assert!(verification_reports(&events).is_empty());
    // The publisher says the person's review, not the verifier, accepted the post.
    assert_eq!(
        finished_summary(&events, "publisher"),
        format!(
            "published; visibility accepted by a person on review ({})",
            tickets(&events)[0]
                .strip_prefix("episode ep-5 (verify, run by verifier) needs review: ")
                .expect("the review ticket")
        )
    );
    assert_campaign_output_reviewed(&events);
    assert_eq!(agency.outbox_keys(), CAMPAIGN_KEYS);

    // Failing every time: looked up twice, then a person.
    let agency = Agency::new();
    let failing = agency.script("lookup-down.sh", "echo 'outbox unreachable' >&2\nexit 1");
    let workflow = agency.workflow_with_lookup(Some(&failing));
    assert_eq!(agency.run_workflow(&workflow, "down"), 3);
    let events = run_events(&agency.data, "down");
    assert_eq!(events_of_kind(&events, "tool.failed").len(), 2);
    let asked = tickets(&events);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].starts_with(&format!(
            "episode ep-5 (verify, run by verifier) needs review: visibility of {post} not checked: the outbox lookup failed 2 times, last "
        )),
        "{asked:?}"
    );
    assert!(!asked[0].contains("found 0 times"), "{asked:?}");
    assert_eq!(agency.approve("down", "ticket-1"), 3);
    assert_eq!(agency.approve("down", "ticket-2"), 3);
    assert_eq!(agency.approve("down", "ticket-3"), 3);
    assert_eq!(agency.approve("down", "ticket-4"), 0);
    assert_campaign_output_reviewed(&run_events(&agency.data, "down"));

    // Failing once: the second lookup finds the post, and only the DM waits for a person.
    let agency = Agency::new();
    let marker = agency.dir().join("lookup-failed-once");
    let real = docket_tests::workspace_bin("docket-example-social", "social-outbox");
    let flaky = agency.script(
        "lookup-flaky.sh",
        &format!(
            "if [ ! -e '{marker}' ]; then touch '{marker}'; exit 1; fi\nexec '{real}' \"$@\"",
            marker = marker.display(),
            real = real.display(),
        ),
    );
    let workflow = agency.workflow_with_lookup(Some(&flaky));
    assert_eq!(agency.run_workflow(&workflow, "flaky"), 3);
    let events = run_events(&agency.data, "flaky");
    assert_eq!(events_of_kind(&events, "tool.failed").len(), 1);
    assert_eq!(events_of_kind(&events, "tool.returned").len(), 1);
    let asked = tickets(&events);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].starts_with(dm), "{asked:?}");
    assert_eq!(
        verification_reports(&events),
        [format!("{post} visible once in the outbox (publish-1)")]
    );
    assert_eq!(
        finished_summary(&events, "publisher"),
        format!("published and verified: {post} visible once in the outbox (publish-1)")
    );
    assert_eq!(agency.approve("flaky", "ticket-1"), 0);
    let events = run_events(&agency.data, "flaky");
    // The replies' verifications looked up once each.
    assert_eq!(events_of_kind(&events, "tool.returned").len(), 3);
    assert_campaign_output(&events);
}

/// `(episode, condition)` of every `episode.stopped`.
fn stops(events: &[Value]) -> Vec<(String, String)> {
    events_of_kind(events, "episode.stopped")
        .iter()
        .map(|e| {
            (
                e["payload"]["episode_id"].as_str().unwrap_or("").to_owned(),
                e["payload"]["condition"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// `(episode, type, agent, depth)` of every `episode.started`.
fn episodes(events: &[Value]) -> Vec<(String, String, String, u64)> {
    events_of_kind(events, "episode.started")
        .iter()
        .map(|e| {
            let p = &e["payload"];
            (
                p["episode_id"].as_str().unwrap_or("").to_owned(),
                p["episode_type"].as_str().unwrap_or("").to_owned(),
                p["agent"].as_str().unwrap_or("").to_owned(),
                p["depth"].as_u64().unwrap_or(99),
            )
        })
        .collect()
}

fn kinds_of_effect<'a>(events: &'a [Value], effect: &str) -> Vec<&'a str> {
    events
        .iter()
        .filter(|e| e["payload"]["effect_id"] == effect)
        .filter_map(|e| e["kind"].as_str())
        .collect()
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn a_campaign_runs_its_episodes_posts_once_per_key_and_waits_for_a_person_before_the_dm() {
    let agency = Agency::new();
    assert_eq!(agency.run("success_achieved", "launch"), 3);
    let events = run_events(&agency.data, "launch");
    // The DM waits for a person; the post and the reply are out already.
    let asked = events_of_kind(&events, "human.escalated");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["payload"]["subject"]["type"], "effect");
    assert!(
        asked[0]["payload"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("key dm:evt-102"),
        "{}",
        asked[0]
    );
    let before = agency.outbox_keys();
    assert_eq!(
        before,
        ["publish:spring-launch:a5722ef529842960", "comment:evt-101"]
    );
    // Resuming while the ticket is open sends nothing again.
    let out = agency.docket(&["resume", "launch"]);
    assert_eq!(agency.code(&out), 3);
    assert_eq!(agency.outbox_keys(), before);

    assert_eq!(agency.approve("launch", "ticket-1"), 0);
    let events = run_events(&agency.data, "launch");
    assert_eq!(
        episodes(&events),
        [
            ("ep-2", "plan", "planner", 1),
            ("ep-3", "create", "creator", 1),
            ("ep-4", "publish", "publisher", 1),
            ("ep-5", "verify", "verifier", 2),
            ("ep-6", "engage", "engagement", 1),
            // Verification first: each reply the engage episode sent is confirmed.
            ("ep-7", "verify", "verifier", 2),
            ("ep-8", "verify", "verifier", 2),
            ("ep-9", "document", "doc", 1),
        ]
        .map(|(e, t, a, d)| (e.to_owned(), t.to_owned(), a.to_owned(), d))
    );
    // Children get half of what their parent has left, at most.
    for started in events_of_kind(&events, "episode.started") {
        let budget = &started["payload"]["budget"];
        assert!(
            budget["tokens"].as_u64().unwrap_or(u64::MAX) <= 20_000,
            "{budget}"
        );
    }
    let stopped = stops(&events);
    assert!(
        stopped.iter().all(|(_, c)| c == "success_achieved"),
        "{stopped:?}"
    );
    assert_eq!(stopped.last().map(|s| s.0.as_str()), Some("ep-1"));

    // Each domain written by its one writer.
    let writers: Vec<(String, String)> = events_of_kind(&events, "domain.written")
        .iter()
        .map(|e| {
            (
                e["payload"]["domain"].as_str().unwrap_or("").to_owned(),
                e["payload"]["agent"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        writers,
        owned(&[
            ("plan_graph", "planner"),
            ("asset_graph", "creator"),
            ("schedule", "publisher"),
            ("asset_graph", "publisher"),
            ("verification_reports", "verifier"),
            ("verification_reports", "verifier"),
            ("verification_reports", "verifier"),
            ("conversation_summaries", "engagement"),
            ("docs_journal", "doc"),
        ])
    );
    assert!(events_of_kind(&events, "domain.write_denied").is_empty());
    // The publisher attached its snapshot ref to the creator's asset and changed nothing
    // else; the engagement summary keeps its replies' receipts redacted.
    let written = events_of_kind(&events, "domain.written");
    let assets: Vec<&Value> = written
        .iter()
        .filter(|e| e["payload"]["domain"] == "asset_graph")
        .map(|e| &e["payload"])
        .collect();
    assert_eq!(
        assets[1]["decision"]["rule_id"],
        "domains.asset_graph.attachers.publisher"
    );
    let mut attached = assets[1]["content"].clone();
    assert!(
        attached["asset"]["snapshot_ref"]
            .as_str()
            .is_some_and(|r| r.starts_with("outbox:")),
        "{attached}"
    );
    if let Some(asset) = attached["asset"].as_object_mut() {
        asset.remove("snapshot_ref");
    }
    assert_eq!(attached, assets[0]["content"]);
    let summary = written
        .iter()
        .find(|e| e["payload"]["domain"] == "conversation_summaries")
        .map(|e| &e["payload"]["content"])
        .expect("the engagement summary");
    let receipts: Vec<&Value> = summary["thread"]
        .as_array()
        .map(|t| t.iter().map(|r| &r["receipt"]).collect())
        .unwrap_or_default();
    assert!(
        !receipts.is_empty() && receipts.iter().all(|r| *r == "[redacted]"),
        "{summary}"
    );

    // Dry run → kill switch read → execute → verify, for the post; the DM after a person.
    assert_eq!(
        kinds_of_effect(&events, "launch/effect-1"),
        [
            "effect.requested",
            "effect.admitted",
            "effect.dry_run",
            "effect.ready",
            "effect.kill_switch_checked",
            "effect.started",
            "effect.applied",
            "effect.verified",
            "effect.settled"
        ]
    );
    let dm = kinds_of_effect(&events, "launch/effect-3");
    assert!(dm.contains(&"effect.applied"), "{dm:?}");
    let requested: Vec<(&str, &str)> = events_of_kind(&events, "effect.requested")
        .iter()
        .map(|e| {
            (
                e["payload"]["agent"].as_str().unwrap_or(""),
                e["payload"]["effect_kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        requested,
        [
            ("publisher", "publish"),
            ("engagement", "comment"),
            ("engagement", "dm")
        ]
    );
    // The verifier saw the post in the outbox through a governed tool call.
    // The post's, then (verification first) each reply's.
    let lookups = events_of_kind(&events, "tool.returned");
    assert_eq!(lookups.len(), 3);
    assert!(
        lookups.iter().all(|l| l["payload"]["result"]["count"] == 1),
        "{lookups:?}"
    );

    // One message per key in the outbox.
    let keys = agency.outbox_keys();
    assert_eq!(keys, CAMPAIGN_KEYS);
    assert_eq!(
        verification_reports(&events),
        [
            "publish:spring-launch:a5722ef529842960 visible once in the outbox (publish-1)",
            "comment:evt-101 visible once in the outbox (comment-2)",
            "dm:evt-102 visible once in the outbox (dm-3)"
        ]
    );
    assert_campaign_output(&events);
    replays_and_exports(&agency.data, "launch");

    // The same campaign again: the outbox's ledger applies no key twice across runs.
    assert_eq!(agency.run("success_achieved", "launch-again"), 3);
    assert_eq!(agency.approve("launch-again", "ticket-1"), 0);
    assert_eq!(agency.outbox_keys(), keys);
    let again = run_events(&agency.data, "launch-again");
    let receipts: Vec<&Value> = events_of_kind(&again, "effect.applied")
        .iter()
        .map(|e| &e["payload"]["receipt"]["result"]["post_id"])
        .collect();
    assert_eq!(receipts, ["publish-1", "comment-2", "dm-3"]);
}

/// The drift evidence the README says the browser lane's executor gives for a page of
/// `examples/social/pages/`, recomputed here: SHA-256 of the page's HTML with whitespace
/// collapsed, and of its body's visible text.
fn expected_drift(page: &str) -> Value {
    use sha2::{Digest, Sha256};
    let html = std::fs::read_to_string(
        workspace_root()
            .join("examples/social/pages")
            .join(format!("{page}.html")),
    )
    .expect("the page");
    let collapse = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let body = &html[html.find("<body").expect("a body")..];
    let mut text = String::new();
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    let hex = |t: &str| -> String {
        Sha256::digest(t.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    serde_json::json!({
        "screenshot_sha256": hex(&collapse(&text)),
        "dom_sha256": hex(&collapse(&html)),
    })
}

/// The reply to the comment goes out on the browser lane: run against the sandbox copy of
/// the thread's page first (nothing reaches the outbox), then against the real page, each
/// answer carrying the drift evidence of the page it drove, recorded and shown by `docket
/// status`.
#[test]
fn the_reply_goes_out_on_the_browser_lane_sandbox_first_with_its_drift_evidence() {
    let agency = Agency::new();
    assert_eq!(agency.run("success_achieved", "reply"), 3);
    let events = run_events(&agency.data, "reply");
    assert_eq!(
        kinds_of_effect(&events, "reply/effect-2"),
        [
            "effect.requested",
            "effect.admitted",
            "effect.dry_run",
            "effect.ready",
            "effect.sandbox_started",
            "effect.sandbox_ran",
            "effect.ready",
            "effect.kill_switch_checked",
            "effect.started",
            "effect.applied",
            "effect.verified",
            "effect.settled"
        ]
    );
    let sandbox = events_of_kind(&events, "effect.sandbox_started");
    assert_eq!(sandbox.len(), 1, "only the reply is on the browser lane");
    assert_eq!(sandbox[0]["payload"]["request"]["target"], "sandbox");
    let ran = &events_of_kind(&events, "effect.sandbox_ran")[0]["payload"]["outcome"];
    assert_eq!(ran["receipt"]["result"]["sandbox"], true, "{ran}");
    assert_eq!(ran["receipt"]["drift"], expected_drift("thread.sandbox"));
    let started = events_of_kind(&events, "effect.started");
    let targets: Vec<&Value> = started
        .iter()
        .map(|e| &e["payload"]["request"]["target"])
        .collect();
    assert_eq!(
        targets,
        [&Value::Null, &Value::from("live")],
        "the post is on the API lane"
    );
    let applied = events_of_kind(&events, "effect.applied");
    let reply = &applied[1]["payload"]["receipt"];
    assert_eq!(reply["result"]["post_id"], "comment-2");
    assert_eq!(reply["drift"], expected_drift("thread"));
    // Nothing of the sandbox run reached the outbox.
    assert_eq!(
        agency.outbox_keys(),
        ["publish:spring-launch:a5722ef529842960", "comment:evt-101"]
    );
    let out = agency.docket(&["status", "reply"]);
    let status = stdout_text(&out);
    let dom = |page: &str| {
        expected_drift(page)["dom_sha256"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        status.contains(&format!("dom sha256 {}", dom("thread")))
            && status.contains("sandbox run: receipt")
            && status.contains(&format!("dom sha256 {}", dom("thread.sandbox"))),
        "{status}"
    );
    assert_eq!(agency.approve("reply", "ticket-1"), 0);
    replays_and_exports(&agency.data, "reply");
}

/// A page whose selectors are unstable (the redesigned thread has two reply buttons with
/// the same test id): the sandbox run reports it, nothing is retried or posted, and the
/// run waits on a manual-review ticket; a person who replied by hand approves it and the
/// campaign goes on to the DM and completes, the reply settled by that person.
#[test]
fn unstable_selectors_wait_on_a_manual_review_ticket_that_a_person_resolves() {
    let agency = Agency::new();
    assert_eq!(agency.run("unstable_selectors", "redesign"), 3);
    let events = run_events(&agency.data, "redesign");
    let ran = &events_of_kind(&events, "effect.sandbox_ran")[0]["payload"]["outcome"];
    assert_eq!(ran["code"], "UNSTABLE_SELECTORS", "{ran}");
    let asked = events_of_kind(&events, "human.escalated");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0]["payload"]["subject"],
        serde_json::json!({"type": "effect", "effect_id": "redesign/effect-2", "step": "manual_review"})
    );
    let reason = asked[0]["payload"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("unstable selectors on its sandbox run")
            && reason.contains(
                "[data-testid=reply-submit] matches 2 elements on page thread-redesign.sandbox"
            )
            && reason.contains("not tried again"),
        "{reason}"
    );
    assert!(
        events_of_kind(&events, "effect.started")
            .iter()
            .all(|e| e["payload"]["effect_id"] != "redesign/effect-2")
    );
    assert_eq!(
        agency.outbox_keys(),
        ["publish:spring-redesign:a5722ef529842960"]
    );
    // Resuming while the ticket is open tries nothing again.
    let out = agency.docket(&["resume", "redesign"]);
    assert_eq!(agency.code(&out), 3);
    assert_eq!(
        events_of_kind(&run_events(&agency.data, "redesign"), "effect.sandbox_ran").len(),
        1
    );

    let out = agency.docket(&[
        "approve",
        "redesign",
        "ticket-1",
        "--by",
        "ana",
        "--reason",
        "replied by hand on the redesigned page",
    ]);
    assert_eq!(agency.code(&out), 3, "the DM waits for its own approval");
    let events = run_events(&agency.data, "redesign");
    let settled = events_of_kind(&events, "effect.settled");
    let reply = settled
        .iter()
        .find(|e| e["payload"]["effect_id"] == "redesign/effect-2")
        .expect("the reply is settled");
    assert_eq!(reply["payload"]["by"], "human");
    assert_eq!(
        reply["payload"]["reason"],
        "ana carried it out by hand (or found it in place): replied by hand on the redesigned page"
    );
    assert_eq!(agency.approve("redesign", "ticket-2"), 0);
    assert_eq!(
        agency.outbox_keys(),
        ["publish:spring-redesign:a5722ef529842960", "dm:evt-302"]
    );
    let events = run_events(&agency.data, "redesign");
    let output = &events_of_kind(&events, "run.completed")[0]["payload"]["output"];
    assert_eq!(
        output["summary"],
        "spring-redesign: planned, created, published and verified; engagement answered; journaled"
    );
    assert_eq!(
        output["artifacts_created"],
        serde_json::json!([
            "plan_graph:plan-spring-redesign-1",
            "asset_graph:asset-a5722ef529842960",
            "outbox:publish-1",
            "outbox:dm-2",
            "journal:spring-redesign"
        ])
    );
    replays_and_exports(&agency.data, "redesign");
}

#[test]
fn the_kill_switch_engaged_between_two_effects_stops_the_dm() {
    let agency = Agency::new();
    assert_eq!(agency.run("success_achieved", "incident"), 3);
    assert_eq!(agency.outbox().len(), 2);
    let out = agency.docket(&[
        "kill-switch",
        "on",
        "--lane",
        "api",
        "--by",
        "operator",
        "--reason",
        "platform incident",
    ]);
    assert_eq!(exit_code(&out), 0);
    // The approval reads the switches again: the DM never reaches the executor.
    assert_eq!(agency.approve("incident", "ticket-1"), 1);
    let events = run_events(&agency.data, "incident");
    let refused = events_of_kind(&events, "effect.refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["payload"]["effect_id"], "incident/effect-3");
    assert_eq!(
        refused[0]["payload"]["rule_id"], "kill_switch.api",
        "{}",
        refused[0]
    );
    assert!(!kinds_of_effect(&events, "incident/effect-3").contains(&"effect.started"));
    assert_eq!(
        agency.outbox_keys(),
        ["publish:spring-launch:a5722ef529842960", "comment:evt-101"]
    );
    let failed = events_of_kind(&events, "run.failed");
    assert_eq!(failed.len(), 1);
    let summary = "the engage episode ended failed: the dm to dm:evt-102 was not sent (kill_switch.api: kill switch `api` is engaged: every side effect in its lanes stops); no further sends on this lane";
    assert_eq!(
        failed[0]["payload"]["reason"],
        format!("episode ep-1 failed: {summary}")
    );
    // The campaign's result names what went out before the switch: the post and the reply.
    assert_eq!(
        *root_result(&events),
        serde_json::json!({
            "status": "failed",
            "summary": summary,
            "error_class": "kill_switch",
            "artifacts_created": [
                "plan_graph:plan-spring-launch-1",
                "asset_graph:asset-a5722ef529842960",
                "outbox:publish-1",
                "outbox:comment-2",
            ],
            "decisions": [
                { "episode": "ep-2", "status": "ok", "type": "plan" },
                { "episode": "ep-3", "status": "ok", "type": "create" },
                { "episode": "ep-4", "status": "ok", "type": "publish" },
                { "episode": "ep-6", "status": "failed", "type": "engage" },
            ],
            "next_actions": [{ "for": "human", "task": "review the stopped engage episode of spring-launch before a new run" }],
            "verification_needed": false,
        })
    );
    replays_and_exports(&agency.data, "incident");
}

/// Runs one stop-condition input; asserts the run failed and the episode of `agent`
/// stopped on `condition`; returns the events.
fn stopped_on(agency: &Agency, condition: &str, agent: &str) -> Vec<Value> {
    assert_eq!(agency.run(condition, condition), 1, "{condition}");
    let events = run_events(&agency.data, condition);
    let by_agent: Vec<(String, String)> = episodes(&events)
        .into_iter()
        .map(|(e, _, a, _)| (e, a))
        .collect();
    let stopped: Vec<(String, String)> = stops(&events)
        .into_iter()
        .filter(|(_, c)| c == condition)
        .collect();
    assert_eq!(stopped.len(), 1, "{condition}: {:?}", stops(&events));
    let agent_of = by_agent
        .iter()
        .find(|(e, _)| *e == stopped[0].0)
        .map(|(_, a)| a.as_str());
    assert_eq!(agent_of, Some(agent), "{condition}: {by_agent:?}");
    let failed = events_of_kind(&events, "run.failed");
    assert!(
        failed[0]["payload"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains(condition),
        "{}",
        failed[0]
    );
    replays_and_exports(&agency.data, condition);
    events
}

/// The result a campaign stopped by `condition` fails with, as the README's "What a run
/// must output" states it: the failed child (`episode`, of `episode_type`) named, the
/// class of its failure (`error_class`), what the children created before it (`created`,
/// after the plan node every campaign's planner writes), how each child ended, and a task
/// for a person.
fn assert_stopped_campaign(
    events: &[Value],
    condition: &str,
    episode_type: &str,
    error_class: &str,
    created: &[&str],
) {
    let campaign = format!("spring-launch-{}", condition.replace('_', "-"));
    let result = root_result(events);
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error_class"], error_class, "{result}");
    let summary = result["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with(&format!("the {episode_type} episode ended failed: "))
            && summary.contains(&format!("stopped ({condition})")),
        "{result}"
    );
    let mut artifacts: Vec<String> = Vec::new();
    if episode_type != "plan" {
        artifacts.push(format!("plan_graph:plan-{campaign}-1"));
    }
    artifacts.extend(created.iter().map(|a| (*a).to_owned()));
    assert_eq!(
        result["artifacts_created"],
        serde_json::json!(artifacts),
        "{result}"
    );
    let order = ["plan", "create", "publish"];
    let reached = order
        .iter()
        .position(|t| *t == episode_type)
        .expect("a campaign step");
    let decisions: Vec<Value> = order[..=reached]
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({
                "episode": format!("ep-{}", i + 2),
                "type": t,
                "status": if i == reached { "failed" } else { "ok" },
            })
        })
        .collect();
    assert_eq!(
        result["decisions"],
        serde_json::json!(decisions),
        "{result}"
    );
    assert_eq!(
        result["next_actions"],
        serde_json::json!([{ "for": "human", "task": format!("review the stopped {episode_type} episode of {campaign} before a new run") }]),
        "{result}"
    );
}

#[test]
fn each_stop_condition_of_the_document_is_reached_from_its_input() {
    let agency = Agency::new();

    // Budget exhausted: the creator's render burns its whole share of the budget.
    let events = stopped_on(&agency, "budget_exhausted", "creator");
    assert_stopped_campaign(
        &events,
        "budget_exhausted",
        "create",
        "budget_exhausted",
        &[],
    );
    assert!(
        events_of_kind(&events, "domain.written")
            .iter()
            .all(|e| e["payload"]["domain"] != "asset_graph")
    );

    // No new information: two retrievals of the missing brand capsule find nothing.
    let events = stopped_on(&agency, "no_new_information", "planner");
    assert_stopped_campaign(
        &events,
        "no_new_information",
        "plan",
        "no_new_information",
        &[],
    );
    let types: Vec<String> = episodes(&events).into_iter().map(|e| e.1).collect();
    assert_eq!(types, ["plan", "retrieve", "retrieve"]);

    // Failure repeats: three rewrites fail the tone rubric.
    let events = stopped_on(&agency, "failure_repeats", "creator");
    assert_stopped_campaign(&events, "failure_repeats", "create", "failure_repeats", &[]);
    let rewrites = episodes(&events)
        .into_iter()
        .filter(|e| e.1 == "rewrite")
        .count();
    assert_eq!(rewrites, 3);

    // Policy blocks: the creator tries to write the plan graph, the planner's alone.
    let events = stopped_on(&agency, "policy_blocks", "creator");
    assert_stopped_campaign(&events, "policy_blocks", "create", "policy_blocks", &[]);
    let denied = events_of_kind(&events, "domain.write_denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(
        denied[0]["payload"]["decision"]["rule_id"],
        "domains.plan_graph"
    );

    // Nothing was published by the four runs above.
    assert!(agency.outbox().is_empty(), "{:?}", agency.outbox());

    // Depth exceeded: the post is out, and the verifier (not the publisher) recurses to
    // confirm it until its depth limit.
    let events = stopped_on(&agency, "depth_exceeded", "verifier");
    // The post is out: the campaign's result names it; the verifier's failure class is
    // the publish episode's.
    assert_stopped_campaign(
        &events,
        "depth_exceeded",
        "publish",
        "visibility_unconfirmed",
        &["asset_graph:asset-a5722ef529842960", "outbox:publish-1"],
    );
    let denied = events_of_kind(&events, "episode.action_denied");
    assert_eq!(denied.len(), 1);
    assert!(
        denied[0]["payload"]["decision"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("child depth 4 > max_depth 3"),
        "{}",
        denied[0]
    );
    assert_eq!(
        denied[0]["payload"]["decision"]["rule_id"],
        "verifier-recursion"
    );
    assert_eq!(agency.outbox().len(), 1);

    // Success achieved: the campaign of the first test (a separate agency here).
    let success = Agency::new();
    assert_eq!(success.run("success_achieved", "success_achieved"), 3);
    assert_eq!(success.approve("success_achieved", "ticket-1"), 0);
    let events = run_events(&success.data, "success_achieved");
    assert!(
        stops(&events).contains(&("ep-1".to_owned(), "success_achieved".to_owned())),
        "{:?}",
        stops(&events)
    );
}

/// A day of the platform (docs/governance.md#outside-events, #scheduled-effects): the
/// campaign's post is scheduled a few seconds ahead and goes out at its time; the
/// engagement agent waits for engagement the ingestion system sends to the running
/// campaign (`docket signal`), each event written to `engagement_events` by the ingestion
/// system alone, delivered without the author's contact details, annotated by the agent in
/// `engagement_annotations`, and answered; an operator pauses the campaign, an event sent
/// meanwhile is recorded and answered only after the unpause; the DM waits for a person;
/// the whole run replays and verifies.
#[test]
fn a_day_of_the_platform_posts_on_time_answers_live_engagement_and_survives_a_pause() {
    let agency = Agency::new();
    let example = workspace_root().join("examples/social");
    let live = std::fs::read_to_string(example.join("input/live.json")).expect("input");
    let input = agency.dir().join("live.json");
    std::fs::write(&input, live.replace("\"+20s\"", "\"+3s\"")).expect("input");
    let out = agency.docket(&[
        "run",
        example.join("workflow.toml").to_str().expect("utf-8"),
        "--input",
        input.to_str().expect("utf-8"),
        "--run-id",
        "day",
    ]);
    assert_eq!(agency.code(&out), 3, "waits for engagement");
    assert!(
        stdout_text(&out).contains("engagement waits for event `engagement`"),
        "{}",
        stdout_text(&out)
    );
    let events = run_events(&agency.data, "day");
    let published = events
        .iter()
        .find(|e| e["kind"] == "effect.requested" && e["payload"]["effect_kind"] == "publish")
        .expect("the post");
    let due = published["payload"]["not_before_ms"]
        .as_i64()
        .expect("scheduled");
    let checked = events
        .iter()
        .find(|e| e["kind"] == "effect.kill_switch_checked")
        .expect("gated");
    assert!(
        checked["payload"]["at_ms"].as_i64().expect("at") >= due,
        "the post went out at its time, not before: {checked}"
    );

    let send = |file: &str| {
        let out = agency.docket(&[
            "signal",
            "day",
            "engagement",
            "--by",
            "ingestion",
            "--payload",
            example
                .join("input/engagement")
                .join(file)
                .to_str()
                .expect("utf-8"),
        ]);
        (agency.code(&out), stdout_text(&out))
    };
    let (code, said) = send("comment.json");
    assert_eq!(code, 3, "answered, then waits for the next: {said}");
    assert!(said.contains("delivered to engagement"), "{said}");
    // A sender the bundle does not list is refused.
    let out = agency.docket(&[
        "signal",
        "day",
        "engagement",
        "--by",
        "someone",
        "--payload",
        example
            .join("input/engagement/comment.json")
            .to_str()
            .expect("utf-8"),
    ]);
    assert!(
        stdout_text(&out).contains("refused"),
        "{}",
        stdout_text(&out)
    );

    let out = agency.docket(&["pause", "day", "--by", "ops", "--reason", "check the tone"]);
    assert_eq!(agency.code(&out), 0);
    let (code, said) = send("dm.json");
    assert_eq!(code, 0, "recorded while paused: {said}");
    let before = run_events(&agency.data, "day");
    let out = agency.docket(&["unpause", "day", "--by", "ops", "--reason", "tone is fine"]);
    assert_eq!(agency.code(&out), 3, "the DM waits for a person");
    let after = run_events(&agency.data, "day");
    let calls = |e: &[Value]| e.iter().filter(|e| e["kind"] == "agent.responded").count();
    assert!(calls(&after) > calls(&before), "answered after the unpause");
    assert_eq!(agency.approve("day", "ticket-1"), 0);

    let events = run_events(&agency.data, "day");
    // The ingestion system alone wrote engagement_events; the agent annotated each
    // delivered event, naming it; the author's address never reached the agent.
    let writes = |domain: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["kind"] == "domain.written" && e["payload"]["domain"] == domain)
            .map(|e| &e["payload"])
            .collect()
    };
    let ingested = writes("engagement_events");
    assert_eq!(ingested.len(), 2, "the refused one was not written");
    assert!(ingested.iter().all(|w| w["agent"] == "ingestion"));
    let notes = writes("engagement_annotations");
    assert_eq!(notes.len(), 2);
    assert!(notes.iter().all(|n| {
        n["agent"] == "engagement"
            && n["content"]["signal_id"]
                .as_str()
                .is_some_and(|s| s.starts_with("day/signal-"))
    }));
    let delivered: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "handoff.allowed" && e["payload"]["from"] == "events")
        .collect();
    assert_eq!(delivered.len(), 2);
    assert!(
        delivered
            .iter()
            .all(|d| d.to_string().contains("maya") || d.to_string().contains("jon")),
        "{delivered:?}"
    );
    assert!(
        delivered
            .iter()
            .all(|d| !d.to_string().contains("@example.com")),
        "{delivered:?}"
    );
    assert_eq!(
        agency.outbox_keys(),
        [
            "publish:spring-live:a5722ef529842960",
            "comment:evt-201",
            "dm:evt-202"
        ]
        .map(str::to_owned)
        .to_vec()
    );
    // Verification first: each reply is confirmed by its own verify child.
    assert_eq!(
        verification_reports(&events),
        [
            "publish:spring-live:a5722ef529842960 visible once in the outbox (publish-1)",
            "comment:evt-201 visible once in the outbox (comment-2)",
            "dm:evt-202 visible once in the outbox (dm-3)"
        ]
    );
    assert_output_of(&events, "spring-live", "published and verified");
    let out = agency.docket(&["replay", "day"]);
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    // And verifies: its chain, hashes, tree and signed seal.
    let out = agency.docket(&["verify", "day"]);
    assert_eq!(
        exit_code(&out),
        0,
        "{}{}",
        stdout_text(&out),
        String::from_utf8_lossy(&out.stderr)
    );
}
