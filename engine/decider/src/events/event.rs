//! The events of a run (`docs/events.md` describes each for users), and their encoding:
//! JSON with keys in sorted order, so an event's bytes never depend on how the binary
//! was built (serde_json's `preserve_order` may be unified on in some workspace builds).

use serde::{Deserialize, Serialize};

use docket_protocol::{AgentId, CallId, EffectId, EpisodeId, RunId, TicketId, ToolCallId};
use serde_json::Value;

use docket_policies::{HandoffAudit, InputKind, PolicyDecision};

use std::collections::BTreeMap;
use std::sync::Arc;

use docket_policies::Meter;
use docket_policies::RecursionClass;
use docket_policies::StopCondition;

use super::effect::{
    EffectAdmitted, EffectApplied, EffectDeduplicated, EffectDryRun, EffectFailed,
    EffectKillSwitchChecked, EffectReady, EffectRefused, EffectRequested, EffectSandboxRan,
    EffectSandboxStarted, EffectSettled, EffectStarted, EffectTicketStep, EffectVerification,
    EffectVerifierCalled,
};
use super::inputs::{
    AgentCallFailed, AgentResponded, CircuitReading, HumanDecided, HumanOverrode, HumanWroteDomain,
    RunCancelled, RunPause,
};
use super::overrides::Overridable;
use super::signal::{
    SignalAwaited, SignalDelivered, SignalKept, SignalReceived, SignalRefused, SignalTimedOut,
};
use super::timer::{TimerFired, TimerSet};
use super::tool::{ToolCallScheduled, ToolDenied, ToolFailed, ToolReturned};
use super::workflow::WorkflowSpec;
use docket_protocol::{
    Action, AgentRequest, Confidence, EpisodeResult, SettledConflict, TaskRestrictions,
};

/// Version of every event kind's payload.
pub const KIND_VERSION: u32 = 1;

/// The run's first event: everything needed to run, resume and audit it without any file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequested {
    /// Chosen by the runtime; the log stream's id.
    pub run_id: RunId,
    /// The workflow as loaded.
    pub workflow: WorkflowSpec,
    /// The policy bundle's source text, as read when the run started.
    pub bundle_source: String,
    /// The bundle's file name (its extension picks TOML or JSON).
    pub bundle_source_name: String,
    /// The compiled bundle's hash (hex), checked whenever the bundle is rebuilt.
    pub bundle_hash: String,
    /// The run's input, handed from `external` to the entry agent.
    pub input: Value,
    /// Wall time the run was requested, ms since the Unix epoch.
    pub at_ms: i64,
    /// The version of the decider that recorded the run ([`DECIDER_VERSION`] then): replay
    /// decides with that version's behaviour. 0 in runs recorded before versions were
    /// recorded, which replay as version 1.
    #[serde(default)]
    pub decider_version: u32,
    /// For a fork (`docket fork`, docs/replay.md#fork): the run it was forked from, and
    /// where. Absent otherwise, so logs recorded before forks keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<Box<ForkedFrom>>,
    /// For a run a schedule started (docs/schedules.md): the schedule, who made it and the
    /// instant its firing was due. Absent otherwise, so logs recorded before schedules
    /// keep their bytes. Recorded only: no decision reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<Box<Scheduled>>,
    /// For a later turn of a session (`docket send`, docs/agent-protocol.md#sessions):
    /// which session and turn, and what its earlier turns carried, copied here so the run
    /// replays from its own log. Absent in a session's first turn and in every run
    /// recorded before sessions (decider version 15), which keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<Session>>,
}

/// A run that continues a session: the user's next message to a finished run
/// (docs/agent-protocol.md#sessions). Each turn is a run of its own; this is the session
/// state carried into it from the turns before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// The session's id: the id of its first turn's run.
    pub id: RunId,
    /// This run's turn (2 for the first message after the session's first run).
    pub turn: u32,
    /// The run of the turn before.
    pub previous_run: RunId,
    /// Who sent the message (`docket send --by`, or the API token's name).
    pub by: String,
    /// Every earlier turn, first to last.
    pub turns: Vec<SessionTurn>,
}

/// One earlier turn of a session, as its run recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionTurn {
    /// The turn (1 for the session's first run).
    pub turn: u32,
    /// Its run.
    pub run_id: RunId,
    /// What the user told us: the turn's request, the run's input.
    pub request: Value,
    /// How its run ended: `completed`, `failed` or `cancelled`.
    pub status: String,
    /// What we told the user: the run's final output (absent when it did not complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The decisions people made on its tickets, in ticket order, as the handoff context
    /// tells them (`ticket`, `asked`, `by`, `approved`, `reason`, `choice`, `answer`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Value>,
}

/// What started a run a schedule fired (docs/schedules.md#the-runs-a-schedule-starts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scheduled {
    /// The schedule's name.
    pub schedule: String,
    /// Who made the schedule.
    pub made_by: String,
    /// The instant the firing was due, ms since the Unix epoch (the run's `at_ms` says
    /// when it was recorded, later when docket was down at the due time).
    pub due_at_ms: i64,
}

/// What a fork was made from: its parent run, the event from which it went live, the
/// parent's chain hash there (proving which log the reused answers were read from), and
/// the answers given instead of the parent's (docs/replay.md#fork). The bundle it decides
/// under is recorded as any run's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkedFrom {
    /// The parent run.
    pub run_id: RunId,
    /// The parent's event from which the fork went live (1-based): the recorded inputs
    /// before it were reused.
    pub seq: u64,
    /// The parent's chain hash at `seq` (hex): it covers the parent's events 1..=seq.
    pub hash: String,
    /// The parent's calls whose recorded answer was replaced (`docket fork
    /// --override-output`), each with the file the answer was read from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<OutputOverride>,
}

