"""The agent protocol's documents as Python types (docs/agent-protocol.md).

Requests are parsed leniently, as the protocol asks (fields docket adds later are kept in
``Request.raw`` and otherwise ignored); responses are built strictly, and
``Response.problems`` checks the same rules docket checks, with the same ``field: problem``
messages, so a broken response is caught in the agent, where it is cheap to fix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Mapping, Union, cast

__all__ = [
    "Action",
    "Budget",
    "CallTool",
    "Confidence",
    "ConflictingOutput",
    "ContextInput",
    "DecisionInput",
    "EpisodeResult",
    "EpisodeStatus",
    "Escalate",
    "EventReceived",
    "EventTimedOut",
    "Finish",
    "FinishEpisode",
    "Handoff",
    "HumanAnswer",
    "Priority",
    "Request",
    "RequestCapability",
    "RequestEffect",
    "RequestError",
    "Response",
    "ResponseError",
    "ResponseStatus",
    "SettledConflict",
    "Spawn",
    "TaskRestrictions",
    "TimerFired",
    "ToolCall",
    "ToolResult",
    "Usage",
    "Wait",
    "WriteDomain",
    "is_error_code",
    "is_tool_pattern",
    "wait_duration_ms",
    "wait_until_ms",
]

Priority = Literal["HIGH", "NORMAL", "LOW"]
ResponseStatus = Literal["SUCCESS", "PARTIAL", "ERROR", "TIMEOUT"]
Confidence = Literal["HIGH", "MEDIUM", "LOW", "SPECULATIVE"]
EpisodeStatus = Literal["ok", "needs_review", "failed"]

PRIORITIES: tuple[Priority, ...] = ("HIGH", "NORMAL", "LOW")
RESPONSE_STATUSES: tuple[ResponseStatus, ...] = ("SUCCESS", "PARTIAL", "ERROR", "TIMEOUT")
CONFIDENCE_LEVELS: tuple[Confidence, ...] = ("HIGH", "MEDIUM", "LOW", "SPECULATIVE")
EPISODE_STATUSES: tuple[EpisodeStatus, ...] = ("ok", "needs_review", "failed")

#: The most actions one response may carry (docs/agent-protocol.md#limits).
MAX_ACTIONS = 1_000
#: The most entries of ``tool_calls``, ``warnings`` and a task's ``denied_tools``.
MAX_LIST_ENTRIES = 1_000

_ERROR_CODE = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+")
_TOOL_NAME = re.compile(r"[\w:*-]+")


def is_error_code(code: str) -> bool:
    """Whether ``code`` has the CATEGORY_SPECIFIC_ERROR form docket requires: at least two
    upper-case words of letters and digits joined by ``_``, starting with a letter."""
    return _ERROR_CODE.fullmatch(code) is not None


def is_tool_pattern(pattern: str) -> bool:
    """Whether ``pattern`` is a tool pattern docket accepts: ``Tool`` or ``Tool(glob)``."""
    text = pattern.strip()
    open_at = text.find("(")
    if open_at >= 0:
        if not text.endswith(")"):
            return False
        text = text[:open_at]
    return _TOOL_NAME.fullmatch(text) is not None


class RequestError(ValueError):
    """A request that does not have the protocol's shape. ``field`` names where
    (``decision_inputs[1].output_type``), so the message says what and where."""

    def __init__(self, field: str, problem: str, request_id: str | None = None) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem
        #: The request's id when it could be read, so an ERROR can still answer it.
        self.request_id = request_id


class ResponseError(ValueError):
    """A response that breaks a rule of docs/agent-protocol.md#rules-a-response-must-follow;
    the message is docket's own ``field: problem``."""


# ---------------------------------------------------------------------------------------
# Reading requests


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class _Reader:
    """Reads one JSON object's fields, naming the path of whatever is wrong."""

    def __init__(self, obj: Any, where: str, request_id: str | None) -> None:
        if not isinstance(obj, dict):
            raise RequestError(where or "request", f"expected an object, got {_type_name(obj)}", request_id)
        self.obj: dict[str, Any] = obj
        self.where = where
        self.request_id = request_id

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, problem: str) -> RequestError:
        return RequestError(self.path(key), problem, self.request_id)

    def string(self, key: str, default: str | None = None) -> str:
        value = self.obj.get(key, default)
        if value is None:
            raise self.fail(key, "required")
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {_type_name(value)}")
        return value

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.obj.get(key, default)
        if value is None:
            raise self.fail(key, "required")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {_type_name(value)}")
        return value

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(key, f"expected an object, got {_type_name(value)}")
        return value

    def array(self, key: str) -> list[Any]:
        value = self.obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(key, f"expected an array, got {_type_name(value)}")
        return value

    def payload(self, key: str) -> Any:
        if key not in self.obj:
            raise self.fail(key, "required")
        return self.obj[key]


@dataclass(frozen=True)
class ConflictingOutput:
    """One output of a settled conflict (docs/agent-protocol.md#labelled-inputs)."""

    source_agent: str
    kept: bool
    confidence_level: Confidence | None = None
    #: The output as you were given it; ``None`` in the run's final report.
    payload: Any = None


@dataclass(frozen=True)
class SettledConflict:
    """A conflict among a fan-out's outputs of one type for you: every output, how it was
    settled (``higher_authority``, ``higher_confidence`` or ``person``) and by whom. Do not hide it: say in your
    own output that there was one and how it was settled."""

    output_type: str
    receiver: str
    settled_by: Literal["higher_authority", "higher_confidence", "person"]
    outputs: tuple[ConflictingOutput, ...]
    decided_by: str | None = None
    ticket: str | None = None


@dataclass(frozen=True)
class DecisionInput:
    """An input the agent may decide from (Guardrail 2), labelled with who produced it, so
    a later check can tell which agent a decision rests on, and with what its producer
    said of it: its confidence, its warnings (a PARTIAL answer's limitations) and, for an
    output kept over others of a fan-out, the conflict (docs/agent-protocol.md#labelled-inputs)."""

    source_agent: str
    output_type: str
    payload: Any
    confidence_level: Confidence | None = None
    warnings: tuple[str, ...] = ()
    conflict: SettledConflict | None = None


