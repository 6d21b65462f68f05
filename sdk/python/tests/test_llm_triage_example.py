"""The llm-triage example (examples/llm-triage): agents on docket-agent that ask a chat
model what to do, under a bundle that decides their handoffs and tools.

End to end under DOCKET_BIN on the recorded model answers (no network, no key): the
handoffs, the allowed tool calls, the denied one with its rule (it never reached the
executor), the resolution, the replay and the README's what-if. Then the agents on their
own: without an endpoint the answer says what to set; a model answer that is not one the
agent may give is an ERROR naming what was wrong; a real endpoint is called as an
OpenAI-compatible Chat Completions API (a local stand-in)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import REPO, events, request_doc, response_lines

EXAMPLE = REPO / "examples" / "llm-triage"
TICKET = {"id": "T-1", "customer": "C-311", "order": "A-1001", "message": "My kettle arrived broken."}
TRIAGE = {"ticket_id": "T-1", "customer": "C-311", "order": "A-1001", "message": "My kettle arrived broken.",
          "category": "refund", "priority": "high", "summary": "Broken kettle, wants a refund."}


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any model setting (a developer's own key must not make the
    tests call a model), no bytecode written into the repository, and `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OPENAI_") and not k.startswith("LLM_TRIAGE_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def run_example(docket: str, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([docket, *args, "--data", str(tmp_path / "data")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False, env=clean_env(**env))


def test_a_run_on_recorded_answers_hands_off_calls_tools_and_is_refused_one(docket: str, tmp_path: Path) -> None:
    tool_log = tmp_path / "tools.log"
    run = run_example(docket, tmp_path, "run", str(EXAMPLE / "workflow.toml"), "--run-id", "triage-1",
                      LLM_TRIAGE_TOOL_LOG=str(tool_log))
    assert run.returncode == 0, run.stdout + run.stderr
    log = events(docket, tmp_path / "data", "triage-1")
    kinds = [e["kind"] for e in log]
    assert kinds[-1] == "run.completed"
    assert "agent.failed" not in kinds

    handoffs = [(e["payload"]["from"], e["payload"]["to"], e["payload"]["output_type"],
                 e["payload"]["decision"]["rule_id"])
                for e in log if e["kind"] == "handoff.allowed" and e["payload"]["input"] == "decision"
                and e["payload"]["from"] != "tools"]
    assert handoffs == [
        ("external", "intake", "ticket", "allow:external->intake"),
        ("intake", "resolver", "triage", "allow:intake->resolver"),
        ("resolver", "external", "resolution", "allow:resolver->external"),
    ]
    triage = next(e["payload"]["delivered"] for e in log
                  if e["kind"] == "handoff.allowed" and e["payload"]["to"] == "resolver"
                  and e["payload"]["output_type"] == "triage")
    assert (triage["category"], triage["priority"]) == ("refund", "high")

    # Every tool call decided before it ran; the refused one never reached the executor.
    decisions = [(e["payload"]["decision"]["verdict"], e["payload"]["decision"]["rule_id"])
                 for e in log if e["kind"] == "policy.decided"
                 and e["payload"]["decision"]["kind"] == "tool_call"]
    assert decisions == [("allow", "agents.resolver.allowed_tools"), ("allow", "agents.resolver.allowed_tools"),
                         ("deny", "no-account-deletion")]
    assert [e["payload"]["name"] for e in log if e["kind"] == "tool.call_scheduled"] == \
        ["lookup_order", "issue_refund"]
    denied = [e["payload"] for e in log if e["kind"] == "tool.denied"]
    assert [(d["name"], d["rule_id"]) for d in denied] == [("delete_account", "no-account-deletion")]
    assert "done by a person" in denied[0]["reason"]
    ran = [json.loads(line)["tool"] for line in tool_log.read_text().splitlines()]
    assert ran == ["lookup_order", "issue_refund"]

    # Every answer says which model gave it: the recorded answers.
    answers = [e["payload"]["response"] for e in log if e["kind"] == "agent.responded"]
    assert [a["status"] for a in answers] == ["SUCCESS"] * 5
    assert {a["metadata"]["model"] for a in answers} == {"scripted"}

    output = next(e["payload"]["delivered"] for e in log
                  if e["kind"] == "handoff.allowed" and e["payload"]["to"] == "external")
    assert output["outcome"] == "partly_resolved"
    assert output["tools"] == [
        {"tool": "lookup_order", "status": "returned"},
        {"tool": "issue_refund", "status": "returned"},
        {"tool": "delete_account", "status": "denied", "rule": "no-account-deletion"},
    ]

    # The README's replay and what-if.
    replay = run_example(docket, tmp_path, "replay", "triage-1")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "every decision reproduced" in replay.stdout
    what_if = run_example(docket, tmp_path, "replay", "triage-1", "--policies",
                          str(EXAMPLE / "what-if" / "refunds-reviewed.toml"))
    assert what_if.returncode == 0, what_if.stdout + what_if.stderr
    assert "tool call triage-1/tool-2: allowed → needs approval  [agents.resolver.allowed_tools -> refunds-reviewed]" \
        in what_if.stdout


def agent(name: str, request: dict[str, Any], *args: str, **env: str) -> dict[str, Any]:
    """Runs one of the example's agents on one request; its only stdout line, parsed."""
    proc = subprocess.run([sys.executable, str(EXAMPLE / "agents" / f"{name}.py"), *args],
                          input=json.dumps(request) + "\n", capture_output=True, text=True, timeout=60,
                          check=False, env=clean_env(**env))
    assert proc.returncode == 0, proc.stderr
    lines = response_lines(proc.stdout)
    assert len(lines) == 1, proc.stdout
    return lines[0]


def intake_request() -> dict[str, Any]:
    return request_doc(target_agent="intake", capability_code="ticket", decision_inputs=[
        {"source_agent": "external", "output_type": "ticket", "payload": TICKET}])


def resolver_request(*tool_results: dict[str, Any]) -> dict[str, Any]:
    return request_doc(target_agent="resolver", capability_code="triage", decision_inputs=[
        {"source_agent": "intake", "output_type": "triage", "payload": TRIAGE},
        *({"source_agent": "tools", "output_type": "tool_result", "payload": r} for r in tool_results)])


@pytest.mark.parametrize("name", ["intake", "resolver"])
def test_without_an_endpoint_the_answer_says_what_to_set(name: str) -> None:
    request = intake_request() if name == "intake" else resolver_request()
    answer = agent(name, request, "--model", "gpt-4o-mini")
    assert answer["status"] == "ERROR"
    assert answer["error_code"] == "MODEL_NOT_CONFIGURED"
    message = answer["error_message"]
    assert message.startswith("the model 'gpt-4o-mini' has no endpoint: set OPENAI_API_KEY")
    for variable in ("OPENAI_BASE_URL", "LLM_TRIAGE_MODEL=scripted"):
        assert variable in message
    # The same through the environment variable the workflow reads.
    assert agent(name, request, LLM_TRIAGE_MODEL="gpt-4o-mini")["error_code"] == "MODEL_NOT_CONFIGURED"


DENIED = {"tool_call_id": "run-1/tool-1", "name": "delete_account", "status": "denied",
          "arguments": {"customer": "C-311", "reason": "asked"}, "rule_id": "no-account-deletion",
          "reason": "closing a customer's account is done by a person"}


