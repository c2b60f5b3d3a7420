"""The model protocol: what the run loop needs from a language model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .. import texts
from ..messages import Message, ToolCallPart
from ..usage import Usage

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"]


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A tool as offered to the model: name, description and JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One request to the model: instructions, conversation and offered tools."""

    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()


@dataclass(frozen=True, kw_only=True)
class StructuredRequest:
    """A request for one JSON object matching ``schema`` (used by auto-resume)."""

    system: str
    messages: Sequence[Message]
    schema: dict[str, Any]
    name: str = "extract"
    description: str = "Extract the requested data from the conversation."


@dataclass(frozen=True, kw_only=True)
class TextDelta:
    """A piece of the model's text, as it arrives."""

    text: str


@dataclass(frozen=True, kw_only=True)
class ToolCallEvent:
    """A complete tool call (arguments fully assembled)."""

    call: ToolCallPart


@dataclass(frozen=True, kw_only=True)
class ModelFinish:
    """The end of one model response."""

    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)


ModelEvent = TextDelta | ToolCallEvent | ModelFinish


class ModelError(Exception):
    """A model request failed for good (after the client's own retries).

    ``user_message`` is safe to show to people in a chat; the exception text may
    hold details for logs.
    """

    def __init__(self, message: str, *, user_message: str | None = None) -> None:
        super().__init__(message)
        self.user_message = user_message or texts.MODEL_UNAVAILABLE


@runtime_checkable
class Model(Protocol):
    """A language model the run loop can drive.

    ``stream`` yields text deltas as they arrive, complete tool calls, and finally
    exactly one ``ModelFinish``. ``structured`` returns one JSON object matching a
    schema. Both raise ``ModelError`` when the model cannot answer.
    """

    @property
    def name(self) -> str:
        """A short name for logs and metrics."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one response."""
        ...

    async def structured(self, request: StructuredRequest) -> dict[str, Any]:
        """Return one object matching ``request.schema``."""
        ...


@runtime_checkable
class Reachable(Protocol):
    """A model behind a service that can be asked, once, whether it would answer
    (``python -m bot check --live``)."""

    async def check(self) -> None:
        """Reach the service once: raises ``ModelError`` saying why it would not answer
        (a refused key, an unknown model, no connection)."""
        ...
