"""Agents written on docket-agent under `docket run`: a stdio agent (triage) that calls a
governed tool, is refused another before it runs, and hands off; an HTTP agent with an
async handler (resolver) that finishes. The run's log must show the handoffs, the tool
decisions and the handler's exception recorded as an ERROR answer with its code. And a
stdio agent (waiter) whose long wait is refused and whose short one fires: it must be
called again with the timer as docket recorded it.

Needs the docket binary: DOCKET_BIN (set by .ci/run). Skipped without it, except under
CI, where its absence fails the test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import docket_agent as da

from conftest import events

E2E = Path(__file__).resolve().parent / "e2e"
sys.path.insert(0, str(E2E))
import resolver  # noqa: E402


def test_a_run_of_sdk_agents_records_handoffs_and_tool_decisions(docket: str, tmp_path: Path) -> None:
    tool_log = tmp_path / "tools.log"
    data = tmp_path / "data"
    with da.HttpAgent(resolver.handle).start() as served:
        workflow = tmp_path / "workflow.toml"
        python = json.dumps(sys.executable)
        tool = f'command = {python}\nargs = [{json.dumps(str(E2E / "tools.py"))}]\n' \
               f'env = {{ TOOL_LOG = {json.dumps(str(tool_log))} }}\n'
        workflow.write_text(
            f'name = "sdk-support"\n'
            f'policy = {json.dumps(str(E2E / "policy.toml"))}\n'
            f'entry = "triage"\ninput_type = "support_request"\n'
            f'input = {json.dumps(str(E2E / "input.json"))}\n\n'
            f'[agents.triage]\ncommand = {python}\nargs = [{json.dumps(str(E2E / "triage.py"))}]\n\n'
            f'[agents.resolver]\nhttp = {json.dumps(served.url)}\ntimeout_ms = 20000\n\n'
            f'[tools.lookup]\n{tool}\n[tools.refund]\n{tool}',
            encoding="utf-8",
        )
        run = subprocess.run([docket, "run", str(workflow), "--data", str(data), "--run-id", "support-1"],
                             capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    log = events(docket, data, "support-1")
    kinds = [e["kind"] for e in log]
    assert kinds[-1] == "run.completed"
    assert "agent.failed" not in kinds  # no protocol failure: every line on stdout was an answer

    # The handler's exception on its first attempt: an ERROR answer with the package's
    # code, retried by the bundle's ladder.
    answers = [e["payload"]["response"] for e in log if e["kind"] == "agent.responded"]
    assert answers[0]["status"] == "ERROR"
    assert answers[0]["error_code"] == "AGENT_INTERNAL_ERROR"
    assert answers[0]["error_message"] == "RuntimeError: the order system was not ready"
    assert [a["status"] for a in answers[1:]] == ["SUCCESS"] * 4
    retry = next(e["payload"]["decision"] for e in log
                 if e["kind"] == "policy.decided" and e["payload"]["decision"]["kind"] == "escalation")
    assert retry["rule_id"] == "retry"

    # Tools: decided before they run; the refused one never reached its executor.
    tool_decisions = [(e["payload"]["decision"]["verdict"], e["payload"]["decision"]["rule_id"])
                      for e in log if e["kind"] == "policy.decided"
                      and e["payload"]["decision"]["kind"] == "tool_call"]
    assert tool_decisions == [("allow", "agents.triage.allowed_tools"), ("deny", "no-agent-refunds")]
    assert [e["payload"]["name"] for e in log if e["kind"] == "tool.call_scheduled"] == ["lookup"]
    assert [e["payload"]["name"] for e in log if e["kind"] == "tool.denied"] == ["refund"]
    ran = [json.loads(line)["tool"] for line in tool_log.read_text().splitlines()]
    assert ran == ["lookup"]

    # Handoffs, as the bundle allowed them, with what crossed.
    handoffs = [(e["payload"]["from"], e["payload"]["to"], e["payload"]["output_type"], e["payload"]["input"])
                for e in log if e["kind"] == "handoff.allowed"]
    assert handoffs == [
        ("external", "triage", "support_request", "decision"),
        ("tools", "triage", "tool_result", "decision"),
        ("tools", "triage", "tool_result", "decision"),
        ("triage", "resolver", "triage_report", "decision"),
        ("external", "resolver", "original_request", "context"),
        ("resolver", "external", "output", "decision"),
    ]
    report = next(e["payload"]["delivered"] for e in log
                  if e["kind"] == "handoff.allowed" and e["payload"]["to"] == "resolver"
                  and e["payload"]["output_type"] == "triage_report")
    assert report == {"order": "A-7", "shipping": "delayed at the depot", "refund": "denied",
                      "refund_rule": "no-agent-refunds"}

    # The resolver decided from the triage report only; the run's request reached it as
    # handoff context, not as an input to decide from.
    output = log[-1]["payload"]["output"]
    assert output == {"resolution": "a person issues the refund", "shipping": "delayed at the depot",
                      "decided_from": ["triage:triage_report"], "consulted": [], "told_the_request": True}


def test_an_sdk_agent_waits_is_refused_a_long_wait_and_is_called_again_when_its_timer_fires(
    docket: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    bundle = tmp_path / "policy.toml"
    bundle.write_text(
        'bundle = { id = "sdk-wait" }\n'
        'agents = [{ id = "external" }, { id = "waiter" }]\n'
        "[interactions]\n"
        'allowed = [{ from = "external", to = "waiter" }, { from = "waiter", to = "external" }]\n'
        "[multi_agent_handoffs]\n"
        'default_handoff_mode = "full"\n',
        encoding="utf-8",
    )
    (tmp_path / "input.json").write_text('{"post": "launch"}', encoding="utf-8")
    workflow = tmp_path / "wait.workflow.toml"
    workflow.write_text(
        f'name = "sdk-wait"\npolicy = {json.dumps(str(bundle))}\nentry = "waiter"\n'
        f'input = {json.dumps(str(tmp_path / "input.json"))}\n\n'
        f'[agents.waiter]\ncommand = {json.dumps(sys.executable)}\n'
        f'args = [{json.dumps(str(E2E / "waiter.py"))}]\n',
        encoding="utf-8",
    )
    run = subprocess.run([docket, "run", str(workflow), "--data", str(data), "--run-id", "wait-1"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    log = events(docket, data, "wait-1")
    kinds = [e["kind"] for e in log]
    assert kinds[-1] == "run.completed"
    assert "agent.failed" not in kinds  # every wait the package wrote was well formed

    sent = [a for e in log if e["kind"] == "agent.responded" for a in e["payload"]["response"].get("actions", [])]
    assert sent[:2] == [{"type": "wait", "for": "31d", "reason": "the next month's slot"},
                        {"type": "wait", "for": "1s", "reason": "the slot opens in a second"}]
    denied = [e["payload"] for e in log if e["kind"] == "episode.action_denied"]
    assert [(d["action"], d["decision"]["rule_id"]) for d in denied] == [("wait", "waiting.max_wait_ms")]
    (timer_set,) = [e["payload"] for e in log if e["kind"] == "timer.set"]
    (timer_fired,) = [e["payload"] for e in log if e["kind"] == "timer.fired"]

    output = log[-1]["payload"]["output"]
    assert output["refused_by"] == ["waiting.max_wait_ms"]
    fired = output["fired"]
    assert fired["timer_id"] == "wait-1/timer-1"
    assert fired["reason"] == "the slot opens in a second"
    assert fired["due_at_ms"] == timer_set["due_at_ms"]
    assert fired["fired_at_ms"] == timer_fired["at_ms"] >= fired["due_at_ms"]
    assert fired["late_ms"] == fired["fired_at_ms"] - fired["due_at_ms"]
