"""A model driven by a Python function: the scripted model for tests and examples.

The function sees the conversation so far (and the request) and returns the next
response. It never touches the network, so runs are deterministic.
"""

from __future__ import annotations

import inspect
import itertools
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, ToolCallPart
from ..usage import Usage
from .base import (
    ModelError,
    ModelEvent,
    ModelFinish,
    ModelRequest,
    StopReason,
    StructuredRequest,
    TextDelta,
    ToolCallEvent,
)


@dataclass(frozen=True)
class ToolCall:
    """A tool call a scripted response asks for; ``id`` is generated when omitted."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModelResponse:
    """One scripted model response."""

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    stop_reason: StopReason | None = None


Handler = Callable[
    [list[Message], ModelRequest], ModelResponse | str | Awaitable[ModelResponse | str]
]
StructuredHandler = Callable[
    [list[Message], dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]
]

_ids = itertools.count(1)


class FunctionModel:
    """A ``Model`` whose answers come from ``handler(messages, request)``.

    Text is streamed word by word so consumers see several deltas. ``structured``
    calls ``structured_handler(messages, schema)``.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        structured_handler: StructuredHandler | None = None,
        name: str = "function",
    ) -> None:
        self._handler = handler
        self._structured = structured_handler
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        answer = self._handler(list(request.messages), request)
        if inspect.isawaitable(answer):
            answer = await answer
        response = ModelResponse(text=answer) if isinstance(answer, str) else answer
        for piece in re.findall(r"\S+\s*|\s+", response.text):
            yield TextDelta(text=piece)
        for call in response.tool_calls:
            call_id = call.id or f"call_{next(_ids)}_{uuid.uuid4().hex[:8]}"
            yield ToolCallEvent(
                call=ToolCallPart(tool_call_id=call_id, tool_name=call.name, args=call.args)
            )
        stop = response.stop_reason or ("tool_use" if response.tool_calls else "end_turn")
        words = len(response.text.split())
        yield ModelFinish(
            stop_reason=stop,
            usage=Usage(input_tokens=len(request.messages), output_tokens=words, requests=1),
        )

    async def structured(self, request: StructuredRequest) -> dict[str, Any]:
        if self._structured is None:
            raise ModelError(f"{self._name} has no structured-output handler")
        answer = self._structured(list(request.messages), request.schema)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer
