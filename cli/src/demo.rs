//! `docket demo`: every example's runs on a fresh data directory, human steps answered by
//! a named demo reviewer, a readable summary of each run, then the evidence: every run
//! replayed, the directory verified, every run exported (JSON lines, checked offline, and
//! an HTML report). The runs are the table [`SCENARIOS`]; docs/demo.md describes the
//! command.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use clap::Args;
use docket_app::Store;
use docket_decider::{RunEvent, RunHistory, RunId, RunState, RunStatus, TicketId};
use docket_policies::{InputKind, Verdict};
use docket_runtime::{HumanDecision, Runtime, Workflow, check_executables};

use crate::command::{EXIT_COMPLETED, EXIT_FAILED};
use crate::export::Format;

/// Who answers the runs' human steps; recorded as such in every ticket's decision.
pub(crate) const DEMO_REVIEWER: &str = "demo-reviewer";

/// Who engages and releases the kill switches of the demo's incident drill.
const DEMO_OPERATOR: &str = "demo-operator";

/// The file that marks a directory as `docket demo`'s, so the next demo may replace it.
const MARKER: &str = "DOCKET-DEMO";

/// The data directory when `--data` is not given (in the current directory).
const DEFAULT_DIR: &str = "docket-demo";

/// How a run is expected to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// `run.completed`.
    Completed,
    /// `run.blocked` by this rule.
    BlockedBy(&'static str),
    /// `run.failed`, its reason naming this (a stop condition, a rule).
    FailedFor(&'static str),
}

/// A human step, answered by [`DEMO_REVIEWER`]: the next open ticket is approved (or
/// denied), with the option or output chosen, for the reason given.
#[derive(Clone, Copy, Debug)]
struct Answer {
    approve: bool,
    /// The option (a question) or the output to keep (a conflict), from 1.
    choose: Option<u32>,
    reason: &'static str,
}

const fn approve(choose: Option<u32>, reason: &'static str) -> Answer {
    Answer {
        approve: true,
        choose,
        reason,
    }
}

/// One run of an example.
struct Scenario {
    /// The example's directory under the examples directory.
    example: &'static str,
    /// The run id's suffix (the run is `EXAMPLE-NAME`).
    name: &'static str,
    /// What the run shows, in one line (the example's README says more).
    shows: &'static str,
    /// The workflow file, in the example's directory.
    workflow: &'static str,
    /// The input file, in the example's directory; `None`: the workflow's own.
    input: Option<&'static str>,
    /// How it must end.
    expect: End,
    /// The human steps, in the order the run asks for them.
    answers: &'static [Answer],
    /// A kill switch's lane an operator engages once the run first waits for a person,
    /// before the answers, and releases when the run has ended.
    kill_switch: Option<&'static str>,
}

/// Every run of the demo, in order. Runs share the data directory, so order matters where
/// one run's circuit readings reach the next (consulting's outage drill comes last of its
/// example). Adding an example is adding its rows.
const SCENARIOS: &[Scenario] = &[
    Scenario {
        example: "geo",
        name: "analysis",
        shows: "the GEO pipeline end to end: Checkpoint 1, five agents in order, Checkpoint 2",
        workflow: "workflow.toml",
        input: None,
        expect: End::Completed,
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "geo",
        name: "no-competitors",
        shows: "an invalid request stopped at Checkpoint 1",
        workflow: "workflow.toml",
        input: Some("input/no-competitors.json"),
        expect: End::BlockedBy("escalation.stop_on_errors"),
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "geo",
        name: "question-feedback",
        shows: "Strategy asks for new questions: refused by the question-generation lock (Guardrail 3)",
        workflow: "workflow.toml",
        input: Some("input/question-feedback.json"),
        expect: End::BlockedBy("guardrail-3"),
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "geo",
        name: "questions-in-recommendations",
        shows: "recommendations rejected at Checkpoint 2, retried, then the hard stop (Guardrail 1)",
        workflow: "workflow.toml",
        input: Some("input/questions-in-recommendations.json"),
        expect: End::BlockedBy("guardrail-1"),
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "claims",
        name: "collision",
        shows: "full, scoped and translated handoffs of a claim",
        workflow: "workflow.toml",
        input: None,
        expect: End::Completed,
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "claims",
        name: "injury",
        shows: "a third party reached in minimal mode",
        workflow: "workflow.toml",
        input: Some("injury.json"),
        expect: End::Completed,
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "claims",
        name: "leak",
        shows: "sharing the investigation with the third party is denied",
        workflow: "workflow.toml",
        input: Some("leak.json"),
        expect: End::BlockedBy("deny_by_default"),
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "consulting",
        name: "business-case",
        shows: "intent routing, a capability request, a fan-out, a conflict, a timeout",
        workflow: "workflow.toml",
        input: None,
        expect: End::Completed,
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "consulting",
        name: "unclear",
        shows: "ORC asks a clarifying question; the demo reviewer answers",
        workflow: "workflow.toml",
        input: Some("unclear.json"),
        expect: End::Completed,
        answers: &[approve(Some(1), "the demo asks for a business case")],
        kill_switch: None,
    },
    Scenario {
        example: "consulting",
        name: "percent-rate",
        shows: "a capability request refused by its input schema",
        workflow: "workflow.toml",
        input: Some("percent-rate.json"),
        expect: End::BlockedBy("agents.ANL.capabilities.ANL_NPV.input_schema"),
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "consulting",
        name: "outage-1",
        shows: "the outage drill: the proofreader fails, ORC answers without it",
        workflow: "outage.toml",
        input: None,
        expect: End::Completed,
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "consulting",
        name: "outage-2",
        shows: "the outage drill, again",
        workflow: "outage.toml",
        input: None,
        expect: End::Completed,
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "consulting",
        name: "outage-3",
        shows: "the outage drill, a third time: the proofreader's circuit opens",
        workflow: "outage.toml",
        input: None,
        expect: End::Completed,
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "consulting",
        name: "circuit-open",
        shows: "the proofreader is not called while its circuit is open",
        workflow: "workflow.toml",
        input: None,
        expect: End::Completed,
        answers: &[],
        kill_switch: None,
    },
    Scenario {
        example: "software-team",
        name: "signup",
        shows: "tasks, a tool refused before it runs, a conflict a person decides",
        workflow: "workflow.toml",
        input: None,
        expect: End::Completed,
        answers: &[approve(Some(2), "REST matches the migration")],
        kill_switch: None,
    },
    Scenario {
        example: "software-team",
        name: "flaky",
        shows: "a failing specialist: retry, escalate to a person, block",
        workflow: "workflow.toml",
        input: Some("flaky.json"),
        expect: End::BlockedBy("block"),
        answers: &[
            approve(Some(2), "REST matches the migration"),
            approve(None, "let qa try once more"),
        ],
        kill_switch: None,
    },
    Scenario {
        example: "social",
        name: "campaign",
        shows: "child episodes under budgets, single-writer domains, a post and a reply to the outbox, a DM a person approves",
        workflow: "workflow.toml",
        input: None,
        expect: End::Completed,
        answers: &[approve(None, "the early-bird code may go out")],
        kill_switch: None,
    },
    Scenario {
        example: "social",
        name: "kill-switch",
        shows: "the api lane's kill switch engaged while the DM waits: the DM is refused",
        workflow: "workflow.toml",
        input: None,
        expect: End::FailedFor("kill_switch.api"),
        answers: &[approve(None, "the early-bird code may go out")],
        kill_switch: Some("api"),
    },
    stop_condition(
        "budget-exhausted",
        "the creator's answer spends its whole token budget: its episode stops",
        "input/budget_exhausted.json",
        "budget_exhausted",
    ),
    stop_condition(
        "depth-exceeded",
        "the verifier recurses to depth 4: the spawn is refused, its episode stops",
        "input/depth_exceeded.json",
        "depth_exceeded",
    ),
    stop_condition(
        "no-new-information",
        "the planner's retrieve children find nothing new: its episode stops",
        "input/no_new_information.json",
        "no_new_information",
    ),
    stop_condition(
        "failure-repeats",
        "the creator's rewrites fail the tone rubric three times: its episode stops",
        "input/failure_repeats.json",
        "failure_repeats",
    ),
    stop_condition(
        "policy-blocks",
        "the creator writes the plan graph, which only the planner may: refused, its episode stops",
        "input/policy_blocks.json",
        "policy_blocks",
    ),
];

/// A social run whose input leads an episode to one of the six
/// stop conditions (`success_achieved` is the campaign's); the campaign fails with it.
const fn stop_condition(
    name: &'static str,
    shows: &'static str,
    input: &'static str,
    condition: &'static str,
) -> Scenario {
    Scenario {
        example: "social",
        name,
        shows,
        workflow: "workflow.toml",
        input: Some(input),
        expect: End::FailedFor(condition),
        answers: &[],
        kill_switch: None,
    }
}

/// Examples whose effect executors and tools write to an outbox file named by an
/// environment variable: the demo points it into its data directory, so a demo's outbox
/// starts empty and holds the demo's messages only.
const OUTBOXES: &[(&str, &str, &str)] = &[("social", "SOCIAL_OUTBOX", "social-outbox.jsonl")];

/// The arguments of `docket demo` (the data directory is the global `--data`).
#[derive(Args)]
pub(crate) struct DemoArgs {
    /// The examples directory (default: ./examples, else the one of the workspace the
    /// `docket` binary was built in).
    #[arg(long, value_name = "DIR")]
    examples: Option<PathBuf>,
}

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Prints as it goes (a demo takes a while); a closed pipe is not worth a panic.
fn say(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// `docket demo`: exit 0 when every run ended as expected and all the evidence checks.
pub(crate) fn main(args: DemoArgs, data: Option<PathBuf>) -> ExitCode {
    let runtime = match crate::command::async_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match runtime.block_on(demo(args, data)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            say!("error: {}", crate::errors::error_text(&e));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

async fn demo(args: DemoArgs, data: Option<PathBuf>) -> anyhow::Result<u8> {
    crate::command::not_with_postgres(
        "`docket demo`",
        "it runs the examples on a fresh data directory of its own: run it without --store (and without DOCKET_STORE)",
    )?;
    let examples = examples_dir(args.examples)?;
    let mut workflows = load_workflows(&examples)?;
    let dir = data.unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
    let replaced = prepare(&dir)?;
    route_outboxes(&mut workflows, &dir)?;
    let rt = crate::command::open_with(&dir, false).await?;
    std::fs::write(
        dir.join(MARKER),
        "Made by `docket demo`: a data directory of example runs. The next `docket demo` \
         with this directory replaces it.\n",
    )
    .with_context(|| format!("cannot write {}", dir.join(MARKER).display()))?;
    docket_evidence::generate_key(&dir, "docket-demo", false)
        .with_context(|| format!("cannot make the signing key of {}", dir.display()))?;
    say(&format!(
        "docket demo: {} runs of the examples in {}, on the data directory {}{}\n\
         human steps are answered by {DEMO_REVIEWER}\n",
        SCENARIOS.len(),
        examples.display(),
        dir.display(),
        if replaced {
            " (the previous demo's, replaced)"
        } else {
            ""
        }
    ));

    let mut unexpected = Vec::new();
    let mut runs = Vec::new();
    for (scenario, workflow) in SCENARIOS.iter().zip(&workflows) {
        let mut out = String::new();
        let run = RunId::parse(&format!("{}-{}", scenario.example, scenario.name))
            .map_err(|e| anyhow!("scenario {}: {e}", scenario.name))?;
        let input = read_input(&examples, scenario, workflow)?;
        let state = drive(&rt, &dir, workflow, input, &run, scenario).await?;
        let events: Vec<RunEvent> = rt
            .events(&run)
            .await?
            .into_iter()
            .map(|e| e.event)
            .collect();
        let verdict = check_end(scenario, &state);
        summarise(&mut out, scenario, &run, &state, &events, verdict.as_ref());
        if let Err(why) = verdict {
            unexpected.push(format!("{run}: {why}"));
        }
        say(&out);
        runs.push(run);
    }

    let mut out = String::new();
    let evidence_sound = evidence(&rt, &dir, &runs, &mut out).await?;
    outln!(
        out,
        "\n{} of {} runs ended as expected",
        SCENARIOS.len() - unexpected.len(),
        SCENARIOS.len()
    );
    for why in &unexpected {
        outln!(out, "  UNEXPECTED {why}");
    }
    say(&out);
    Ok(if unexpected.is_empty() && evidence_sound {
        EXIT_COMPLETED
    } else {
        EXIT_FAILED
    })
}

/// `--examples`, else `./examples`, else the workspace's next to `target/PROFILE/docket`.
fn examples_dir(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = given {
        if !dir.is_dir() {
            return Err(anyhow!(
                "--examples {}: not a directory (give docket's examples directory)",
                dir.display()
            ));
        }
        return Ok(dir);
    }
    let here = PathBuf::from("examples");
    if here.join("geo").is_dir() {
        return Ok(here);
    }
    let beside_build = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("examples")));
    match beside_build {
        Some(dir) if dir.join("geo").is_dir() => Ok(dir),
        _ => Err(anyhow!(
            "no examples directory: run `docket demo` from the docket workspace, or give \
             --examples DIR"
        )),
    }
}

/// Every scenario's workflow, loaded, and its programs found; the programs missing are
/// named, per example, with what to build, before anything runs.
fn load_workflows(examples: &Path) -> anyhow::Result<Vec<Workflow>> {
    let mut workflows = Vec::new();
    // Per example: the programs not found, and any other problem in full.
    let mut missing: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for s in SCENARIOS {
        let path = examples.join(s.example).join(s.workflow);
        let workflow = Workflow::load(&path)
            .with_context(|| format!("the {} example's workflow {}", s.example, s.workflow))?;
        for problem in check_executables(&workflow.spec) {
            let (programs, others) = missing.entry(s.example).or_default();
            match not_found(&problem.message) {
                Some(program) if !programs.iter().any(|p| p == program) => {
                    programs.push(program.to_owned());
                }
                Some(_) => {}
                None => others.push(problem.to_string()),
            }
        }
        workflows.push(workflow);
    }
    if missing.is_empty() {
        return Ok(workflows);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.display().to_string()))
        .unwrap_or_else(|| "the docket binary".to_owned());
    let mut why = format!(
        "the examples' agents are not built: run `cargo build` in the docket workspace (it \
         builds every example's agents next to target/debug/docket; `cargo build -p \
         docket-example-EXAMPLE` builds one example's), then `target/debug/docket demo`. \
         Not found next to docket ({beside}) nor on PATH:"
    );
    for (example, (programs, others)) in &missing {
        if !programs.is_empty() {
            let _ = write!(why, "\n  {example}: {}", programs.join(", "));
        }
        for other in others {
            let _ = write!(why, "\n  {example}: {other}");
        }
    }
    Err(anyhow!(why))
}

/// The program a "`command` `NAME` is not found" problem names.
fn not_found(message: &str) -> Option<&str> {
    if !message.contains("is not found next to docket") {
        return None;
    }
    message.strip_prefix("`command` `")?.split('`').next()
}

/// Makes `dir` ready: a new or empty directory, or a previous demo's, which is removed
/// first (returns true then). Anything else is refused, so no data is overwritten.
fn prepare(dir: &Path) -> anyhow::Result<bool> {
    if !dir.exists() {
        return Ok(false);
    }
    if !dir.is_dir() {
        return Err(anyhow!(
            "--data {}: it is a file, not a directory (give a new directory)",
            dir.display()
        ));
    }
    let mut entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if entries.next().is_none() {
        return Ok(false);
    }
    if !dir.join(MARKER).is_file() {
        return Err(anyhow!(
            "{} is not empty and not a previous demo's (it has no {MARKER} file): the demo \
             needs a fresh data directory; give a new one with --data DIR",
            dir.display()
        ));
    }
    std::fs::remove_dir_all(dir)
        .with_context(|| format!("cannot remove the previous demo in {}", dir.display()))?;
    Ok(true)
}

fn read_input(
    examples: &Path,
    scenario: &Scenario,
    workflow: &Workflow,
) -> anyhow::Result<serde_json::Value> {
    let path = match (scenario.input, workflow.spec.input.as_deref()) {
        (Some(file), _) => examples.join(scenario.example).join(file),
        (None, Some(own)) => PathBuf::from(own),
        (None, None) => {
            return Err(anyhow!(
                "the {} example's {} names no input file and its scenario {} gives none",
                scenario.example,
                scenario.workflow,
                scenario.name
            ));
        }
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the input {}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "the input {} is not valid JSON: {}",
            path.display(),
            crate::errors::json_error(&e)
        )
    })
}

