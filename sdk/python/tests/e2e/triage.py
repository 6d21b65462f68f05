"""The triage agent of the end-to-end test, on docket-agent over stdio.

First call: look the order up (call_tool). Second: try to refund it (the bundle denies
it before the tool runs). Third: hand what it learnt to the resolver. With the ticket's
`fail_first`, its first attempt raises, which must reach docket as an ERROR answer
(AGENT_INTERNAL_ERROR) and be retried, and a print() must not disturb stdout.
"""

from docket_agent import Request, Response, call_tool, handoff, run_stdio, success


def handle(request: Request) -> Response:
    ticket = request.require_decision_input("support_request").payload
    results = request.tool_results()
    print(f"triage: call {request.request_id}, attempt {request.attempt}, {len(results)} tool result(s)")
    if ticket.get("fail_first") and request.attempt == 1 and not results:
        raise RuntimeError("the order system was not ready")
    if not results:
        return success(request, call_tool("lookup", {"order": ticket["order"]}), confidence="HIGH")
    if len(results) == 1:
        return success(request, call_tool("refund", {"order": ticket["order"]}), confidence="MEDIUM")
    lookup, refund = results[0], results[1]
    report = {
        "order": ticket["order"],
        "shipping": lookup.result["shipping"] if lookup.status == "returned" else "unknown",
        "refund": refund.status,
        "refund_rule": refund.rule_id or "",
    }
    return success(request, handoff("resolver", "triage_report", report), confidence="HIGH")


if __name__ == "__main__":
    run_stdio(handle)
