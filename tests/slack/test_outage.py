"""The store goes away for a while: work is delayed, never lost.

A real bot process takes messages and a click while every command it sends its
store hangs (Redis: ``CLIENT PAUSE``; PostgreSQL: every table of the bot locked by
another transaction). It still acks each within Slack's three seconds, tells the
people waiting once that it is delayed, and, once the store answers again,
carries everything out without anyone sending or clicking again. On PostgreSQL
the bot's connections are also cut mid-burst (``pg_terminate_backend``, as a
restarting server does): its pool connects again, and nothing is lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from redis.asyncio import Redis

from adapters.slack.wire import APPROVE_ACTION
from agents.stores import store_kind
from bot import texts as core_texts
from tests.stores.conftest import REDIS_URL, cut_postgres, store_url

from .fake_slack import FakeSlack
from .harness import CHANNEL, mention_event
from .process import BotProcess, running
from .test_approvals import card_text, has_buttons
from .test_crash import card_for, replies

PAUSE = 4.0
SLACK_PATIENCE = 3.0


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def bot(
    request: pytest.FixtureRequest, slack: FakeSlack, tmp_path: Path
) -> AsyncIterator[BotProcess]:
    async with store_url(request.param, tmp_path) as url, running(slack, url, tmp_path) as bot:
        yield bot


@asynccontextmanager
async def store_paused(url: str) -> AsyncIterator[None]:
    """Every command sent to the store at ``url`` hangs for ``PAUSE`` s from now on; the
    exit waits the pause out."""
    if store_kind(url) == "redis":
        redis = Redis.from_url(REDIS_URL)
        try:
            await redis.client_pause(int(PAUSE * 1000), all=True)
            yield
        finally:
            await redis.aclose()
        return
    async with (
        await psycopg.AsyncConnection.connect(url, autocommit=True) as holder,
        holder.transaction(),
    ):
        cursor = await holder.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        )
        tables = [sql.Identifier(str(row[0])) for row in await cursor.fetchall()]
        await holder.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.SQL(", ").join(tables))
        )
        until = time.monotonic() + PAUSE
        yield
        await asyncio.sleep(until - time.monotonic())  # the pause's length: then commit


async def timed(request: asyncio.Future[int] | asyncio.Task[int]) -> tuple[int, float]:
    started = time.monotonic()
    status = await request
    return status, time.monotonic() - started


async def test_requests_during_a_store_outage_are_acked_fast_and_carried_out_after(
    bot: BotProcess, slack: FakeSlack
) -> None:
    card = await card_for(bot, slack, "api")
    events = [mention_event(f"hello {n}") for n in range(5)]
    async with store_paused(bot.store_url):
        sent = time.monotonic()
        results = await asyncio.gather(
            *(timed(asyncio.ensure_future(bot.send_event(e))) for e in events),
            timed(asyncio.ensure_future(bot.press(card, APPROVE_ACTION))),
        )
        assert time.monotonic() - sent < PAUSE, "the requests were not answered during the pause"
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


@pytest.mark.postgres
async def test_connections_cut_mid_burst_lose_nothing_and_do_nothing_twice(
    slack: FakeSlack, tmp_path: Path
) -> None:
    async with store_url("postgres", tmp_path) as url, running(slack, url, tmp_path) as bot:
        card = await card_for(bot, slack, "api")
        events = [mention_event(f"hello {n}") for n in range(10)]
        cut = 0
        requests = [timed(asyncio.ensure_future(bot.send_event(e))) for e in events[:5]]
        sent = [asyncio.ensure_future(request) for request in requests]
        cut += await cut_postgres(url)  # while the first half is written and worked on
        requests = [timed(asyncio.ensure_future(bot.send_event(e))) for e in events[5:]]
        requests.append(timed(asyncio.ensure_future(bot.press(card, APPROVE_ACTION))))
        sent += [asyncio.ensure_future(request) for request in requests]
        cut += await cut_postgres(url)
        results = await asyncio.gather(*sent)
        assert cut > 0
        for status, took in results:
            assert status == 200
            assert took < SLACK_PATIENCE

        root = card.thread_ts or ""

        def carried_out() -> bool:
            answered = all(any("You said" in t for t in replies(slack, e["ts"])) for e in events)
            return answered and any("Done." in t for t in replies(slack, root))

        await slack.wait_for(carried_out, within=30, what="everything carried out")
        await bot.stop()
    for n, event in enumerate(events):
        assert replies(slack, event["ts"]).count(f"You said: hello {n}") == 1
    assert len(bot.recorded("deploy-end")) == 1
    assert not has_buttons(card)
    assert "Approved by" in card_text(card)
    told = [c.args.get("text", "") for c in slack.of("chat.postEphemeral")]
    assert not any("try again" in t for t in [*told, *replies(slack, root)])
