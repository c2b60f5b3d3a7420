"""Teams' own Stop on a streamed answer, at the HTTP edge: pressing it stops the request
(nothing more runs for it, the cut-off text is not posted again); Teams ending a stream
for other reasons (its two minutes) leaves the run alone and the answer whole."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

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
from .conftest import MakeBot, TeamsBot
from .fake_connector import FakeConnector

DEADLINE = 5.0
ANSWER = "api is up and running, all green."
STOP_NOTICE = "as you asked"
"""In the core's notice of a stop ("stopping as you asked: …")."""


async def eventually(what: str, ready: Callable[[], Awaitable[bool]]) -> None:
    """Wait (polling, with a deadline) until ``await ready()``."""
    deadline = time.monotonic() + DEADLINE
    while not await ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


class HeldCheck:
    """An agent whose one tool runs until the test lets it go (so the run is still in
    flight when Teams ends the stream); it counts the model's turns."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.run_ids: list[str] = []
        self.model_turns = 0

    def agent(self) -> Agent:
        @tool
        async def service_status(ctx: ToolContext, service: str) -> str:
            """How a service is doing."""
            self.run_ids.append(ctx.run_id)
            await self.release.wait()
            return f"{service} is up"

        def respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
            self.model_turns += 1
            if messages[-1].tool_results:
                return ModelResponse(text=ANSWER)
            return ModelResponse(tool_calls=[ToolCall("service_status", {"service": "api"})])

        return Agent(
            id="ops", model=FunctionModel(respond), tools=[service_status], store=MemoryStore()
        )


async def ask_in_chat(teams: TeamsBot, connector: FakeConnector, text: str) -> None:
    chat = act.chat_conversation("personal")
    answer = await teams.post(act.message(connector.url, text, conversation=chat))
    assert answer.status == 200


def refused_with(connector: FakeConnector, words: str) -> Callable[[], Awaitable[bool]]:
    async def ready() -> bool:
        return any(r.status == 403 and words in r.message for r in connector.refused)

    return ready


def said(connector: FakeConnector, words: str) -> Callable[[], Awaitable[bool]]:
    async def ready() -> bool:
        return any(words in text for text in connector.texts(act.PERSONAL_CHAT))

    return ready


def run_is(teams: TeamsBot, held: HeldCheck, status: str) -> Callable[[], Awaitable[bool]]:
    async def ready() -> bool:
        return (await teams.bot.agent.get_run(held.run_ids[0])).status == status

    return ready


async def test_pressing_teams_stop_on_a_streamed_answer_stops_its_run(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    connector.stop_after = 1  # "Working…" is shown, then the user presses Stop
    held = HeldCheck()
    teams = await make_bot(agent=held.agent())

    try:
        await ask_in_chat(teams, connector, "how is the api?")
        await eventually("Teams refusing the stream", refused_with(connector, "cancelled by user"))
        await eventually("the stop notice", said(connector, STOP_NOTICE))
        assert len(held.run_ids) == 1  # the tool was still running
    finally:
        held.release.set()
    await eventually("the run stopped", run_is(teams, held, "stopped"))
    await teams.bot.drain()

    assert held.model_turns == 1  # the model was not asked again
    (stream,) = connector.streams
    assert stream.final is None
    assert not any(ANSWER in text for text in connector.texts(act.PERSONAL_CHAT))
    stops = [t for t in connector.texts(act.PERSONAL_CHAT) if STOP_NOTICE in t]
    assert len(stops) == 1  # one stop for the stream


async def test_a_stream_teams_ends_at_its_time_limit_does_not_stop_the_run(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    connector.time_out_after = 1  # "Working…" is shown, then the two minutes are over
    held = HeldCheck()
    teams = await make_bot(agent=held.agent())

    try:
        await ask_in_chat(teams, connector, "how is the api?")
        await eventually("Teams refusing the stream", refused_with(connector, "streaming time"))
    finally:
        held.release.set()
    await eventually("the run finished", run_is(teams, held, "finished"))
    await teams.bot.drain()

    assert held.model_turns == 2
    texts = connector.texts(act.PERSONAL_CHAT)
    assert any(ANSWER in text for text in texts)  # the whole answer, below the stream
    assert not any(STOP_NOTICE in text for text in texts)