/// Points each outbox of [`OUTBOXES`] into the demo's data directory (made absolute, as
/// the executors run in the example's directory).
fn route_outboxes(workflows: &mut [Workflow], dir: &Path) -> anyhow::Result<()> {
    let dir = std::path::absolute(dir)
        .with_context(|| format!("cannot make {} absolute", dir.display()))?;
    for (scenario, workflow) in SCENARIOS.iter().zip(workflows) {
        for (example, variable, file) in OUTBOXES {
            if scenario.example != *example {
                continue;
            }
            let outbox = dir.join(file).display().to_string();
            for effect in workflow.spec.effects.values_mut() {
                effect.env.insert((*variable).to_owned(), outbox.clone());
            }
            for tool in workflow.spec.tools.values_mut() {
                tool.env.insert((*variable).to_owned(), outbox.clone());
            }
        }
    }
    Ok(())
}

/// Starts the run and answers its human steps in order, until it ends or waits with no
/// answer left; engages the scenario's kill switch before the first answer and releases
/// it at the end.
async fn drive(
    rt: &Runtime<Store>,
    dir: &Path,
    workflow: &Workflow,
    input: serde_json::Value,
    run: &RunId,
    scenario: &Scenario,
) -> anyhow::Result<RunState> {
    let outcome = crate::verify::app(rt, dir)
        .start(workflow, input, Some(run.clone()))
        .await
        .with_context(|| format!("run {run}"))?;
    if let Some(lane) = scenario.kill_switch {
        crate::kill_switch::engage(dir, lane, true, DEMO_OPERATOR, "the demo's incident drill")?;
    }
    let answered = answer(rt, dir, run, scenario.answers, outcome.state).await;
    if let Some(lane) = scenario.kill_switch {
        crate::kill_switch::engage(dir, lane, false, DEMO_OPERATOR, "the drill is over")?;
    }
    answered
}

