"""Shared fixtures: the repository's schema and documented examples, and a request
builder. Agents under test run as real processes (stdio) or servers (HTTP)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
SCHEMA_PATH = REPO / "docs" / "agent-protocol.schema.json"
PROTOCOL_DOC = REPO / "docs" / "agent-protocol.md"


def doc_example(name: str, doc: Path = PROTOCOL_DOC) -> str:
    """The code block after `<!-- example: NAME -->` in a doc page."""
    text = doc.read_text(encoding="utf-8")
    found = re.search(r"<!-- example: " + re.escape(name) + r" -->\s*```\w*\n(.*?)```", text, re.S)
    assert found, f"{doc.name} has no example {name!r}"
    return found.group(1)


@pytest.fixture(scope="session")
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


def request_doc(**fields: Any) -> dict[str, Any]:
    """A request document as docket sends it, with `fields` replacing the defaults."""
    doc: dict[str, Any] = {
        "request_id": "run-1/call-1",
        "correlation_id": "run-1",
        "run_id": "run-1",
        "episode_id": "ep-1",
        "attempt": 1,
        "source_agent": "external",
        "target_agent": "worker",
        "capability_code": "WORK",
        "timeout_ms": 5000,
        "priority": "NORMAL",
        "context": {},
        "decision_inputs": [],
        "context_inputs": [],
    }
    doc.update(fields)
    return doc


def run_agent(source: str, lines: list[str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs an agent script (its source given) on the request lines; returns the process
    with stdout and stderr captured. A bounded timeout turns a hang into a failure."""
    script = tmp_path / "agent.py"
    script.write_text(source, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script), *args],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def response_lines(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line parsed as JSON: a line that is not JSON fails the test."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def docket() -> str:
    """The docket binary from DOCKET_BIN (set by .ci/run): skipped without it, except under
    CI, where its absence fails the test."""
    path = os.environ.get("DOCKET_BIN", "")
    if not path or not os.access(path, os.X_OK):
        why = (f"DOCKET_BIN={path!r} is not an executable docket; build it (cargo build -p docket-cli "
               "--bin docket) and set DOCKET_BIN=target/debug/docket")
        if os.environ.get("CI"):
            pytest.fail("CI must run the end-to-end tests: " + why)
        pytest.skip(why)
    return path


def events(docket: str, data: Path, run: str) -> list[dict[str, Any]]:
    """`docket events RUN --json`, parsed."""
    out = subprocess.run([docket, "events", run, "--json", "--data", str(data)],
                         capture_output=True, text=True, timeout=60, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
