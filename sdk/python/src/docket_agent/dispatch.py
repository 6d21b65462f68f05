"""Turning one request document into one response document, whatever the handler does.

Both runners (stdio and HTTP) go through ``Dispatcher``: it parses the request, calls the
handler (a plain function or a coroutine function), and makes sure what comes back is a
response docket accepts. An exception or a broken response becomes an ERROR (or TIMEOUT)
answer with a code from ``docket_agent.errors``; its traceback goes to stderr.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import threading
import traceback
from typing import Any, Awaitable, Callable, Union

from . import errors
from .protocol import Request, RequestError, Response

__all__ = ["Dispatcher", "Handler", "NotARequest"]

#: What an agent is: a function from a request to a response, plain or ``async``.
Handler = Callable[[Request], Union[Response, Awaitable[Response]]]


class NotARequest(ValueError):
    """A document without a readable ``request_id``: nothing can answer it, so the stdio
    runner logs it to stderr and the HTTP runner answers 400."""


def _log(message: str) -> None:
    print(f"docket-agent: {message}", file=sys.stderr, flush=True)


class Dispatcher:
    """Answers request documents with ``handler``. Thread-safe: the runners call
    ``answer`` from several threads when several requests are under way. Coroutines run
    on one event loop of the dispatcher's own, started on the first one."""

    def __init__(self, handler: Handler) -> None:
        if not callable(handler):
            raise TypeError(f"a docket agent's handler must be callable, got {type(handler).__name__}")
        self.handler = handler
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="docket-agent-loop", daemon=True).start()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        """Stops the event loop, if one was started."""
        with self._loop_lock:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._loop = None

    def answer(self, document: str | bytes) -> Response:
        """The response to one request document. Raises ``NotARequest`` only when the
        document has no ``request_id`` to answer."""
        try:
            request = Request.parse(document)
        except RequestError as exc:
            if exc.request_id is None:
                raise NotARequest(str(exc)) from None
            _log(f"request {exc.request_id}: {exc}")
            return Response(exc.request_id, "ERROR", error_code=errors.MALFORMED_REQUEST,
                            error_message=f"the request cannot be read: {exc}")
        return self.answer_request(request)

    def answer_request(self, request: Request) -> Response:
        """Calls the handler on a parsed request; never raises."""
        try:
            result: Any = self.handler(request)
            if inspect.isawaitable(result):
                result = asyncio.run_coroutine_threadsafe(_awaited(result), self._event_loop()).result()
        except BaseException as exc:  # noqa: BLE001 - every failure must become an answer
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return self._from_exception(request, exc)
        return self._checked(request, result)

    def _from_exception(self, request: Request, exc: BaseException) -> Response:
        if isinstance(exc, errors.AgentError):
            _log(f"request {request.request_id}: {exc.code}: {exc.message}")
            return Response(request.request_id, "ERROR", error_code=exc.code, error_message=exc.message)
        name = type(exc).__name__
        text = str(exc) or "(no message)"
        print(f"docket-agent: request {request.request_id}: the handler raised {name}",
              file=sys.stderr, flush=True)
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
            return Response(request.request_id, "TIMEOUT", error_code=errors.TIMED_OUT,
                            error_message=f"{name}: {text}")
        return Response(request.request_id, "ERROR", error_code=errors.INTERNAL_ERROR,
                        error_message=f"{name}: {text}")

    def _checked(self, request: Request, result: Any) -> Response:
        if not isinstance(result, Response):
            problem = (f"the handler returned {type(result).__name__}, not a docket_agent.Response "
                       "(build one with success, partial, error or timed_out)")
        elif result.request_id != request.request_id:
            problem = (f"request_id: expected {request.request_id!r} (the request's request_id), "
                       f"got {result.request_id!r}")
        else:
            problems = result.problems()
            if not problems:
                try:
                    result.to_line()
                    return result
                except (TypeError, ValueError) as exc:
                    problems = [f"the response is not JSON: {exc}"]
            problem = problems[0]
        _log(f"request {request.request_id}: answered ERROR {errors.INVALID_RESPONSE}: {problem}")
        return Response(request.request_id, "ERROR", error_code=errors.INVALID_RESPONSE,
                        error_message=problem)


async def _awaited(result: Awaitable[Any]) -> Any:
    return await result