/// Answers the human steps in order, until the run ends or waits with no answer left.
async fn answer(
    rt: &Runtime<Store>,
    dir: &Path,
    run: &RunId,
    answers: &[Answer],
    state: RunState,
) -> anyhow::Result<RunState> {
    let mut state = state;
    for answer in answers {
        if state.status() != RunStatus::WaitingForHuman {
            break;
        }
        let Some(ticket) = first_open_ticket(&state) else {
            break;
        };
        let decision = if answer.approve {
            HumanDecision::approve(DEMO_REVIEWER, answer.reason).choosing(answer.choose)
        } else {
            HumanDecision::deny(DEMO_REVIEWER, answer.reason)
        };
        state = crate::verify::app(rt, dir)
            .decide_ticket(run, ticket.as_str(), decision)
            .await
            .with_context(|| format!("run {run}, {ticket}"))?
            .state;
    }
    Ok(state)
}

fn first_open_ticket(state: &RunState) -> Option<TicketId> {
    state.open_tickets().next().map(|(id, _)| id.clone())
}

/// Whether the run ended as the scenario expects; why not, if not.
fn check_end(scenario: &Scenario, state: &RunState) -> Result<(), String> {
    let as_expected = match scenario.expect {
        End::Completed => state.status() == RunStatus::Completed,
        End::BlockedBy(rule) => {
            state.status() == RunStatus::Blocked && state.blocked_by() == Some(rule)
        }
        End::FailedFor(why) => {
            state.status() == RunStatus::Failed
                && state
                    .stop_reason()
                    .is_some_and(|reason| reason.contains(why))
        }
    };
    if as_expected {
        return Ok(());
    }
    Err(format!(
        "expected {}, but the run is {}{}",
        expected_text(scenario.expect),
        state.status().as_str(),
        state
            .blocked_by()
            .map(|rule| format!(" by {rule}"))
            .unwrap_or_default()
    ))
}

