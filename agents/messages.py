"""The model-neutral conversation: what agents say to models and models answer.

These are pydantic models because they cross boundaries: they are persisted in run
snapshots and thread memory, and model adapters translate them to a provider's wire
format.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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

    ``content`` is text (JSON for structured results); ``is_error`` marks failures,
    declines and expiries so the model can tell them apart from results.
    """

    kind: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False


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
