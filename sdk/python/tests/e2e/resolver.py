"""The resolver agent of the end-to-end test, on docket-agent over HTTP with an async
handler. It decides from its decision inputs only and says which inputs it decided
from, which it only consulted, and whether the handoff context told it the run's request
(read-only context), so the test can check the three stayed apart."""

from __future__ import annotations

import asyncio

from docket_agent import Request, Response, finish, success


async def handle(request: Request) -> Response:
    report = request.require_decision_input("triage_report").payload
    await asyncio.sleep(0)  # where a real agent would await its model
    resolution = "a person issues the refund" if report["refund"] == "denied" else "refunded"
    return success(
        request,
        finish({
            "resolution": resolution,
            "shipping": report["shipping"],
            "decided_from": [f"{i.source_agent}:{i.output_type}" for i in request.decision_inputs],
            "consulted": [f"{i.source_agent}:{i.output_type}" for i in request.context_inputs],
            "told_the_request": "original_request" in request.handoff_context,
        }),
        confidence="HIGH",
    )