fn expected_text(end: End) -> String {
    match end {
        End::Completed => "completed".to_owned(),
        End::BlockedBy(rule) => format!("blocked by {rule}"),
        End::FailedFor(why) => format!("failed for {why}"),
    }
}

/// The summary of one run: what was allowed and denied and why, the calls that failed,
/// the human steps, the effects, and how it ended.
fn summarise(
    out: &mut String,
    scenario: &Scenario,
    run: &RunId,
    state: &RunState,
    events: &[RunEvent],
    verdict: Result<&(), &String>,
) {
    outln!(
        out,
        "\n== {} / {}: {}",
        scenario.example,
        scenario.name,
        scenario.shows
    );
    let input = scenario.input.map_or_else(
        || {
            state
                .request()
                .and_then(|r| r.workflow.input.as_deref())
                .and_then(|path| Path::new(path).file_name())
                .map_or_else(
                    || "its input".to_owned(),
                    |f| f.to_string_lossy().into_owned(),
                )
        },
        str::to_owned,
    );
    outln!(
        out,
        "run {run} ({} on {input}): {}",
        scenario.workflow,
        state.status().as_str()
    );

    // Every call and handoff decision, from the log (the state keeps only live calls).
    let history = RunHistory::fold(events);
    // Decisive handoffs allowed, in order, with repeats counted; context inputs counted.
    let mut decisive = Vec::new();
    let mut context = 0;
    for h in history.handoffs().iter().filter(|h| h.allowed) {
        if h.input == InputKind::Context {
            context += 1;
        } else {
            decisive.push(format!("{} → {}", h.from, h.to));
        }
    }
    let listed = counted(&decisive);
    outln!(
        out,
        "  allowed: {} handoff(s): {}; {context} read-only context input(s)",
        decisive.len(),
        if listed.is_empty() {
            "none".to_owned()
        } else {
            listed.join(", ")
        }
    );

    let denied = denials(events);
    if denied.is_empty() {
        outln!(out, "  denied: nothing");
    } else {
        outln!(out, "  denied:");
        for line in denied {
            outln!(out, "    {line}");
        }
    }

    let failures: Vec<String> = history
        .calls()
        .values()
        .filter_map(|call| {
            let code = call.failure.as_ref()?;
            Some(format!("{} {code}", call.recorded.target_agent))
        })
        .collect();
    let failed = counted(&failures);
    outln!(
        out,
        "  calls: {}{}",
        history.calls().len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(", failed: {}", failed.join(", "))
        }
    );

    if state.tickets().is_empty() {
        outln!(out, "  human steps: none");
    } else {
        outln!(out, "  human steps:");
        for (id, t) in state.tickets() {
            let decided = match &t.decision {
                Some(d) => format!(
                    "{} by {}{}{}",
                    if d.approved { "approved" } else { "denied" },
                    d.by,
                    d.choice
                        .map(|c| format!(", choice {c}"))
                        .unwrap_or_default(),
                    if d.reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", d.reason)
                    }
                ),
                None => "still open".to_owned(),
            };
            outln!(out, "    {id}: {} → {decided}", t.reason);
        }
    }

    let mut effects = String::new();
    crate::effects::list_text(&mut effects, state);
    if effects.is_empty() {
        outln!(out, "  effects: none");
    } else {
        for line in effects.lines() {
            outln!(out, "  {line}");
        }
    }

    let result = match (state.status(), state.output()) {
        (RunStatus::Completed, Some(output)) => format!("completed: {}", brief(output)),
        (RunStatus::Blocked, _) => format!(
            "blocked by {}: {}",
            state.blocked_by().unwrap_or("?"),
            state.stop_reason().unwrap_or("")
        ),
        (RunStatus::Failed, _) => format!("failed: {}", state.stop_reason().unwrap_or("")),
        (status, _) => status.as_str().to_owned(),
    };
    outln!(out, "  result: {result}");
    match verdict {
        Ok(()) => outln!(out, "  as expected ({})", expected_text(scenario.expect)),
        Err(why) => outln!(out, "  UNEXPECTED: {why}"),
    }
}

