"""The waiting agent of the end-to-end wait test, on docket-agent over stdio.

First call: wait 31 days, more than the bundle's longest wait (30 days by default), which
docket refuses and says so with an ``action_denied`` input. Second: wait one second.
Third, once the timer has fired: finish with what the refusal and the timer said.
"""

from typing import Any

from docket_agent import Request, Response, finish, run_stdio, success, wait


def handle(request: Request) -> Response:
    fired = request.timers_fired()
    refused = [i.payload for i in request.decision_inputs_of("action_denied")
               if isinstance(i.payload, dict) and i.payload.get("action") == "wait"]
    if fired:
        timer = fired[-1]
        output: dict[str, Any] = {
            "refused_by": [r.get("rule_id") for r in refused],
            "fired": {"timer_id": timer.timer_id, "reason": timer.reason, "due_at_ms": timer.due_at_ms,
                      "fired_at_ms": timer.fired_at_ms, "late_ms": timer.late_ms},
        }
        return success(request, finish(output), confidence="HIGH")
    if refused:
        return success(request, wait(for_="1s", reason="the slot opens in a second"), confidence="HIGH")
    return success(request, wait(for_="31d", reason="the next month's slot"), confidence="HIGH")


if __name__ == "__main__":
    run_stdio(handle)
