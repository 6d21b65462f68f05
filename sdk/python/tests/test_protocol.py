"""Reading requests, building actions and responses: bad input is refused with a message
naming what and where, and a response is checked by docket's own rules, in its words."""

from __future__ import annotations

import json

import pytest

import docket_agent as da

from conftest import request_doc


def parse(**fields: object) -> da.Request:
    return da.Request.parse(json.dumps(request_doc(**fields)))


# -- requests ---------------------------------------------------------------------------


def test_decision_and_context_inputs_stay_apart() -> None:
    request = parse(
        decision_inputs=[{"source_agent": "reasoning", "output_type": "gaps", "payload": {"n": 1}}],
        context_inputs=[{"source_agent": "intelligence", "output_type": "geo_scores", "payload": {"n": 2}}],
    )
    assert request.decision_inputs_of("gaps") == [da.DecisionInput("reasoning", "gaps", {"n": 1})]
    assert request.decision_inputs_of("geo_scores") == []  # a context input is never one to decide from
    assert request.context_inputs_of("geo_scores") == [da.ContextInput("intelligence", "geo_scores", {"n": 2})]


def test_fields_docket_adds_later_are_ignored_but_kept() -> None:
    request = parse(a_field_of_tomorrow={"x": 1}, priority="HIGH")
    assert request.priority == "HIGH"
    assert request.raw["a_field_of_tomorrow"] == {"x": 1}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"attempt": "1"}, "attempt: expected an integer, got str"),
        ({"attempt": True}, "attempt: expected an integer, got bool"),
        ({"priority": "URGENT"}, "priority: expected one of HIGH, NORMAL, LOW, got 'URGENT'"),
        ({"decision_inputs": {}}, "decision_inputs: expected an array, got dict"),
        ({"decision_inputs": [{"source_agent": "a", "payload": 1}]}, "decision_inputs[0].output_type: required"),
        ({"context_inputs": [{"source_agent": "a", "output_type": "t"}]}, "context_inputs[0].payload: required"),
        ({"task": {"id": "t", "denied_tools": ["Bash", 3]}}, "task.denied_tools[1]: expected a string, got int"),
        ({"context": []}, "context: expected an object, got list"),
    ],
)
def test_a_malformed_request_names_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(da.RequestError) as caught:
        parse(**fields)
    assert str(caught.value) == message
    assert caught.value.request_id == "run-1/call-1"  # so the runner can still answer it


def test_a_document_without_a_request_id_says_so() -> None:
    with pytest.raises(da.RequestError, match="request_id: required") as caught:
        da.Request.parse('{"run_id": "r"}')
    assert caught.value.request_id is None
    with pytest.raises(da.RequestError, match="request: not JSON"):
        da.Request.parse("hello")
    with pytest.raises(da.RequestError, match="request: expected an object, got list"):
        da.Request.parse("[1]")


def test_tool_results_human_answers_and_missing_inputs() -> None:
    request = parse(
        decision_inputs=[
            {"source_agent": "external", "output_type": "ticket", "payload": {}},
            {"source_agent": "tools", "output_type": "tool_result",
             "payload": {"tool_call_id": "run-1/tool-1", "name": "lookup", "arguments": {"order": "A-7"},
                         "status": "returned", "result": {"shipping": "late"}}},
            {"source_agent": "tools", "output_type": "tool_result",
             "payload": {"tool_call_id": "run-1/tool-2", "name": "refund", "arguments": None,
                         "status": "denied", "rule_id": "no-agent-refunds", "reason": "people refund"}},
            {"source_agent": "human", "output_type": "human_answer",
             "payload": {"ticket": "ticket-1", "question": "Which market?", "approved": True, "by": "ana",
                         "reason": "launch", "choice": "EU"}},
        ],
        task={"id": "t-1", "denied_tools": ["Bash(git push*)"]},
    )
    lookup, refund = request.tool_results()
    assert (lookup.status, lookup.result) == ("returned", {"shipping": "late"})
    assert (refund.status, refund.rule_id, refund.result) == ("denied", "no-agent-refunds", None)
    answer = request.human_answer()
    assert answer is not None and (answer.choice, answer.by, answer.approved) == ("EU", "ana", True)
    assert request.task == da.TaskRestrictions("t-1", ("Bash(git push*)",))
    with pytest.raises(da.InputError) as caught:
        request.require_decision_input("gaps")
    assert caught.value.code == "INPUT_MISSING"
    assert "'gaps'" in caught.value.message and "human_answer, ticket, tool_result" in caught.value.message
    assert parse().human_answer() is None


