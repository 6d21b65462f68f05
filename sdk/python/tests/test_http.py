"""The HTTP runner, served on a loopback port and called as docket calls it: POSTed
requests on kept-alive connections, several at once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import threading
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest

import docket_agent as da

from conftest import request_doc


def post(conn: http.client.HTTPConnection, body: str) -> tuple[int, bytes, http.client.HTTPResponse]:
    conn.request("POST", "/agent", body=body.encode(), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read(), response


def connect(agent: da.HttpAgent) -> http.client.HTTPConnection:
    address = urlsplit(agent.url)
    assert address.hostname is not None and address.port is not None
    return http.client.HTTPConnection(address.hostname, address.port, timeout=30)


def triage(request: da.Request) -> da.Response:
    if request.capability_code == "BUG":
        raise ZeroDivisionError("division by zero")
    if request.capability_code == "ASK":
        return da.success(request, da.ask("Refund the order?", ["yes", "no"]), confidence="MEDIUM")
    return da.success(request, da.handoff("resolver", "triage_report", {"order": "A-7"}), confidence="HIGH")


async def triage_async(request: da.Request) -> da.Response:
    await asyncio.sleep(0)
    return triage(request)


@pytest.fixture(params=["sync", "async"])
def agent(request: pytest.FixtureRequest) -> Iterator[da.HttpAgent]:
    handler = triage if request.param == "sync" else triage_async
    with da.HttpAgent(handler).start() as served:
        yield served


def test_requests_on_one_kept_alive_connection_are_answered(agent: da.HttpAgent) -> None:
    conn = connect(agent)
    status, body, first = post(conn, json.dumps(request_doc(request_id="c-1")))
    assert status == 200 and first.getheader("Content-Type") == "application/json"
    assert not first.will_close  # docket reuses its connections
    sock = conn.sock
    status, body2, _ = post(conn, json.dumps(request_doc(request_id="c-2", capability_code="ASK")))
    assert conn.sock is sock  # the same connection served the second request
    assert json.loads(body)["actions"] == [
        {"type": "handoff", "to": "resolver", "output_type": "triage_report", "payload": {"order": "A-7"}}]
    second = json.loads(body2)
    assert second["request_id"] == "c-2"
    assert second["actions"] == [{"type": "escalate", "reason": "Refund the order?", "choices": ["yes", "no"]}]
    conn.close()


def test_failures_are_answers_or_clear_http_errors(agent: da.HttpAgent) -> None:
    conn = connect(agent)
    status, body, _ = post(conn, json.dumps(request_doc(request_id="c-bug", capability_code="BUG")))
    assert status == 200
    assert json.loads(body) == {"request_id": "c-bug", "status": "ERROR", "error_code": "AGENT_INTERNAL_ERROR",
                                "error_message": "ZeroDivisionError: division by zero"}
    status, body, _ = post(conn, json.dumps(request_doc(request_id="c-bad", decision_inputs=[{"payload": 1}])))
    answer = json.loads(body)
    assert (status, answer["error_code"]) == (200, "AGENT_MALFORMED_REQUEST")
    assert "decision_inputs[0].source_agent: required" in answer["error_message"]
    status, body, _ = post(conn, "not json")
    assert status == 400 and body.startswith(b"not a docket request: request: not JSON")
    conn.request("GET", "/agent")
    got = conn.getresponse()
    assert (got.status, got.read()) == (405, b"POST a docket request (docs/agent-protocol.md)\n")
    conn.close()


def test_several_requests_at_once_are_served_side_by_side() -> None:
    n = 4
    arrived = 0
    lock = threading.Lock()
    everyone: dict[str, asyncio.Event] = {}

    async def waits_for_all(request: da.Request) -> da.Response:
        nonlocal arrived
        event = everyone.setdefault("e", asyncio.Event())
        with lock:
            arrived += 1
            if arrived == n:
                event.set()
        await asyncio.wait_for(event.wait(), 10)
        return da.success(request, da.finish(request.request_id), confidence="HIGH")

    with da.HttpAgent(waits_for_all).start() as served:
        def call(i: int) -> dict[str, Any]:
            conn = connect(served)
            _, body, _ = post(conn, json.dumps(request_doc(request_id=f"c-{i}")))
            conn.close()
            answer: dict[str, Any] = json.loads(body)
            return answer

        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(call, range(n)))
    assert [a["status"] for a in answers] == ["SUCCESS"] * n, answers  # TIMEOUT if served one by one
    assert [a["actions"][0]["output"] for a in answers] == [f"c-{i}" for i in range(n)]
