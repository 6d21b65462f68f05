"""An OpenAI Agents SDK agent under docket (docket_agent.openai_agents), with a scripted
model that decides from what it is sent: look the order up, then try to refund it, then,
the refund refused, hand off to the refunds desk. `--tools` serves its function tools as
docket's tool executor; each run of a function is appended to $TOOL_LOG."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import agents  # noqa: E402
from scripted_model import ScriptedModel, Sent, message, tool_call  # noqa: E402

from docket_agent import run_stdio  # noqa: E402
from docket_agent.openai_agents import AgentsSdkAgent, run_tools_stdio  # noqa: E402


def ran(tool: str, order: str) -> None:
    with open(os.environ["TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "order": order}) + "\n")


@agents.function_tool
def lookup_order(order: str) -> dict[str, str]:
    """Where an order is."""
    ran("lookup_order", order)
    return {"shipping": "lost in transit"}


@agents.function_tool
def refund_order(order: str) -> dict[str, bool]:
    """Refund an order."""
    ran("refund_order", order)
    return {"refunded": True}


def decide(sent: Sent) -> list[Any]:
    outcomes = [item for item in sent.input if item.get("type") == "function_call_output"]
    order = json.loads(str(sent.input[0]["content"]).split("\n", 1)[1])[0]["payload"]["order"]
    if not outcomes:
        return [tool_call("lookup_order", json.dumps({"order": order}))]
    if len(outcomes) == 1:
        return [tool_call("refund_order", json.dumps({"order": order}))]
    return [message(f"Order {order} is lost; the refunds desk takes over."),
            tool_call("transfer_to_refunds_desk", "{}")]


refunds_desk = agents.Agent(name="refunds desk", instructions="Refund lost orders.")
concierge = AgentsSdkAgent(
    agents.Agent(name="concierge", instructions="Help the customer with their order.",
                 tools=[lookup_order, refund_order], handoffs=[refunds_desk],
                 model=ScriptedModel([decide] * 20)),
    confidence="HIGH",
)

if __name__ == "__main__":
    if sys.argv[1:] == ["--tools"]:
        run_tools_stdio(concierge)
    else:
        run_stdio(concierge)
