"""Responses built from the request they answer, so the ``request_id`` is always echoed."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .protocol import Action, Confidence, IntentClassification, Request, Response, ToolCall, Usage

__all__ = ["error", "partial", "success", "timed_out"]


def success(
    request: Request,
    *actions: Action,
    confidence: Confidence,
    usage: Usage | None = None,
    tool_calls: Iterable[ToolCall] = (),
    metadata: Mapping[str, Any] | None = None,
    intent: IntentClassification | None = None,
) -> Response:
    """SUCCESS: completed fully. At least one action says what was done; ``confidence`` is
    required because docket prefers the higher one when outputs conflict. ``intent`` is the
    classifying agent's intent classification (docs/agent-protocol.md#intent-classification)."""
    return Response(
        request.request_id,
        "SUCCESS",
        confidence_level=confidence,
        actions=actions,
        usage=usage or Usage(),
        tool_calls=tuple(tool_calls),
        metadata=dict(metadata or {}),
        intent=intent,
    ).check()


def partial(
    request: Request,
    *actions: Action,
    confidence: Confidence,
    warnings: Iterable[str],
    usage: Usage | None = None,
    tool_calls: Iterable[ToolCall] = (),
    metadata: Mapping[str, Any] | None = None,
    intent: IntentClassification | None = None,
) -> Response:
    """PARTIAL: completed with limitations, each named in ``warnings``. A bundle may refuse
    partial outputs on an edge; docket then retries this agent."""
    listed = tuple(warnings)
    if not listed:
        raise ValueError("partial: warnings must say what was limited (at least one)")
    return Response(
        request.request_id,
        "PARTIAL",
        confidence_level=confidence,
        actions=actions,
        warnings=listed,
        usage=usage or Usage(),
        tool_calls=tuple(tool_calls),
        metadata=dict(metadata or {}),
        intent=intent,
    ).check()


def error(request: Request, code: str, message: str, *, usage: Usage | None = None) -> Response:
    """ERROR: failed. ``code`` is CATEGORY_SPECIFIC_ERROR; its words pick the error class
    the failure ladder reads (``INPUT_VALIDATION_FAILED`` is a validation error)."""
    return Response(
        request.request_id, "ERROR", error_code=code, error_message=message, usage=usage or Usage()
    ).check()


def timed_out(
    request: Request,
    message: str,
    *actions: Action,
    code: str | None = "AGENT_TIMEOUT",
    usage: Usage | None = None,
) -> Response:
    """TIMEOUT: this agent ran out of time itself; whatever it got to may come as actions."""
    return Response(
        request.request_id,
        "TIMEOUT",
        actions=actions,
        error_code=code,
        error_message=message,
        usage=usage or Usage(),
    ).check()
