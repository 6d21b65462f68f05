"""Run an OpenAI Agents SDK ``Agent`` as a docket agent (the ``openai-agents`` extra).

``AgentsSdkAgent(agent)`` is a docket handler. Each docket request is one turn of the
model: the agent's instructions, tools and handoffs go to its ``Model``, and what the
model answers becomes a docket action instead of running in this process:

* a call of one of the agent's function tools becomes ``call_tool``: docket decides it
  before it runs (deny patterns, MUST NOT rules, allowed tools, review patterns) and its
  ``[tools.NAME]`` executor runs it, which can be this same agent's functions
  (``run_tools_stdio``); the outcome, a refusal too, is handed back to the model as the
  tool's output on the next request;
* a handoff (``transfer_to_...``) becomes a docket ``handoff`` to the agent the bundle
  knows by that name: the interaction matrix decides it;
* a final answer becomes ``finish``, validated against the agent's ``output_type``.

The conversation is rebuilt from the request on every call (the decision inputs, then each
tool call and its recorded outcome), so the adapter keeps no state between calls: a
restarted process, a retry or ``docket resume`` sees the same conversation.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Mapping

import pydantic
from agents import Agent, AgentOutputSchema, AgentOutputSchemaBase, FunctionTool, Handoff, MultiProvider
from agents import ModelSettings, RunContextWrapper, handoff
from agents.exceptions import ModelBehaviorError
from agents.items import ModelResponse, TResponseInputItem
from agents.models.interface import Model, ModelTracing
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from .actions import call_tool, finish
from .actions import handoff as docket_handoff
from .errors import AgentError
from .protocol import Confidence, Request, Response, ToolResult, Usage
from .responses import success

__all__ = ["AgentsSdkAgent", "docket_id", "run_tools_stdio"]

#: The output type of a handoff from an Agents SDK agent, unless told otherwise.
HANDOFF_OUTPUT_TYPE = "agent_handoff"


def docket_id(name: str) -> str:
    """The docket agent id an Agents SDK agent's name stands for by default:
    ``"Refunds agent"`` is ``refunds_agent``."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _tool_output(result: ToolResult) -> str:
    """What the model is told a tool call came to, from docket's recorded outcome."""
    if result.status == "returned":
        return result.result if isinstance(result.result, str) else json.dumps(result.result)
    if result.status == "denied":
        return (f"docket refused this call before it ran (rule {result.rule_id}): {result.reason}. "
                "The tool did not run; do something else.")
    return f"the tool failed ({result.code}): {result.message}"


@dataclass(frozen=True)
class _Turn:
    tools: list[FunctionTool]
    handoffs: list[Handoff[Any, Any]]