/// One answer a fork was given instead of its parent's recorded one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputOverride {
    /// The parent's call (`{parent}/call-N`).
    pub call: CallId,
    /// The file the answer was read from, as given.
    pub file: String,
}

/// The decider's behaviour version, recorded in every run's `run.requested`: this
/// build's, which it records in the runs it starts.
///
/// Version 12 is the release baseline: what docket decided while it was developed
/// (versions 1 to 11) was squashed into it, and those versions are retired. A later
/// version is added, kept and retired by the rule in ARCHITECTURE.md ("Decider
/// versions"); each is listed in docs/events.md#decider-versions, and a golden log of
/// each shape of run is checked in for it under `tests/golden/`.
pub const DECIDER_VERSION: u32 = 16;

/// Decider version 16: an episode's result carries a bounded summary. A `finish_episode`
/// whose `summary` has more than [`MAX_SUMMARY_LINES`] lines is refused
/// (`episode.action_denied`, rule `episodes.summary_lines`) and the agent told, so it
/// can say it shorter; the refusal counts as `summary_refused` towards failure repeats
/// (docs/governance.md#episodes). Earlier versions took a summary of any length.
pub(crate) const BOUNDED_SUMMARIES: u32 = 16;

/// Decider version 16: an effect whose policy says `critique_first` is admitted only once
/// a critique child of the asking episode finished ok (or a person approves each
/// execution). Earlier versions ignore the setting.
pub(crate) const CRITIQUE_FIRST: u32 = 16;

/// The most lines an episode's summary may have (decider version 16).
pub const MAX_SUMMARY_LINES: usize = 8;

/// The rule a summary over [`MAX_SUMMARY_LINES`] lines is refused by.
pub(crate) const SUMMARY_LINES_RULE: &str = "episodes.summary_lines";

/// Decider version 15: a run may be a later turn of a session (`run.requested`'s
/// `session`): its requests' handoff context names the session (`session_id` is the
/// session's id) and carries `session`, what the earlier turns' user said, what we told
/// them and the decisions people made, each part crossing the gate as content
/// (docs/agent-protocol.md#sessions). Earlier versions record no session.
pub(crate) const SESSIONS: u32 = 15;

/// Decider version 14: a domain's content rules (`content_type`, `required_refs`,
/// `max_bytes`) hold for every write, an agent's and an outside event's: content that
/// breaks one is refused (`domain.write_denied`, naming the rule and where in the content)
/// instead of written, and an allowed write to a domain with content rules records a
/// step per rule met (docs/governance.md#domain-content). Earlier versions wrote any
/// content the writer's scope allowed.
pub(crate) const DOMAIN_CONTENT: u32 = 14;

/// Decider version 13: a handoff's audit says what the receiver got. Its fields and token
/// count are computed from what was delivered, after extraction and summarising; a prior
/// output (`prior:TYPE`) counts as one before scoping and as one after when something of
/// it crossed; `summarize = true` always delivers a summary, made once to the least
/// budget that applies (the translation's `max_tokens`, the receiver's
/// `max_context_tokens`) and measured as delivered, recast included; and a summary that
/// kept nothing says so (`summary` in the audit) (docs/governance.md#the-handoff-audit).
pub(crate) const DELIVERED_AUDITS: u32 = 13;

/// Decider version 13: agents may `wait` on a durable timer (`timer.set`, then the
/// recorded `timer.fired`; docs/agent-protocol.md#waiting-wait). A run recorded by an
/// earlier version is told its `wait` was refused.
pub(crate) const TIMERS: u32 = 13;

/// Decider version 13: a person may pause a run and let it go on (`run.paused`,
/// `run.unpaused`; docs/events.md#runpaused). A run recorded by an earlier version
/// refuses a pause.
pub(crate) const PAUSES: u32 = 13;

/// Decider version 13: outside events reach runs (`signal.received`, kept or refused by
/// the bundle's `[[signals]]`), and agents may `wait` for one (`signal.awaited`, then
/// `signal.delivered`; docs/events.md#outside-events). A run recorded by an earlier
/// version refuses an event.
pub(crate) const SIGNALS: u32 = 13;

/// Decider version 13: a side effect may be scheduled (`request_effect`'s `not_before`):
/// decided and dry-run at once, then held by a timer (`timer.set` naming the effect) and
/// taken to its execution gate when it fires (docs/governance.md#scheduled-effects). A
/// run recorded by an earlier version refuses a scheduled effect.
pub(crate) const SCHEDULED_EFFECTS: u32 = 13;

/// Decider version 13: the runtime reads an agent's circuit breaker by its failure rate
/// over the bundle's window (`agent.circuit_checked` with `window`); version 12 read its
/// failures in a row (docs/governance.md#circuit-breaker).
pub const CIRCUIT_RATE: u32 = 13;

/// Decider version 13: a request's priority is the bundle's `defaults.priority`, or for a
/// capability call the one the asking agent gave (`request_capability`'s `priority`);
/// version 12 sent every request as `NORMAL` (docs/agent-protocol.md#priority).
pub(crate) const PRIORITIES: u32 = 13;

/// Decider version 14: what an answer says of its output travels with it. The receiver's
/// decision input carries the sender's `confidence_level` and `warnings` (recorded in
/// `handoff.allowed` too); an output kept over others of a fan-out carries the settled
/// conflict (every output, how, by whom), and `run.completed` lists the run's settled
/// conflicts (docs/agent-protocol.md#labelled-inputs). Version 13 delivered the payload
/// alone.
pub(crate) const LABELLED_INPUTS: u32 = 14;

/// Decider version 14: what recursion is for. A spawn of a child type the bundle gives a
/// class names its trigger, one the class allows; an episode that applied a side effect
/// spawns no repair child, and finishes ok, only once a verification passed (a
/// verification child, or the effects verified by their verifier or a person)
/// (docs/governance.md#recursion-classes). `episode.started` records the class and
/// trigger. Version 13 knew no classes.
pub(crate) const RECURSION_CLASSES: u32 = 14;

