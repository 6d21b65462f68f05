#!/usr/bin/env python3
"""A docket agent in Python, standard library only: the geo pipeline's Intelligence step.

It reads AI-answer snapshots (a decision input from Observation) and computes, per brand,
the mention rate (share of answers naming the brand) and the share of voice (the brand's
mentions over all brands' mentions), then hands the GEO scores to Reasoning.

Protocol (docs/agent-protocol.md): one JSON request per line on stdin, one JSON response
per line on stdout, nothing else on stdout. Logs go to stderr. The process is kept
between requests, so state may be cached, but every answer must depend on the request only.
"""

import concurrent.futures
import json
import sys
import threading


def error(request, code, message):
    """An ERROR response: the engine records it and applies its retry policy."""
    return {
        "request_id": request["request_id"],
        "status": "ERROR",
        "error_code": code,
        "error_message": message,
    }


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


def handle(request):
    if request["capability_code"] != "GEO_SCORE":
        return error(request, "INPUT_UNKNOWN_CAPABILITY",
                     "this agent only offers GEO_SCORE, not " + request["capability_code"])
    # Decide only from decision_inputs; context_inputs are read-only references.
    snapshots, brands = [], []
    for item in request.get("decision_inputs", []):
        if item["output_type"] == "ai_answer_snapshots":
            snapshots += item["payload"].get("snapshots", [])
            brands += item["payload"].get("brands", [])
    if not brands or not snapshots:
        return error(request, "INPUT_MISSING_SNAPSHOTS",
                     "expected brands and snapshots in an ai_answer_snapshots decision input")
    usable = [s for s in snapshots if s.get("answer")]
    warnings = []
    if len(usable) < len(snapshots):
        warnings.append(f"{len(snapshots) - len(usable)} snapshot(s) had no answer text")
    if not usable:
        return error(request, "DATA_NO_ANSWERS", "no snapshot has answer text")
    response = {
        "request_id": request["request_id"],
        "status": "PARTIAL" if warnings else "SUCCESS",
        "confidence_level": "MEDIUM" if warnings else "HIGH",
        "usage": {"input_tokens": 0, "output_tokens": 0, "tool_calls": 0},
        "actions": [{
            "type": "handoff",
            "to": "reasoning",
            "output_type": "geo_scores",
            "payload": {"scores": geo_scores(brands, usable), "answers": len(usable)},
        }],
    }
    if warnings:
        response["warnings"] = warnings
    return response


def answer(request, out_lock):
    try:
        response = handle(request)
    except Exception as exc:  # an agent bug becomes an ERROR response, not a crash
        response = error(request, "AGENT_INTERNAL_ERROR", f"{type(exc).__name__}: {exc}")
    line = json.dumps(response) + "\n"
    with out_lock:  # one whole response line at a time, even with several under way
        sys.stdout.write(line)
        sys.stdout.flush()
    print(f"answered {request['request_id']}", file=sys.stderr)


def main():
    """`agent.py [--at-once N]`: with N above 1, up to N requests are handled at once on
    threads, each answered by its request_id as it finishes (the workflow says
    `requests_per_process = N`: docs/agent-protocol.md#several-requests-at-once)."""
    at_once = 1
    if len(sys.argv) == 3 and sys.argv[1] == "--at-once":
        at_once = max(1, int(sys.argv[2]))
    out_lock = threading.Lock()
    with concurrent.futures.ThreadPoolExecutor(max_workers=at_once) as pool:
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            if at_once == 1:
                answer(request, out_lock)
            else:
                pool.submit(answer, request, out_lock)


if __name__ == "__main__":
    main()
