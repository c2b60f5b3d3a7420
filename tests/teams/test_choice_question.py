"""A question that asks for one thing that is not free text (here: one of a few
environments) is a form: its card has the input and Send, pressed over HTTP with signed
invokes, and the run goes on with the value sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from agents import (
    Agent,
    FunctionModel,
    MemoryStore,
    Message,
    ModelResponse,
    ToolCall,
    ToolContext,
    tool,
)
from agents.models.base import ModelRequest

from . import activities as act
from .conftest import MakeBot
from .fake_connector import FakeConnector
from .signed import SignedBot, signed_settings, token_for

QUESTION = "Where should it go?"


class AskTarget(BaseModel):
    message: str


class Target(BaseModel):
    env: Literal["staging", "production"]


def release_agent(released: list[str]) -> Agent:
    """``release`` asks where to release to, then releases there (kept in ``released``)."""

    @tool(suspend_schema=AskTarget, resume_schema=Target)
    def release(ctx: ToolContext) -> str:
        """Release the current build."""
        if ctx.resume_data is None:
            ctx.suspend({"message": QUESTION})
        released.append(ctx.resume_data.env)
        return f"released to {ctx.resume_data.env}"

    def respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
        last = messages[-1]
        if last.tool_results:
            return ModelResponse(text=f"Done. {last.tool_results[0].content}")
        return ModelResponse(tool_calls=[ToolCall("release", {})])

    return Agent(id="ops", model=FunctionModel(respond), tools=[release], store=MemoryStore())


@dataclass
class Releases(SignedBot):
    released: list[str]


@pytest.fixture
async def releases(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Releases]:
    async with token_for(connector, monkeypatch) as token:
        released: list[str] = []
        teams = await make_bot(agent=release_agent(released), settings=signed_settings())
        yield Releases(teams=teams, connector=connector, token=token, released=released)


def inputs(card: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in card["body"] if e["type"].startswith("Input.")]


async def test_a_question_of_one_choice_is_a_form_that_answers_it(releases: Releases) -> None:
    question = await releases.ask("release it")
    card = question.card

    assert question.posted.card_kind == "question"
    (choice,) = inputs(card)
    assert (choice["type"], choice["id"]) == ("Input.ChoiceSet", "field:env")
    assert [c["value"] for c in choice["choices"]] == ["staging", "production"]
    assert [(a["title"], a["verb"]) for a in card["actions"]] == [
        ("Send", "answer"),
        ("Decline", "decline"),
        ("Cancel", "cancel"),
    ]
    texts = [e["text"] for e in card["body"] if e["type"] == "TextBlock"]
    assert not any("Reply here" in t for t in texts)  # the form answers it

    answer = await question.press("answer", user=act.ALICE, values={"env": "production"})

    assert answer.body["type"] == "application/vnd.microsoft.card.adaptive", answer.body
    assert releases.released == ["production"]
    assert "Done. released to production" in question.texts()
    (answered,) = question.updates()
    assert "Answered" in answered["body"][0]["text"]
    assert inputs(answered) == []
