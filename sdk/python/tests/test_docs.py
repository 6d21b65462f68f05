"""Every example of docs/python.md runs and answers what the page says it does."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import jsonschema
import pytest

import docket_agent as da

from conftest import REPO, doc_example, request_doc

PAGE = REPO / "docs" / "python.md"
ACTIONS = ["handoff", "request_capability", "call_tool", "request_effect", "spawn", "write_domain",
           "escalate", "wait", "finish", "finish_episode"]


def test_the_page_has_an_example_per_action_of_the_schema(schema: dict[str, Any]) -> None:
    in_schema = {v["properties"]["type"]["const"] for v in schema["$defs"]["Action"]["oneOf"]}
    on_page = set(re.findall(r"<!-- example: action-(\w+) -->", PAGE.read_text(encoding="utf-8")))
    assert on_page == in_schema == set(ACTIONS)


@pytest.mark.parametrize("action", ACTIONS)
def test_each_action_example_answers_with_its_action(action: str, schema: dict[str, Any]) -> None:
    scope: dict[str, Any] = {"request": da.Request.from_json(request_doc())}
    exec(compile(doc_example(f"action-{action}", PAGE), f"docs/python.md:action-{action}", "exec"), scope)
    response: da.Response = scope["response"]
    document = response.to_json()
    jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/AgentResponse"}).validate(document)
    assert action in [a["type"] for a in document["actions"]]


def test_the_first_agent_and_the_http_agent_answer() -> None:
    first: dict[str, Any] = {"__name__": "first_agent"}
    exec(doc_example("first-agent", PAGE), first)
    request = da.Request.from_json(request_doc(decision_inputs=[
        {"source_agent": "external", "output_type": "support_request",
         "payload": {"order": "A-7", "complaint": "I want a refund"}}]))
    assert first["handle"](request).to_json()["actions"] == [
        {"type": "handoff", "to": "resolver", "output_type": "triage_report",
         "payload": {"order": "A-7", "urgent": True}}]

    served: dict[str, Any] = {"__name__": "http_agent"}
    exec(doc_example("http", PAGE), served)
    request = da.Request.from_json(request_doc(decision_inputs=[
        {"source_agent": "triage", "output_type": "triage_report", "payload": {"order": "A-7"}}]))
    response = asyncio.run(served["handle"](request))
    assert response.to_json()["actions"] == [
        {"type": "finish", "output": {"resolution": "refunded", "order": "A-7"}}]


def test_the_wait_example_finishes_once_its_timer_has_fired() -> None:
    fired = {"source_agent": "timers", "output_type": "timer_fired",
             "payload": {"timer_id": "run-1/timer-1", "reason": "the 09:00 slot", "due_at_ms": 1_796_025_600_000,
                         "fired_at_ms": 1_796_025_600_250, "late_ms": 250}}
    scope: dict[str, Any] = {"request": da.Request.from_json(request_doc(decision_inputs=[fired]))}
    exec(doc_example("action-wait", PAGE), scope)
    assert scope["response"].to_json()["actions"] == [{"type": "finish", "output": {"posted_late_by_ms": 250}}]


def test_the_wait_event_example_waits_then_answers_the_event_or_its_timeout(schema: dict[str, Any]) -> None:
    comment = {"source_agent": "events", "output_type": "event",
               "payload": {"signal_id": "run-1/signal-1", "name": "comment", "by": "ana",
                           "payload": {"text": "Nice post"}}}
    timed_out = {"source_agent": "timers", "output_type": "event_timed_out",
                 "payload": {"event": "comment", "timer_id": "run-1/timer-1", "reason": "answer the first comment",
                             "due_at_ms": 1_796_025_600_000, "fired_at_ms": 1_796_025_600_250, "late_ms": 250}}
    answers = []
    for inputs in ([], [comment], [timed_out]):
        scope: dict[str, Any] = {"request": da.Request.from_json(request_doc(decision_inputs=inputs))}
        exec(doc_example("wait-event", PAGE), scope)
        document = scope["response"].to_json()
        jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/AgentResponse"}).validate(document)
        answers.append(document["actions"])
    assert answers == [
        [{"type": "wait", "for": "6h", "event": "comment", "reason": "answer the first comment"}],
        [{"type": "finish", "output": {"reply_to": {"text": "Nice post"}}}],
        [{"type": "finish", "output": {"reply_to": None}}],
    ]
