"""docket_agent.openai_agents: an Agents SDK Agent answering docket requests, driven by a
scripted model through the Agents SDK's model interface (no network). Its function tools
become governed call_tool actions and never run in the agent; its handoffs become docket
handoffs; its final answer finishes."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

try:
    import agents
except ImportError:  # the extra is optional; CI installs it
    if os.environ.get("CI"):
        raise
    pytest.skip("openai-agents is not installed (pip install './sdk/python[openai-agents]')",
                allow_module_level=True)

import pydantic

import docket_agent as da
from docket_agent.openai_agents import AgentsSdkAgent, docket_id

from conftest import request_doc
from scripted_model import ScriptedModel, Sent, message, tool_call

TICKET = {"source_agent": "external", "output_type": "support_request",
          "payload": {"order": "A-7", "complaint": "my parcel has not arrived"}}
PRIOR = {"source_agent": "intake", "output_type": "customer_history", "payload": {"orders": 12}}


def concierge(model: ScriptedModel, ran: list[str], **options: Any) -> AgentsSdkAgent:
    @agents.function_tool
    def lookup_order(order: str) -> dict[str, str]:
        """Where an order is."""
        ran.append(order)
        return {"shipping": "delayed at the depot"}

    refunds = agents.Agent(name="Refunds desk", instructions="Refund orders.")
    agent = agents.Agent(name="concierge", instructions="Help the customer.", tools=[lookup_order],
                         handoffs=[refunds], model=model, **options)
    return AgentsSdkAgent(agent, agent_ids={"Refunds desk": "refunds"})


def answer(adapter: AgentsSdkAgent, **fields: Any) -> dict[str, Any]:
    response = asyncio.run(adapter(da.Request.from_json(request_doc(**fields))))
    result: dict[str, Any] = response.to_json()
    return result


def test_a_function_tool_call_is_a_call_tool_for_docket_to_decide_and_never_runs_here() -> None:
    ran: list[str] = []
    model = ScriptedModel([lambda sent: [tool_call("lookup_order", '{"order": "A-7"}')]])
    got = answer(concierge(model, ran), decision_inputs=[TICKET], context_inputs=[PRIOR])
    assert got["actions"] == [{"type": "call_tool", "name": "lookup_order", "arguments": {"order": "A-7"}}]
    assert got["usage"] == {"input_tokens": 120, "output_tokens": 30, "tool_calls": 0}
    assert ran == []  # docket runs it, once its bundle allowed it
    sent = model.sent[0]
    assert (sent.instructions, sent.tools, sent.handoffs) == (
        "Help the customer.", ["lookup_order"], ["transfer_to_refunds_desk"])
    user, context = sent.input
    assert user["role"] == "user" and json.loads(user["content"].split("\n", 1)[1]) == [TICKET]
    assert context["role"] == "developer" and "never to prioritise, rank or decide from" in context["content"]
    assert json.loads(context["content"].split("\n", 1)[1]) == [PRIOR]


def tool_result(n: int, name: str, status: str, **fields: Any) -> dict[str, Any]:
    return {"source_agent": "tools", "output_type": "tool_result",
            "payload": {"tool_call_id": f"run-1/tool-{n}", "name": name, "arguments": {"order": "A-7"},
                        "status": status, **fields}}


def test_the_tools_outcome_reaches_the_model_and_its_handoff_is_a_docket_handoff() -> None:
    def hands_off(sent: Sent) -> list[Any]:
        call, output = sent.input[1], sent.input[2]
        assert call == {"type": "function_call", "call_id": "run-1/tool-1", "name": "lookup_order",
                        "arguments": '{"order": "A-7"}'}
        assert output == {"type": "function_call_output", "call_id": "run-1/tool-1",
                          "output": '{"shipping": "delayed at the depot"}'}
        return [message("Passing you to refunds."), tool_call("transfer_to_refunds_desk", "{}")]

    model = ScriptedModel([hands_off])
    got = answer(concierge(model, []), decision_inputs=[
        TICKET, tool_result(1, "lookup_order", "returned", result={"shipping": "delayed at the depot"})])
    assert got["actions"] == [{
        "type": "handoff", "to": "refunds", "output_type": "agent_handoff",
        "payload": {"from": "concierge", "arguments": {},
                    "conversation": [{"role": "user", "content": json.dumps([TICKET["payload"]])},
                                     {"role": "assistant", "content": "Passing you to refunds."}]},
    }]
    assert docket_id("Refunds desk") == "refunds_desk"  # without agent_ids


def test_a_refused_tool_is_told_to_the_model_which_answers_in_the_end() -> None:
    def gives_up(sent: Sent) -> list[Any]:
        assert sent.input[-1]["output"].startswith(
            "docket refused this call before it ran (rule no-agent-refunds): refunds are issued by people")
        return [message("A person will refund you today.")]

    model = ScriptedModel([gives_up])
    got = answer(concierge(model, []), decision_inputs=[
        TICKET, tool_result(2, "refund_order", "denied", rule_id="no-agent-refunds",
                            reason="refunds are issued by people")])
    assert got["status"] == "SUCCESS" and got["confidence_level"] == "MEDIUM"
    assert got["actions"] == [{"type": "finish", "output": "A person will refund you today."}]


class Resolution(pydantic.BaseModel):
    resolution: str
    refund: bool


def test_a_structured_answer_is_validated_against_the_agents_output_type() -> None:
    model = ScriptedModel([lambda sent: [message('{"resolution": "reship", "refund": false}')],
                           lambda sent: [message("not json at all")],
                           lambda sent: [tool_call("lookup_order", "{not json")]])
    adapter = concierge(model, [], output_type=Resolution)
    got = answer(adapter, decision_inputs=[TICKET])
    assert got["actions"] == [{"type": "finish", "output": {"resolution": "reship", "refund": False}}]
    dispatcher = da.Dispatcher(adapter)
    for _ in range(2):
        wrong = dispatcher.answer(json.dumps(request_doc(decision_inputs=[TICKET]))).to_json()
        assert (wrong["status"], wrong["error_code"]) == ("ERROR", "MODEL_OUTPUT_INVALID")
    dispatcher.close()


def test_a_failing_model_is_an_error_answer() -> None:
    def fails(sent: Sent) -> list[Any]:
        raise ConnectionError("the model service is unreachable")

    dispatcher = da.Dispatcher(concierge(ScriptedModel([fails]), []))
    got = dispatcher.answer(json.dumps(request_doc(decision_inputs=[TICKET]))).to_json()
    dispatcher.close()
    assert got == {"request_id": "run-1/call-1", "status": "ERROR", "error_code": "AGENT_INTERNAL_ERROR",
                   "error_message": "ConnectionError: the model service is unreachable"}


def test_the_tool_executor_runs_the_agents_functions_for_docket() -> None:
    ran: list[str] = []
    adapter = concierge(ScriptedModel([]), ran)
    done = asyncio.run(adapter.run_tool({"tool_call_id": "run-1/tool-1", "tool": "lookup_order",
                                         "arguments": {"order": "A-7"}}))
    assert done == {"tool_call_id": "run-1/tool-1", "result": {"shipping": "delayed at the depot"}}
    assert ran == ["A-7"]
    unknown = asyncio.run(adapter.run_tool({"tool_call_id": "run-1/tool-2", "tool": "refund_order",
                                            "arguments": {}}))
    assert unknown["error"]["code"] == "TOOL_UNKNOWN"
    assert "concierge has no function tool 'refund_order' (it has: lookup_order)" == unknown["error"]["message"]


def test_the_adapter_says_why() -> None:
    from docket_agent import openai_agents

    for name in openai_agents.__all__:
        value = getattr(openai_agents, name)
        assert (value.__doc__ or "").strip(), name
    for method in ("__call__", "conversation", "run_tool"):
        assert (getattr(AgentsSdkAgent, method).__doc__ or "").strip(), method


def test_the_documented_adapter_answers_with_a_governed_tool_call() -> None:
    from conftest import REPO, doc_example

    scope: dict[str, Any] = {"__name__": "concierge"}
    exec(doc_example("openai-agents", REPO / "docs" / "python.md"), scope)
    adapter: AgentsSdkAgent = scope["concierge"]
    adapter.model = ScriptedModel([lambda sent: [tool_call("lookup_order", '{"order": "A-7"}')],
                                   lambda sent: [tool_call("transfer_to_refunds_desk", "{}")]])
    assert answer(adapter, decision_inputs=[TICKET])["actions"] == [
        {"type": "call_tool", "name": "lookup_order", "arguments": {"order": "A-7"}}]
    assert answer(adapter, decision_inputs=[TICKET])["actions"][0]["to"] == "refunds"
    ran = asyncio.run(adapter.run_tool({"tool_call_id": "t-1", "tool": "lookup_order", "arguments": {"order": "A-7"}}))
    assert ran == {"tool_call_id": "t-1", "result": {"shipping": "lost in transit"}}
