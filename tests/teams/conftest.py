"""A running bot for the Teams tests: real aiohttp server, real CloudAdapter, fake connector."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.teams import StreamPace, TeamsAdapter, TeamsSettings, load_teams_settings
from adapters.teams.limits import RetryPolicy
from adapters.web import page_routes
from agents import Agent, MemoryStore, Store
from bot import Settings
from bot.clients import Clients
from bot.core import ChatBot
from bot.policy import ApprovalPolicy
from bot.server import build_app

from . import activities as act
from .fake_connector import ConnectorCall, FakeConnector
from .scripted import build_agent

_ENV = (
    "MICROSOFT_APP_ID",
    "MICROSOFT_APP_PASSWORD",
    "MICROSOFT_APP_TYPE",
    "MICROSOFT_APP_TENANT_ID",
    "TEAMS_ALLOW_UNAUTHENTICATED",
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "APPROVAL_POLICY",
    "STORE_URL",
)


@pytest.fixture(autouse=True)
def _no_platform_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings come from each test, never from the machine's environment."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@dataclass
class Answer:
    """The HTTP answer to one posted activity: JSON decoded, else the text (or ``None``)."""

    status: int
    body: Any


@dataclass
class TeamsBot:
    """One running bot process: ChatBot + TeamsAdapter served over HTTP on 127.0.0.1."""

    bot: ChatBot
    adapter: TeamsAdapter
    deployed: list[str]
    runner: web.AppRunner
    session: aiohttp.ClientSession
    url: str = ""
    closed: bool = field(default=False)

    async def post(
        self, activity: dict[str, Any], *, headers: dict[str, str] | None = None
    ) -> Answer:
        """POST an activity to /api/messages and return status and JSON body (if any)."""
        return await self.post_raw(json.dumps(activity).encode(), headers=headers)

    async def post_raw(
        self,
        body: bytes,
        *,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Answer:
        all_headers = {"Content-Type": content_type, **(headers or {})}
        async with self.session.post(
            f"{self.url}/api/messages", data=body, headers=all_headers
        ) as response:
            text = await response.text()
            is_json = response.content_type == "application/json"
            return Answer(response.status, json.loads(text) if is_json else (text or None))

    async def seen_by(
        self,
        posted: ConnectorCall,
        *,
        user: dict[str, Any],
        conversation: dict[str, Any],
        service_url: str,
    ) -> dict[str, Any]:
        """A posted card as ``user`` sees it: what their refresh answers when Teams
        refreshes it for them, else the card as posted."""
        card = posted.card
        assert card is not None, posted
        if not act.refreshes_for(card, user):
            return card
        invoke = act.refresh(
            service_url, card, conversation=conversation, card_id=posted.response_id, user=user
        )
        answer = await self.post(invoke)
        assert answer.status == 200, answer
        assert answer.body["type"] == "application/vnd.microsoft.card.adaptive", answer.body
        seen: dict[str, Any] = answer.body["value"]
        return seen

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.session.close()
            await self.runner.cleanup()  # finishes the bot's background work first


MakeBot = Callable[..., Awaitable[TeamsBot]]

TEST_PACE = StreamPace(every=0.05, gap=0.02)
"""Streamed answers in tests: Teams' pace (1.5 s, 1 s) made quick, the same proportions."""

TEST_LIMITS = RetryPolicy(
    budget=3.0, reply_budget=1.0, first_wait=0.05, longest_wait=0.4, attempt_timeout=5.0
)
"""Teams' limits in tests: the same policy made quick (a ``Retry-After`` is kept as sent)."""


@pytest.fixture
async def connector() -> AsyncIterator[FakeConnector]:
    fake = await FakeConnector().start()
    fake.stream_gap = TEST_PACE.gap
    yield fake
    await fake.close()


async def start_teams_bot(
    *,
    store: Store | None = None,
    policy: ApprovalPolicy | None = None,
    deployed: list[str] | None = None,
    settings: TeamsSettings | None = None,
    agent: Agent | None = None,
    clients: Clients | None = None,
) -> TeamsBot:
    """A bot (the scripted agent unless ``agent`` is given) serving /api/messages locally."""
    settings = settings or load_teams_settings(teams_allow_unauthenticated=True)
    deployed = [] if deployed is None else deployed
    agent = agent or build_agent(store or MemoryStore(), deployed)
    bot = ChatBot(agent, policy=policy, clients=clients)
    adapter = TeamsAdapter(bot, settings)
    adapter.messenger.pace = TEST_PACE
    adapter.limits.policy = TEST_LIMITS
    runner = web.AppRunner(build_app(Settings(), bot, [adapter], pages=page_routes(bot.pages)))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    bot.links.public_url = f"http://127.0.0.1:{port}"
    return TeamsBot(
        bot=bot,
        adapter=adapter,
        deployed=deployed,
        runner=runner,
        session=aiohttp.ClientSession(),
        url=f"http://127.0.0.1:{port}",
    )


@pytest.fixture
async def make_bot() -> AsyncIterator[MakeBot]:
    """Start bots (the scripted agent unless ``agent`` is given); several may share a store."""
    started: list[TeamsBot] = []

    async def make(**options: Any) -> TeamsBot:
        running = await start_teams_bot(**options)
        started.append(running)
        return running

    yield make
    for running in reversed(started):
        await running.close()
