"""Errors a handler raises to answer ERROR, and the codes the runners answer with.

An exception never leaves the agent as a traceback on stdout: the runner turns it into an
ERROR response (the traceback goes to stderr), so docket records it with a code whose
error class (docs/governance.md#error-classes) decides what the failure ladder does.
"""

from __future__ import annotations

from .protocol import is_error_code

__all__ = [
    "AgentError",
    "InputError",
    "INTERNAL_ERROR",
    "INVALID_RESPONSE",
    "MALFORMED_REQUEST",
    "TIMED_OUT",
    "INPUT_VALIDATION_FAILED",
    "INPUT_MISSING",
]

#: An exception the handler did not expect (error class ``agent_error``: retried).
INTERNAL_ERROR = "AGENT_INTERNAL_ERROR"
#: The handler built a response that breaks a protocol rule (class ``validation_error``),
#: the code docket itself gives such a response.
INVALID_RESPONSE = "AGENT_INVALID_RESPONSE"
#: A request line docket sent that this package cannot read (class ``protocol_error``).
MALFORMED_REQUEST = "AGENT_MALFORMED_REQUEST"
#: The handler raised ``TimeoutError``: answered with status TIMEOUT (class ``timeout``:
#: the retry gets a longer timeout).
TIMED_OUT = "AGENT_TIMEOUT"
#: ``InputError``'s default: the decision inputs are not what this agent can work from
#: (class ``validation_error``; a bundle may stop the flow on it at a checkpoint).
INPUT_VALIDATION_FAILED = "INPUT_VALIDATION_FAILED"
#: A decision input the agent needs is absent (class ``data_error``).
INPUT_MISSING = "INPUT_MISSING"


class AgentError(Exception):
    """Raise in a handler to answer ERROR with a code of your own
    (``raise AgentError("GEO_SNAPSHOT_STALE", "snapshots are older than a week")``)."""

    def __init__(self, code: str, message: str) -> None:
        if not is_error_code(code):
            raise ValueError(
                f"AgentError code {code!r} is not of the form CATEGORY_SPECIFIC_ERROR "
                "(upper-case words of letters and digits joined by `_`, at least two)"
            )
        if not message.strip():
            raise ValueError(f"AgentError {code}: the message must not be empty")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class InputError(AgentError):
    """The request's decision inputs cannot be worked from: answered ERROR
    ``INPUT_VALIDATION_FAILED`` unless another code is given."""

    def __init__(self, message: str, code: str = INPUT_VALIDATION_FAILED) -> None:
        super().__init__(code, message)
