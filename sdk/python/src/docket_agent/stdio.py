"""The stdio runner: JSON lines on stdin and stdout, as docket's ``command`` agents speak.

Only responses reach stdout. While the runner runs, file descriptor 1 and ``sys.stdout``
point at stderr, so a stray ``print`` (or a library, or a child process) writing to stdout
cannot put a line docket would take for the answer and kill the process for
(``AGENT_MALFORMED_RESPONSE``).
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
from typing import BinaryIO

from .dispatch import Dispatcher, Handler, NotARequest

__all__ = ["run_stdio"]


def run_stdio(
    handler: Handler,
    *,
    at_once: int = 1,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Serves requests from stdin until it closes, one response line per request.

    ``at_once`` above 1 handles up to that many requests side by side (threads, or
    coroutines for an ``async`` handler), each answered under its own ``request_id`` as it
    finishes: the workflow says ``requests_per_process = N`` for the agent
    (docs/agent-protocol.md#several-requests-at-once). ``stdin``/``stdout`` default to the
    process's own; given, they are used as they are (tests)."""
    if isinstance(at_once, bool) or not isinstance(at_once, int) or at_once < 1:
        raise ValueError(f"run_stdio: at_once must be a whole number of at least 1, got {at_once!r}")
    source = stdin if stdin is not None else sys.stdin.buffer
    if stdout is not None:
        _serve(handler, at_once, source, stdout)
        return
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    saved_stdout = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        with os.fdopen(protocol_fd, "wb", buffering=0) as out:
            _serve(handler, at_once, source, out)
    finally:
        sys.stdout = saved_stdout


def _serve(handler: Handler, at_once: int, source: BinaryIO, out: BinaryIO) -> None:
    dispatcher = Dispatcher(handler)
    write_lock = threading.Lock()

    def answer(line: bytes) -> None:
        try:
            response = dispatcher.answer(line)
        except NotARequest as exc:
            print(f"docket-agent: ignored a line that is not a request ({exc}): {line[:200]!r}",
                  file=sys.stderr, flush=True)
            return
        data = response.to_line()
        with write_lock:  # one whole line at a time, even with several under way
            try:
                out.write(data)
                out.flush()
            except BrokenPipeError:
                print("docket-agent: stdout is closed; the answer to a request was dropped",
                      file=sys.stderr, flush=True)

    room = threading.BoundedSemaphore(at_once)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="docket-agent")

    def answer_then_free(line: bytes) -> None:
        try:
            answer(line)
        finally:
            room.release()

    try:
        for line in source:
            if not line.strip():
                continue
            if at_once == 1:
                answer(line)
            else:
                room.acquire()
                pool.submit(answer_then_free, line)
    except KeyboardInterrupt:
        pass
    finally:
        pool.shutdown(wait=True)
        dispatcher.close()