/// Decider version 14: an effect whose policy marks a browser lane
/// (`[[side_effects]] browser`) runs against the sandbox target first when
/// `sandbox_first` (`effect.sandbox_started`, then the recorded `effect.sandbox_ran`), and
/// against the real target only after that run succeeded with drift evidence; a
/// browser-lane receipt without drift evidence is refused (rule `browser.drift_evidence`),
/// and an executor reporting unstable selectors opens a manual-review ticket instead of
/// being tried again (docs/governance.md#browser-lane). Earlier versions run such an
/// effect as on any other lane.
pub(crate) const BROWSER_LANE: u32 = 14;

/// Decider version 14: under a bundle's `[intent_classification]`, the classifying
/// agent's calls that carry the run's input tell it the contract
/// (`context.intent_classification`), and its answers are held to their `intent`
/// classification: each decided as a `policy.decided` (kind `intent_classification`), a
/// refusal failing the call (`INTENT_POLICY_VIOLATION`) (docs/governance.md#intent-classification).
pub(crate) const INTENT_CLASSIFICATION: u32 = 14;

/// Decider version 15: an effect a child episode's agent has no permission for escalates
/// to the parent episode (`effect.refused`'s `escalated_to`): it is not counted as the
/// child's failure, and the child's result reaches its parent with the effects it
/// escalated (docs/governance.md#effects-escalate-to-the-parent). Earlier versions refuse
/// it to the child alone.
pub(crate) const EFFECT_ESCALATION: u32 = 15;

/// Decider version 15: a domain's `redact` paths are applied to every version it keeps,
/// the content rules checked on the redacted content (docs/governance.md#domain-content).
/// Earlier versions knew no `redact` (no bundle of theirs could set it).
pub(crate) const DOMAIN_REDACTION: u32 = 15;

/// Decider version 15: a person writes a domain their role may write
/// (`human.wrote_domain`, docs/governance.md#a-person-writes-a-domain). Earlier versions
/// refuse it, recording nothing.
pub(crate) const PERSON_DOMAIN_WRITES: u32 = 15;

/// Decider version 15: a domain's `attachers` write versions that differ from the latest
/// only in their fields, and own nothing under the single-owner rule
/// (docs/governance.md#domain-content). Earlier versions knew no attachers.
pub(crate) const DOMAIN_ATTACH: u32 = 15;

/// Decider version 15: authority between agents. An agent's boundary violation (a failure
/// of class `boundary_violation`) hands its task over to the agent its registry entry
/// names in `reassign_to` (`task.reassigned`, the rejected output archived); a fan-out
/// conflict between outputs of agents of different authority keeps the highest's
/// (`higher_authority`) when the bundle lets authority settle conflicts; and rules of
/// different safety tiers order by tier (docs/governance.md#authority-and-precedence).
/// Earlier versions retried the same agent and settled conflicts by confidence alone.
pub(crate) const AGENT_AUTHORITY: u32 = 15;

/// The oldest decider version this build decides as: a run recorded by an older one (or
/// a newer one than [`DECIDER_VERSION`]) is refused, by replay and by resume alike, with
/// both versions named, rather than decided by behaviour it was not recorded with.
pub const OLDEST_DECIDER_VERSION: u32 = 12;

/// A run recorded by a decider version this build does not decide as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnsupportedDecider {
    /// Recorded by a version before [`OLDEST_DECIDER_VERSION`].
    #[error(
        "the run was recorded by decider version {recorded}, a version this build no longer decides as (it decides versions {OLDEST_DECIDER_VERSION} to {DECIDER_VERSION}; docs/events.md#decider-versions)"
    )]
    Retired {
        /// The version in `run.requested`.
        recorded: u32,
    },
    /// Recorded by a newer decider than this build's.
    #[error(
        "the run was recorded by decider version {recorded}; this build decides up to version {DECIDER_VERSION}: use a newer docket"
    )]
    Newer {
        /// The version in `run.requested`.
        recorded: u32,
    },
}

impl UnsupportedDecider {
    /// Whether a run recorded by decider version `recorded` is decided by this build.
    ///
    /// # Errors
    /// The version, when it is outside [`OLDEST_DECIDER_VERSION`]..=[`DECIDER_VERSION`].
    pub fn check(recorded: u32) -> Result<(), Self> {
        if recorded < OLDEST_DECIDER_VERSION {
            Err(Self::Retired { recorded })
        } else if recorded > DECIDER_VERSION {
            Err(Self::Newer { recorded })
        } else {
            Ok(())
        }
    }
}

/// How many times an agent's own timeout a retry after timeouts may wait, at most.
pub const MAX_TIMEOUT_GROWTH: u64 = 4;

/// One output on its way to an agent: what a governed handoff delivers (already checked
/// and scoped), with the sender's confidence for conflict resolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// Sender.
    pub from: AgentId,
    /// Receiver.
    pub to: AgentId,
    /// Output type.
    pub output_type: String,
    /// The sender's confidence in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Confidence>,
    /// The scoped payload (shared with the `handoff.allowed` that delivered it and the
    /// run state's outputs).
    pub payload: Arc<Value>,
    /// The task the handoff gives the receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskRestrictions>,
    /// The sender's warnings (decider version 14).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The conflict this output was kept in (decider version 14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<SettledConflict>,
}

/// A fan-out branch that failed past retrying, recorded as a gap the join goes on
/// without (`fan_out_partial`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchGap {
    /// The failed branch's last call.
    pub request_id: CallId,
    /// The branch's agent.
    pub agent: AgentId,
    /// Its last error code, and the code's class.
    pub error_code: String,
    pub error_class: String,
    /// Its last error message.
    pub error_message: String,
    /// How many attempts the branch made.
    pub attempts: u32,
}

