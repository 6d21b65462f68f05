"""Reading requests, building actions and responses: bad input is refused with a message
naming what and where, and a response is checked by docket's own rules, in its words."""

from __future__ import annotations

import json

import pytest

import docket_agent as da
from docket_agent import protocol

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


def test_a_later_turn_carries_its_session_and_a_first_run_none() -> None:
    session = {
        "id": "run-1",
        "turn": 2,
        "told_us": [{"turn": 1, "request": {"q": "Germany?"}}],
        "we_told": [{"turn": 1, "output": {"answer": "yes"}}],
        "decisions": [],
    }
    later = parse(context={"handoff": {"session_id": "run-1", "session": session}})
    assert later.session == session
    assert later.handoff_context["session_id"] == "run-1"
    assert parse(context={"handoff": {"session_id": "run-1"}}).session is None
    assert parse().session is None


def test_an_input_carries_what_its_producer_said_of_it() -> None:
    conflict = {
        "output_type": "verdict", "receiver": "sink", "settled_by": "person",
        "decided_by": "ana", "ticket": "ticket-1",
        "outputs": [
            {"source_agent": "left", "confidence_level": "HIGH", "kept": False, "payload": {"v": "left"}},
            {"source_agent": "right", "confidence_level": "HIGH", "kept": True, "payload": {"v": "right"}},
        ],
    }
    request = parse(decision_inputs=[{
        "source_agent": "right", "output_type": "verdict", "payload": {"v": "right"},
        "confidence_level": "HIGH", "warnings": ["one source only"], "conflict": conflict,
    }])
    assert request.decision_inputs == (
        da.DecisionInput(
            "right", "verdict", {"v": "right"}, "HIGH", ("one source only",),
            da.SettledConflict(
                "verdict", "sink", "person",
                (
                    da.ConflictingOutput("left", False, "HIGH", {"v": "left"}),
                    da.ConflictingOutput("right", True, "HIGH", {"v": "right"}),
                ),
                decided_by="ana", ticket="ticket-1",
            ),
        ),
    )
    bad = {"source_agent": "a", "output_type": "t", "payload": 1, "confidence_level": "SURE"}
    with pytest.raises(da.RequestError, match=r"decision_inputs\[0\]\.confidence_level: expected one of"):
        parse(decision_inputs=[bad])
    bad = {"source_agent": "a", "output_type": "t", "payload": 1, "conflict": {**conflict, "settled_by": "vote"}}
    with pytest.raises(da.RequestError, match=r"decision_inputs\[0\]\.conflict\.settled_by"):
        parse(decision_inputs=[bad])


def test_a_spawn_names_its_trigger_only_when_given_one() -> None:
    named = da.spawn("verifier", "verify", "confirm the DM", trigger="side_effect_attempted").to_json()
    assert named["trigger"] == "side_effect_attempted"
    assert "trigger" not in da.spawn("planner", "plan", "plan it").to_json()


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
        (lambda: da.request_capability("a", "X", priority="URGENT"), "request_capability.priority: expected HIGH, NORMAL or LOW"),
        (lambda: da.escalate(""), "escalate.reason: must not be empty"),
        (lambda: da.ask("Which?", ["EU", " "]), "ask.choices[1]: must not be empty"),
        (lambda: da.ask("Which?", "EU"), "ask.choices: expected a list of options, got one string"),
        (lambda: da.spawn("a", "verify", ""), "spawn.goal: must not be empty"),
        (lambda: da.spawn("a", "verify", "g", budget={"tokens": 1}), "spawn.budget: expected a docket_agent.Budget"),  # type: ignore[arg-type]
        (lambda: da.spawn("a", "verify", "g", trigger=""), "spawn.trigger: expected a non-empty string"),
        (lambda: da.write_domain("", 1), "write_domain.domain: must not be empty"),
        (lambda: da.finish_episode("done"), "finish_episode.result.status: expected one of ok, needs_review, failed"),  # type: ignore[arg-type]
        (lambda: da.request_effect("publish", "api", idempotency_key=""), "request_effect.idempotency_key: must not be empty"),
        (lambda: da.request_effect("publish", "api", not_before="tomorrow 9am"),
         'request_effect.not_before: "tomorrow 9am" is not a time with its offset'),
        (lambda: da.request_effect("publish", "api", not_before="2026-11-30T09:00:00"),
         'request_effect.not_before: "2026-11-30T09:00:00" is not a time with its offset'),
        (lambda: da.request_effect("publish", "api", not_before=1_796_025_600_000),  # type: ignore[arg-type]
         "request_effect.not_before: expected a string, got int"),
        (lambda: da.call_tool(""), "call_tool.name: must not be empty"),
        (lambda: da.wait(for_="2h", reason=" "), "wait.reason: must not be empty"),
        (lambda: da.wait(reason="a slot"),
         "wait.for: a wait needs `until` (a time), `for` (a duration) or `event` (an outside event)"),
        (lambda: da.wait(until="2027-01-15T09:30:00Z", for_="1h", reason="a slot"),
         "wait.until: give `until` or `for`, not both"),
        (lambda: da.wait(for_=7200, reason="a slot"), "wait.for: expected a string, got int"),  # type: ignore[arg-type]
        (lambda: da.wait(event=" ", reason="a reply"),
         "wait.event: name the event waited for (a name the bundle's [[signals]] declares)"),
        (lambda: da.wait(event="", for_="6h", reason="a reply"),
         "wait.event: name the event waited for (a name the bundle's [[signals]] declares)"),
        (lambda: da.wait(event="comment", until="2027-01-15T09:30:00Z", for_="1h", reason="a reply"),
         "wait.until: give `until` or `for`, not both"),
        (lambda: da.wait(event="comment", for_="soon", reason="a reply"), 'wait.for: "soon" is not a duration'),
        (lambda: da.wait(event=7, reason="a reply"), "wait.event: expected a string, got int"),  # type: ignore[arg-type]
        (lambda: da.wait(for_="2h", reason=None), "wait.reason: expected a string, got NoneType"),  # type: ignore[arg-type]
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


