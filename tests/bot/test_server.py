"""The HTTP app: health, metrics, adapter routes and lifecycle."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import ClientConnectionError, ClientSession, web
from aiohttp.test_utils import TestClient, TestServer

from agents import MemoryStore
from bot import ApprovalCard, ChatBot, IncomingMessage, ThreadKey, build_app, load_settings
from bot.traces import TracedMessenger
from tests.agents.helpers import Counter

from .helpers import RecordingMessenger, click, restart_agent

ROOT = Path(__file__).resolve().parents[2]
THREAD = ThreadKey(platform="fake", workspace="W", channel="C", root="1")


@dataclass
class FakeAdapter:
    """The adapter contract, with one route that turns a JSON body into a message."""

    bot: ChatBot
    platform: str = "fake"
    messenger: RecordingMessenger = field(default_factory=RecordingMessenger)
    events: list[str] = field(default_factory=list)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/fake/events", self.handle)]

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        await self.bot.on_message(
            IncomingMessage(
                thread=THREAD, user_id=body["user"], text=body["text"], dedupe_keys=(body["id"],)
            )
        )
        return web.json_response({"ok": True})

    async def start(self) -> None:
        self.events.append("start")

    async def stop(self) -> None:
        self.events.append("stop")


class DownStore(MemoryStore):
    async def ping(self) -> bool:
        raise ConnectionError("no route to store")


@pytest.fixture
async def served() -> AsyncIterator[tuple[TestClient[web.Request, web.Application], FakeAdapter]]:
    bot = ChatBot(restart_agent(Counter()))
    adapter = FakeAdapter(bot)
    app = build_app(load_settings(store_url="memory://"), bot, [adapter])
    async with TestClient(TestServer(app)) as client:
        yield client, adapter


async def test_healthz_is_ok_when_the_store_answers(
    served: tuple[TestClient[web.Request, web.Application], FakeAdapter],
) -> None:
    client, _ = served
    response = await client.get("/healthz")
    assert response.status == 200
    assert await response.json() == {"ok": True, "store": True}


async def test_healthz_is_503_when_the_store_is_down() -> None:
    bot = ChatBot(restart_agent(Counter(), DownStore()))
    app = build_app(load_settings(store_url="memory://"), bot, [])
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/healthz")
        assert response.status == 503
        assert await response.json() == {"ok": False, "store": False}


async def test_metrics_count_messages_clicks_decisions_and_runs(
    served: tuple[TestClient[web.Request, web.Application], FakeAdapter],
) -> None:
    client, adapter = served
    for _ in range(2):  # the second is a redelivery
        response = await client.post("/fake/events", json={"user": "U1", "text": "go", "id": "e1"})
        assert response.status == 200
    await adapter.bot.drain()
    (card,) = adapter.messenger.views(ApprovalCard)
    await adapter.bot.on_click(click(card, thread=THREAD))
    await adapter.bot.on_click(click(card, thread=THREAD, user="U3"))
    await adapter.bot.drain()
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    lines = set((await response.text()).splitlines())
    assert {
        "approval_bot_messages_received_total 2.0",
        "approval_bot_messages_duplicate_total 1.0",
        "approval_bot_clicks_total 2.0",
        'approval_bot_decisions_total{outcome="approved"} 1.0',
        'approval_bot_decisions_total{outcome="stale"} 1.0',
        "approval_bot_runs_started_total 1.0",
        "approval_bot_runs_finished_total 1.0",
        "approval_bot_runs_failed_total 0.0",
        "approval_bot_background_tasks 0.0",
        "# TYPE approval_bot_decisions_total counter",
        "# TYPE approval_bot_background_tasks gauge",
    } <= lines
    run = await adapter.bot.agent.get_run(card.run_id)
    assert run.usage.output_tokens > 0
    assert {
        f'approval_bot_model_tokens_total{{kind="input"}} {float(run.usage.input_tokens)}',
        f'approval_bot_model_tokens_total{{kind="output"}} {float(run.usage.output_tokens)}',
        'approval_bot_model_tokens_total{kind="cache_read"} 0.0',
    } <= lines


async def test_adapters_are_registered_started_and_stopped() -> None:
    bot = ChatBot(restart_agent(Counter()))
    adapter = FakeAdapter(bot)
    app = build_app(load_settings(store_url="memory://"), bot, [adapter], sweep_interval=3600)
    registered = bot.messenger("fake")
    assert isinstance(registered, TracedMessenger)  # each call a span, then the adapter's
    assert registered.inner is adapter.messenger
    async with TestClient(TestServer(app)):
        assert adapter.events == ["start"]
        assert bot._sweeper is not None
    assert adapter.events == ["start", "stop"]
    assert bot._sweeper is None


async def test_python_m_bot_serves_health_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "MICROSOFT_"))}
    env |= {
        "BOT_MODEL": "demo",
        "BOT_HOST": "127.0.0.1",
        "BOT_PORT": str(port),
        "STORE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
        "OPS_DB_PATH": str(tmp_path / "ops.db"),
        "TEAMS_ALLOW_UNAUTHENTICATED": "false",
        "PYTHONPATH": str(ROOT),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", cwd=tmp_path, env=env, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with ClientSession() as http:
            deadline = time.monotonic() + 30
            while True:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                        assert response.status == 200
                        break
                except ClientConnectionError:
                    assert time.monotonic() < deadline, "the server did not come up"
                    await asyncio.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr.decode()
    assert "shutting down" in stderr.decode()