/// The distinct items in their first order, each repeated one marked `×N`.
fn counted(items: &[String]) -> Vec<String> {
    let mut tally: Vec<(&str, usize)> = Vec::new();
    for item in items {
        match tally.iter_mut().find(|(seen, _)| *seen == item.as_str()) {
            Some((_, n)) => *n += 1,
            None => tally.push((item, 1)),
        }
    }
    tally
        .into_iter()
        .map(|(item, n)| {
            if n > 1 {
                format!("{item} ×{n}")
            } else {
                item.to_owned()
            }
        })
        .collect()
}

/// Every refusal the run recorded, one line each: handoffs, policy decisions (tool calls,
/// capability requests, the ladder's hard stops...), effects, episode actions, domain
/// writes, calls not made (an open circuit).
fn denials(events: &[RunEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|event| match event {
            RunEvent::HandoffDenied { .. }
            | RunEvent::EffectRefused(_)
            | RunEvent::EpisodeActionDenied { .. }
            | RunEvent::DomainWriteDenied { .. }
            | RunEvent::CallDegraded { .. } => true,
            RunEvent::PolicyDecided { decision, .. } => decision.verdict == Verdict::Deny,
            _ => false,
        })
        .map(|event| format!("{}: {}", event.kind(), crate::show::describe(event)))
        .collect()
}