@pytest.mark.parametrize(
    ("text", "ms"),
    [("90s", 90_000), ("15m", 900_000), ("2h 30m", 9_000_000), ("2h30m", 9_000_000), ("PT2H", 7_200_000),
     ("1d", 86_400_000), ("P1D", 86_400_000), ("2w", 1_209_600_000), ("0s", 0), ("PT2h30m", 9_000_000),
     ("P1DT12H", 129_600_000), ("10.5 hours", 37_800_000), ("1 day, 02:30:00", 95_400_000),
     ("3 mins 34,123s", 214_123), ("1 week 4 days", 950_400_000), (" 2h ", 7_200_000),
     ("1 hour, 30 minutes", 5_400_000), ("1d, 2h", 93_600_000), ("PT1.5H", 5_400_000), ("p1d", 86_400_000),
     ("PT0.5S", 500), ("1,5h", 5_400_000), ("+5m", 300_000), ("-0s", 0), ("0mo 1d", 86_400_000),
     ("P0M1D", 86_400_000), ("2 hrs", 7_200_000), ("1 \u00b5s", 0)],
)
def test_durations_docket_reads(text: str, ms: int) -> None:
    assert protocol.wait_duration_ms(text) == ms
    assert da.wait(for_=text, reason="r").for_ == text


