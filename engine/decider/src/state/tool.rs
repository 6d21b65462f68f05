//! Governed tool calls as folded from their events (docs/governance.md#tools): each
//! call's record (who asked, what, the request its executor gets, where it stands).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::RunState;
use crate::events::{RunEvent, TicketSubject};
use docket_protocol::ToolRequest;
use docket_protocol::{AgentId, CallId, EpisodeId, ToolCallId};

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolPhase {
    /// Allowed and scheduled: its executor runs it next (or ran it, unrecorded).
    Scheduled,
    /// Waiting for a human's review on a ticket.
    AwaitingReview,
    /// Final: refused before it ran.
    Denied,
    /// Final: its result is recorded.
    Returned,
    /// Final: it failed (or was interrupted and not run again).
    Failed,
}

impl ToolPhase {
    /// Whether an outcome (`tool.returned` / `tool.failed`) may still be recorded.
    #[must_use]
    pub fn awaits_outcome(self) -> bool {
        self == Self::Scheduled
    }

    /// The word used in messages.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::AwaitingReview => "awaiting review",
            Self::Denied => "denied",
            Self::Returned => "returned",
            Self::Failed => "failed",
        }
    }
}

/// One governed tool call of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// `{run}/tool-N`.
    pub tool_call_id: ToolCallId,
    /// The asking call.
    pub request_id: CallId,
    /// The asking agent.
    pub agent: AgentId,
    /// Its episode.
    pub episode_id: EpisodeId,
    /// The tool as the agent named it.
    pub name: String,
    /// The arguments as given.
    pub arguments: Value,
    /// Whether its section is `read_only` (run again after a crash).
    pub read_only: bool,
    /// What its executor is given (absent for a denied call).
    pub request: Option<ToolRequest>,
    /// The `[tools.NAME]` section serving it (absent for a denied call).
    pub section: Option<String>,
    /// Where it stands.
    pub phase: ToolPhase,
}

impl ToolCallRecord {
    /// Scheduled without an outcome, or waiting for a review.
    fn in_flight(&self) -> bool {
        matches!(self.phase, ToolPhase::Scheduled | ToolPhase::AwaitingReview)
    }
}

impl RunState {
    /// Every governed tool call, by id.
    #[must_use]
    pub fn tool_calls(&self) -> &std::collections::BTreeMap<ToolCallId, ToolCallRecord> {
        &self.tool_calls
    }

    /// Whether a tool call is scheduled without an outcome, or waits for a review (the
    /// run waits for it).
    #[must_use]
    pub fn tools_in_flight(&self) -> bool {
        self.tool_calls.values().any(ToolCallRecord::in_flight)
    }

    /// Whether a branch of the fan-out `group` waits for a tool call's outcome (the group
    /// is not joined before it).
    #[must_use]
    pub fn tools_in_flight_in(&self, group: &str) -> bool {
        self.tool_calls.values().any(|r| {
            r.in_flight()
                && self
                    .calls
                    .get(&r.request_id)
                    .is_some_and(|c| c.branch_of.as_deref() == Some(group))
        })
    }

    /// The first scheduled tool call without an outcome: the runtime's next tool work.
    #[must_use]
    pub fn due_tool_call(&self) -> Option<&ToolCallRecord> {
        self.tool_calls.values().find(|r| r.phase.awaits_outcome())
    }

    /// Folds a tool event.
    pub(super) fn apply_tool(&mut self, event: &RunEvent) {
        match event {
            RunEvent::ToolCallScheduled(s) => {
                self.count_tool_call(&s.tool_call_id);
                self.tool_calls.insert(
                    s.tool_call_id.clone(),
                    ToolCallRecord {
                        tool_call_id: s.tool_call_id.clone(),
                        request_id: s.request_id.clone(),
                        agent: s.request.agent.clone(),
                        episode_id: s.request.episode_id.clone(),
                        name: s.name.clone(),
                        arguments: s.request.arguments.clone(),
                        read_only: s.read_only,
                        request: Some(s.request.clone()),
                        section: Some(s.section.clone()),
                        phase: ToolPhase::Scheduled,
                    },
                );
            }
            RunEvent::ToolDenied(d) => {
                self.count_tool_call(&d.tool_call_id);
                self.tool_calls.insert(
                    d.tool_call_id.clone(),
                    ToolCallRecord {
                        tool_call_id: d.tool_call_id.clone(),
                        request_id: d.request_id.clone(),
                        agent: d.agent.clone(),
                        episode_id: d.episode_id.clone(),
                        name: d.name.clone(),
                        arguments: d.arguments.clone(),
                        read_only: false,
                        request: None,
                        section: None,
                        phase: ToolPhase::Denied,
                    },
                );
            }
            RunEvent::ToolReturned(r) => self.settle_tool(&r.tool_call_id, ToolPhase::Returned),
            RunEvent::ToolFailed(f) => self.settle_tool(&f.tool_call_id, ToolPhase::Failed),
            _ => {}
        }
    }

    /// A call decided for the first time takes the next id; one decided after its review
    /// kept the id its ticket reserved.
    fn count_tool_call(&mut self, id: &ToolCallId) {
        if !self.tool_calls.contains_key(id) {
            self.tool_calls_requested += 1;
        }
    }

    /// Folds a tool review ticket: the call's id is reserved and the
    /// call waits for the human.
    pub(super) fn hold_tool_for_review(&mut self, subject: &TicketSubject) {
        let TicketSubject::Tool {
            tool_call_id,
            request_id,
            agent,
            episode_id,
            name,
            arguments,
            ..
        } = subject
        else {
            return;
        };
        self.count_tool_call(tool_call_id);
        self.tool_calls.insert(
            tool_call_id.clone(),
            ToolCallRecord {
                tool_call_id: tool_call_id.clone(),
                request_id: request_id.clone(),
                agent: agent.clone(),
                episode_id: episode_id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
                read_only: false,
                request: None,
                section: None,
                phase: ToolPhase::AwaitingReview,
            },
        );
    }

    fn settle_tool(&mut self, id: &ToolCallId, phase: ToolPhase) {
        if let Some(rec) = self.tool_calls.get_mut(id) {
            rec.phase = phase;
        }
    }
}
