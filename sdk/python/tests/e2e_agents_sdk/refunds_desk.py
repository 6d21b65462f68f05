"""The refunds desk of the Agents SDK end-to-end test: a plain docket-agent handler that
finishes with what the concierge handed over."""

from docket_agent import Request, Response, finish, run_stdio, success


def handle(request: Request) -> Response:
    handed = request.require_decision_input("agent_handoff").payload
    said = [turn["content"] for turn in handed["conversation"] if turn["role"] == "assistant"]
    return success(request, finish({"handed_over_by": handed["from"], "concierge_said": said}),
                   confidence="HIGH")


if __name__ == "__main__":
    run_stdio(handle)