@pytest.mark.parametrize(
    ("text", "says"),
    [("soon", "is not a duration such as 90s"), ("1 month", "months and years have no fixed length"),
     ("P1M", "months and years have no fixed length"), ("1y", "months and years have no fixed length"),
     ("1M", "is not a duration"), ("", "is not a duration"), ("PT", "at least one unit"),
     ("1.5d", "a fraction of d"), ("2m 3h", "largest to the smallest"), ("1.5h 3m", "a fraction last"),
     ("-5m", "is negative: a wait cannot end before it starts"), ("5m ago", "is negative"),
     ("1000000h", "is longer than 100 years"), ("P36501D", "is longer than 100 years"),
     ("2H", "expected a number and a unit"), ("90 S", "expected a number and a unit"),
     ("1h 1h", "largest to the smallest"), ("1d,2h", "expected a number and a unit"),
     ("P1DT", "at least one unit"), ("P1.5D", "ISO 8601 form"), ("PT1.5H30M", "only the smallest unit")],
)
def test_durations_docket_refuses_name_the_for_field(text: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        da.wait(for_=text, reason="r")
    assert str(caught.value).startswith(f"wait.for: {json.dumps(text)} ")
    assert says in str(caught.value)


def test_times_docket_reads_and_refuses() -> None:
    assert protocol.wait_until_ms("2027-01-15T09:30:00Z") == 1_800_005_400_000
    assert protocol.wait_until_ms("2027-01-15T10:30:00+01:00") == 1_800_005_400_000
    assert protocol.wait_until_ms("2027-01-15T04:30:00.250-05:00") == 1_800_005_400_250
    for text in ["2027-01-15 09:30:00Z", "2027-01-15t09:30:00z", "2027-01-15T09:30Z", "20270115T093000Z",
                 "2027-01-15T10:30:00+01:00[Europe/Paris]", "2027-01-15T10:30:00+0100", "2027-01-15T10:30:00+01",
                 "2027-01-15T09:30:00-00:00", "2027-01-15T09:30:00.000999999Z"]:
        assert protocol.wait_until_ms(text) == 1_800_005_400_000, text
    assert protocol.wait_until_ms("2027-01-15T09Z") == 1_800_003_600_000
    assert protocol.wait_until_ms("2027-01-15T09:29:60Z") == protocol.wait_until_ms("2027-01-15T09:29:59Z")
    assert da.wait(until="2026-11-30T09:00:00+01:00", reason="r").until == "2026-11-30T09:00:00+01:00"
    for text, says in [("2027-01-15T09:30:00", "an offset"), ("tomorrow", "RFC 3339"),
                       ("2027-02-30T09:30:00Z", "day is out of range"),
                       ("2027-01-15T09:30:00+26:00", "beyond 25 hours"),
                       ("1969-12-31T23:59:59Z", "is not a time between 1970 and 2170")]:
        with pytest.raises(ValueError) as caught:
            da.wait(until=text, reason="r")
        assert str(caught.value).startswith(f"wait.until: {json.dumps(text)} is not a time"), text
        assert says in str(caught.value), text


def test_a_wait_goes_through_json_and_back() -> None:
    for action in (da.wait(until="2026-11-30T09:00:00+01:00", reason="the 09:00 slot"),
                   da.wait(for_="2h", reason="after the embargo")):
        document = json.loads(json.dumps(action.to_json()))
        assert da.Wait.from_json(document) == action
    assert da.wait(for_="2h", reason="r").to_json() == {"type": "wait", "for": "2h", "reason": "r"}
    response = da.success(REQUEST, da.wait(for_="2h", reason="r"), confidence="HIGH")
    assert json.loads(response.to_line())["actions"] == [{"type": "wait", "for": "2h", "reason": "r"}]
    for document, message in [
        ({"type": "wait", "for": 2, "reason": "r"}, "wait.for: expected a string, got int"),
        ({"type": "wait", "event": ["comment"], "reason": "r"}, "wait.event: expected a string, got list"),
        ({"type": "wait", "for": "2h"}, "wait.reason: required"),
        ({"type": "wait", "for": "2h", "reason": "r", "at": "9"}, "wait.at: unknown field"),
        ({"type": "finish"}, "wait.type: expected 'wait', got 'finish'"),
    ]:
        with pytest.raises(ValueError) as caught:
            da.Wait.from_json(document)
        assert str(caught.value).startswith(message)


def test_a_wait_for_an_event_needs_no_time_and_takes_one_as_its_timeout() -> None:
    alone = da.wait(event="comment", reason="answer the first comment on the post")
    assert (alone.event, alone.until, alone.for_) == ("comment", None, None)
    assert alone.to_json() == {"type": "wait", "event": "comment", "reason": "answer the first comment on the post"}
    timed = da.wait(event="comment", for_="6h", reason="answer the first comment on the post")
    assert timed.to_json() == {"type": "wait", "for": "6h", "event": "comment",
                               "reason": "answer the first comment on the post"}
    until = da.wait(event="payment", until="2026-11-30T09:00:00+01:00", reason="the invoice is due")
    assert until.to_json()["until"] == "2026-11-30T09:00:00+01:00"
    for action in (alone, timed, until):
        assert da.Wait.from_json(json.loads(json.dumps(action.to_json()))) == action
        response = da.success(REQUEST, action, confidence="HIGH")
        assert response.problems() == []
        assert json.loads(response.to_line())["actions"] == [action.to_json()]
    assert "event" not in da.wait(for_="2h", reason="r").to_json()  # only when given
    blank = da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH", actions=(da.Wait("r", event=" "),))
    assert blank.problems() == [
        "actions[0].event: name the event waited for (a name the bundle's [[signals]] declares)"]


def test_events_received_and_timed_out_are_read_from_their_sources() -> None:
    request = parse(decision_inputs=[
        {"source_agent": "external", "output_type": "ticket", "payload": {}},
        {"source_agent": "events", "output_type": "event",
         "payload": {"signal_id": "run-1/signal-1", "name": "comment", "by": "ana",
                     "payload": {"text": "Nice post"}}},
        {"source_agent": "planner", "output_type": "event", "payload": {"signal_id": "not-an-event"}},
        {"source_agent": "timers", "output_type": "event_timed_out",
         "payload": {"event": "comment", "timer_id": "run-1/timer-1", "reason": "a reply needs a comment",
                     "due_at_ms": 3_610_000, "fired_at_ms": 3_612_000, "late_ms": 2_000}},
        {"source_agent": "events", "output_type": "event_timed_out", "payload": {"event": "not-a-timeout"}},
        {"source_agent": "events", "output_type": "event", "payload": {"signal_id": "run-1/signal-2"}},
    ])
    first, second = request.events_received()
    assert first == da.EventReceived("run-1/signal-1", "comment", "ana", {"text": "Nice post"})
    assert second == da.EventReceived("run-1/signal-2", "", "", None)
    assert request.events_timed_out() == [
        da.EventTimedOut("comment", "run-1/timer-1", "a reply needs a comment", 3_610_000, 3_612_000, 2_000)]
    assert request.timers_fired() == []  # an event's timeout is not a timer of a plain wait
    assert parse().events_received() == [] and parse().events_timed_out() == []


def test_a_scheduled_effect_writes_not_before_after_its_params() -> None:
    effect = da.request_effect("publish", "api", idempotency_key="post-1", params={"text": "We are live."},
                               not_before="2026-11-30T09:00:00+01:00")
    assert effect.not_before == "2026-11-30T09:00:00+01:00"
    assert list(effect.to_json().items()) == [
        ("type", "request_effect"), ("kind", "publish"), ("lane", "api"), ("idempotency_key", "post-1"),
        ("params", {"text": "We are live."}), ("not_before", "2026-11-30T09:00:00+01:00")]
    assert "not_before" not in da.request_effect("publish", "api").to_json()  # only when given
    response = da.success(REQUEST, effect, confidence="HIGH")
    assert response.problems() == []
    assert json.loads(response.to_line())["actions"] == [effect.to_json()]
    # The forms a wait's `until` takes, as docket reads them for both.
    assert da.request_effect("like", "browser", not_before="20261130T080000Z").not_before == "20261130T080000Z"
    both = da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH",
                       actions=(da.RequestEffect(" ", "api", "", not_before="2027-01-15T09:30:00+26:00"),))
    assert [p.split(":")[0] for p in both.problems()] == [
        "actions[0].kind", "actions[0].not_before", "actions[0].idempotency_key"]