# -- actions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: da.handoff(" ", "gaps", {}), "handoff.to: must not be empty"),
        (lambda: da.handoff("a", "", {}), "handoff.output_type: must not be empty"),
        (lambda: da.task("t", ["Bash(git"]), "task.task.denied_tools[0]: 'Bash(git' is not a tool pattern"),
        (lambda: da.task("t", "Bash"), "task.denied_tools: expected a list of tool patterns, got one string"),
        (lambda: da.request_capability("", "X"), "request_capability.target_agent: must not be empty"),
        (lambda: da.request_capability("a", "X", [1]), "request_capability.inputs: expected an object"),  # type: ignore[arg-type]
        (lambda: da.escalate(""), "escalate.reason: must not be empty"),
        (lambda: da.ask("Which?", ["EU", " "]), "ask.choices[1]: must not be empty"),
        (lambda: da.ask("Which?", "EU"), "ask.choices: expected a list of options, got one string"),
        (lambda: da.spawn("a", "verify", ""), "spawn.goal: must not be empty"),
        (lambda: da.spawn("a", "verify", "g", budget={"tokens": 1}), "spawn.budget: expected a docket_agent.Budget"),  # type: ignore[arg-type]
        (lambda: da.write_domain("", 1), "write_domain.domain: must not be empty"),
        (lambda: da.finish_episode("done"), "finish_episode.result.status: expected one of ok, needs_review, failed"),  # type: ignore[arg-type]
        (lambda: da.request_effect("publish", "api", idempotency_key=""), "request_effect.idempotency_key: must not be empty"),
        (lambda: da.call_tool(""), "call_tool.name: must not be empty"),
    ],
)
def test_bad_arguments_name_the_function_and_the_argument(build: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        build()  # type: ignore[operator]
    assert str(caught.value).startswith(message)


def test_an_agent_error_needs_a_category_specific_code() -> None:
    with pytest.raises(ValueError, match="'oops' is not of the form CATEGORY_SPECIFIC_ERROR"):
        da.AgentError("oops", "x")
    assert da.InputError("no brands").code == "INPUT_VALIDATION_FAILED"


# -- responses --------------------------------------------------------------------------


REQUEST = da.Request.from_json(request_doc())


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        (da.Response("run-1/call-1", "SUCCESS", actions=(da.finish(),)), "confidence_level: required when status is SUCCESS"),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH"), "actions: required when status is SUCCESS"),
        (da.Response("run-1/call-1", "ERROR"), "error_message: required when status is ERROR"),
        (da.Response("run-1/call-1", "ERROR", error_message="x", actions=(da.finish(),)), "actions: not allowed when status is ERROR"),
        (da.Response("run-1/call-1", "PARTIAL", confidence_level="LOW", error_message="x"), "error_message: not allowed when status is PARTIAL"),
        (da.Response("run-1/call-1", "ERROR", error_code="BAD", error_message="x"),
         "error_code: 'BAD' is not of the form CATEGORY_SPECIFIC_ERROR (upper-case words joined by `_`)"),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH", actions=(da.finish(), da.escalate("why?"))),
         "actions[0]: finish must be the last action, but 1 action(s) follow it"),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH", actions=(da.call_tool("t"), da.finish())),
         "actions[0]: call_tool `t` must be the last action (its result comes back in a new request), but 1 action(s) follow it"),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH", actions=(da.finish(),), tool_calls=(da.ToolCall("Bash"),)),
         "usage.tool_calls: 0 is less than the 1 entries in tool_calls"),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH", actions=(da.Handoff("", "t", {}),)),
         "actions[0].to: must not be empty"),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH", actions=(da.escalate("q"),) * 1000 + (da.finish(),)),
         "actions: lists 1001 entries, more than the limit of 1000"),
    ],
)
def test_response_rules_are_dockets_in_its_words(response: da.Response, problem: str) -> None:
    assert response.problems()[0] == problem
    with pytest.raises(da.ResponseError) as caught:
        response.check()
    assert str(caught.value) == problem


def test_builders_fill_in_the_request_id_and_refuse_what_docket_would() -> None:
    assert da.success(REQUEST, da.finish(), confidence="LOW").request_id == "run-1/call-1"
    with pytest.raises(da.ResponseError, match="actions: required when status is SUCCESS"):
        da.success(REQUEST, confidence="HIGH")
    with pytest.raises(ValueError, match="partial: warnings must say what was limited"):
        da.partial(REQUEST, da.finish(), confidence="LOW", warnings=[])
    with pytest.raises(da.ResponseError, match="error_code: 'nope'"):
        da.error(REQUEST, "nope", "x")
    line = da.error(REQUEST, "DATA_NO_ANSWERS", "none had text").to_line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"request_id": "run-1/call-1", "status": "ERROR",
                                "error_code": "DATA_NO_ANSWERS", "error_message": "none had text"}
