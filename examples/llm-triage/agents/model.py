"""The chat model behind the llm-triage agents: an OpenAI-compatible Chat Completions
endpoint called with the standard library only, or recorded answers (`--model scripted`).

What the model answers is untrusted text. `ask` returns it parsed as one JSON object and
nothing else; each agent then checks it against what that agent may do. Anything else
becomes an ERROR answer to docket (`AgentError`), its code saying what went wrong:

| code | when |
|---|---|
| MODEL_NOT_CONFIGURED | a real model is chosen but no endpoint is set (the message says what to set) |
| MODEL_ANSWER_MALFORMED | the model's text is not one JSON object, or the object is not an answer this agent may give (class `protocol_error`) |
| MODEL_SCRIPT_MISSING | `--model scripted` and the answers file has no answer for this ticket, agent and step |
| MODEL_HTTP_ERROR | the endpoint answered with an HTTP error status |
| MODEL_UNREACHABLE | the endpoint could not be reached |

The model is chosen by `--model NAME`, else the environment variable LLM_TRIAGE_MODEL,
else `scripted`: a run needs no network and no key unless a real model is asked for.
"""

from __future__ import annotations

import json
import math
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

try:
    import docket_agent  # noqa: F401
except ImportError:  # a checkout where the package is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "sdk" / "python" / "src"))

from docket_agent import AgentError, Usage

EXAMPLE = Path(__file__).resolve().parents[1]
SCRIPTED = "scripted"
DEFAULT_SCRIPT = EXAMPLE / "scripted" / "answers.json"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
MODEL_ENV = "LLM_TRIAGE_MODEL"
SCRIPT_ENV = "LLM_TRIAGE_SCRIPT"

#: What the message of MODEL_NOT_CONFIGURED tells a person to set.
SETUP = (
    f"set OPENAI_API_KEY (and OPENAI_BASE_URL for an OpenAI-compatible endpoint other than "
    f"{DEFAULT_BASE_URL}; a local server that needs no key: OPENAI_BASE_URL alone), "
    f"or {MODEL_ENV}={SCRIPTED} for the recorded answers"
)


@dataclass(frozen=True)
class Config:
    """Which model answers, and where it is reached."""

    model: str
    script: Path = DEFAULT_SCRIPT
    base_url: str = DEFAULT_BASE_URL
    base_url_given: bool = False
    api_key: str = ""

    @property
    def scripted(self) -> bool:
        return self.model == SCRIPTED

    def metadata(self) -> dict[str, str]:
        """Recorded with each answer (response metadata): the model, and where it was
        reached or the answers file. Never the key."""
        if self.scripted:
            return {"model": SCRIPTED, "answers": self.script.name}
        return {"model": self.model, "endpoint": self.base_url}


def config_from(argv: Sequence[str], environ: Mapping[str, str]) -> Config:
    """`--model NAME` and `--script FILE` from the command line, the rest from the
    environment. Bad usage goes to stderr and exits 2 before any request is read."""
    model = environ.get(MODEL_ENV, "").strip() or SCRIPTED
    script = Path(environ.get(SCRIPT_ENV, "") or DEFAULT_SCRIPT)
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag in ("--model", "--script") and args:
            value = args.pop(0)
            if flag == "--model":
                model = value.strip() or SCRIPTED
            else:
                script = Path(value)
        else:
            print(f"usage: AGENT.py [--model NAME|{SCRIPTED}] [--script ANSWERS.json] (got {flag!r})",
                  file=sys.stderr)
            raise SystemExit(2)
    base_url = environ.get("OPENAI_BASE_URL", "").strip()
    return Config(
        model=model,
        script=script,
        base_url=(base_url or DEFAULT_BASE_URL).rstrip("/"),
        base_url_given=bool(base_url),
        api_key=environ.get("OPENAI_API_KEY", "").strip(),
    )


@dataclass(frozen=True)
class Answer:
    """One answer of the model: its JSON object, and the tokens it cost."""

    value: dict[str, Any]
    usage: Usage


def ask(config: Config, *, agent: str, ticket: str, step: int,
        messages: list[dict[str, str]], timeout_s: float) -> Answer:
    """Asks the model for one JSON object. `agent`, `ticket` and `step` (the number of
    tool outcomes this step of the agent has had) find a scripted answer."""
    if config.scripted:
        return Answer(parse(scripted_text(config.script, agent=agent, ticket=ticket, step=step)), Usage())
    if not config.api_key and not config.base_url_given:
        raise AgentError(
            "MODEL_NOT_CONFIGURED",
            f"the model {config.model!r} has no endpoint: {SETUP}",
        )
    text, usage = chat_completion(config, messages, timeout_s)
    return Answer(parse(text), usage)


