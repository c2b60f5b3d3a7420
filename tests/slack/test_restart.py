"""A restart between the card (or question) and the answer: the new process resumes."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from adapters.slack.wire import APPROVE_ACTION
from agents import open_store

from .fake_slack import FakeSlack
from .harness import CHANNEL, mention_event, message_event, start_bot
from .scripted import Ran, build_agent
from .test_approvals import ask_for_deploy, card_text, has_buttons

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
DURABLE = ["sqlite", pytest.param("redis", marks=pytest.mark.redis)]


@asynccontextmanager
async def durable_url(kind: str, tmp_path: Path) -> AsyncIterator[str]:
    """An empty SQLite file, or a private key prefix on the real Redis (deleted after)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'bot.db'}"
        return
    prefix = f"test-slack-{uuid.uuid4().hex[:12]}"
    client = Redis.from_url(REDIS_URL)
    try:
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            pytest.fail(f"no Redis at {REDIS_URL} ({exc}); run scripts/ensure-redis")
        separator = "&" if "?" in REDIS_URL else "?"
        yield f"{REDIS_URL}{separator}prefix={prefix}"
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.mark.parametrize("kind", DURABLE)
async def test_a_click_after_a_restart_resumes_the_run(
    kind: str, slack: FakeSlack, tmp_path: Path
) -> None:
    ran = Ran()
    async with durable_url(kind, tmp_path) as url:
        store = open_store(url)
        before = await start_bot(slack, build_agent(store, ran))
        card = await ask_for_deploy(before, slack)
        await before.close()
        await store.close()

        store = open_store(url)
        after = await start_bot(slack, build_agent(store, ran))
        try:
            assert await after.press(card, APPROVE_ACTION) == 200
            await after.idle()
        finally:
            await after.close()
            await store.close()

    assert len(ran.deploys) == 1
    assert not has_buttons(card)
    assert "Approved by" in card_text(card)
    assert "deploy ok" in slack.in_thread(CHANNEL, card.thread_ts or "")[-1].text


@pytest.mark.parametrize("kind", DURABLE)
async def test_a_thread_reply_after_a_restart_answers_the_question(
    kind: str, slack: FakeSlack, tmp_path: Path
) -> None:
    ran = Ran()
    root = mention_event("release web")
    async with durable_url(kind, tmp_path) as url:
        store = open_store(url)
        before = await start_bot(slack, build_agent(store, ran))
        await before.send_event(root)
        await before.idle()
        await before.close()
        await store.close()

        store = open_store(url)
        after = await start_bot(slack, build_agent(store, ran))
        try:
            # No mention: the new process knows the bot is active in this thread.
            await after.send_event(message_event("3.1.0", thread_ts=root["ts"]))
            await after.idle()
        finally:
            await after.close()
            await store.close()

    assert ran.releases == [{"service": "web", "version": "3.1.0"}]
    assert "release ok" in slack.in_thread(CHANNEL, root["ts"])[-1].text
