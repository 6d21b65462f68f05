#!/usr/bin/env python3
"""The shop's tools for llm-triage, one executor for the three `[tools.NAME]` sections
(docs/agent-protocol.md#tool-executors): a call per line on stdin, an answer per line on
stdout. Orders come from data/orders.json; nothing leaves this machine. Only calls the
bundle allowed ever reach it. With LLM_TRIAGE_TOOL_LOG set, each call it receives is
appended to that file (the tests read it to tell which tools really ran)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ORDERS: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "orders.json").read_text(encoding="utf-8"))


def run(tool: str, arguments: Any) -> dict[str, Any]:
    """The answer's `result` or `error`."""
    args = arguments if isinstance(arguments, dict) else {}
    if tool == "lookup_order":
        order = ORDERS.get(str(args.get("order")))
        if order is None:
            return {"error": {"code": "ORDER_NOT_FOUND", "message": f"no order {args.get('order')!r}"}}
        return {"result": {"order": args["order"], **order}}
    if tool == "issue_refund":
        order = ORDERS.get(str(args.get("order")))
        if order is None:
            return {"error": {"code": "ORDER_NOT_FOUND", "message": f"no order {args.get('order')!r}"}}
        amount = args.get("amount")
        if not isinstance(amount, (int, float)) or amount > order["total"]:
            return {"error": {"code": "REFUND_ABOVE_TOTAL",
                              "message": f"{amount} is more than the order's total, {order['total']}"}}
        return {"result": {"refund_id": f"RF-{args['order']}", "amount": amount,
                           "currency": order["currency"], "status": "issued"}}
    if tool == "delete_account":
        return {"result": {"customer": args.get("customer"), "status": "deleted"}}
    return {"error": {"code": "TOOL_UNKNOWN", "message": f"this executor has no tool {tool!r}"}}


def main() -> None:
    log = os.environ.get("LLM_TRIAGE_TOOL_LOG")
    for line in sys.stdin:
        if not line.strip():
            continue
        call = json.loads(line)
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"tool": call["tool"], "arguments": call["arguments"]}) + "\n")
        answer = {"tool_call_id": call["tool_call_id"], **run(call["tool"], call["arguments"])}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