class AgentsSdkAgent:
    """A docket handler (``async``) running an Agents SDK ``Agent``, one model turn per
    request. Serve it with ``run_stdio`` or ``HttpAgent`` like any handler.

    ``agent_ids`` maps the Agents SDK names of handoff targets to docket agent ids (by
    default ``docket_id(name)``); ``handoff_output_type`` is the output type the bundle
    declares for such handoffs; ``confidence`` is what a model's answer is reported with
    (the Agents SDK has no such notion); ``model`` replaces the agent's own."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        model: Model | None = None,
        agent_ids: Mapping[str, str] | None = None,
        handoff_output_type: str = HANDOFF_OUTPUT_TYPE,
        confidence: Confidence = "MEDIUM",
        context: Any = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"AgentsSdkAgent: expected an agents.Agent, got {type(agent).__name__}")
        self.agent = agent
        self.model = model
        self.agent_ids = dict(agent_ids or {})
        self.handoff_output_type = handoff_output_type
        self.confidence: Confidence = confidence
        self.context = context

    def _model(self) -> Model:
        if self.model is not None:
            return self.model
        if isinstance(self.agent.model, Model):
            return self.agent.model
        return MultiProvider().get_model(self.agent.model)

    async def _turn(self, run_context: RunContextWrapper[Any]) -> _Turn:
        tools = [t for t in await self.agent.get_all_tools(run_context) if isinstance(t, FunctionTool)]
        handoffs: list[Handoff[Any, Any]] = []
        for item in self.agent.handoffs:
            h = item if isinstance(item, Handoff) else handoff(item)
            enabled = h.is_enabled
            if not isinstance(enabled, bool):
                answer = enabled(run_context, self.agent)
                enabled = bool(await answer) if asyncio.iscoroutine(answer) else bool(answer)
            if enabled:
                handoffs.append(h)
        return _Turn(tools, handoffs)

    def conversation(self, request: Request) -> list[TResponseInputItem]:
        """The model's input for this request: the decision inputs as the user's message,
        the read-only context inputs apart (labelled as not to decide from), then every
        tool call this step made with docket's recorded outcome."""
        decision = [
            {"source_agent": i.source_agent, "output_type": i.output_type, "payload": i.payload}
            for i in request.decision_inputs if i.output_type != "tool_result"
        ]
        items: list[TResponseInputItem] = [
            {"role": "user", "content": "Decision inputs (decide from these only):\n" + json.dumps(decision)}
        ]
        if request.context_inputs:
            context = [{"source_agent": i.source_agent, "output_type": i.output_type, "payload": i.payload}
                       for i in request.context_inputs]
            items.append({"role": "developer",
                          "content": "Read-only context: for reference and planning, never to prioritise, "
                                     "rank or decide from:\n" + json.dumps(context)})
        for result in request.tool_results():
            arguments = result.arguments if isinstance(result.arguments, str) else json.dumps(result.arguments)
            items.append({"type": "function_call", "call_id": result.tool_call_id, "name": result.name,
                          "arguments": arguments})
            items.append({"type": "function_call_output", "call_id": result.tool_call_id,
                          "output": _tool_output(result)})
        return items

    async def __call__(self, request: Request) -> Response:
        """One model turn, answered as a docket action."""
        run_context: RunContextWrapper[Any] = RunContextWrapper(context=self.context)
        turn = await self._turn(run_context)
        output_schema = _output_schema(self.agent)
        answer = await self._model().get_response(
            await self.agent.get_system_prompt(run_context),
            self.conversation(request),
            self.agent.model_settings or ModelSettings(),
            list(turn.tools),
            output_schema,
            turn.handoffs,
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
        usage = Usage(input_tokens=answer.usage.input_tokens, output_tokens=answer.usage.output_tokens)
        calls = [item for item in answer.output if isinstance(item, ResponseFunctionToolCall)]
        if calls:
            first = calls[0]  # one tool or handoff per response: the model sees the rest again
            arguments = _arguments(first)
            for h in turn.handoffs:
                if h.tool_name == first.name:
                    to = self.agent_ids.get(h.agent_name, docket_id(h.agent_name))
                    payload = {"from": self.agent.name, "arguments": arguments,
                               "conversation": _messages(request, answer)}
                    return success(request, docket_handoff(to, self.handoff_output_type, payload),
                                   confidence=self.confidence, usage=usage)
            return success(request, call_tool(first.name, arguments), confidence=self.confidence, usage=usage)
        text = _final_text(answer)
        if output_schema is None or output_schema.is_plain_text():
            return success(request, finish(text), confidence=self.confidence, usage=usage)
        try:
            value = output_schema.validate_json(text)
        except ModelBehaviorError as exc:
            raise AgentError("MODEL_OUTPUT_INVALID", f"the model's answer is not a valid "
                             f"{output_schema.name()}: {exc}") from None
        output = pydantic.TypeAdapter(type(value)).dump_python(value, mode="json")
        return success(request, finish(output), confidence=self.confidence, usage=usage)

    async def run_tool(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """Answers one call of docket's tool-executor protocol
        (docs/agent-protocol.md#tool-executors) by running the agent's function tool of
        that name; docket sends only calls it has allowed."""
        call_id = str(call.get("tool_call_id", ""))
        name = call.get("tool")
        arguments = call.get("arguments")
        tools = (await self._turn(RunContextWrapper(context=self.context))).tools
        tool = next((t for t in tools if t.name == name), None)
        if tool is None:
            known = ", ".join(t.name for t in tools) or "none"
            return {"tool_call_id": call_id,
                    "error": {"code": "TOOL_UNKNOWN", "message": f"{self.agent.name} has no function tool "
                                                                 f"{name!r} (it has: {known})"}}
        text = arguments if isinstance(arguments, str) else json.dumps({} if arguments is None else arguments)
        try:
            result = await tool.on_invoke_tool(
                ToolContext(context=self.context, tool_name=tool.name, tool_call_id=call_id, tool_arguments=text),
                text,
            )
        except Exception as exc:  # noqa: BLE001 - a tool's failure is an answer, never a crash
            return {"tool_call_id": call_id, "error": {"code": "TOOL_ERROR", "message": f"{type(exc).__name__}: {exc}"}}
        return {"tool_call_id": call_id, "result": _jsonable(result)}


def _output_schema(agent: Agent[Any]) -> AgentOutputSchemaBase | None:
    if agent.output_type is None or agent.output_type is str:
        return None
    if isinstance(agent.output_type, AgentOutputSchemaBase):
        return agent.output_type
    return AgentOutputSchema(agent.output_type)


def _arguments(call: ResponseFunctionToolCall) -> Any:
    try:
        return json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        raise AgentError("MODEL_OUTPUT_INVALID",
                         f"the model called {call.name} with arguments that are not JSON: {call.arguments[:200]!r}"
                         ) from None


def _final_text(answer: ModelResponse) -> str:
    texts = [part.text for item in answer.output if isinstance(item, ResponseOutputMessage)
             for part in item.content if isinstance(part, ResponseOutputText)]
    if not texts:
        raise AgentError("MODEL_OUTPUT_MISSING", "the model answered with neither a tool call, a handoff nor text")
    return texts[-1]


def _messages(request: Request, answer: ModelResponse) -> list[dict[str, str]]:
    """The conversation's text, carried in a handoff so the next agent can continue it."""
    said = [{"role": "user", "content": json.dumps([i.payload for i in request.decision_inputs
                                                     if i.output_type != "tool_result"])}]
    for item in answer.output:
        if isinstance(item, ResponseOutputMessage):
            text = "".join(p.text for p in item.content if isinstance(p, ResponseOutputText))
            if text:
                said.append({"role": "assistant", "content": text})
    return said


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return pydantic.TypeAdapter(type(value)).dump_python(value, mode="json")


def run_tools_stdio(adapter: AgentsSdkAgent) -> None:
    """Serves docket's tool-executor protocol on stdin/stdout with the agent's function
    tools, for the workflow's ``[tools.NAME]`` sections (``command`` naming this program):
    the functions run only once docket has allowed the call. Only answers reach stdout."""
    sys.stdout.flush()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    saved, sys.stdout = sys.stdout, sys.stderr
    loop = asyncio.new_event_loop()
    try:
        with os.fdopen(out_fd, "wb", buffering=0) as out:
            for line in sys.stdin.buffer:
                if not line.strip():
                    continue
                try:
                    call = json.loads(line)
                    if not isinstance(call, dict):
                        raise ValueError(f"expected an object, got {type(call).__name__}")
                except ValueError as exc:
                    print(f"docket-agent tools: ignored a line that is not a tool call ({exc})",
                          file=sys.stderr, flush=True)
                    continue
                answer = loop.run_until_complete(adapter.run_tool(call))
                out.write((json.dumps(answer) + "\n").encode())
    finally:
        loop.close()
        sys.stdout = saved