def scripted_text(script: Path, *, agent: str, ticket: str, step: int) -> str:
    """The recorded answer for this ticket, agent and step: `{TICKET: {AGENT: [ANSWER,
    ...]}}`, an answer being the model's text (a string, taken as it is) or a JSON object
    (its text)."""
    try:
        recorded = json.loads(script.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AgentError("MODEL_SCRIPT_MISSING", f"cannot read the recorded answers {script}: {exc}") from None
    answers = recorded.get(ticket, {}).get(agent, []) if isinstance(recorded, dict) else []
    if not isinstance(answers, list) or step >= len(answers):
        raise AgentError(
            "MODEL_SCRIPT_MISSING",
            f"{script} has no recorded answer for ticket {ticket!r}, agent {agent!r}, step {step} "
            f"(it has {len(answers) if isinstance(answers, list) else 0} for them)",
        )
    answer = answers[step]
    return answer if isinstance(answer, str) else json.dumps(answer)


def chat_completion(config: Config, messages: list[dict[str, str]], timeout_s: float) -> tuple[str, Usage]:
    """One POST to `{OPENAI_BASE_URL}/chat/completions` asking for a JSON object; returns
    the message's text and the usage the endpoint reported."""
    body = json.dumps({
        "model": config.model,
        "messages": messages,
        "response_format": {"type": "json_object"},
    }).encode()
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    url = f"{config.base_url}/chat/completions"
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        start = exc.read()[:300].decode("utf-8", "replace")
        raise AgentError("MODEL_HTTP_ERROR", f"{url} answered HTTP {exc.code}: {start}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise TimeoutError(f"{url} did not answer within {timeout_s:.0f} s") from None
        raise AgentError("MODEL_UNREACHABLE", f"cannot reach {url}: {exc.reason}") from None
    try:
        doc = json.loads(raw)
        text = doc["choices"][0]["message"]["content"]
        if not isinstance(text, str):
            raise TypeError("content is not a string")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise AgentError(
            "MODEL_ANSWER_MALFORMED",
            f"{url} answered without choices[0].message.content ({exc}): {raw[:200]!r}",
        ) from None
    reported = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
    usage = Usage(input_tokens=_count(reported.get("prompt_tokens")),
                  output_tokens=_count(reported.get("completion_tokens")))
    return text, usage


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def malformed(problem: str) -> AgentError:
    """The model's answer is not one this agent may give."""
    return AgentError("MODEL_ANSWER_MALFORMED", f"the model's answer: {problem}")


def parse(text: str) -> dict[str, Any]:
    """The model's text as one JSON object: nothing before or after it (a ```json fence
    around it is tolerated)."""
    body = text.strip()
    if body.startswith("```"):
        body = body.removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except ValueError as exc:
        raise malformed(f"not one JSON object ({exc}); it began {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise malformed(f"a JSON {type(value).__name__}, not an object; it began {text[:80]!r}")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def fields(value: Mapping[str, Any], where: str, required: Sequence[str], optional: Sequence[str] = ()) -> None:
    """`value` has every required key and no other than the optional ones."""
    missing = [k for k in required if k not in value]
    if missing:
        raise malformed(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(value) - set(required) - set(optional))
    if unknown:
        raise malformed(f"{where}: unknown field(s) {', '.join(unknown)}")


def text_field(value: Mapping[str, Any], key: str, where: str, *, limit: int, empty: bool = False) -> str:
    """A string field, stripped, within `limit` characters."""
    found = value.get(key)
    if not isinstance(found, str):
        raise malformed(f"{where}.{key}: expected a string, got {json.dumps(found)[:40]}")
    found = found.strip()
    if not found and not empty:
        raise malformed(f"{where}.{key}: must not be empty")
    if len(found) > limit:
        raise malformed(f"{where}.{key}: {len(found)} characters, more than {limit}")
    return found


def choice_field(value: Mapping[str, Any], key: str, where: str, choices: Sequence[str]) -> str:
    """A string field that is one of `choices`."""
    found = value.get(key)
    if found not in choices:
        raise malformed(f"{where}.{key}: {json.dumps(found)[:40]} is not one of {', '.join(choices)}")
    return str(found)


def amount_field(value: Mapping[str, Any], key: str, where: str) -> float:
    """A positive amount of money, at most two decimals."""
    found = value.get(key)
    if isinstance(found, bool) or not isinstance(found, (int, float)) or not math.isfinite(found):
        raise malformed(f"{where}.{key}: expected a number, got {json.dumps(found)[:40]}")
    if found <= 0 or found > 1_000_000 or round(found, 2) != found:
        raise malformed(f"{where}.{key}: {found} is not an amount (above 0, at most 1000000, two decimals)")
    return float(found)
