"""The package's types against docs/agent-protocol.schema.json, the schema docket
generates from its Rust types: same fields, same required ones, same enumerations, and
every document the package writes validates."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, get_args

import jsonschema
import pytest

import docket_agent as da
from docket_agent import protocol

from conftest import doc_example

ACTIONS = {
    "handoff": da.Handoff,
    "request_capability": da.RequestCapability,
    "escalate": da.Escalate,
    "finish": da.Finish,
    "spawn": da.Spawn,
    "write_domain": da.WriteDomain,
    "finish_episode": da.FinishEpisode,
    "request_effect": da.RequestEffect,
    "call_tool": da.CallTool,
    "wait": da.Wait,
}

#: Fields whose JSON name is a Python keyword, by their Python name: `Wait.for_` is `for`.
JSON_NAMES = {(da.Wait, "for_"): "for"}

STRUCTS = {
    "AgentRequest": da.Request,
    "AgentResponse": da.Response,
    "EpisodeResult": da.EpisodeResult,
    "BudgetRequest": da.Budget,
    "Usage": da.Usage,
    "ToolCall": da.ToolCall,
    "TaskRestrictions": da.TaskRestrictions,
    "DecisionInput": da.DecisionInput,
    "ContextInput": da.ContextInput,
    "IntentClassification": da.IntentClassification,
    "IntentTarget": da.IntentTarget,
}

ENUMS = {
    "Priority": da.Priority,
    "ResponseStatus": da.ResponseStatus,
    "Confidence": da.Confidence,
    "EpisodeStatus": da.EpisodeStatus,
}


def validator(schema: dict[str, Any], definition: str) -> jsonschema.protocols.Validator:
    wrapped = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    return jsonschema.Draft202012Validator(wrapped)


def fields_of(cls: type) -> tuple[set[str], set[str]]:
    """(every field, the fields without a default) of a dataclass by their JSON names,
    leaving out `raw`."""
    fields = [f for f in dataclasses.fields(cls) if f.name != "raw"]
    required = {
        JSON_NAMES.get((cls, f.name), f.name) for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    return {JSON_NAMES.get((cls, f.name), f.name) for f in fields}, required


def test_a_field_named_for_its_json_name_is_written_under_it() -> None:
    assert fields_of(da.Wait) == ({"until", "for", "event", "reason"}, {"reason"})
    assert "for" in da.wait(for_="2h", reason="r").to_json()


def test_every_action_of_the_schema_has_a_type_with_its_fields(schema: dict[str, Any]) -> None:
    variants = {v["properties"]["type"]["const"]: v for v in schema["$defs"]["Action"]["oneOf"]}
    assert set(variants) == set(ACTIONS), "the schema's actions and the package's differ"
    for name, cls in ACTIONS.items():
        props = set(variants[name]["properties"]) - {"type"}
        required = set(variants[name]["required"]) - {"type"}
        fields, no_default = fields_of(cls)
        assert fields == props, f"{name}: fields {sorted(fields)} != schema {sorted(props)}"
        assert no_default == required, f"{name}: required {sorted(no_default)} != schema {sorted(required)}"


@pytest.mark.parametrize("definition", sorted(STRUCTS))
def test_documents_have_the_schemas_fields(schema: dict[str, Any], definition: str) -> None:
    d = schema["$defs"][definition]
    fields, no_default = fields_of(STRUCTS[definition])
    assert fields == set(d["properties"])
    assert no_default == set(d.get("required", []))


@pytest.mark.parametrize("definition", sorted(ENUMS))
def test_enumerations_match(schema: dict[str, Any], definition: str) -> None:
    consts = [v["const"] for v in schema["$defs"][definition]["oneOf"]]
    assert list(get_args(ENUMS[definition])) == consts


def every_action() -> list[da.Action]:
    """One of each action, with every optional field given."""
    return [
        da.handoff("coder", "job", {"fix": "the build"},
                   task=da.task("fix-build-7", ["Bash(git push*)", "fs:write_file"])),
        da.request_capability("observation", "question_generation", {"topics": ["crm"]}, priority="HIGH"),
        da.escalate("Publish the post?"),
        da.ask("Which market first?", ["EU", "US"]),
        da.finish({"answer": 42}),
        da.spawn("checker", "verify", "re-check the totals",
                 budget=da.Budget(tokens=2000, tool_calls=3, wall_time_ms=60_000), inputs={"ids": [1, 2]}),
        da.write_domain("backend_code", {"files": ["src/main.rs"]}),
        da.finish_episode("failed", "the source was down", artifacts_created=["doc-1"],
                          decisions=[{"chose": "stop"}], verification_needed=True,
                          next_actions=[{"retry": "tomorrow"}], error_class="data_error"),
        da.request_effect("publish", "api", idempotency_key="post-1", params={"text": "We are live."},
                          not_before="2026-11-30T09:00:00+01:00"),
        da.call_tool("search", {"q": "crm for startups"}),
        da.wait(until="2026-11-30T09:00:00+01:00", reason="the 09:00 slot"),
        da.wait(for_="2h 30m", reason="the post goes out after the embargo"),
        da.wait(event="comment", reason="answer the first comment on the post"),
        da.wait(event="comment", for_="6h", reason="answer the first comment on the post"),
    ]


def test_every_action_validates_against_the_schema(schema: dict[str, Any]) -> None:
    v = validator(schema, "Action")
    for action in every_action():
        doc = action.to_json()
        v.validate(doc)
        assert json.loads(json.dumps(doc)) == doc


def test_responses_validate_against_the_schema(schema: dict[str, Any]) -> None:
    v = validator(schema, "AgentResponse")
    request = da.Request.from_json(json.loads(doc_example("request")))
    for action in every_action():
        v.validate(da.success(request, action, confidence="HIGH").to_json())
    v.validate(da.partial(request, da.finish(), confidence="LOW", warnings=["2 sources down"],
                          usage=da.Usage(10, 20, 1), tool_calls=[da.ToolCall("Bash", "ls")],
                          metadata={"model": "m-1"}).to_json())
    v.validate(da.error(request, "INPUT_VALIDATION_FAILED", "no brands").to_json())
    v.validate(da.success(request, da.ask("A business case, or channels?", ["case", "channels"]),
                          confidence="MEDIUM",
                          intent=da.IntentClassification(
                              "business_case", 0.4, secondary_intents=("document_generation",),
                              secondary_targets=(da.IntentTarget("DOC", "DOC_GENERATE"),))).to_json())
    v.validate(da.timed_out(request, "the model did not answer", da.finish({"partial": True})).to_json())


def test_the_documented_request_parses_and_the_documented_response_is_rebuilt(schema: dict[str, Any]) -> None:
    raw = json.loads(doc_example("request"))
    validator(schema, "AgentRequest").validate(raw)
    request = da.Request.from_json(raw)
    assert request.capability_code == "GEO_SCORE"
    assert [i.source_agent for i in request.decision_inputs] == ["observation"]
    assert [i.source_agent for i in request.context_inputs] == ["governance"]
    assert isinstance(request.context_inputs[0], da.ContextInput)

    documented = json.loads(doc_example("response"))
    handoff = documented["actions"][0]
    rebuilt = da.success(
        request, da.handoff(handoff["to"], handoff["output_type"], handoff["payload"]), confidence="HIGH"
    ).to_json()
    documented.pop("usage")  # all zero: the default, left out
    assert rebuilt == documented


def test_the_package_leaves_out_defaults_but_keeps_what_was_given() -> None:
    assert da.finish().to_json() == {"type": "finish", "output": None}
    assert da.call_tool("clock").to_json() == {"type": "call_tool", "name": "clock", "arguments": None}
    assert da.request_effect("like", "browser").to_json() == {"type": "request_effect", "kind": "like", "lane": "browser"}
    assert da.request_effect("like", "browser", not_before="2026-11-30T09:00:00Z").to_json() == {
        "type": "request_effect", "kind": "like", "lane": "browser", "not_before": "2026-11-30T09:00:00Z"}
    assert da.spawn("a", "verify", "g").to_json()["budget"] == {}
    assert da.wait(for_="90s", reason="r").to_json() == {"type": "wait", "for": "90s", "reason": "r"}
    assert da.wait(event="comment", reason="r").to_json() == {"type": "wait", "event": "comment", "reason": "r"}
    assert protocol.MAX_ACTIONS == 1000
