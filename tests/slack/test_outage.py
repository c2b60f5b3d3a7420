"""The store goes away for a while (Redis ``CLIENT PAUSE``): work is delayed, never lost.

A real bot process on the real Redis takes messages and a click while every
Redis command it sends hangs. It still acks each within Slack's three seconds,
tells the people waiting once that it is delayed, and, once Redis answers
again, carries everything out without anyone sending or clicking again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from adapters.slack.wire import APPROVE_ACTION
from bot import texts as core_texts
from tests.stores.conftest import REDIS_URL, store_url

from .fake_slack import FakeSlack
from .harness import CHANNEL, mention_event
from .process import BotProcess, running
from .test_approvals import card_text, has_buttons
from .test_crash import card_for, replies

pytestmark = pytest.mark.redis

PAUSE = 4.0
SLACK_PATIENCE = 3.0


@pytest.fixture
async def bot(slack: FakeSlack, tmp_path: Path) -> AsyncIterator[BotProcess]:
    async with store_url("redis", tmp_path) as url, running(slack, url, tmp_path) as bot:
        yield bot


async def timed(request: asyncio.Future[int] | asyncio.Task[int]) -> tuple[int, float]:
    started = time.monotonic()
    status = await request
    return status, time.monotonic() - started


async def test_requests_during_a_store_outage_are_acked_fast_and_carried_out_after(
    bot: BotProcess, slack: FakeSlack
) -> None:
    card = await card_for(bot, slack, "api")
    events = [mention_event(f"hello {n}") for n in range(5)]
    redis = Redis.from_url(REDIS_URL)
    try:
        await redis.client_pause(int(PAUSE * 1000), all=True)
        sent = time.monotonic()
        results = await asyncio.gather(
            *(timed(asyncio.ensure_future(bot.send_event(e))) for e in events),
            timed(asyncio.ensure_future(bot.press(card, APPROVE_ACTION))),
        )
        assert time.monotonic() - sent < PAUSE, "the requests were not answered during the pause"
    finally:
        await redis.aclose()
    for status, took in results:
        assert status == 200
        assert took < SLACK_PATIENCE

    root = card.thread_ts or ""

    def carried_out() -> bool:
        answered = all(any("You said" in t for t in replies(slack, e["ts"])) for e in events)
        return answered and any("Done." in t for t in replies(slack, root))

    await slack.wait_for(carried_out, within=PAUSE + 15, what="everything carried out")
    await bot.stop()
    for n, event in enumerate(events):
        said = replies(slack, event["ts"])
        assert said.count(f"You said: hello {n}") == 1, said
        assert [t for t in said if core_texts.DELAYED in t] != [], said  # told once it waits
        assert len(said) == 2, said
    assert len(bot.recorded("deploy-end")) == 1
    assert not has_buttons(card)
    assert "Approved by" in card_text(card)
    told = [c.args.get("text", "") for c in slack.of("chat.postEphemeral")]
    assert told.count(core_texts.CLICK_DELAYED) == 1, told
    assert not any("try again" in t for t in [*told, *replies(slack, root)])
    assert all(m.channel == CHANNEL for m in slack.messages.values())
