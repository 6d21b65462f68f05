#!/usr/bin/env python3
"""A docket agent in Python, on the docket-agent package: the geo pipeline's Intelligence step.

It reads AI-answer snapshots (a decision input from Observation) and computes, per brand,
the mention rate (share of answers naming the brand) and the share of voice (the brand's
mentions over all brands' mentions), then hands the GEO scores to Reasoning.

The package (sdk/python, `pip install ./sdk/python`; docs/python.md) speaks the protocol:
one JSON request per line on stdin, one response per line on stdout, nothing else there;
an exception in `handle` becomes an ERROR response, its traceback going to stderr.
Run from a checkout without installing, the package is taken from sdk/python/src.
"""

import sys
from pathlib import Path

try:
    import docket_agent
except ImportError:  # a checkout where the package is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python" / "src"))
    import docket_agent

from docket_agent import AgentError, InputError, Request, Response, handoff, partial, success


def geo_scores(brands, snapshots):
    """Mention rate and share of voice per brand, rounded to 4 decimals."""
    answers = [s["answer"].lower() for s in snapshots]
    mentions = {b: sum(a.count(b.lower()) for a in answers) for b in brands}
    answered = {b: sum(1 for a in answers if b.lower() in a) for b in brands}
    total = sum(mentions.values())
    return {
        b: {
            "mentions": mentions[b],
            "mention_rate": round(answered[b] / len(answers), 4),
            "share_of_voice": round(mentions[b] / total, 4) if total else 0.0,
        }
        for b in brands
    }


def handle(request: Request) -> Response:
    if request.capability_code != "GEO_SCORE":
        raise AgentError("INPUT_UNKNOWN_CAPABILITY",
                         "this agent only offers GEO_SCORE, not " + request.capability_code)
    # Decide only from decision inputs; context inputs are read-only references.
    snapshots, brands = [], []
    for item in request.decision_inputs_of("ai_answer_snapshots"):
        snapshots += item.payload.get("snapshots", [])
        brands += item.payload.get("brands", [])
    if not brands or not snapshots:
        raise InputError("expected brands and snapshots in an ai_answer_snapshots decision input",
                         code="INPUT_MISSING_SNAPSHOTS")
    usable = [s for s in snapshots if s.get("answer")]
    if not usable:
        raise AgentError("DATA_NO_ANSWERS", "no snapshot has answer text")
    scores = handoff("reasoning", "geo_scores",
                     {"scores": geo_scores(brands, usable), "answers": len(usable)})
    if len(usable) < len(snapshots):
        return partial(request, scores, confidence="MEDIUM",
                       warnings=[f"{len(snapshots) - len(usable)} snapshot(s) had no answer text"])
    return success(request, scores, confidence="HIGH")


def main():
    """`agent.py [--at-once N]`: with N above 1, up to N requests are handled at once,
    each answered by its request_id as it finishes (the workflow says
    `requests_per_process = N`: docs/agent-protocol.md#several-requests-at-once)."""
    at_once = 1
    if len(sys.argv) == 3 and sys.argv[1] == "--at-once":
        at_once = max(1, int(sys.argv[2]))
    docket_agent.run_stdio(handle, at_once=at_once)


if __name__ == "__main__":
    main()
