"""Scripted models and small tools shared by the runtime tests."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from agents import DEFAULT_LEASE, FunctionModel, Message, ModelResponse, ToolCall
from agents.models.base import ModelRequest
from agents.models.function import StructuredHandler


def after_the_lease() -> datetime:
    """A moment when the heartbeat of a run 'crashed' just now has lapsed."""
    return datetime.now(UTC) + DEFAULT_LEASE + timedelta(seconds=1)


def last_results(messages: list[Message]) -> list[Any]:
    """The tool results the model is answering now (empty on a fresh user turn)."""
    last = messages[-1]
    return last.tool_results if last.role == "user" else []


def call_then_answer(
    *calls: ToolCall,
    before: str = "",
    answer: Callable[[list[Message]], str] | None = None,
    structured_handler: StructuredHandler | None = None,
) -> FunctionModel:
    """A model that asks for ``calls`` on a user's text, then answers from the results."""

    def handler(messages: list[Message], request: ModelRequest) -> ModelResponse:
        results = last_results(messages)
        if not results:
            return ModelResponse(text=before, tool_calls=calls)
        if answer is not None:
            return ModelResponse(text=answer(messages))
        summary = "; ".join(
            f"{r.tool_name} {'error' if r.is_error else 'ok'}: {r.content}" for r in results
        )
        return ModelResponse(text=f"Done. {summary}")

    return FunctionModel(handler, structured_handler=structured_handler)


class Counter:
    """Counts calls of a tool body, so tests can assert what ran and how often."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)

    @property
    def count(self) -> int:
        return len(self.calls)


WAITING_NOTE = re.compile(r"^\[Still waiting in this thread[^`\n]*`([^`]+)`[^\n]*\]\n+", re.M)
"""A line the chat layer puts before a request for a call still waiting in its thread."""


def still_waiting(text: str) -> tuple[str, list[str]]:
    """A turn's text without the chat layer's waiting notes, and the tools they name (a
    scripted model's view of what the chat layer told it waits)."""
    return WAITING_NOTE.sub("", text), WAITING_NOTE.findall(text)