/// A run's output in one line: recommendations by id, priority and topic (the geo
/// example's), anything else as JSON cut at 160 characters.
fn brief(output: &serde_json::Value) -> String {
    if let Some(recs) = output.get("recommendations").and_then(|r| r.as_array()) {
        let field = |r: &serde_json::Value, k: &str| {
            r.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_owned()
        };
        let listed: Vec<String> = recs
            .iter()
            .map(|r| {
                format!(
                    "{} [{}] {}",
                    field(r, "id"),
                    field(r, "priority"),
                    field(r, "topic")
                )
            })
            .collect();
        return format!(
            "{} recommendations ({}): {}",
            recs.len(),
            output.get("status").and_then(|s| s.as_str()).unwrap_or("?"),
            listed.join(", ")
        );
    }
    let text = serde_json::to_string(output).unwrap_or_default();
    match text.char_indices().nth(160) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// Replays every run, verifies the data directory and exports every run (JSON lines,
/// checked offline against the directory's key, and HTML); true when all is sound.
async fn evidence(
    rt: &Runtime<Store>,
    dir: &Path,
    runs: &[RunId],
    out: &mut String,
) -> anyhow::Result<bool> {
    outln!(out, "\n== evidence");
    let mut sound = true;
    let mut reproduced = 0;
    for run in runs {
        let events: Vec<RunEvent> = rt.events(run).await?.into_iter().map(|e| e.event).collect();
        let report = crate::progress::replay_shown(&events, &Default::default())
            .map_err(|e| anyhow!("run {run}: {e}"))?;
        if report.reproduced() {
            reproduced += 1;
        } else {
            sound = false;
            crate::replay::text(out, &report);
        }
    }
    outln!(
        out,
        "replayed {} runs (docket replay): {reproduced} reproduced every decision",
        runs.len()
    );

    let verification = docket_evidence::verify(dir, &docket_evidence::VerifyOptions::default())
        .with_context(|| format!("cannot verify {}", dir.display()))?;
    if verification.is_sound() {
        outln!(
            out,
            "verified the data directory (docket verify): {} runs, every chain, tree and seal sound",
            verification.runs.len()
        );
    } else {
        sound = false;
        outln!(out, "verified the data directory (docket verify): FAILED");
        crate::verify::print_text(out, &verification, None);
    }

    let reports = dir.join("reports");
    std::fs::create_dir_all(&reports)
        .with_context(|| format!("cannot create {}", reports.display()))?;
    let key = docket_evidence::verifier(dir)?;
    let mut checked = 0;
    for run in runs {
        let jsonl = reports.join(format!("{run}.jsonl"));
        crate::export::export_to(rt, dir, run, Format::Jsonl, &jsonl).await?;
        crate::export::export_to(
            rt,
            dir,
            run,
            Format::Html,
            &reports.join(format!("{run}.html")),
        )
        .await?;
        let file = std::fs::File::open(&jsonl)
            .with_context(|| format!("cannot open {}", jsonl.display()))?;
        match docket_evidence::verify_export(std::io::BufReader::new(file), key.as_ref()) {
            Ok(summary) if summary.checkpoint.as_ref().is_some_and(|c| c.key_trusted) => {
                checked += 1;
            }
            Ok(_) => {
                sound = false;
                outln!(
                    out,
                    "{}: sound but not signed by the demo's key",
                    jsonl.display()
                );
            }
            Err(bad) => {
                sound = false;
                outln!(out, "{}: {bad}", jsonl.display());
            }
        }
    }
    outln!(
        out,
        "exported {} runs (docket export): {checked} JSON-lines exports signed and checked offline (docket verify-export)",
        runs.len()
    );
    let first = runs
        .first()
        .map(|r| format!("{r}.html"))
        .unwrap_or_default();
    outln!(
        out,
        "HTML reports: {}/RUN.html, one per run (open {})",
        reports.display(),
        reports.join(first).display()
    );
    outln!(
        out,
        "look further with: docket --data {} status RUN | events RUN | inspect RUN --at N",
        dir.display()
    );
    Ok(sound)
}
