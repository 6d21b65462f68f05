//! Governed tools in the decider (docs/governance.md#tools): an agent's `call_tool` is
//! decided before any executor runs it, in seed 002's precedence (the bundle's tool
//! rules: deny patterns > the agent's MUST NOT rules > task restrictions > its allowed
//! tools > review patterns; before them, the episode's budget gate), then matched to the
//! workflow's `[tools.NAME]` executor.
//!
//! ```text
//! call_tool ─▶ policy.decided ─▶ allowed, served ─▶ tool.call_scheduled ─▶ (the runtime runs it)
//!                     │                                 ─▶ tool.returned | tool.failed (input)
//!                     └─ denied, needs review, no executor ─▶ tool.denied (never runs)
//! ```
//!
//! Every outcome goes back to the asking agent as a new call carrying a `tool_result`
//! decision input from `tools`, through the content gate (`gate_content`: scoped and
//! recorded as `handoff.allowed`). A denial counts as a refused action of the asking
//! episode (`tool_refused`, stop condition `failure_repeats`): the agent is told and may
//! fall back, and one that keeps asking for refused tools stops. A call found scheduled
//! without a result when a run resumes is run again only when its section is `read_only`;
//! otherwise the runtime records `tool.failed` with `TOOL_INTERRUPTED`.

use super::*;
use crate::events::tool::*;
use crate::protocol::{resolve_tool, tool_invocation};
use docket_policies::ContentPart;
use docket_protocol::ToolRequest;
use docket_protocol::{CallId, ToolCallId};

/// A recorded tool outcome, handed to `decide` as [`super::Command::RecordTool`].
#[derive(Debug, Clone, PartialEq)]
pub enum ToolInput {
    /// `tool.returned`.
    Returned(ToolReturned),
    /// `tool.failed`.
    Failed(ToolFailed),
}

impl ToolInput {
    /// The call it is about.
    #[must_use]
    pub fn tool_call_id(&self) -> &ToolCallId {
        match self {
            Self::Returned(e) => &e.tool_call_id,
            Self::Failed(e) => &e.tool_call_id,
        }
    }

    pub(crate) fn at_ms(&self) -> i64 {
        match self {
            Self::Returned(e) => e.at_ms,
            Self::Failed(e) => e.at_ms,
        }
    }

    pub(crate) fn to_event(&self) -> RunEvent {
        match self.clone() {
            Self::Returned(e) => RunEvent::ToolReturned(e),
            Self::Failed(e) => RunEvent::ToolFailed(e),
        }
    }

    pub(crate) fn from_event(event: &RunEvent) -> Option<Self> {
        match event {
            RunEvent::ToolReturned(e) => Some(Self::Returned(e.clone())),
            RunEvent::ToolFailed(e) => Some(Self::Failed(e.clone())),
            _ => None,
        }
    }
}

/// The argument part of a `Tool(argument)` invocation.
fn invocation_argument(invocation: &str) -> &str {
    invocation
        .split_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or("")
}

/// Whether a tool outcome applies: the call was scheduled and has no outcome yet.
pub(super) fn check_input(state: &RunState, input: &ToolInput) -> Result<(), Rejection> {
    let id = input.tool_call_id();
    let rec = state
        .tool_calls
        .get(id)
        .ok_or_else(|| Rejection::UnknownToolCall(id.to_string()))?;
    if rec.phase.awaits_outcome() {
        Ok(())
    } else {
        Err(Rejection::ToolCallSettled {
            tool_call_id: id.to_string(),
            phase: rec.phase.as_str(),
        })
    }
}