@pytest.mark.parametrize("name, answers, problem", [
    ("intake", ["Sure! This ticket is about a refund."], "not one JSON object"),
    ("intake", ["[1, 2]"], "a JSON list, not an object"),
    ("intake", [{"category": "refund", "priority": "urgent", "summary": "x"}],
     'answer.priority: "urgent" is not one of low, normal, high'),
    ("intake", [{"category": "refund", "priority": "high", "summary": "x", "route": "billing"}],
     "answer: unknown field(s) route"),
    ("intake", ['{"category": "refund", "priority": "high", "summary": NaN}'], "NaN is not JSON"),
    ("resolver", [{"action": "run_shell", "command": "rm -rf /"}],
     'answer.action: "run_shell" is not one of call_tool, resolve'),
    ("resolver", [{"action": "call_tool", "tool": "drop_database", "arguments": {}}],
     'answer.tool: "drop_database" is not one of lookup_order, issue_refund, delete_account'),
    ("resolver", [{"action": "call_tool", "tool": "issue_refund", "arguments": {"order": "A-1001"}}],
     "answer.arguments: missing amount, reason"),
    ("resolver", [{"action": "call_tool", "tool": "issue_refund",
                   "arguments": {"order": "A-1001", "amount": -5, "reason": "x"}}],
     "answer.arguments.amount: -5 is not an amount"),
    ("resolver", [{"action": "call_tool", "tool": "issue_refund",
                   "arguments": {"order": "A-1001", "amount": "49.90", "reason": "x"}}],
     'answer.arguments.amount: expected a number, got "49.90"'),
    ("resolver", [{}, {"action": "resolve", "outcome": "done", "reply": "ok"}],
     'answer.outcome: "done" is not one of resolved, partly_resolved, needs_person'),
])
def test_a_malformed_model_answer_is_an_error_naming_what_was_wrong(
        name: str, answers: list[Any], problem: str, tmp_path: Path) -> None:
    script = tmp_path / "answers.json"
    script.write_text(json.dumps({"T-1": {name: answers}}), encoding="utf-8")
    request = intake_request() if name == "intake" else resolver_request(*[DENIED] * (len(answers) - 1))
    answer = agent(name, request, "--model", "scripted", "--script", str(script))
    assert answer["status"] == "ERROR", answer
    assert answer["error_code"] == "MODEL_ANSWER_MALFORMED"
    assert answer["error_message"].startswith("the model's answer: ")
    assert problem in answer["error_message"]


def test_a_step_the_recording_lacks_is_named(tmp_path: Path) -> None:
    script = tmp_path / "answers.json"
    script.write_text(json.dumps({"T-1": {"resolver": []}}), encoding="utf-8")
    answer = agent("resolver", resolver_request(), "--script", str(script))
    assert answer["error_code"] == "MODEL_SCRIPT_MISSING"
    assert "no recorded answer for ticket 'T-1', agent 'resolver', step 0" in answer["error_message"]


class Endpoint(BaseHTTPRequestHandler):
    """A stand-in for an OpenAI-compatible endpoint: records each request and answers with
    the next content of `answers`."""

    seen: list[tuple[str, dict[str, str], dict[str, Any]]] = []
    answers: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (the handler's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Endpoint.seen.append((self.path, dict(self.headers), body))
        reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": Endpoint.answers.pop(0)}}],
                            "usage": {"prompt_tokens": 321, "completion_tokens": 45}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Endpoint.seen.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_compatible_endpoint_is_asked_for_a_json_object(endpoint: str) -> None:
    Endpoint.answers = [json.dumps({"action": "resolve", "outcome": "needs_person", "reply": "A colleague will call.",
                                    "for_a_person": "Close account C-311."})]
    answer = agent("resolver", resolver_request(DENIED), "--model", "local-model",
                   OPENAI_BASE_URL=endpoint, OPENAI_API_KEY="test-key-123")
    assert answer["status"] == "SUCCESS", answer
    assert answer["usage"] == {"input_tokens": 321, "output_tokens": 45, "tool_calls": 0}
    assert answer["metadata"] == {"model": "local-model", "endpoint": endpoint}
    assert "test-key-123" not in json.dumps(answer)
    assert answer["actions"][0]["payload"]["tools"] == [
        {"tool": "delete_account", "status": "denied", "rule": "no-account-deletion"}]

    [(path, headers, body)] = Endpoint.seen
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer test-key-123"
    assert body["model"] == "local-model"
    assert body["response_format"] == {"type": "json_object"}
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert json.loads(body["messages"][2]["content"])["tool"] == "delete_account"
    assert '"rule": "no-account-deletion"' in body["messages"][3]["content"]


def test_a_local_endpoint_needs_no_key(endpoint: str) -> None:
    Endpoint.answers = [json.dumps({"category": "refund", "priority": "normal", "summary": "Broken kettle."})]
    answer = agent("intake", intake_request(), LLM_TRIAGE_MODEL="llama3", OPENAI_BASE_URL=endpoint)
    assert answer["status"] == "SUCCESS", answer
    assert answer["actions"][0]["payload"]["priority"] == "normal"
    [(_, headers, _)] = Endpoint.seen
    assert "Authorization" not in headers
