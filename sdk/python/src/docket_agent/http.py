"""The HTTP runner: docket POSTs each request and reads the response from the body
(``http = "http://127.0.0.1:PORT/"`` in the workflow's ``[agents.ID]``).

Built on the standard library's threading HTTP server, HTTP/1.1 with keep-alive (docket
reuses its connections). Each request is served on its own thread; an ``async`` handler's
coroutines run on one event loop.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .dispatch import Dispatcher, Handler, NotARequest

__all__ = ["HttpAgent", "serve_http"]

#: The largest request body read; docket's requests are far smaller.
MAX_REQUEST_BYTES = 64 * 1024 * 1024


class HttpAgent:
    """An agent served over HTTP. ``port=0`` picks a free port; ``url`` says which.

    ``serve_forever()`` blocks; ``start()`` serves on a background thread (for tests and
    for agents embedded in a larger program) and ``stop()`` ends it. Also a context
    manager: ``with HttpAgent(handle).start() as agent: ... agent.url``."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self.dispatcher = Dispatcher(handler)
        dispatcher = self.dispatcher

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "docket-agent"

            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                length_header = self.headers.get("Content-Length")
                if length_header is None:
                    self._reply(411, b"a docket request needs a Content-Length\n", "text/plain")
                    return
                try:
                    length = int(length_header)
                except ValueError:
                    length = -1
                if length < 0 or length > MAX_REQUEST_BYTES:
                    self._reply(413, f"Content-Length {length_header!r} is not accepted\n".encode(),
                                "text/plain")
                    return
                body = self.rfile.read(length)
                try:
                    response = dispatcher.answer(body)
                except NotARequest as exc:
                    self._reply(400, f"not a docket request: {exc}\n".encode(), "text/plain")
                    return
                self._reply(200, response.to_line(), "application/json")

            def do_GET(self) -> None:  # noqa: N802
                self._reply(405, b"POST a docket request (docs/agent-protocol.md)\n", "text/plain")

            def _reply(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                sys.stderr.write("docket-agent http: " + (format % args) + "\n")

        self.server = ThreadingHTTPServer((host, port), _Handler)
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The address to put in the workflow's ``http = "..."``."""
        host, port = self.server.server_address[:2]
        shown = host.decode() if isinstance(host, bytes) else host
        if ":" in shown:
            shown = f"[{shown}]"
        return f"http://{shown}:{port}/"

    def serve_forever(self) -> None:
        """Serves until ``stop()`` (from another thread) or Ctrl-C."""
        try:
            self.server.serve_forever(poll_interval=0.1)  # how soon stop() is noticed
        except KeyboardInterrupt:
            pass
        finally:
            self.server.server_close()
            self.dispatcher.close()

    def start(self) -> HttpAgent:
        """Serves on a background thread and returns at once."""
        self._thread = threading.Thread(target=self.serve_forever, name="docket-agent-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving and waits for the serving thread to end."""
        self.server.shutdown()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> HttpAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_http(handler: Handler, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serves ``handler`` over HTTP until interrupted, saying on stderr where it listens."""
    agent = HttpAgent(handler, host, port)
    print(f"docket agent listening on {agent.url}", file=sys.stderr, flush=True)
    agent.serve_forever()