def test_timers_fired_are_read_from_the_timers_inputs() -> None:
    request = parse(decision_inputs=[
        {"source_agent": "external", "output_type": "ticket", "payload": {}},
        {"source_agent": "timers", "output_type": "timer_fired",
         "payload": {"timer_id": "run-1/timer-1", "reason": "the 09:00 slot", "due_at_ms": 1_000,
                     "fired_at_ms": 61_000, "late_ms": 60_000}},
        {"source_agent": "planner", "output_type": "timer_fired", "payload": {"timer_id": "not-a-timer"}},
        {"source_agent": "timers", "output_type": "timer_fired", "payload": {"timer_id": "run-1/timer-2"}},
    ])
    first, second = request.timers_fired()
    assert first == da.TimerFired("run-1/timer-1", "the 09:00 slot", 1_000, 61_000, 60_000)
    assert second == da.TimerFired("run-1/timer-2", "", 0, 0, 0)
    assert parse().timers_fired() == []


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
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH",
                     actions=(da.wait(for_="1h", reason="r"), da.finish())),
         "actions[0]: wait must be the last action (the agent is called again once it is due), "
         "but 1 action(s) follow it"),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH", actions=(da.Wait("r", until="tomorrow"),)),
         'actions[0].until: "tomorrow" is not a time with its offset, as RFC 3339 writes it (2026-11-29T10:00:00Z): '
         "expected YYYY-MM-DDTHH:MM:SS and an offset (Z or +01:00)"),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH",
                     actions=(da.RequestEffect("publish", "api", not_before="tomorrow"),)),
         'actions[0].not_before: "tomorrow" is not a time with its offset, as RFC 3339 writes it '
         "(2026-11-29T10:00:00Z): expected YYYY-MM-DDTHH:MM:SS and an offset (Z or +01:00)"),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH",
                     actions=(da.RequestEffect("publish", "api", not_before="1969-12-31T23:59:59Z"),)),
         'actions[0].not_before: "1969-12-31T23:59:59Z" is not a time between 1970 and 2170'),
        (da.Response("run-1/call-1", "SUCCESS", confidence_level="HIGH", actions=(da.Wait(""),)),
         "actions[0].reason: must not be empty"),
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
