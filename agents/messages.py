"""The model-neutral conversation: what agents say to models and models answer.

These are pydantic models because they cross boundaries: they are persisted in run
snapshots and thread memory, and model adapters translate them to a provider's wire
format.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Part):
    """Plain text from the user or the model."""

    kind: Literal["text"] = "text"
    text: str


class ToolCallPart(_Part):
    """A tool call requested by the model."""

    kind: Literal["tool-call"] = "tool-call"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]


class ToolResultPart(_Part):
    """The answer to one tool call, sent back to the model.

    ``content`` is exactly the tool's own text (JSON for structured results);
    ``is_error`` marks failures, declines and expiries so the model can tell them
    apart from results. ``edited_args``: the arguments the call ran with when a
    person edited them before approving (``None``: it ran as the model asked).
    ``given_by``: the tool did not run; this person answered for it, and ``content``
    is their answer (``Agent.respond_tool_call``).
    """

    kind: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    edited_args: dict[str, Any] | None = None
    given_by: str | None = None

    @model_serializer(mode="wrap")
    def _without_unedited(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Nearly every result ran as asked: stored snapshots and histories leave the
        # fields out then, instead of repeating a null in every result.
        data: dict[str, Any] = handler(self)
        for rare in ("edited_args", "given_by"):
            if data.get(rare) is None:
                data.pop(rare, None)
        return data


Part = Annotated[TextPart | ToolCallPart | ToolResultPart, Field(discriminator="kind")]


class Message(BaseModel):
    """One turn of the conversation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user", "assistant"]
    parts: list[Part]

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message with one text part."""
        return cls(role="user", parts=[TextPart(text=text)])

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool calls in this message, in order."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """The tool results in this message, in order."""
        return [p for p in self.parts if isinstance(p, ToolResultPart)]