@dataclass(frozen=True)
class ContextInput:
    """A read-only reference: for impact estimation, planning and reference, never for
    prioritising, ranking or deciding (Guardrail 2). A distinct type from
    ``DecisionInput`` so that a type checker refuses one where the other is expected."""

    source_agent: str
    output_type: str
    payload: Any


@dataclass(frozen=True)
class TaskRestrictions:
    """The task a handoff gives its receiver, and the tools it forbids there; it only
    ever restricts what the bundle allows."""

    id: str
    denied_tools: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        out: dict[str, Any] = {"id": self.id}
        if self.denied_tools:
            out["denied_tools"] = list(self.denied_tools)
        return out


@dataclass(frozen=True)
class ToolResult:
    """The outcome of a ``call_tool`` docket ran (or refused) for this agent, as the
    decision input ``tool_result`` brings it back. ``denied`` means the tool never ran."""

    tool_call_id: str
    name: str
    status: Literal["returned", "failed", "denied"] | str
    arguments: Any = None
    result: Any = None
    code: str | None = None
    message: str | None = None
    rule_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class HumanAnswer:
    """A person's answer to an ``escalate`` question (decision input ``human_answer``)."""

    ticket: str
    question: str
    approved: bool
    by: str
    reason: str | None = None
    choice: str | None = None
    answer: str | None = None


@dataclass(frozen=True)
class TimerFired:
    """A timer this agent set with ``wait`` that has fired (decision input
    ``timer_fired`` from ``timers``). Times are in ms since the Unix epoch, as docket
    recorded them; ``late_ms`` is ``fired_at_ms - due_at_ms``, more than a little when no
    process was driving the run when the timer fell due."""

    timer_id: str
    reason: str
    due_at_ms: int
    fired_at_ms: int
    late_ms: int


@dataclass(frozen=True)
class EventReceived:
    """An outside event this agent waited for with ``wait(event=...)``, delivered to it
    (decision input ``event`` from ``events``): ``signal_id`` (``{run}/signal-N``), its
    ``name``, who sent it (``by``), and its ``payload``, scoped for this agent as content
    from ``events``."""

    signal_id: str
    name: str
    by: str
    payload: Any = None


