"""Fixtures: the fake Slack Web API, a store, and a bot served over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agents import Agent, MemoryStore, Store
from bot import ApprovalPolicy, SuggestedPrompt
from bot.clients import Clients

from .fake_slack import FakeSlack
from .harness import BotServer, start_bot
from .scripted import Ran, build_agent

StartBot = Callable[..., Awaitable[BotServer]]


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    yield fake
    await fake.stop()
    assert not fake.problems, f"Slack would have refused: {fake.problems}"


@pytest.fixture
def ran() -> Ran:
    return Ran()


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    memory = MemoryStore()
    yield memory
    await memory.close()


@pytest.fixture
async def serve(slack: FakeSlack) -> AsyncIterator[StartBot]:
    """Start bots (closed at the end of the test)."""
    started: list[BotServer] = []

    async def start(
        agent: Agent,
        *,
        policy: ApprovalPolicy | None = None,
        socket_mode: bool = False,
        prompts: tuple[SuggestedPrompt, ...] = (),
        clients: Clients | None = None,
    ) -> BotServer:
        server = await start_bot(
            slack, agent, policy=policy, socket_mode=socket_mode, prompts=prompts, clients=clients
        )
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        await server.close()


@pytest.fixture
async def bot(serve: StartBot, store: Store, ran: Ran) -> BotServer:
    """The scripted agent on a memory store, served over HTTP."""
    return await serve(build_agent(store, ran))
