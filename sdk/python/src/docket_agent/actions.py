"""One function per action an agent can ask docket for (docs/agent-protocol.md#actions).

Each checks its arguments as docket would (no blank names, tool patterns that parse, a
wait that says when or for which event) and raises ``ValueError`` naming the function and
the argument, so a mistake shows where it was made rather than as a rejected response
later.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, TypeVar

from .protocol import (
    Action,
    Budget,
    CallTool,
    EpisodeResult,
    EpisodeStatus,
    Escalate,
    Finish,
    FinishEpisode,
    Handoff,
    RequestCapability,
    RequestEffect,
    Spawn,
    TaskRestrictions,
    Wait,
    WriteDomain,
    action_problems,
)

__all__ = [
    "ask",
    "call_tool",
    "escalate",
    "finish",
    "finish_episode",
    "handoff",
    "request_capability",
    "request_effect",
    "spawn",
    "task",
    "wait",
    "write_domain",
]

A = TypeVar("A", bound=Action)


def _checked(where: str, action: A) -> A:
    problems = action_problems(action, where)
    if problems:
        raise ValueError("; ".join(problems))
    return action


def _mapping(where: str, value: Mapping[str, Any] | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object (a mapping), got {type(value).__name__}")
    return dict(value)


def task(id: str, denied_tools: Iterable[str] = ()) -> TaskRestrictions:
    """A task for a handoff's receiver, with the tool patterns (``Bash(git push*)``) it
    may not call on it; it restricts the bundle's rules, never widens them."""
    patterns = tuple(denied_tools)
    if isinstance(denied_tools, str):
        raise ValueError("task.denied_tools: expected a list of tool patterns, got one string")
    restrictions = TaskRestrictions(id, patterns)
    _checked("task", Handoff("-", "-", None, restrictions))
    return restrictions


def handoff(to: str, output_type: str, payload: Any, *, task: TaskRestrictions | None = None) -> Handoff:
    """Hand the work to ``to`` as ``output_type``. docket checks the interaction matrix,
    validates ``payload`` against the output type's schema, scopes it, and calls ``to``
    with it as a decision input."""
    return _checked("handoff", Handoff(to, output_type, payload, task))


_PRIORITIES = ("HIGH", "NORMAL", "LOW")


def request_capability(
    target_agent: str,
    capability_code: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    priority: str | None = None,
) -> RequestCapability:
    """Ask ``target_agent`` for a capability. docket makes the call (agents never call each
    other) and calls this agent again with the answer as a decision input whose
    ``output_type`` is the capability code (or ``capability_failed``). ``priority``
    (``HIGH``, ``NORMAL`` or ``LOW``; default the bundle's) orders the call where calls to
    that agent wait for room."""
    if priority is not None and priority not in _PRIORITIES:
        raise ValueError(
            f"request_capability.priority: expected HIGH, NORMAL or LOW, got {priority!r}"
        )
    return _checked(
        "request_capability",
        RequestCapability(
            target_agent,
            capability_code,
            _mapping("request_capability.inputs", inputs),
            priority,
        ),
    )


def escalate(reason: str, choices: Iterable[str] = ()) -> Escalate:
    """Stop and ask a human. Followed by other actions it holds them until a person
    approves; as the last action it is a question (see ``ask``)."""
    if isinstance(choices, str):
        raise ValueError("escalate.choices: expected a list of options, got one string")
    return _checked("escalate", Escalate(reason, tuple(choices)))


def ask(question: str, choices: Iterable[str] = ()) -> Escalate:
    """Ask a person a question (an ``escalate`` ending the response). The run waits; this
    agent is called again with a ``human_answer`` decision input (``Request.human_answer``)."""
    if isinstance(choices, str):
        raise ValueError("ask.choices: expected a list of options, got one string")
    return _checked("ask", Escalate(question, tuple(choices)))


def finish(output: Any = None) -> Finish:
    """The work asked of this agent is done; ``output`` is its result. Must come last."""
    return Finish(output)