/// Which response a classifier call classifies, and which classifier of the agent's list
/// it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classifies {
    /// The classified call.
    pub request_id: CallId,
    /// Position in the agent's `classifiers` list.
    pub index: usize,
}

/// A risk classifier's verdict (docs/governance.md#output-validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RiskVerdict {
    /// The output proceeds.
    Safe,
    /// A human reviews before the output proceeds.
    ReviewRequired,
    /// The output is blocked.
    Dangerous,
}

/// What a human ticket waits for, and what approving it does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TicketSubject {
    /// A failed step the escalation ladder sent to a human: approving retries it.
    Retry {
        /// The failed call.
        request_id: CallId,
    },
    /// Conflicting fan-out outputs: approving picks one (`choice`, from 1; default 1).
    Conflict {
        /// The fan-out group.
        group: String,
        /// The request whose answer completed the fan-out.
        origin: CallId,
        /// Unresolved conflicts; the ticket decides the first.
        conflicts: Vec<Vec<Delivery>>,
        /// Outputs already decided, which proceed with the winner.
        proceed: Vec<Delivery>,
    },
    /// An agent's remaining actions, held for review (an `escalate` action or a
    /// REVIEW_REQUIRED verdict): approving carries them out.
    Proceed {
        /// The agent whose actions wait.
        agent: AgentId,
        /// The call that produced them.
        request_id: CallId,
        /// The actions, in order.
        actions: Vec<Action>,
    },
    /// An agent's question to a human (its last action was `escalate`, from decider
    /// version 4): approving or answering calls the agent again with the decision, the
    /// answer or the chosen option as a decision input from `human`; denying blocks.
    Question {
        /// The agent that asked.
        agent: AgentId,
        /// The call whose response asked.
        request_id: CallId,
        /// The question, in the agent's words.
        question: String,
        /// The options the agent offered, if any (`docket answer --choice`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        choices: Vec<String>,
    },
    // Episodes
    /// A review ticket: an episode finished `needs_review`
    /// (docs/governance.md#escalation-and-tickets). Approving accepts its result as ok (the
    /// human is the reviewer); denying stops the episode (`policy_blocks`) and blocks the
    /// run.
    EpisodeReview {
        /// The episode.
        episode_id: EpisodeId,
        /// The agent that ran it.
        agent: AgentId,
        /// The call whose `finish_episode` asked for review.
        request_id: CallId,
        /// Its summary.
        summary: String,
        /// What the person is asked to do.
        asked: String,
        /// The result awaiting review.
        result: EpisodeResult,
    },
    /// A `call_tool` that matched a review pattern: approving runs the
    /// tool (its result returns to the agent through the gate), denying tells the agent
    /// the call was denied; neither blocks the run.
    Tool {
        /// `{run}/tool-N`, reserved for the call.
        tool_call_id: ToolCallId,
        /// The asking call.
        request_id: CallId,
        /// The asking agent.
        agent: AgentId,
        /// Its episode.
        episode_id: EpisodeId,
        /// The tool as the agent named it.
        name: String,
        /// The arguments as given.
        #[serde(default)]
        arguments: Value,
        /// The call as patterns see it: `Tool(argument)`.
        invocation: String,
        /// The review pattern's id.
        rule_id: String,
        /// The review pattern as written in the bundle.
        pattern: String,
    },
    // Side effects
    /// A side effect waits for a human: approving continues its path (see `step`).
    Effect {
        /// The effect (`{run}/effect-N`).
        effect_id: EffectId,
        /// What the person is asked.
        step: EffectTicketStep,
    },
}

