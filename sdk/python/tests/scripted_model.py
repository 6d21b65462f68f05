"""A scripted model for the Agents SDK's model interface: each turn is a function of what
the model is sent, so a test states what the model must have seen and what it answers.
No network, no key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model, ModelTracing
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText


@dataclass
class Sent:
    """What one call of the model was given."""

    instructions: str | None
    input: list[TResponseInputItem]
    tools: list[str]
    handoffs: list[str]


def tool_call(name: str, arguments: str, call_id: str = "model-call-1") -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", call_id=call_id, name=name, arguments=arguments)


def message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg-1", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


Turn = Callable[[Sent], list[TResponseOutputItem]]


@dataclass
class ScriptedModel(Model):
    """Answers each call with the next turn of the script; a call past its end fails."""

    turns: list[Turn]
    sent: list[Sent] = field(default_factory=list)

    async def get_response(self, system_instructions: str | None, input: str | list[TResponseInputItem],
                           model_settings: Any, tools: list[Any], output_schema: Any, handoffs: list[Any],
                           tracing: ModelTracing, *, previous_response_id: str | None,
                           conversation_id: str | None, prompt: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        sent = Sent(system_instructions, items, [t.name for t in tools], [h.tool_name for h in handoffs])
        self.sent.append(sent)
        if len(self.sent) > len(self.turns):
            raise AssertionError(f"the model was called {len(self.sent)} times; the script has {len(self.turns)}")
        output = self.turns[len(self.sent) - 1](sent)
        return ModelResponse(output=output, usage=Usage(input_tokens=120, output_tokens=30), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("docket calls the model once per request, without streaming")