def spawn(
    agent: str,
    episode_type: str,
    goal: str,
    *,
    budget: Budget | None = None,
    inputs: Mapping[str, Any] | None = None,
    trigger: str | None = None,
) -> Spawn:
    """Start a child episode of ``episode_type`` (``verify``, ``retrieve``...) run by
    ``agent``, decided by the recursion policy. ``trigger`` says why it is needed
    (``side_effect_attempted`` for a ``verify`` child...); a child type with a recursion
    class needs one its class allows (docs/governance.md#recursion-classes). The child's
    ``episode_result`` comes back to this agent in a new request."""
    if budget is not None and not isinstance(budget, Budget):
        raise ValueError(f"spawn.budget: expected a docket_agent.Budget, got {type(budget).__name__}")
    if trigger is not None and (not isinstance(trigger, str) or not trigger):
        raise ValueError("spawn.trigger: expected a non-empty string")
    return _checked(
        "spawn",
        Spawn(agent, episode_type, goal, budget or Budget(), _mapping("spawn.inputs", inputs), trigger),
    )


def write_domain(domain: str, content: Any) -> WriteDomain:
    """Write a new version of a domain this agent owns (its bundle ``write_scopes``)."""
    return _checked("write_domain", WriteDomain(domain, content))


def finish_episode(
    status: EpisodeStatus,
    summary: str = "",
    *,
    artifacts_created: Iterable[str] = (),
    decisions: Iterable[Any] = (),
    verification_needed: bool = False,
    next_actions: Iterable[Any] = (),
    error_class: str | None = None,
) -> FinishEpisode:
    """End this agent's episode: ``ok``, ``needs_review`` (a person looks first) or
    ``failed`` (with ``error_class``, counted by the parent's stop conditions)."""
    result = EpisodeResult(
        status,
        summary,
        tuple(artifacts_created),
        tuple(decisions),
        verification_needed,
        tuple(next_actions),
        error_class,
    )
    return _checked("finish_episode", FinishEpisode(result))


def request_effect(kind: str, lane: str, *, idempotency_key: str | None = None, params: Any = None,
                   not_before: str | None = None) -> RequestEffect:
    """Ask docket to carry out a side effect (a publish, a DM). docket decides it, runs it
    at most once per ``idempotency_key``, verifies it, and calls this agent again with an
    ``effect_result`` decision input. With ``not_before`` (RFC 3339 with its offset,
    ``"2026-11-30T09:00:00+01:00"``), it is decided and dry-run at once and executed no
    earlier than that time, its kill switch and policy read then."""
    if not_before is not None and not isinstance(not_before, str):
        raise ValueError(f"request_effect.not_before: expected a string, got {type(not_before).__name__}")
    return _checked("request_effect", RequestEffect(kind, lane, idempotency_key, params, not_before))


def call_tool(name: str, arguments: Any = None) -> CallTool:
    """Ask docket to run the tool ``name``; the call is decided before it runs (deny
    patterns, MUST NOT rules, allowed tools), and the outcome, even a refusal, comes back
    as a ``tool_result`` decision input (``Request.tool_results``). Must come last."""
    return _checked("call_tool", CallTool(name, arguments))


def wait(*, until: str | None = None, for_: str | None = None, event: str | None = None, reason: str) -> Wait:
    """Wait, then be called again: ``until`` a time (RFC 3339 with its offset,
    ``"2026-11-30T09:00:00+01:00"``) or ``for_`` a duration from when the response is
    recorded (``"90s"``, ``"15m"``, ``"2h 30m"``, ``"1d"``, ``"2w"``, ``"PT2H"``; a day is
    24 hours; months and years are refused; at most 100 years), exactly one of them; or
    for the outside ``event`` of that name (the bundle's ``[[signals]]``), with ``until``
    or ``for_`` as an optional timeout. ``reason`` is shown to people and recorded. Must
    come last.

    docket decides the wait (the episode's budget, the bundle's longest wait, whether
    this agent may wait for the event); once it fires, this agent is called again with a
    ``timer_fired`` decision input (``Request.timers_fired``); for an event, with an
    ``event`` one when it is delivered (``Request.events_received``) or an
    ``event_timed_out`` one when the timeout passes first (``Request.events_timed_out``);
    refused, with an ``action_denied`` one."""
    for name, value, optional in (("until", until, True), ("for", for_, True), ("event", event, True),
                                  ("reason", reason, False)):
        if not isinstance(value, str) and not (optional and value is None):
            raise ValueError(f"wait.{name}: expected a string, got {type(value).__name__}")
    return _checked("wait", Wait(reason, until=until, for_=for_, event=event))
