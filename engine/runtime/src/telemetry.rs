//! The runtime's spans, named for OpenTelemetry (docs/observability.md): a run, each agent
//! call (`invoke_agent {agent}`), each handoff, each governed tool call (`execute_tool
//! {tool}`) and each side effect, with the GenAI semantic conventions' attributes where
//! they fit (`gen_ai.operation.name`, `gen_ai.agent.name`, `gen_ai.tool.name`,
//! `gen_ai.usage.input_tokens` / `output_tokens`) and docket's own (`docket.run_id`,
//! `docket.seq`: the log position of the event that records the step).
//!
//! They are plain `tracing` spans: `otel.name` gives the exported name, and nothing here
//! knows whether anything exports them (the `docket` command does when asked to). The
//! decider has none: spans are made here, around the I/O.

use docket_decider::{AgentRequest, AgentResponse, EffectRequest, ToolCallRecord};
use tracing::field::Empty;

/// The span of a run being driven (a start, a resume, or a human's decision going on).
pub(crate) fn run(run_id: &str, workflow: &str) -> tracing::Span {
    tracing::info_span!(
        "run",
        otel.name = %format!("run {workflow}"),
        run_id = %run_id,
        workflow = %workflow,
        docket.run_id = %run_id,
        docket.workflow = %workflow,
        docket.status = Empty,
    )
}

/// The span of one agent call: open while the agent works and its answer is recorded.
pub(crate) fn invoke_agent(request: &AgentRequest) -> tracing::Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = %format!("invoke_agent {}", request.target_agent),
        otel.kind = "client",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = %request.target_agent,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        docket.run_id = %request.run_id,
        docket.request_id = %request.request_id,
        docket.attempt = request.attempt,
        docket.source_agent = %request.source_agent,
        docket.seq = Empty,
    )
}

/// Records an agent's answer on its span: the usage it reports, or the failure's code; and
/// `seq`, where the answer is recorded.
pub(crate) fn answered<E: AsRef<str>>(
    span: &tracing::Span,
    answer: Result<&AgentResponse, E>,
    seq: u64,
) {
    match answer {
        Ok(response) => {
            span.record("gen_ai.usage.input_tokens", response.usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", response.usage.output_tokens);
        }
        Err(code) => {
            span.record("error.type", code.as_ref());
            span.record("otel.status_code", "ERROR");
        }
    }
    span.record("docket.seq", seq);
}

/// What a handoff's audit measured: the tokens of the content offered, and of what the
/// receiver got after scoping and translation (docs/governance.md#the-handoff-audit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HandoffTokens {
    pub(crate) before: usize,
    pub(crate) after: usize,
}

/// The span of one handoff decision (allowed or denied), recorded at `seq`. It has no
/// duration worth reading: it marks where in the run the handoff was decided, and by what.
/// An allowed handoff's span carries its token counts before and after scoping, so what
/// scoping saved shows in the traces without reading the log.
pub(crate) fn handoff(
    run_id: &str,
    from: &str,
    to: &str,
    output_type: &str,
    rule_id: &str,
    tokens: Option<HandoffTokens>,
    seq: u64,
) -> tracing::Span {
    let span = tracing::info_span!(
        "handoff",
        otel.name = %format!("handoff {from} → {to}"),
        from = %from,
        to = %to,
        output_type = %output_type,
        gen_ai.agent.name = %to,
        docket.run_id = %run_id,
        docket.seq = seq,
        docket.handoff.from = %from,
        docket.handoff.to = %to,
        docket.handoff.output_type = %output_type,
        docket.rule_id = %rule_id,
        docket.verdict = if tokens.is_some() { "allow" } else { "deny" },
        docket.handoff.tokens_before = Empty,
        docket.handoff.tokens_after = Empty,
    );
    if let Some(tokens) = tokens {
        span.record("docket.handoff.tokens_before", tokens.before);
        span.record("docket.handoff.tokens_after", tokens.after);
    }
    span
}

/// The span of one governed tool call, open while it runs and its outcome is recorded.
pub(crate) fn execute_tool(run_id: &str, record: &ToolCallRecord) -> tracing::Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {}", record.name),
        otel.kind = "internal",
        tool_call_id = %record.tool_call_id,
        tool = %record.name,
        agent = %record.agent,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %record.name,
        gen_ai.tool.call.id = %record.tool_call_id,
        gen_ai.agent.name = %record.agent,
        error.type = Empty,
        otel.status_code = Empty,
        docket.run_id = %run_id,
        docket.seq = Empty,
    )
}

/// The span of one side effect's execution (or its verification after a crash).
pub(crate) fn effect(request: &EffectRequest) -> tracing::Span {
    tracing::info_span!(
        "effect",
        otel.name = %format!("effect {}", request.kind),
        otel.kind = "client",
        run = %request.run_id,
        effect_id = %request.effect_id,
        kind = %request.kind,
        lane = %request.lane,
        key = %request.idempotency_key,
        docket.run_id = %request.run_id,
        docket.effect.id = %request.effect_id,
        docket.effect.kind = %request.kind,
        docket.effect.lane = %request.lane,
        docket.attempt = request.attempt,
        docket.seq = Empty,
    )
}