/// One event of a run's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
#[non_exhaustive]
pub enum RunEvent {
    /// Recorded input: a run was started.
    #[serde(rename = "run.requested")]
    RunRequested(Arc<RunRequested>),
    /// Decision: the engine will send this exact request to its target agent.
    #[serde(rename = "agent.call_scheduled")]
    AgentCallScheduled {
        /// The request, as the agent receives it (shared with the run state's call).
        request: Arc<AgentRequest>,
        /// For a capability call: the request whose agent asked, which gets the answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<CallId>,
        /// For a risk classifier call: the response it classifies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        classifies: Option<Classifies>,
        /// For a branch of a parallel fan-out: the group (the request that fanned out).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch_of: Option<String>,
        /// For a call made again: the call it repeats. `request`
        /// then holds only the decision inputs added to that call's; the agent receives
        /// that call's inputs followed by these ([`crate::RunState`] rebuilds the whole
        /// request).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        again_of: Option<CallId>,
    },
    /// Decision: a branch's output waits for the other branches of its fan-out.
    #[serde(rename = "output.held")]
    OutputHeld {
        /// The fan-out group.
        group: String,
        /// The output.
        delivery: Delivery,
    },
    /// Decision: branches of a fan-out produced different outputs of the same type for
    /// the same agent; never hidden.
    #[serde(rename = "output.conflict_detected")]
    ConflictDetected {
        /// The fan-out group.
        group: String,
        /// The outputs, in branch order.
        candidates: Vec<Delivery>,
        /// `prefer_higher_confidence` or `human`, from the bundle.
        resolution: String,
        /// The winner's index, when decided without a human.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        winner: Option<usize>,
    },
    /// Decision: an agent's output was rejected for a boundary violation and its task
    /// handed to the agent its registry entry names in `reassign_to`, with the same input
    /// (docs/governance.md#reassignment-on-a-boundary-violation). The rejected output is
    /// archived: it stays in the log as the call's answer and is never delivered. The
    /// new agent's call follows.
    #[serde(rename = "task.reassigned")]
    TaskReassigned {
        /// The call whose output was rejected.
        request_id: CallId,
        /// The agent it was rejected from.
        from: AgentId,
        /// The agent that takes the task over.
        to: AgentId,
        /// The rule that reassigned it (`agents.FROM.reassign_to`).
        rule_id: String,
        /// The violation: its error code.
        error_code: String,
        /// Its class (`boundary_violation`).
        error_class: String,
        /// What was violated.
        error_message: String,
    },
    /// Decision: a losing output, archived (never deleted).
    #[serde(rename = "output.archived")]
    OutputArchived {
        /// The fan-out group.
        group: String,
        /// The losing output.
        delivery: Delivery,
        /// Why it lost.
        reason: String,
    },
    /// Decision: every branch of a fan-out answered; these outputs go on.
    #[serde(rename = "fanout.joined")]
    FanoutJoined {
        /// The fan-out group.
        group: String,
        /// What proceeds.
        deliveries: Vec<Delivery>,
    },
    /// Decision (`fan_out_partial`): a branch of a fan-out failed
    /// past retrying; the join goes on without it.
    #[serde(rename = "fanout.branch_failed")]
    FanoutBranchFailed {
        /// The fan-out group.
        group: String,
        /// The missing branch.
        gap: BranchGap,
    },
    /// Recorded input: the agent answered (any status).
    #[serde(rename = "agent.responded")]
    AgentResponded(AgentResponded),
    /// Recorded input: the call failed without a usable response (timeout, crash,
    /// malformed, oversized...).
    #[serde(rename = "agent.call_failed")]
    AgentCallFailed(AgentCallFailed),
    /// Decision: a handoff passed the interaction matrix and the data contract, and was
    /// scoped; `delivered` is exactly what the receiver gets.
    #[serde(rename = "handoff.allowed")]
    HandoffAllowed {
        /// Sender.
        from: AgentId,
        /// Receiver.
        to: AgentId,
        /// The output type carried.
        output_type: String,
        /// Decision input or read-only context input (Guardrail 2).
        input: InputKind,
        /// The interaction-matrix decision.
        decision: PolicyDecision,
        /// The output-type contract check.
        contract: PolicyDecision,
        /// The scoping audit record (docs/governance.md#handoff-modes).
        audit: HandoffAudit,
        /// The scoped payload the receiver gets (shared with its delivery and the run
        /// state's outputs).
        delivered: Arc<Value>,
        /// The provenance rules checked on this handoff (Guardrail 2), all allowed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        provenance: Vec<PolicyDecision>,
        /// In a sequential flow, the position (0-based, in `flow_order`) the run moves to
        /// with this handoff (docs/governance.md#sequential-flow); absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flow_position: Option<u32>,
        /// The confidence the sender answered with, which the receiver is told (decider
        /// version 14).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confidence_level: Option<Confidence>,
        /// The sender's warnings, which the receiver is told (decider version 14).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
    },
    /// Decision: a handoff was refused; the flow stops.
    #[serde(rename = "handoff.denied")]
    HandoffDenied {
        /// Sender.
        from: AgentId,
        /// Intended receiver.
        to: AgentId,
        /// The output type it claimed.
        output_type: String,
        /// The deciding rule and reason (matrix, contract or provenance).
        decision: PolicyDecision,
        /// The error object (docs/events.md#the-error-object).
        error: Value,
    },
    /// Decision: any other policy decision (tool calls, capability requests, escalation
    /// ladder steps, circuit breaker).
    #[serde(rename = "policy.decided")]
    PolicyDecided {
        /// What was decided about (a request id, usually).
        subject: String,
        /// The decision.
        decision: PolicyDecision,
    },
    /// Decision: a risk classifier's verdict on a response, read from its answer.
    #[serde(rename = "risk.classified")]
    RiskClassified {
        /// The classified call.
        request_id: CallId,
        /// The classifier agent.
        classifier: AgentId,
        /// SAFE, REVIEW_REQUIRED or DANGEROUS.
        verdict: RiskVerdict,
        /// The classifier's reason.
        reason: String,
    },
    /// Decision: the run waits for a human on this ticket.
    #[serde(rename = "human.escalated")]
    Escalated {
        /// `ticket-N`, unique in the run.
        ticket: TicketId,
        /// What the person is asked, and why.
        reason: String,
        /// What approving does.
        subject: TicketSubject,
    },
    /// Recorded input: a human approved or refused a ticket.
    #[serde(rename = "human.decided")]
    HumanDecided(HumanDecided),
    /// Recorded input: a person overrode the rule that blocked the run
    /// (docs/governance.md#human-override); what the block stopped continues.
    #[serde(rename = "human.overrode")]
    HumanOverrode(HumanOverrode),
    /// Recorded input: a person wrote a domain (docs/governance.md#a-person-writes-a-domain);
    /// its `domain.written` follows.
    #[serde(rename = "human.wrote_domain")]
    HumanWroteDomain(HumanWroteDomain),
    /// Recorded input: a person cancelled the run; it ends
    /// `cancelled` and nothing more happens in it (docs/events.md#runcancelled).
    #[serde(rename = "run.cancelled")]
    RunCancelled(RunCancelled),
    /// Decision: the run finished with this output.
    #[serde(rename = "run.completed")]
    RunCompleted {
        /// The final output (the exit agent's `finish` output or its handoff to `external`).
        output: Value,
        /// The conflicts settled on the way, without their outputs' content: the user is
        /// told of them (decider version 14).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflicts: Vec<SettledConflict>,
    },
    /// Recorded input: the agent's circuit breaker as the runtime read
    /// it from the data directory's circuits stream before calling, recorded when its
    /// failures reached the bundle's threshold (docs/governance.md#circuit-breaker).
    #[serde(rename = "agent.circuit_checked")]
    CircuitChecked(CircuitReading),
    /// Decision: the call was not made because the agent's circuit is
    /// open; the caller gets a graceful degradation response instead.
    #[serde(rename = "agent.call_degraded")]
    CallDegraded {
        /// The call not made.
        request_id: CallId,
        /// Its target agent.
        agent: AgentId,
        /// The error object (docs/events.md#the-error-object), `errorType` `circuit_open`.
        error: Value,
    },
    /// Decision: a policy stopped the run; it needs a human (a new run or a new bundle).
    #[serde(rename = "run.blocked")]
    RunBlocked {
        /// The deciding rule.
        rule_id: String,
        /// Why.
        reason: String,
        /// The error object (docs/events.md#the-error-object).
        error: Value,
        /// For a block a person may override: the level the rule
        /// sits at and what the block stopped, which an override continues
        /// (docs/governance.md#human-override). Absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        overridable: Option<Box<Overridable>>,
    },
    /// Decision: the run cannot go on for a reason that is not a policy.
    #[serde(rename = "run.failed")]
    RunFailed {
        /// Why.
        reason: String,
    },
    // Episodes
    /// Decision: a spawn was allowed; the child episode starts (its first call follows).
    #[serde(rename = "episode.started")]
    EpisodeStarted {
        /// `ep-N`, unique in the run (the root is `ep-1`).
        episode_id: EpisodeId,
        /// The spawning episode.
        parent: EpisodeId,
        /// The root is 0.
        depth: u32,
        /// The child type (`verify`...).
        episode_type: String,
        /// The agent that runs it.
        agent: AgentId,
        /// Its goal.
        goal: String,
        /// Its budget per dimension (`tokens`, `tool_calls`, `wall_time_ms`).
        budget: BTreeMap<String, u64>,
        /// The call whose `spawn` started it; its agent gets the result.
        spawned_by: CallId,
        /// Recorded time of the input that caused it (the child's wall-time origin).
        at_ms: i64,
        /// The spawn decision.
        decision: PolicyDecision,
        /// What the child is for, when the bundle gives its type a class (decider version
        /// 14).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<RecursionClass>,
        /// The trigger its spawn named (decider version 14).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trigger: Option<String>,
    },
    /// Decision: an episode action was refused (a spawn by the recursion policy or the
    /// budget rules, a `finish_episode` whose verification has not passed).
    #[serde(rename = "episode.action_denied")]
    EpisodeActionDenied {
        /// The acting agent's episode.
        episode_id: EpisodeId,
        /// The acting agent.
        agent: AgentId,
        /// `spawn` or `finish_episode`.
        action: String,
        /// What was asked (child type, agent, goal, budget; or the result).
        detail: Value,
        /// The deciding rule and reason.
        decision: PolicyDecision,
        /// The stop condition the refusal stands for.
        condition: StopCondition,
    },
    /// Decision: an episode's agent finished it with a result.
    #[serde(rename = "episode.finished")]
    EpisodeFinished {
        /// The episode.
        episode_id: EpisodeId,
        /// Its agent.
        agent: AgentId,
        /// The result.
        result: EpisodeResult,
    },
    /// Decision: an episode stopped on one of the six stop conditions
    /// (docs/governance.md#stop-conditions).
    #[serde(rename = "episode.stopped")]
    EpisodeStopped {
        /// The episode.
        episode_id: EpisodeId,
        /// Which condition.
        condition: StopCondition,
        /// The deciding rule.
        rule_id: String,
        /// Why, with the numbers.
        reason: String,
        /// Its budget and usage when it stopped.
        usage: BTreeMap<String, Meter>,
    },
    /// Decision: a new version of a domain (append-only; earlier versions stay).
    #[serde(rename = "domain.written")]
    DomainWritten {
        /// The domain.
        domain: String,
        /// 1 for the first write, then n+1.
        version: u32,
        /// The owning agent that wrote it.
        agent: AgentId,
        /// The writer's episode.
        episode_id: EpisodeId,
        /// The content, as the domain keeps it (redacted where its rules say).
        content: Value,
        /// The write decision.
        decision: PolicyDecision,
        /// The person who wrote it, in the role named as `agent`
        /// (`human.wrote_domain`); absent for an agent's or an outside event's write.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// Decision: a domain write was refused (not the owner, or another agent already
    /// writes the domain in this episode).
    #[serde(rename = "domain.write_denied")]
    DomainWriteDenied {
        /// The domain.
        domain: String,
        /// The agent that tried.
        agent: AgentId,
        /// Its episode.
        episode_id: EpisodeId,
        /// The deciding rule and reason.
        decision: PolicyDecision,
        /// The person who tried, in the role named as `agent`; absent for an agent or an
        /// outside event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    // Side effects
    /// Decision: an agent's `request_effect`, numbered and with its attempt for the key.
    #[serde(rename = "effect.requested")]
    EffectRequested(EffectRequested),
    /// Decision: the key was already applied in this run; the recorded receipt is the result.
    #[serde(rename = "effect.deduplicated")]
    EffectDeduplicated(EffectDeduplicated),
    /// Decision: the effect passed admission and goes to its dry run or execution gate.
    #[serde(rename = "effect.admitted")]
    EffectAdmitted(EffectAdmitted),
    /// Decision: the effect will not be executed (policy, kill switch, dry run, human).
    #[serde(rename = "effect.refused")]
    EffectRefused(EffectRefused),
    /// Decision: the effect may go to its execution gate (kill switch, full decision).
    #[serde(rename = "effect.ready")]
    EffectReady(EffectReady),
    /// Decision: the effect is executed now; durable before the executor is called.
    #[serde(rename = "effect.started")]
    EffectStarted(EffectStarted),
    /// Decision: a browser-lane effect runs against its sandbox target first; durable
    /// before the executor is called.
    #[serde(rename = "effect.sandbox_started")]
    EffectSandboxStarted(EffectSandboxStarted),
    /// Recorded input: the answer of a browser-lane effect's sandbox run.
    #[serde(rename = "effect.sandbox_ran")]
    EffectSandboxRan(EffectSandboxRan),
    /// Decision: a verifier agent re-checks an applied effect (Class D before Class C).
    #[serde(rename = "effect.verifier_called")]
    EffectVerifierCalled(EffectVerifierCalled),
    /// Decision: the effect's path is over (verified or not); the agent gets the result.
    #[serde(rename = "effect.settled")]
    EffectSettled(EffectSettled),
    /// Recorded input: the executor's dry run.
    #[serde(rename = "effect.dry_run")]
    EffectDryRun(EffectDryRun),
    /// Recorded input: the kill switches as read immediately before execution.
    #[serde(rename = "effect.kill_switch_checked")]
    EffectKillSwitchChecked(EffectKillSwitchChecked),
    /// Recorded input: the executor applied the effect; its receipt.
    #[serde(rename = "effect.applied")]
    EffectApplied(EffectApplied),
    /// Recorded input: the executor failed the effect.
    #[serde(rename = "effect.failed")]
    EffectFailed(EffectFailed),
    /// Recorded input: the executor's verification of an applied effect.
    #[serde(rename = "effect.verified")]
    EffectVerified(EffectVerification),
    /// Recorded input: the executor's verification of an effect started without a
    /// recorded result (after a crash, or an execute call that gave no answer).
    #[serde(rename = "effect.recovered")]
    EffectRecovered(EffectVerification),
    // Governed tools
    /// Decision: an agent's `call_tool` was allowed; the executor runs it next (the exact
    /// request is durable before it runs).
    #[serde(rename = "tool.call_scheduled")]
    ToolCallScheduled(ToolCallScheduled),
    /// Decision: an agent's `call_tool` was refused before any executor ran it.
    #[serde(rename = "tool.denied")]
    ToolDenied(ToolDenied),
    /// Recorded input: the tool's result.
    #[serde(rename = "tool.returned")]
    ToolReturned(ToolReturned),
    /// Recorded input: the tool call failed (the executor's error, or a call interrupted
    /// by a crash that is not run again).
    #[serde(rename = "tool.failed")]
    ToolFailed(ToolFailed),
    // Durable timers
    /// Decision: an agent's `wait` was allowed; it is called again once the timer is due.
    #[serde(rename = "timer.set")]
    TimerSet(TimerSet),
    /// Recorded input: the timer fired, at its recorded time.
    #[serde(rename = "timer.fired")]
    TimerFired(TimerFired),
    // Pause
    /// Recorded input: a person paused the run; nothing new starts until it is unpaused.
    #[serde(rename = "run.paused")]
    RunPaused(RunPause),
    /// Recorded input: a person let the paused run go on.
    #[serde(rename = "run.unpaused")]
    RunUnpaused(RunPause),
    // Outside events
    /// Recorded input: an outside event sent to the run.
    #[serde(rename = "signal.received")]
    SignalReceived(SignalReceived),
    /// Decision: the bundle admitted the event; it is kept until delivered.
    #[serde(rename = "signal.kept")]
    SignalKept(SignalKept),
    /// Decision: the bundle refused the event.
    #[serde(rename = "signal.refused")]
    SignalRefused(SignalRefused),
    /// Decision: an agent waits for an event (none was kept to hand it).
    #[serde(rename = "signal.awaited")]
    SignalAwaited(SignalAwaited),
    /// Decision: a kept event was handed to an agent that waits for it.
    #[serde(rename = "signal.delivered")]
    SignalDelivered(SignalDelivered),
    /// Decision: a wait for an event ended by its timeout.
    #[serde(rename = "signal.timed_out")]
    SignalTimedOut(SignalTimedOut),
}

/// An event payload that could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("event of kind {kind:?} is not a valid docket run event: {message}")]
pub struct DecodeError {
    /// The envelope's kind.
    pub kind: String,
    /// What was wrong.
    pub message: String,
}

impl RunEvent {
    /// Every event kind, in the order of [`RunEvent::kind`]'s match.
    pub const KINDS: &'static [&'static str] = &[
        "run.requested",
        "agent.call_scheduled",
        "agent.circuit_checked",
        "agent.call_degraded",
        "agent.responded",
        "agent.call_failed",
        "handoff.allowed",
        "handoff.denied",
        "policy.decided",
        "output.held",
        "output.conflict_detected",
        "output.archived",
        "task.reassigned",
        "fanout.joined",
        "fanout.branch_failed",
        "risk.classified",
        "human.escalated",
        "human.decided",
        "human.overrode",
        "human.wrote_domain",
        "run.completed",
        "run.blocked",
        "run.failed",
        "run.cancelled",
        "episode.started",
        "episode.action_denied",
        "episode.finished",
        "episode.stopped",
        "domain.written",
        "domain.write_denied",
        "effect.requested",
        "effect.deduplicated",
        "effect.admitted",
        "effect.refused",
        "effect.ready",
        "effect.started",
        "effect.sandbox_started",
        "effect.sandbox_ran",
        "effect.verifier_called",
        "effect.settled",
        "effect.dry_run",
        "effect.kill_switch_checked",
        "effect.applied",
        "effect.failed",
        "effect.verified",
        "effect.recovered",
        "tool.call_scheduled",
        "tool.denied",
        "tool.returned",
        "tool.failed",
        "timer.set",
        "timer.fired",
        "run.paused",
        "run.unpaused",
        "signal.received",
        "signal.kept",
        "signal.refused",
        "signal.awaited",
        "signal.delivered",
        "signal.timed_out",
    ];

    /// The event kind stored in the envelope (`run.requested`...).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RunRequested(_) => "run.requested",
            Self::AgentCallScheduled { .. } => "agent.call_scheduled",
            Self::CircuitChecked(_) => "agent.circuit_checked",
            Self::CallDegraded { .. } => "agent.call_degraded",
            Self::AgentResponded(_) => "agent.responded",
            Self::AgentCallFailed(_) => "agent.call_failed",
            Self::HandoffAllowed { .. } => "handoff.allowed",
            Self::HandoffDenied { .. } => "handoff.denied",
            Self::PolicyDecided { .. } => "policy.decided",
            Self::OutputHeld { .. } => "output.held",
            Self::ConflictDetected { .. } => "output.conflict_detected",
            Self::OutputArchived { .. } => "output.archived",
            Self::TaskReassigned { .. } => "task.reassigned",
            Self::FanoutJoined { .. } => "fanout.joined",
            Self::FanoutBranchFailed { .. } => "fanout.branch_failed",
            Self::RiskClassified { .. } => "risk.classified",
            Self::Escalated { .. } => "human.escalated",
            Self::HumanDecided(_) => "human.decided",
            Self::HumanOverrode(_) => "human.overrode",
            Self::HumanWroteDomain(_) => "human.wrote_domain",
            Self::RunCompleted { .. } => "run.completed",
            Self::RunBlocked { .. } => "run.blocked",
            Self::RunFailed { .. } => "run.failed",
            Self::RunCancelled(_) => "run.cancelled",
            // Episodes
            Self::EpisodeStarted { .. } => "episode.started",
            Self::EpisodeActionDenied { .. } => "episode.action_denied",
            Self::EpisodeFinished { .. } => "episode.finished",
            Self::EpisodeStopped { .. } => "episode.stopped",
            Self::DomainWritten { .. } => "domain.written",
            Self::DomainWriteDenied { .. } => "domain.write_denied",
            // Side effects
            Self::EffectRequested(_) => "effect.requested",
            Self::EffectDeduplicated(_) => "effect.deduplicated",
            Self::EffectAdmitted(_) => "effect.admitted",
            Self::EffectRefused(_) => "effect.refused",
            Self::EffectReady(_) => "effect.ready",
            Self::EffectStarted(_) => "effect.started",
            Self::EffectSandboxStarted(_) => "effect.sandbox_started",
            Self::EffectSandboxRan(_) => "effect.sandbox_ran",
            Self::EffectVerifierCalled(_) => "effect.verifier_called",
            Self::EffectSettled(_) => "effect.settled",
            Self::EffectDryRun(_) => "effect.dry_run",
            Self::EffectKillSwitchChecked(_) => "effect.kill_switch_checked",
            Self::EffectApplied(_) => "effect.applied",
            Self::EffectFailed(_) => "effect.failed",
            Self::EffectVerified(_) => "effect.verified",
            Self::EffectRecovered(_) => "effect.recovered",
            // Governed tools
            Self::ToolCallScheduled(_) => "tool.call_scheduled",
            Self::ToolDenied(_) => "tool.denied",
            Self::ToolReturned(_) => "tool.returned",
            Self::ToolFailed(_) => "tool.failed",
            // Durable timers
            Self::TimerSet(_) => "timer.set",
            Self::TimerFired(_) => "timer.fired",
            // Pause
            Self::RunPaused(_) => "run.paused",
            Self::RunUnpaused(_) => "run.unpaused",
            // Outside events
            Self::SignalReceived(_) => "signal.received",
            Self::SignalKept(_) => "signal.kept",
            Self::SignalRefused(_) => "signal.refused",
            Self::SignalAwaited(_) => "signal.awaited",
            Self::SignalDelivered(_) => "signal.delivered",
            Self::SignalTimedOut(_) => "signal.timed_out",
        }
    }

    /// Whether this event is a recorded input (it opens a batch) rather than a decision.
    #[must_use]
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            Self::RunRequested(_)
                | Self::AgentResponded(_)
                | Self::AgentCallFailed(_)
                | Self::HumanDecided(_)
                | Self::HumanOverrode(_)
                | Self::HumanWroteDomain(_)
                | Self::RunCancelled(_)
                | Self::CircuitChecked(_)
                // Side effects
                | Self::EffectDryRun(_)
                | Self::EffectKillSwitchChecked(_)
                | Self::EffectSandboxRan(_)
                | Self::EffectApplied(_)
                | Self::EffectFailed(_)
                | Self::EffectVerified(_)
                | Self::EffectRecovered(_)
                // Governed tools
                | Self::ToolReturned(_)
                | Self::ToolFailed(_)
                // Durable timers
                | Self::TimerFired(_)
                // Pause
                | Self::RunPaused(_)
                | Self::RunUnpaused(_)
                // Outside events
                | Self::SignalReceived(_)
        )
    }

    /// The payload as JSON with keys sorted at every level.
    #[must_use]
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The canonical payload bytes (sorted keys, no whitespace).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        docket_policies::canonical_json_bytes(self)
    }

    /// Decodes a payload; `kind` is the envelope's kind, checked against the payload's.
    ///
    /// # Errors
    /// [`DecodeError`] when the bytes are not this kind of event.
    pub fn decode(kind: &str, bytes: &[u8]) -> Result<Self, DecodeError> {
        let err = |message: String| DecodeError {
            kind: kind.to_owned(),
            message,
        };
        let event: RunEvent = serde_json::from_slice(bytes).map_err(|e| err(e.to_string()))?;
        if event.kind() != kind {
            return Err(err(format!("payload is a {} event", event.kind())));
        }
        Ok(event)
    }
}

/// The error object of `handoff.denied` and `run.blocked` (docs/events.md#the-error-object).
#[must_use]
pub fn seed_error(
    request_id: &str,
    agent: &str,
    error_type: &str,
    message: &str,
    details: Value,
    retry_count: u32,
) -> Value {
    serde_json::json!({
        "error": true,
        "requestId": request_id,
        "agent": agent,
        "errorType": error_type,
        "message": message,
        "details": details,
        "retryCount": retry_count,
    })
}