impl Batch<'_> {
    /// An agent's `call_tool`: numbered, decided, then scheduled for its executor or
    /// refused (and the agent told).
    pub(super) fn call_tool(&mut self, agent: &str, request_id: &CallId, action: &Action) {
        let Action::CallTool { name, arguments } = action else {
            return;
        };
        let Some(asker) = self.state.calls.get(request_id) else {
            return;
        };
        let episode_id = asker.recorded.episode_id.clone();
        let tool_call_id = ToolCallId::from(format!(
            "{}/tool-{}",
            self.run_id(),
            self.state.tool_calls_requested + 1
        ));
        let invocation = tool_invocation(name, arguments);
        // The episode's budget gate first (a stopped episode, or one past its
        // finalize-or-escalate threshold, runs no more tools), then the tool rules.
        let decision = self
            .state
            .episode_gate(self.bundle, &episode_id)
            .unwrap_or_else(|| {
                let task_denied = self.task_denied(&asker.recorded);
                self.bundle
                    .decide_tool_call(agent, &invocation, task_denied)
            });
        let verdict = decision.verdict;
        let rule = decision.rule_id.to_string();
        let reason = decision.reason.to_string();
        self.push(RunEvent::PolicyDecided {
            subject: tool_call_id.to_string(),
            decision,
        });
        let denied = ToolDenied {
            tool_call_id: tool_call_id.clone(),
            request_id: request_id.clone(),
            agent: agent.into(),
            episode_id: episode_id.clone(),
            name: name.clone(),
            arguments: arguments.clone(),
            rule_id: rule,
            reason,
        };
        match verdict {
            Verdict::Allow => {}
            Verdict::NeedsApproval => return self.review_tool(denied),
            _ => return self.deny_tool(denied),
        }
        self.schedule_tool(denied);
    }

    /// An allowed call (by the rules or by a human's review): matched to the workflow's
    /// executor and scheduled, or refused when the workflow has none.
    fn schedule_tool(&mut self, denied: ToolDenied) {
        let Some(run) = self.state.run.clone() else {
            return;
        };
        let ToolDenied {
            tool_call_id,
            request_id,
            agent,
            episode_id,
            name,
            arguments,
            ..
        } = denied.clone();
        let Some((section, spec, tool)) = resolve_tool(&run.workflow.tools, &name) else {
            return self.deny_tool(ToolDenied {
                rule_id: "workflow.tools".to_owned(),
                reason: format!(
                    "the workflow declares no executor for tool `{name}` (a [tools.{name}] \
                     section, or `SECTION:TOOL` for an mcp section)"
                ),
                ..denied
            });
        };
        let request = ToolRequest {
            run_id: self.run_id(),
            episode_id,
            tool_call_id: tool_call_id.clone(),
            agent,
            tool: tool.to_owned(),
            arguments,
            timeout_ms: spec.timeout_ms(),
        };
        let (section, read_only) = (section.to_owned(), spec.read_only);
        self.push(RunEvent::ToolCallScheduled(ToolCallScheduled {
            tool_call_id,
            request_id,
            name,
            section,
            read_only,
            request,
        }));
    }

    /// A call a review pattern matched waits for a human on a
    /// ticket naming the tool, the argument and the pattern; the call's id is reserved.
    fn review_tool(&mut self, held: ToolDenied) {
        let pattern = self
            .bundle
            .spec()
            .review_patterns
            .iter()
            .find(|p| p.id == held.rule_id)
            .map(|p| p.pattern.clone())
            .unwrap_or_default();
        let invocation = tool_invocation(&held.name, &held.arguments);
        let reason = format!(
            "{} asks to call tool `{}` with argument `{}` ({}), which matches review \
             pattern `{}` (`{pattern}`): approving runs it, denying tells {} it was denied",
            held.agent,
            held.name,
            invocation_argument(&invocation),
            held.tool_call_id,
            held.rule_id,
            held.agent,
        );
        let ticket = self.next_ticket();
        self.push(RunEvent::Escalated {
            ticket,
            reason,
            subject: TicketSubject::Tool {
                tool_call_id: held.tool_call_id,
                request_id: held.request_id,
                agent: held.agent,
                episode_id: held.episode_id,
                name: held.name,
                arguments: held.arguments,
                invocation,
                rule_id: held.rule_id,
                pattern,
            },
        });
    }

    /// A human's decision on a tool review ticket: approved, the call is scheduled
    /// (matched to its executor); denied, the agent is told, as of a refused call.
    pub(super) fn on_tool_ticket(
        &mut self,
        subject: &TicketSubject,
        ticket: &docket_protocol::TicketId,
        approved: bool,
        by: &str,
        reason: &str,
    ) {
        let TicketSubject::Tool {
            tool_call_id,
            request_id,
            agent,
            episode_id,
            name,
            arguments,
            rule_id,
            ..
        } = subject
        else {
            return;
        };
        let held = ToolDenied {
            tool_call_id: tool_call_id.clone(),
            request_id: request_id.clone(),
            agent: agent.clone(),
            episode_id: episode_id.clone(),
            name: name.clone(),
            arguments: arguments.clone(),
            rule_id: rule_id.clone(),
            reason: format!("{by} denied {ticket}: {reason}"),
        };
        if approved {
            self.schedule_tool(held);
        } else {
            self.deny_tool(held);
        }
    }

    /// The tool patterns the task of `request` forbids (none before):
    /// the tool decision's task restrictions.
    pub(super) fn task_denied<'r>(&self, request: &'r AgentRequest) -> &'r [String] {
        match &request.task {
            Some(task) => &task.denied_tools,
            None => &[],
        }
    }

    /// Records a refusal; the asking episode counts it (`tool_refused`) and, unless that
    /// stops it, the agent is told.
    fn deny_tool(&mut self, denied: ToolDenied) {
        let id = denied.tool_call_id.clone();
        let episode_id = denied.episode_id.clone();
        let detail = json!({ "rule_id": denied.rule_id, "reason": denied.reason });
        self.push(RunEvent::ToolDenied(denied));
        if self.refusals_repeat(&episode_id) {
            return;
        }
        self.reply_tool(&id, "denied", detail);
    }

    /// A recorded outcome: the agent that asked is called again with it.
    pub(super) fn on_tool_input(&mut self, input: &ToolInput) {
        let id = input.tool_call_id().clone();
        let Some(rec) = self.state.tool_calls.get(&id) else {
            return;
        };
        self.episode = rec.episode_id.clone();
        match input {
            ToolInput::Returned(e) => {
                self.reply_tool(&id, "returned", json!({ "result": e.result }))
            }
            ToolInput::Failed(e) => self.reply_tool(
                &id,
                "failed",
                json!({ "code": e.code, "message": e.message }),
            ),
        }
    }

    /// Calls the asking agent again with the call's outcome as a `tool_result` decision
    /// input, through the content gate (scoped for `tools → agent`, recorded).
    fn reply_tool(&mut self, id: &ToolCallId, status: &str, extra: Value) {
        let Some(rec) = self.state.tool_calls.get(id).cloned() else {
            return;
        };
        let Some(asker) = self.state.calls.get(&rec.request_id).cloned() else {
            return;
        };
        let mut outcome = json!({
            "tool_call_id": id,
            "name": rec.name,
            "arguments": rec.arguments,
            "status": status,
        });
        if let (Some(map), Value::Object(more)) = (outcome.as_object_mut(), extra) {
            map.extend(more);
        }
        let agent = rec.agent.to_string();
        let rule = format!("agents.{agent}.allowed_tools");
        let authority = PolicyDecision {
            kind: DecisionKind::ToolCall,
            verdict: Verdict::Allow,
            rule_id: rule.as_str().into(),
            reason: format!(
                "the outcome of {agent}'s call of `{}` returns to it",
                rec.name
            )
            .into(),
            bundle_hash: self.bundle.hash(),
            chain: vec![RuleStep::new(rule, StepOutcome::Applied, "tool outcome")],
        };
        // The context parts decide how much of an observation crosses: scoped (as
        // `tools → agent` scopes it), in full, or without its result.
        let observations = self.context_parts(&asker.recorded).observations.value;
        if observations == ContentPart::None
            && let Some(map) = outcome.as_object_mut()
        {
            map.remove("result");
        }
        let delivered = self.gate_content_in(
            TOOLS_SOURCE,
            &agent,
            (TOOL_RESULT_TYPE, InputKind::Decision),
            &outcome,
            &authority,
            observations.mode(),
        );
        let Some(mut request) = self.request_again(&asker.recorded.request_id) else {
            return;
        };
        request.decision_inputs.push(DecisionInput::new(
            TOOLS_SOURCE,
            TOOL_RESULT_TYPE,
            delivered,
        ));
        let asked = asker.recorded.request_id.clone();
        self.schedule_again(&asked, request, asker.reply_to, None, asker.branch_of);
    }
}
