"""An OpenAI Agents SDK agent under `docket run` (docket_agent.openai_agents): its function
tools are decided by the bundle before they run, and run by docket's tool executor; its
handoff is a docket handoff. Needs DOCKET_BIN and the openai-agents extra (CI has both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import events

try:
    import agents  # noqa: F401
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip("openai-agents is not installed (pip install './sdk/python[openai-agents]')",
                allow_module_level=True)

RUN = Path(__file__).resolve().parent / "e2e_agents_sdk"


def test_an_agents_sdk_agent_runs_governed_under_docket(docket: str, tmp_path: Path) -> None:
    tool_log = tmp_path / "tools.log"
    python = json.dumps(sys.executable)
    concierge = json.dumps(str(RUN / "concierge.py"))
    tools = f'command = {python}\nargs = [{concierge}, "--tools"]\nenv = {{ TOOL_LOG = {json.dumps(str(tool_log))} }}\n'
    workflow = tmp_path / "workflow.toml"
    workflow.write_text(
        f'name = "agents-sdk"\npolicy = {json.dumps(str(RUN / "policy.toml"))}\nentry = "concierge"\n'
        f'input_type = "support_request"\ninput = {json.dumps(str(RUN / "input.json"))}\n\n'
        f'[agents.concierge]\ncommand = {python}\nargs = [{concierge}]\n'
        f'env = {{ TOOL_LOG = {json.dumps(str(tool_log))} }}\n\n'
        f'[agents.refunds_desk]\ncommand = {python}\nargs = [{json.dumps(str(RUN / "refunds_desk.py"))}]\n\n'
        f'[tools.lookup_order]\n{tools}\n[tools.refund_order]\n{tools}',
        encoding="utf-8",
    )
    data = tmp_path / "data"
    run = subprocess.run([docket, "run", str(workflow), "--data", str(data), "--run-id", "concierge-1"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    log = events(docket, data, "concierge-1")
    assert log[-1]["kind"] == "run.completed"

    decided = [(e["payload"]["decision"]["verdict"], e["payload"]["decision"]["rule_id"])
               for e in log if e["kind"] == "policy.decided" and e["payload"]["decision"]["kind"] == "tool_call"]
    assert decided == [("allow", "agents.concierge.allowed_tools"), ("deny", "no-agent-refunds")]
    ran = [json.loads(line) for line in tool_log.read_text().splitlines()]
    assert ran == [{"tool": "lookup_order", "order": "A-7"}]  # the refused function never ran

    handoffs = [(e["payload"]["from"], e["payload"]["to"], e["payload"]["output_type"])
                for e in log if e["kind"] == "handoff.allowed"]
    assert handoffs == [
        ("external", "concierge", "support_request"),
        ("tools", "concierge", "tool_result"),
        ("tools", "concierge", "tool_result"),
        ("concierge", "refunds_desk", "agent_handoff"),
        ("external", "refunds_desk", "original_request"),  # read-only handoff context
        ("refunds_desk", "external", "output"),
    ]
    # The model's usage is charged to the run, per turn.
    answers = [e["payload"]["response"] for e in log if e["kind"] == "agent.responded"]
    assert [a["usage"]["input_tokens"] for a in answers[:3]] == [120, 120, 120]
    assert log[-1]["payload"]["output"] == {
        "handed_over_by": "concierge", "concierge_said": ["Order A-7 is lost; the refunds desk takes over."]}