@dataclass(frozen=True)
class EventTimedOut:
    """A wait for an outside event whose timeout (its ``until`` or ``for``) passed before
    the event came (decision input ``event_timed_out`` from ``timers``): the ``event``
    waited for, and the timeout's timer as ``TimerFired`` has it."""

    event: str
    timer_id: str
    reason: str
    due_at_ms: int
    fired_at_ms: int
    late_ms: int


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Request:
    """One call of this agent. Decision inputs and context inputs are kept apart, as
    docket sends them: decide from ``decision_inputs`` only."""

    request_id: str
    correlation_id: str
    run_id: str
    episode_id: str
    attempt: int
    source_agent: str
    target_agent: str
    capability_code: str
    timeout_ms: int = 30_000
    priority: Priority = "NORMAL"
    context: Mapping[str, Any] = field(default_factory=dict)
    decision_inputs: tuple[DecisionInput, ...] = ()
    context_inputs: tuple[ContextInput, ...] = ()
    task: TaskRestrictions | None = None
    #: The request as it arrived, with any field this version does not know.
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Any) -> Request:
        """Parses a decoded request; unknown fields are ignored (requests may gain fields).

        Raises ``RequestError`` naming the field that is missing or of the wrong type."""
        request_id = obj.get("request_id") if isinstance(obj, dict) else None
        rid = request_id if isinstance(request_id, str) else None
        r = _Reader(obj, "", rid)
        priority = r.string("priority", "NORMAL")
        if priority not in PRIORITIES:
            raise r.fail("priority", f"expected one of {', '.join(PRIORITIES)}, got {priority!r}")
        decision = tuple(
            _decision_input(item, f"decision_inputs[{i}]", rid)
            for i, item in enumerate(r.array("decision_inputs"))
        )
        context = tuple(
            ContextInput(**_input_fields(item, f"context_inputs[{i}]", rid))
            for i, item in enumerate(r.array("context_inputs"))
        )
        task: TaskRestrictions | None = None
        if obj.get("task") is not None:
            t = _Reader(obj["task"], "task", rid)
            denied = t.array("denied_tools")
            for i, pattern in enumerate(denied):
                if not isinstance(pattern, str):
                    raise t.fail(f"denied_tools[{i}]", f"expected a string, got {_type_name(pattern)}")
            task = TaskRestrictions(t.string("id"), tuple(denied))
        return cls(
            request_id=r.string("request_id"),
            correlation_id=r.string("correlation_id"),
            run_id=r.string("run_id"),
            episode_id=r.string("episode_id"),
            attempt=r.integer("attempt"),
            source_agent=r.string("source_agent"),
            target_agent=r.string("target_agent"),
            capability_code=r.string("capability_code"),
            timeout_ms=r.integer("timeout_ms", 30_000),
            priority=priority,
            context=r.mapping("context"),
            decision_inputs=decision,
            context_inputs=context,
            task=task,
            raw=obj,
        )

    @classmethod
    def parse(cls, text: str | bytes) -> Request:
        """Parses one request document (a stdin line or an HTTP body)."""
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise RequestError("request", f"not JSON: {exc}") from None
        return cls.from_json(obj)

    def decision_inputs_of(self, output_type: str) -> list[DecisionInput]:
        """The decision inputs handed over as ``output_type``, in the order they came."""
        return [i for i in self.decision_inputs if i.output_type == output_type]

    def context_inputs_of(self, output_type: str) -> list[ContextInput]:
        """The read-only context inputs of ``output_type``, in the order they came."""
        return [i for i in self.context_inputs if i.output_type == output_type]

    def require_decision_input(self, output_type: str) -> DecisionInput:
        """The first decision input of ``output_type``; without one, raises ``InputError``
        (answered as ERROR ``INPUT_MISSING``, a data error in docket's classes)."""
        from .errors import InputError

        found = self.decision_inputs_of(output_type)
        if not found:
            have = sorted({i.output_type for i in self.decision_inputs}) or ["none"]
            raise InputError(
                f"expected a decision input of type {output_type!r}; this request has: {', '.join(have)}",
                code="INPUT_MISSING",
            )
        return found[0]

    @property
    def handoff_context(self) -> Mapping[str, Any]:
        """``context.handoff`` (position, prior agents, decisions, original request): for
        continuity, never to decide from; empty when the run predates it."""
        value = self.context.get("handoff")
        return value if isinstance(value, dict) else {}

    @property
    def session(self) -> Mapping[str, Any] | None:
        """In a later turn of a session, ``context.handoff.session``: its ``id`` and
        ``turn``, what the user told us (``told_us``), what we told them (``we_told``) and
        the decisions people made (``decisions``) in the earlier turns; ``None`` in a
        session's first run (docs/agent-protocol.md#sessions)."""
        value = self.handoff_context.get("session")
        return value if isinstance(value, dict) else None

    @property
    def previous_attempt(self) -> Mapping[str, Any] | None:
        """On a retry, what went wrong the time before (``context.previous_attempt``)."""
        value = self.context.get("previous_attempt")
        return value if isinstance(value, dict) else None

    def tool_results(self) -> list[ToolResult]:
        """Every ``tool_result`` decision input, oldest first: the outcomes of the
        ``call_tool`` actions this step asked for."""
        out = []
        for item in self.decision_inputs_of("tool_result"):
            p = item.payload if isinstance(item.payload, dict) else {}
            out.append(
                ToolResult(
                    tool_call_id=str(p.get("tool_call_id", "")),
                    name=str(p.get("name", "")),
                    status=str(p.get("status", "")),
                    arguments=p.get("arguments"),
                    result=p.get("result"),
                    code=_opt_str(p.get("code")),
                    message=_opt_str(p.get("message")),
                    rule_id=_opt_str(p.get("rule_id")),
                    reason=_opt_str(p.get("reason")),
                )
            )
        return out

    def timers_fired(self) -> list[TimerFired]:
        """Every ``timer_fired`` decision input from ``timers``, oldest first: the timers
        this agent's ``wait`` actions set that have fired, which is how a call after a
        ``wait`` tells itself from the first. A field missing from a payload reads as
        ``""`` or ``0``."""
        out = []
        for item in self.decision_inputs_of("timer_fired"):
            if item.source_agent != "timers":
                continue
            p = item.payload if isinstance(item.payload, dict) else {}
            out.append(
                TimerFired(
                    timer_id=str(p.get("timer_id", "")),
                    reason=str(p.get("reason", "")),
                    due_at_ms=_int(p.get("due_at_ms")),
                    fired_at_ms=_int(p.get("fired_at_ms")),
                    late_ms=_int(p.get("late_ms")),
                )
            )
        return out

    def events_received(self) -> list[EventReceived]:
        """Every ``event`` decision input from ``events``, oldest first: the outside events
        this agent's ``wait(event=...)`` actions received, which is how a call after such a
        wait tells itself from the first. A field missing from a payload reads as ``""``,
        ``0`` or ``None``."""
        out = []
        for item in self.decision_inputs_of("event"):
            if item.source_agent != "events":
                continue
            p = item.payload if isinstance(item.payload, dict) else {}
            out.append(
                EventReceived(
                    signal_id=str(p.get("signal_id", "")),
                    name=str(p.get("name", "")),
                    by=str(p.get("by", "")),
                    payload=p.get("payload"),
                )
            )
        return out

    def events_timed_out(self) -> list[EventTimedOut]:
        """Every ``event_timed_out`` decision input from ``timers``, oldest first: the waits
        for an outside event whose timeout passed before the event came. A field missing
        from a payload reads as ``""`` or ``0``."""
        out = []
        for item in self.decision_inputs_of("event_timed_out"):
            if item.source_agent != "timers":
                continue
            p = item.payload if isinstance(item.payload, dict) else {}
            out.append(
                EventTimedOut(
                    event=str(p.get("event", "")),
                    timer_id=str(p.get("timer_id", "")),
                    reason=str(p.get("reason", "")),
                    due_at_ms=_int(p.get("due_at_ms")),
                    fired_at_ms=_int(p.get("fired_at_ms")),
                    late_ms=_int(p.get("late_ms")),
                )
            )
        return out

    def human_answer(self) -> HumanAnswer | None:
        """The latest answer a person gave to this agent's question, if any: how a second
        call after an ``escalate`` tells itself from the first."""
        answers = [
            i for i in self.decision_inputs if i.output_type == "human_answer" and isinstance(i.payload, dict)
        ]
        if not answers:
            return None
        p = answers[-1].payload
        choice = p.get("choice")
        return HumanAnswer(
            ticket=str(p.get("ticket", "")),
            question=str(p.get("question", "")),
            approved=bool(p.get("approved", False)),
            by=str(p.get("by", "")),
            reason=_opt_str(p.get("reason")),
            choice=None if choice is None else str(choice),
            answer=_opt_str(p.get("answer")),
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _confidence(r: _Reader, key: str) -> Confidence | None:
    value = r.obj.get(key)
    if value is None:
        return None
    if value not in CONFIDENCE_LEVELS:
        raise r.fail(key, f"expected one of {', '.join(CONFIDENCE_LEVELS)}, got {value!r}")
    return cast(Confidence, value)


def _strings(r: _Reader, key: str) -> tuple[str, ...]:
    values = r.array(key)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise r.fail(f"{key}[{i}]", f"expected a string, got {_type_name(value)}")
    return tuple(values)


def _conflict(item: Any, where: str, request_id: str | None) -> SettledConflict:
    r = _Reader(item, where, request_id)
    settled_by = r.string("settled_by")
    if settled_by not in ("higher_authority", "higher_confidence", "person"):
        raise r.fail(
            "settled_by",
            f"expected higher_authority, higher_confidence or person, got {settled_by!r}",
        )
    outputs = []
    for i, output in enumerate(r.array("outputs")):
        o = _Reader(output, f"{where}.outputs[{i}]", request_id)
        kept = o.obj.get("kept")
        if not isinstance(kept, bool):
            raise o.fail("kept", f"expected a boolean, got {_type_name(kept)}")
        outputs.append(
            ConflictingOutput(
                source_agent=o.string("source_agent"),
                kept=kept,
                confidence_level=_confidence(o, "confidence_level"),
                payload=o.obj.get("payload"),
            )
        )
    return SettledConflict(
        output_type=r.string("output_type"),
        receiver=r.string("receiver"),
        settled_by=settled_by,  # type: ignore[arg-type]
        outputs=tuple(outputs),
        decided_by=_opt_str(r.obj.get("decided_by")),
        ticket=_opt_str(r.obj.get("ticket")),
    )


def _decision_input(item: Any, where: str, request_id: str | None) -> DecisionInput:
    fields = _input_fields(item, where, request_id)
    r = _Reader(item, where, request_id)
    conflict = r.obj.get("conflict")
    return DecisionInput(
        **fields,
        confidence_level=_confidence(r, "confidence_level"),
        warnings=_strings(r, "warnings"),
        conflict=None if conflict is None else _conflict(conflict, f"{where}.conflict", request_id),
    )


def _input_fields(item: Any, where: str, request_id: str | None) -> dict[str, Any]:
    r = _Reader(item, where, request_id)
    return {
        "source_agent": r.string("source_agent"),
        "output_type": r.string("output_type"),
        "payload": r.payload("payload"),
    }


# ---------------------------------------------------------------------------------------
# Actions


@dataclass(frozen=True)
class Handoff:
    """Hand the work to the next agent, as the interaction matrix allows."""

    to: str
    output_type: str
    payload: Any
    task: TaskRestrictions | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        out = {"type": "handoff", "to": self.to, "output_type": self.output_type, "payload": self.payload}
        if self.task is not None:
            out["task"] = self.task.to_json()
        return out


@dataclass(frozen=True)
class RequestCapability:
    """Ask another agent for a capability; docket makes the call and brings the answer."""

    target_agent: str
    capability_code: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    priority: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        document: dict[str, Any] = {
            "type": "request_capability",
            "target_agent": self.target_agent,
            "capability_code": self.capability_code,
            "inputs": dict(self.inputs),
        }
        if self.priority is not None:
            document["priority"] = self.priority
        return document


@dataclass(frozen=True)
class Escalate:
    """Stop and ask a human: a question when last, else an approval holding what follows."""

    reason: str
    choices: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        out: dict[str, Any] = {"type": "escalate", "reason": self.reason}
        if self.choices:
            out["choices"] = list(self.choices)
        return out


@dataclass(frozen=True)
class Finish:
    """The work asked of this agent is done; ``output`` is its result."""

    output: Any = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        return {"type": "finish", "output": self.output}


@dataclass(frozen=True)
class Budget:
    """What a spawned child may consume; a dimension left ``None`` gets the most allowed."""

    tokens: int | None = None
    tool_calls: int | None = None
    wall_time_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        return {k: v for k, v in (("tokens", self.tokens), ("tool_calls", self.tool_calls),
                                  ("wall_time_ms", self.wall_time_ms)) if v is not None}


@dataclass(frozen=True)
class Spawn:
    """Start a child episode run by ``agent``, as the recursion policy allows."""

    agent: str
    episode_type: str
    goal: str
    budget: Budget = Budget()
    inputs: Mapping[str, Any] = field(default_factory=dict)
    #: Why the child is needed: a trigger its type's recursion class allows.
    trigger: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        out = {
            "type": "spawn",
            "agent": self.agent,
            "episode_type": self.episode_type,
            "goal": self.goal,
            "budget": self.budget.to_json(),
            "inputs": dict(self.inputs),
        }
        if self.trigger is not None:
            out["trigger"] = self.trigger
        return out


@dataclass(frozen=True)
class WriteDomain:
    """Write a new version of a domain this agent owns; earlier versions never change."""

    domain: str
    content: Any

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        return {"type": "write_domain", "domain": self.domain, "content": self.content}


@dataclass(frozen=True)
class EpisodeResult:
    """What an episode hands back when it ends."""

    status: EpisodeStatus
    summary: str = ""
    artifacts_created: tuple[str, ...] = ()
    decisions: tuple[Any, ...] = ()
    verification_needed: bool = False
    next_actions: tuple[Any, ...] = ()
    error_class: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        out: dict[str, Any] = {"status": self.status, "summary": self.summary}
        if self.artifacts_created:
            out["artifacts_created"] = list(self.artifacts_created)
        if self.decisions:
            out["decisions"] = list(self.decisions)
        if self.verification_needed:
            out["verification_needed"] = True
        if self.next_actions:
            out["next_actions"] = list(self.next_actions)
        if self.error_class is not None:
            out["error_class"] = self.error_class
        return out


@dataclass(frozen=True)
class FinishEpisode:
    """End this agent's episode with a result."""

    result: EpisodeResult

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        return {"type": "finish_episode", "result": self.result.to_json()}


@dataclass(frozen=True)
class RequestEffect:
    """Ask docket to carry out a side effect; the agent never performs it itself. With
    ``not_before`` (RFC 3339 with its offset, ``2026-11-30T09:00:00+01:00``), it is decided
    and dry-run at once and executed no earlier than that time, its kill switch and policy
    read then; ``action_problems`` checks the time as it does a wait's ``until``."""

    kind: str
    lane: str
    idempotency_key: str | None = None
    params: Any = None
    not_before: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        out: dict[str, Any] = {"type": "request_effect", "kind": self.kind, "lane": self.lane}
        if self.idempotency_key is not None:
            out["idempotency_key"] = self.idempotency_key
        if self.params is not None:
            out["params"] = self.params
        if self.not_before is not None:
            out["not_before"] = self.not_before
        return out


@dataclass(frozen=True)
class CallTool:
    """Ask docket to run a tool, decided before it runs; the outcome comes back as a
    ``tool_result`` decision input in a new request."""

    name: str
    arguments: Any = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        return {"type": "call_tool", "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Wait:
    """Wait, then be called again with a ``timer_fired`` decision input
    (``Request.timers_fired``): ``until`` a time (RFC 3339 with its offset,
    ``2026-11-30T09:00:00+01:00``) or ``for_`` a duration (``90s``, ``2h 30m``, ``1d``,
    ``PT2H``), exactly one of them; ``for_`` is the JSON field ``for``. Must be the last
    action.

    With ``event`` (a name the bundle's ``[[signals]]`` declares), wait for that outside
    event instead, with ``until`` or ``for_`` as an optional timeout (at most one of them):
    called again with an ``event`` decision input when it is delivered
    (``Request.events_received``), or an ``event_timed_out`` one when the timeout passes
    first (``Request.events_timed_out``).

    ``action_problems`` checks the time and the duration (``wait_until_ms``,
    ``wait_duration_ms``) in the forms docket reads and with its messages, but is not
    docket's parser: docket parses them again when the response arrives and has the last
    word (a number too large for its unit is refused here as longer than 100 years, by
    docket as not a duration)."""

    reason: str
    until: str | None = None
    for_: str | None = None
    event: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out whichever of ``until``, ``for`` and
        ``event`` is not given."""
        out: dict[str, Any] = {"type": "wait"}
        if self.until is not None:
            out["until"] = self.until
        if self.for_ is not None:
            out["for"] = self.for_
        if self.event is not None:
            out["event"] = self.event
        out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Wait:
        """Reads a ``wait`` action as ``to_json`` writes it (``for`` becomes ``for_``).

        Raises ``ValueError`` naming the field (``wait.for: expected a string, got int``)
        for another type, an unknown field, or a field of the wrong type; whether the time
        says when is ``action_problems``'s to check."""
        if not isinstance(obj, Mapping):
            raise ValueError(f"wait: expected an object, got {_type_name(obj)}")
        if obj.get("type") != "wait":
            raise ValueError(f"wait.type: expected 'wait', got {obj.get('type')!r}")
        unknown = sorted(set(obj) - {"type", "until", "for", "event", "reason"})
        if unknown:
            raise ValueError(f"wait.{unknown[0]}: unknown field (expected type, until, for, event, reason)")
        reason = obj.get("reason")
        if not isinstance(reason, str):
            raise ValueError("wait.reason: required" if reason is None
                             else f"wait.reason: expected a string, got {_type_name(reason)}")
        given: dict[str, str | None] = {}
        for key in ("until", "for", "event"):
            value = obj.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"wait.{key}: expected a string, got {_type_name(value)}")
            given[key] = value
        return cls(reason, until=given["until"], for_=given["for"], event=given["event"])


Action = Union[
    Handoff, RequestCapability, Escalate, Finish, Spawn, WriteDomain, FinishEpisode, RequestEffect, CallTool, Wait
]
_ACTION_TYPES = (
    Handoff, RequestCapability, Escalate, Finish, Spawn, WriteDomain, FinishEpisode, RequestEffect, CallTool, Wait
)

#: The longest wait a ``for`` or ``until`` may say, in ms: 100 years of 365 days.
LONGEST_WAIT_MS = 100 * 365 * 24 * 3_600_000

_NS = {"y": 0, "mo": 0, "w": 7 * 86_400 * 10**9, "d": 86_400 * 10**9, "h": 3_600 * 10**9,
       "m": 60 * 10**9, "s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_ORDER = list(_NS)
_LABELS = {
    "y": ("years", "year", "yrs", "yr", "y"),
    "mo": ("months", "month", "mos", "mo"),
    "w": ("weeks", "week", "wks", "wk", "w"),
    "d": ("days", "day", "d"),
    "h": ("hours", "hour", "hrs", "hr", "h"),
    "m": ("minutes", "minute", "mins", "min", "m"),
    "s": ("seconds", "second", "secs", "sec", "s"),
    "ms": ("milliseconds", "millisecond", "millis", "milli", "msecs", "msec", "ms"),
    "us": ("microseconds", "microsecond", "micros", "micro", "usecs", "usec", "\u00b5secs", "\u00b5sec",
           "us", "\u00b5s"),
    "ns": ("nanoseconds", "nanosecond", "nanos", "nano", "nsecs", "nsec", "ns"),
}
_LABEL_UNIT = sorted(((label, unit) for unit, labels in _LABELS.items() for label in labels),
                     key=lambda lu: -len(lu[0]))
_FRIENDLY_PART = re.compile(
    r"(\d+)(?:[.,](\d{1,9}))?[ \t\n\f\r]*("
    + "|".join(re.escape(label) for label, _ in _LABEL_UNIT)
    + r")(?![a-zA-Z\u00b5])(?:,[ \t\n\f\r])?[ \t\n\f\r]*"
)
_HMS = re.compile(r"(\d+):(\d+):(\d+)(?:[.,](\d{1,9}))?")
_ISO_DURATION = re.compile(
    r"[Pp](?:(\d+)[Yy])?(?:(\d+)[Mm])?(?:(\d+)[Ww])?(?:(\d+)[Dd])?"
    r"(?:[Tt](?:(\d+)(?:[.,](\d{1,9}))?[Hh])?(?:(\d+)(?:[.,](\d{1,9}))?[Mm])?(?:(\d+)(?:[.,](\d{1,9}))?[Ss])?)?"
)
_RFC3339 = re.compile(
    r"(\d{4})-?(\d{2})-?(\d{2})[Tt ](\d{2})(?::?(\d{2})(?::?(\d{2})(?:[.,](\d{1,9}))?)?)?"
    r"(?:([Zz])|([+-])(\d{2})(?::?(\d{2})(?::?(\d{2})(?:[.,]\d{1,9})?)?)?)(?:\[[^\]]*\])*"
)


def _amount(whole: str, fraction: str | None, unit_ns: int) -> int:
    ns = int(whole) * unit_ns
    if fraction:
        ns += int(fraction.ljust(9, "0")) * unit_ns // 10**9
    return ns


def _friendly_ns(text: str) -> int:
    """A friendly duration (``2h 30m``, ``1 day, 02:00:00``, ``5m ago``) in ns."""
    sign = 1
    if text[:1] in ("+", "-"):
        sign, text = (-1 if text[0] == "-" else 1), text[1:]
    elif re.search(r"[ \t\n\f\r]ago$", text):
        sign, text = -1, text[:-3].rstrip(" \t\n\f\r")
    hms = _HMS.fullmatch(text)
    if hms:
        h, m, s, f = hms.groups()
        return sign * (int(h) * _NS["h"] + int(m) * _NS["m"] + _amount(s, f, _NS["s"]))
    total, at, last, fractional = 0, 0, -1, False
    while at < len(text):
        hms = _HMS.fullmatch(text, at)
        if hms and 0 <= last <= _ORDER.index("d"):
            h, m, s, f = hms.groups()
            return sign * (total + int(h) * _NS["h"] + int(m) * _NS["m"] + _amount(s, f, _NS["s"]))
        part = _FRIENDLY_PART.match(text, at)
        if part is None:
            raise ValueError("expected a number and a unit (s, m, h, d, w...)")
        whole, fraction, label = part.groups()
        unit = dict(_LABEL_UNIT)[label]
        index = _ORDER.index(unit)
        if index <= last or fractional:
            raise ValueError("units must go from the largest to the smallest, each once, a fraction last")
        if fraction is not None and index < _ORDER.index("h"):
            raise ValueError(f"a fraction of {label} is not allowed")
        if unit in ("y", "mo") and int(whole):
            raise ValueError("months and years have no fixed length")
        total += _amount(whole, fraction, _NS[unit])
        last, fractional, at = index, fraction is not None, part.end()
    if last < 0:
        raise ValueError("expected a number and a unit (s, m, h, d, w...)")
    return sign * total


def _iso_ns(text: str) -> int:
    """An ISO 8601 duration (``PT2H``, ``P1DT12H``) in ns."""
    sign = 1
    if text[:1] in ("+", "-"):
        sign, text = (-1 if text[0] == "-" else 1), text[1:]
    iso = _ISO_DURATION.fullmatch(text)
    if iso is None:
        raise ValueError("not of the ISO 8601 form PnWnDTnHnMnS")
    y, mo, w, d, h, hf, m, mf, s, sf = iso.groups()
    if (y and int(y)) or (mo and int(mo)):
        raise ValueError("months and years have no fixed length")
    time_part = text[text.upper().index("T") + 1:] if "T" in text.upper() else None
    if not any((y, mo, w, d, h, m, s)) or time_part == "":
        raise ValueError("a duration needs at least one unit")
    if (hf and (m or s)) or (mf and s):
        raise ValueError("only the smallest unit may have a fraction")
    total = 0
    for whole, fraction, unit in ((w, None, "w"), (d, None, "d"), (h, hf, "h"), (m, mf, "m"), (s, sf, "s")):
        if whole:
            total += _amount(whole, fraction, _NS[unit])
    return sign * total


def wait_duration_ms(text: str) -> int:
    """The ms a ``wait``'s ``for`` says (``90s``, ``15m``, ``2h 30m``, ``1d``, ``2w``,
    ``PT2H``, ``P1D``), a day being 24 hours and a week 7 days.

    Raises ``ValueError`` in docket's words for what is not a duration (months and years,
    of no fixed length, included), a negative one, or one longer than 100 years."""
    stripped = text.strip()
    try:
        body = stripped.lstrip("+-")
        ns = _iso_ns(stripped) if body[:1] in ("P", "p") else _friendly_ns(stripped)
    except ValueError as exc:
        raise ValueError(f"{json.dumps(text)} is not a duration such as 90s, 15m, 2h 30m, 1d or PT2H: {exc}") from None
    ms = int(ns / 10**6) if ns < 0 else ns // 10**6
    if ms < 0:
        raise ValueError(f"{json.dumps(text)} is negative: a wait cannot end before it starts")
    if ms > LONGEST_WAIT_MS:
        raise ValueError(f"{json.dumps(text)} is longer than 100 years")
    return ms


def wait_until_ms(text: str) -> int:
    """The ms since the Unix epoch of a ``wait``'s ``until`` or a ``request_effect``'s
    ``not_before``: an RFC 3339 time with its offset (``2026-11-30T09:00:00+01:00``,
    ``...Z``), or one of the other ISO 8601 forms docket reads (``20261130T090000Z``,
    ``2026-11-30T09+01``, a ``[Europe/Paris]`` annotation after the offset, which does not
    change the time).

    Raises ``ValueError`` in docket's words for a time without an offset, one that does
    not parse, or one outside 1970 to 2170."""
    stripped = text.strip()
    problem = "expected YYYY-MM-DDTHH:MM:SS and an offset (Z or +01:00)"
    found = _RFC3339.fullmatch(stripped)
    ms: int | None = None
    if found:
        y, mo, d, h, mi, s, f, z, sign, oh, om, os_ = found.groups()
        try:
            if oh is not None and int(oh) > 25:
                raise ValueError(f"offset {sign}{oh} is beyond 25 hours")
            # A leap second (:60) is read as :59, as docket reads it.
            at = datetime(int(y), int(mo), int(d), int(h), int(mi or 0), min(int(s or 0), 59), tzinfo=timezone.utc)
        except ValueError as exc:
            problem = str(exc)
        else:
            offset_s = 0 if z else (1 if sign == "+" else -1) * (int(oh) * 3600 + int(om or 0) * 60
                                                                 + int(os_ or 0))
            ms = int(at.timestamp()) * 1000 - offset_s * 1000 + int((f or "0").ljust(9, "0")[:3])
    if ms is None:
        raise ValueError(f"{json.dumps(text)} is not a time with its offset, as RFC 3339 writes it "
                         f"(2026-11-29T10:00:00Z): {problem}")
    if not 0 <= ms <= 2 * LONGEST_WAIT_MS:
        raise ValueError(f"{json.dumps(text)} is not a time between 1970 and 2170")
    return ms


def _wait_problem(action: Wait) -> tuple[str, str] | None:
    """Which field of a wait does not say when or for what, and why, as docket finds it."""
    if action.event is not None and not action.event.strip():
        return "event", "name the event waited for (a name the bundle's [[signals]] declares)"
    if action.until is not None and action.for_ is not None:
        return "until", "give `until` or `for`, not both"
    if action.until is None and action.for_ is None:
        if action.event is not None:
            return None
        return "for", "a wait needs `until` (a time), `for` (a duration) or `event` (an outside event)"
    try:
        if action.until is not None:
            wait_until_ms(action.until)
        elif action.for_ is not None:
            wait_duration_ms(action.for_)
    except ValueError as exc:
        return ("until" if action.until is not None else "for"), str(exc)
    return None


# ---------------------------------------------------------------------------------------
# Responses


@dataclass(frozen=True)
class ToolCall:
    """A tool the agent ran itself, reported so deny patterns are checked after the fact."""

    name: str
    arguments: str = ""

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        return {"name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Usage:
    """What the call consumed, charged to the episode's budget. ``tool_calls`` counts the
    tools the agent ran itself, not the ``call_tool`` actions docket runs."""

    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "tool_calls": self.tool_calls}


@dataclass(frozen=True)
class IntentTarget:
    """Where a secondary intent goes: an agent and, optionally, its capability."""

    agent: str
    capability: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        out: dict[str, Any] = {"agent": self.agent}
        if self.capability is not None:
            out["capability"] = self.capability
        return out


@dataclass(frozen=True)
class IntentClassification:
    """The classifying agent's reading of the user's request, which docket holds its
    routing to (docs/agent-protocol.md#intent-classification): below the threshold its
    request's ``context.intent_classification`` names, ask instead of routing."""

    primary_intent: str
    intent_confidence: float
    target_agent: str | None = None
    target_capability: str | None = None
    secondary_intents: tuple[str, ...] = ()
    secondary_targets: tuple[IntentTarget, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON document docket reads, leaving out what defaults to empty."""
        out: dict[str, Any] = {"primary_intent": self.primary_intent,
                               "intent_confidence": self.intent_confidence}
        if self.target_agent is not None:
            out["target_agent"] = self.target_agent
        if self.target_capability is not None:
            out["target_capability"] = self.target_capability
        if self.secondary_intents:
            out["secondary_intents"] = list(self.secondary_intents)
        if self.secondary_targets:
            out["secondary_targets"] = [t.to_json() for t in self.secondary_targets]
        return out

    def problems(self) -> list[str]:
        """Every protocol rule the classification breaks, in docket's order and words."""
        p: list[str] = []
        if not self.primary_intent.strip():
            p.append("intent.primary_intent: must not be empty")
        if not 0.0 <= self.intent_confidence <= 1.0:
            p.append(f"intent.intent_confidence: {self.intent_confidence} is not a confidence from 0 to 1")
        if self.target_agent is None and self.target_capability is not None:
            p.append("intent.target_capability: names a capability but no target_agent")
        if self.target_agent is not None and not self.target_agent.strip():
            p.append("intent.target_agent: must not be empty")
        if self.target_capability is not None and not self.target_capability.strip():
            p.append("intent.target_capability: must not be empty")
        if len(self.secondary_targets) > len(self.secondary_intents):
            p.append(f"intent.secondary_targets: lists {len(self.secondary_targets)} target(s) for "
                     f"{len(self.secondary_intents)} secondary intent(s): one per intent, in order")
        p += [f"intent.secondary_intents[{i}]: must not be empty"
              for i, s in enumerate(self.secondary_intents) if not s.strip()]
        for i, t in enumerate(self.secondary_targets):
            if not t.agent.strip():
                p.append(f"intent.secondary_targets[{i}].agent: must not be empty")
            if t.capability is not None and not t.capability.strip():
                p.append(f"intent.secondary_targets[{i}].capability: must not be empty")
        return p


@dataclass(frozen=True)
class Response:
    """An agent's answer to one request. Build it with ``success``, ``partial``,
    ``error`` or ``timed_out`` (docket_agent.responses), which fill in the request id."""

    request_id: str
    status: ResponseStatus
    confidence_level: Confidence | None = None
    actions: tuple[Action, ...] = ()
    warnings: tuple[str, ...] = ()
    error_code: str | None = None
    error_message: str | None = None
    usage: Usage = Usage()
    tool_calls: tuple[ToolCall, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    intent: IntentClassification | None = None

    def to_json(self) -> dict[str, Any]:
        """The response document, leaving out what defaults to empty."""
        out: dict[str, Any] = {"request_id": self.request_id, "status": self.status}
        if self.confidence_level is not None:
            out["confidence_level"] = self.confidence_level
        if self.error_code is not None:
            out["error_code"] = self.error_code
        if self.error_message is not None:
            out["error_message"] = self.error_message
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.usage != Usage():
            out["usage"] = self.usage.to_json()
        if self.tool_calls:
            out["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.actions:
            out["actions"] = [a.to_json() for a in self.actions]
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        if self.intent is not None:
            out["intent"] = self.intent.to_json()
        return out

    def to_line(self) -> bytes:
        """One line of UTF-8 JSON, as the stdio transport writes it."""
        text = json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return (text + "\n").encode()

    def problems(self) -> list[str]:
        """Every rule of docs/agent-protocol.md#rules-a-response-must-follow this response
        breaks, in docket's order and words (``actions[1].to: must not be empty``)."""
        p: list[str] = []
        s = self.status
        if s not in RESPONSE_STATUSES:
            p.append(f"status: expected one of {', '.join(RESPONSE_STATUSES)}, got {s!r}")
        if self.confidence_level is not None and self.confidence_level not in CONFIDENCE_LEVELS:
            p.append(f"confidence_level: expected one of {', '.join(CONFIDENCE_LEVELS)}, "
                     f"got {self.confidence_level!r}")
        if not self.request_id.strip():
            p.append("request_id: must not be empty")
        if s in ("SUCCESS", "PARTIAL"):
            if self.confidence_level is None:
                p.append(f"confidence_level: required when status is {s}")
            if self.error_code is not None:
                p.append(f"error_code: not allowed when status is {s}")
            if self.error_message is not None:
                p.append(f"error_message: not allowed when status is {s}")
            if s == "SUCCESS" and not self.actions:
                p.append(f"actions: required when status is {s}")
        elif s == "ERROR":
            if self.error_message is None:
                p.append("error_message: required when status is ERROR")
            elif not self.error_message.strip():
                p.append("error_message: must not be empty")
            if self.confidence_level is not None:
                p.append("confidence_level: not allowed when status is ERROR")
            if self.actions:
                p.append("actions: not allowed when status is ERROR")
        if self.error_code is not None and not is_error_code(self.error_code):
            p.append(f"error_code: {self.error_code!r} is not of the form CATEGORY_SPECIFIC_ERROR "
                     "(upper-case words joined by `_`)")
        for name, items, limit in (("actions", self.actions, MAX_ACTIONS),
                                   ("tool_calls", self.tool_calls, MAX_LIST_ENTRIES),
                                   ("warnings", self.warnings, MAX_LIST_ENTRIES)):
            if len(items) > limit:
                p.append(f"{name}: lists {len(items)} entries, more than the limit of {limit}")
        p += [f"warnings[{i}]: must not be empty" for i, w in enumerate(self.warnings) if not w.strip()]
        p += [f"tool_calls[{i}].name: must not be empty" for i, c in enumerate(self.tool_calls)
              if not c.name.strip()]
        if self.usage.tool_calls < len(self.tool_calls):
            p.append(f"usage.tool_calls: {self.usage.tool_calls} is less than the "
                     f"{len(self.tool_calls)} entries in tool_calls")
        if self.intent is not None:
            if len(self.intent.secondary_intents) > MAX_LIST_ENTRIES:
                p.append(f"intent.secondary_intents: lists {len(self.intent.secondary_intents)} "
                         f"entries, more than the limit of {MAX_LIST_ENTRIES}")
            p += self.intent.problems()
        for i, action in enumerate(self.actions):
            if not isinstance(action, _ACTION_TYPES):
                p.append(f"actions[{i}]: expected an action (docket_agent.handoff, finish...), "
                         f"got {_type_name(action)}")
                continue
            p += action_problems(action, f"actions[{i}]")
            following = len(self.actions) - i - 1
            if following and isinstance(action, CallTool):
                p.append(f"actions[{i}]: call_tool `{action.name}` must be the last action (its result "
                         f"comes back in a new request), but {following} action(s) follow it")
            if following and isinstance(action, Wait):
                p.append(f"actions[{i}]: wait must be the last action (the agent is called again once it "
                         f"is due), but {following} action(s) follow it")
            if following and isinstance(action, (Finish, FinishEpisode)):
                p.append(f"actions[{i}]: finish must be the last action, but {following} action(s) follow it")
        return p

    def check(self) -> Response:
        """Returns the response unchanged, or raises ``ResponseError`` with its first problem."""
        problems = self.problems()
        if problems:
            raise ResponseError(problems[0])
        return self


def action_problems(action: Action, at: str) -> list[str]:
    """The blank names, malformed task patterns, waits that do not say when (or for
    which event) and effects' ``not_before`` that is not a time of one action, each as
    ``field: problem`` under ``at`` (``actions[0]``, or the function's name when it builds
    the action)."""
    p: list[str] = []

    def blank(name: str, value: str) -> None:
        if not value.strip():
            p.append(f"{at}.{name}: must not be empty")

    if isinstance(action, Handoff):
        blank("to", action.to)
        blank("output_type", action.output_type)
        if action.task is not None:
            blank("task.id", action.task.id)
            if len(action.task.denied_tools) > MAX_LIST_ENTRIES:
                p.append(f"{at}.task.denied_tools: lists {len(action.task.denied_tools)} entries, "
                         f"more than the limit of {MAX_LIST_ENTRIES}")
            for j, pattern in enumerate(action.task.denied_tools):
                if not is_tool_pattern(pattern):
                    p.append(f"{at}.task.denied_tools[{j}]: {pattern!r} is not a tool pattern "
                             "(`Tool` or `Tool(glob)`)")
    elif isinstance(action, RequestCapability):
        blank("target_agent", action.target_agent)
        blank("capability_code", action.capability_code)
    elif isinstance(action, Escalate):
        blank("reason", action.reason)
        for j, choice in enumerate(action.choices):
            blank(f"choices[{j}]", choice)
    elif isinstance(action, Spawn):
        blank("agent", action.agent)
        blank("episode_type", action.episode_type)
        blank("goal", action.goal)
    elif isinstance(action, WriteDomain):
        blank("domain", action.domain)
    elif isinstance(action, RequestEffect):
        blank("kind", action.kind)
        blank("lane", action.lane)
        if action.not_before is not None:
            try:
                wait_until_ms(action.not_before)
            except ValueError as exc:
                p.append(f"{at}.not_before: {exc}")
        if action.idempotency_key is not None:
            blank("idempotency_key", action.idempotency_key)
    elif isinstance(action, CallTool):
        blank("name", action.name)
    elif isinstance(action, Wait):
        blank("reason", action.reason)
        wrong = _wait_problem(action)
        if wrong is not None:
            p.append(f"{at}.{wrong[0]}: {wrong[1]}")
    elif isinstance(action, FinishEpisode):
        if action.result.status not in EPISODE_STATUSES:
            p.append(f"{at}.result.status: expected one of {', '.join(EPISODE_STATUSES)}, "
                     f"got {action.result.status!r}")
    return p
