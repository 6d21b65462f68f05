"""The stdio runner, run as docket runs it: a child process fed request lines. Whatever
the handler does, stdout carries exactly one JSON response per request and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import REPO, doc_example, request_doc, response_lines, run_agent

FAILING_AGENT = '''
import math, sys
import docket_agent as da

def handle(request):
    code = request.capability_code
    if code == "BUG":
        return {}["x"]
    if code == "BAD_INPUT":
        raise da.InputError("brands must name a competitor")
    if code == "OWN":
        raise da.AgentError("GEO_SNAPSHOT_STALE", "snapshots are a month old")
    if code == "MISSING":
        request.require_decision_input("ai_answer_snapshots")
    if code == "SLOW":
        raise TimeoutError("the model did not answer in time")
    if code == "DICT":
        return {"request_id": request.request_id, "status": "SUCCESS"}
    if code == "RULE":
        return da.Response(request.request_id, "SUCCESS", actions=(da.finish(),))
    if code == "OTHER_ID":
        return da.Response("someone-else", "SUCCESS", confidence_level="HIGH", actions=(da.finish(),))
    if code == "NAN":
        return da.success(request, da.finish(math.nan), confidence="HIGH")
    return da.success(request, da.finish({"from": [i.source_agent for i in request.decision_inputs]}),
                      confidence="HIGH")

async def handle_async(request):
    return handle(request)

da.run_stdio(handle_async if sys.argv[1:] == ["async"] else handle)
'''

EXPECTED = [
    ("BUG", "ERROR", "AGENT_INTERNAL_ERROR", "KeyError: 'x'"),
    ("BAD_INPUT", "ERROR", "INPUT_VALIDATION_FAILED", "brands must name a competitor"),
    ("OWN", "ERROR", "GEO_SNAPSHOT_STALE", "snapshots are a month old"),
    ("MISSING", "ERROR", "INPUT_MISSING", "expected a decision input of type 'ai_answer_snapshots'"),
    ("SLOW", "TIMEOUT", "AGENT_TIMEOUT", "TimeoutError: the model did not answer in time"),
    ("DICT", "ERROR", "AGENT_INVALID_RESPONSE", "the handler returned dict, not a docket_agent.Response"),
    ("RULE", "ERROR", "AGENT_INVALID_RESPONSE", "confidence_level: required when status is SUCCESS"),
    ("OTHER_ID", "ERROR", "AGENT_INVALID_RESPONSE", "request_id: expected 'call-OTHER_ID'"),
    ("NAN", "ERROR", "AGENT_INVALID_RESPONSE", "the response is not JSON"),
    ("FINE", "SUCCESS", None, None),
]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_every_failure_is_an_answer_with_its_code(tmp_path: Path, kind: str, schema: dict[str, Any]) -> None:
    lines = [json.dumps(request_doc(request_id=f"call-{code}", capability_code=code,
                                    decision_inputs=[{"source_agent": "a", "output_type": "t", "payload": 1}]))
             for code, *_ in EXPECTED]
    lines.insert(3, json.dumps(request_doc(request_id="call-malformed", attempt="one")))
    lines.insert(5, "this is not a request")
    lines.insert(6, '{"no": "request_id"}')
    done = run_agent(FAILING_AGENT, lines, tmp_path, *([kind] if kind == "async" else []))
    assert done.returncode == 0, done.stderr
    answers = response_lines(done.stdout)
    validate = jsonschema.Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": "#/$defs/AgentResponse"}).validate
    for answer in answers:
        validate(answer)
    by_id = {a["request_id"]: a for a in answers}
    # One answer per request with an id, none for the two lines without one.
    assert len(answers) == len(EXPECTED) + 1
    malformed = by_id["call-malformed"]
    assert (malformed["status"], malformed["error_code"]) == ("ERROR", "AGENT_MALFORMED_REQUEST")
    assert "attempt: expected an integer, got str" in malformed["error_message"]
    for code, status, error_code, message in EXPECTED:
        answer = by_id[f"call-{code}"]
        assert answer["status"] == status, (code, answer)
        assert answer.get("error_code") == error_code, (code, answer)
        if message is not None:
            assert message in answer["error_message"], (code, answer)
    assert by_id["call-FINE"]["actions"] == [{"type": "finish", "output": {"from": ["a"]}}]
    assert "Traceback" in done.stderr and "KeyError" in done.stderr
    assert "ignored a line that is not a request" in done.stderr


NOISY_AGENT = '''
import os, subprocess, sys
import docket_agent as da

def handle(request):
    print("a stray print")
    sys.stdout.write("a stray write\\n")
    os.write(1, b"a write to file descriptor 1\\n")
    subprocess.run(["echo", "a child process"], check=True)
    return da.success(request, da.finish("done"), confidence="HIGH")

da.run_stdio(handle)
'''


def test_nothing_but_answers_reaches_stdout(tmp_path: Path) -> None:
    lines = [json.dumps(request_doc(request_id=f"call-{i}")) for i in range(2)]
    done = run_agent(NOISY_AGENT, lines, tmp_path)
    assert done.returncode == 0, done.stderr
    assert [a["request_id"] for a in response_lines(done.stdout)] == ["call-0", "call-1"]
    for noise in ("a stray print", "a stray write", "a write to file descriptor 1", "a child process"):
        assert done.stderr.count(noise) == 2, noise


AT_ONCE_AGENT = '''
import asyncio, sys, threading
import docket_agent as da

N = int(sys.argv[2])
# Every request waits for the others: answered only if all N are under way at once.
barrier = threading.Barrier(N, timeout=10)
arrived = 0
everyone = None

def handle(request):
    barrier.wait()
    return da.success(request, da.finish(request.request_id), confidence="HIGH")

async def handle_async(request):
    global arrived, everyone
    if everyone is None:
        everyone = asyncio.Event()
    arrived += 1
    if arrived == N:
        everyone.set()
    await asyncio.wait_for(everyone.wait(), 10)
    return da.success(request, da.finish(request.request_id), confidence="HIGH")

da.run_stdio(handle_async if sys.argv[1] == "async" else handle, at_once=N)
'''


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_several_requests_at_once_are_served_side_by_side(tmp_path: Path, kind: str) -> None:
    lines = [json.dumps(request_doc(request_id=f"call-{i}")) for i in range(4)]
    done = run_agent(AT_ONCE_AGENT, lines, tmp_path, kind, "4")
    assert done.returncode == 0, done.stderr
    answers = response_lines(done.stdout)
    assert sorted(a["request_id"] for a in answers) == [f"call-{i}" for i in range(4)]
    assert all(a["status"] == "SUCCESS" for a in answers), answers  # a barrier timeout would be an ERROR
    assert all(a["actions"][0]["output"] == a["request_id"] for a in answers)


def test_at_once_must_be_a_whole_number(tmp_path: Path) -> None:
    done = run_agent("import docket_agent as da\nda.run_stdio(print, at_once=0)\n", [], tmp_path)
    assert done.returncode != 0
    assert "run_stdio: at_once must be a whole number of at least 1, got 0" in done.stderr


def test_the_example_agent_answers_the_documented_request_from_a_checkout() -> None:
    """examples/python-agent/agent.py, run with `-S` (no site-packages: the package is not
    installed), as docket's own test runs it with a bare python3."""
    request = json.loads(doc_example("request"))
    unknown = dict(request, request_id="req-7f3b", capability_code="TRANSLATE")
    partial = json.loads(json.dumps(request))
    partial["request_id"] = "req-7f3c"
    partial["decision_inputs"][0]["payload"]["snapshots"][1]["answer"] = ""
    done = subprocess.run(
        [sys.executable, "-S", str(REPO / "examples" / "python-agent" / "agent.py"), "--at-once", "2"],
        input="".join(json.dumps(r) + "\n" for r in (request, unknown, partial)),
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    by_id = {a["request_id"]: a for a in response_lines(done.stdout)}
    documented = json.loads(doc_example("response"))
    documented.pop("usage")
    assert by_id["req-7f3a"] == documented
    assert by_id["req-7f3b"]["error_code"] == "INPUT_UNKNOWN_CAPABILITY"
    assert (by_id["req-7f3c"]["status"], by_id["req-7f3c"]["warnings"]) == (
        "PARTIAL", ["1 snapshot(s) had no answer text"])
