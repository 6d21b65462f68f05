"""Write docket agents in Python: typed requests and responses, one function per action,
and runners for stdio and HTTP agents (docs/python.md).

    from docket_agent import Request, Response, handoff, run_stdio, success

    def handle(request: Request) -> Response:
        scores = request.require_decision_input("geo_scores").payload
        return success(request, handoff("strategy", "gaps", find_gaps(scores)), confidence="HIGH")

    run_stdio(handle)
"""

from .actions import (
    ask,
    call_tool,
    escalate,
    finish,
    finish_episode,
    handoff,
    request_capability,
    request_effect,
    spawn,
    task,
    wait,
    write_domain,
)
from .dispatch import Dispatcher, Handler
from .errors import AgentError, InputError
from .http import HttpAgent, serve_http
from .protocol import (
    Action,
    Budget,
    CallTool,
    Confidence,
    ContextInput,
    DecisionInput,
    EpisodeResult,
    EpisodeStatus,
    Escalate,
    EventReceived,
    EventTimedOut,
    Finish,
    FinishEpisode,
    Handoff,
    HumanAnswer,
    IntentClassification,
    IntentTarget,
    Priority,
    Request,
    RequestCapability,
    RequestEffect,
    RequestError,
    Response,
    ResponseError,
    ResponseStatus,
    Spawn,
    TaskRestrictions,
    TimerFired,
    ToolCall,
    ToolResult,
    Usage,
    Wait,
    WriteDomain,
)
from .responses import error, partial, success, timed_out
from .stdio import run_stdio

__version__ = "0.1.0"

__all__ = [
    "Action",
    "AgentError",
    "Budget",
    "CallTool",
    "Confidence",
    "ContextInput",
    "DecisionInput",
    "Dispatcher",
    "EpisodeResult",
    "EpisodeStatus",
    "Escalate",
    "EventReceived",
    "EventTimedOut",
    "Finish",
    "FinishEpisode",
    "Handler",
    "Handoff",
    "HttpAgent",
    "HumanAnswer",
    "InputError",
    "IntentClassification",
    "IntentTarget",
    "Priority",
    "Request",
    "RequestCapability",
    "RequestEffect",
    "RequestError",
    "Response",
    "ResponseError",
    "ResponseStatus",
    "Spawn",
    "TaskRestrictions",
    "TimerFired",
    "ToolCall",
    "ToolResult",
    "Usage",
    "Wait",
    "WriteDomain",
    "ask",
    "call_tool",
    "error",
    "escalate",
    "finish",
    "finish_episode",
    "handoff",
    "partial",
    "request_capability",
    "request_effect",
    "run_stdio",
    "serve_http",
    "spawn",
    "success",
    "task",
    "timed_out",
    "wait",
    "write_domain",
]
