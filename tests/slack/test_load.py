"""Bursts over two replicas: every message answered exactly once, every click decided once.

Two real bot processes share one durable store (the real Redis, or one SQLite
file). Slack's redeliveries are reproduced as Slack sends them: the same event
again with ``X-Slack-Retry-Num``, and an in-thread mention twice, as
``app_mention`` and as ``message``, each copy to either replica, all at once.
``bench/load_bench.py`` runs the same at a larger size and prints timings.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.slack.wire import APPROVE_ACTION
from agents import texts
from tests.stores.conftest import DURABLE_KINDS, store_url

from .fake_slack import BOT_USER_ID, FakeSlack, Posted
from .harness import CHANNEL, mention_event, message_event, new_ts
from .process import BotProcess
from .test_approvals import has_buttons
from .test_crash import replies

THREADS = 20
BURST = 40


@pytest.fixture(params=DURABLE_KINDS)
async def replicas(
    request: pytest.FixtureRequest, slack: FakeSlack, tmp_path: Path
) -> AsyncIterator[tuple[BotProcess, BotProcess]]:
    async with store_url(request.param, tmp_path) as url:
        pair = []
        for name in ("a", "b"):
            workdir = tmp_path / name
            workdir.mkdir()
            pair.append(BotProcess(slack=slack, store_url=url, workdir=workdir, lease="5s"))
        first, second = pair
        try:
            await asyncio.gather(first.start(), second.start())
            yield first, second
        finally:
            await asyncio.gather(first.stop(), second.stop())


async def test_redelivered_mentions_spread_over_two_replicas_are_each_answered_once(
    replicas: tuple[BotProcess, BotProcess], slack: FakeSlack
) -> None:
    a, b = replicas
    roots = [mention_event(f"start {n}") for n in range(THREADS)]
    started = await asyncio.gather(
        *((a if n % 2 else b).send_event(root) for n, root in enumerate(roots))
    )
    assert set(started) == {200}
    await slack.wait_for(
        lambda: all(replies(slack, r["ts"]) for r in roots), within=30, what="threads started"
    )

    # In each thread the bot now follows, one more mention, delivered five times.
    deliveries = []
    for n, root in enumerate(roots):
        ts = new_ts()
        mention = mention_event(f"again {n}", ts=ts, thread_ts=root["ts"])
        message = message_event(f"<@{BOT_USER_ID}> again {n}", ts=ts, thread_ts=root["ts"])
        mention_id, message_id = f"EvM{n:04d}", f"EvC{n:04d}"
        deliveries += [
            a.send_event(mention, event_id=mention_id),
            b.send_event(mention, event_id=mention_id, retry=1),
            b.send_event(message, event_id=message_id),
            a.send_event(message, event_id=message_id, retry=1),
            a.send_event(mention, event_id=mention_id, retry=2),
        ]
    statuses = await asyncio.gather(*deliveries)
    assert set(statuses) == {200}

    await slack.wait_for(
        lambda: all(len(replies(slack, r["ts"])) >= 2 for r in roots),
        within=30,
        what="every mention answered",
    )
    await asyncio.gather(a.stop(), b.stop())  # whatever else was coming has come
    for n, root in enumerate(roots):
        assert replies(slack, root["ts"]) == [f"You said: start {n}", f"You said: again {n}"]


async def test_a_burst_queues_on_few_workers_and_every_card_is_decided_once(
    replicas: tuple[BotProcess, BotProcess], slack: FakeSlack
) -> None:
    a, b = replicas
    await a.stop()
    a.extra_env["BOT_WORKERS"] = "2"  # far fewer than the burst: it has to queue
    await a.start()
    statuses = await asyncio.gather(
        *(a.send_event(mention_event(f"deploy svc{n}")) for n in range(BURST))
    )
    assert set(statuses) == {200}

    def cards() -> list[Posted]:
        return [m for m in slack.messages.values() if has_buttons(m)]

    await slack.wait_for(lambda: len(cards()) == BURST, within=60, what="every card")
    clicks = await asyncio.gather(
        *((a if n % 2 else b).press(card, APPROVE_ACTION) for n, card in enumerate(cards()))
    )
    assert set(clicks) == {200}
    await slack.wait_for(
        lambda: all(not has_buttons(m) for m in slack.messages.values()),
        within=60,
        what="every card decided",
    )
    await asyncio.gather(a.stop(), b.stop())
    deployed = [line["service"] for bot in (a, b) for line in bot.recorded("deploy-end")]
    assert sorted(deployed) == sorted(f"svc{n}" for n in range(BURST))
    everything = [m.text for m in slack.messages.values() if m.channel == CHANNEL]
    assert not any("went wrong" in text or "try again" in text for text in everything)


async def test_a_replica_killed_loses_nothing_and_the_other_serves_its_cards(
    replicas: tuple[BotProcess, BotProcess], slack: FakeSlack
) -> None:
    a, b = replicas
    roots = [mention_event(f"deploy svc{n}") for n in range(THREADS // 2)]
    assert set(await asyncio.gather(*(a.send_event(root) for root in roots))) == {200}

    def cards() -> list[Posted]:
        return [m for m in slack.messages.values() if has_buttons(m)]

    await slack.wait_for(lambda: len(cards()) == len(roots), within=30, what="every card")
    # Acked by the replica about to die: in the shared inbox, maybe being worked on.
    greetings = [mention_event(f"hello {n}") for n in range(THREADS // 2)]
    assert set(await asyncio.gather(*(a.send_event(g) for g in greetings))) == {200}
    await a.kill()

    clicks = await asyncio.gather(*(b.press(card, APPROVE_ACTION) for card in cards()))
    assert set(clicks) == {200}
    await slack.wait_for(
        lambda: not cards() and all(replies(slack, g["ts"]) for g in greetings),
        within=30,
        what="every card decided and every greeting answered",
    )
    await b.stop()
    deployed = [line["service"] for line in b.recorded("deploy-end")]
    assert sorted(deployed) == sorted(f"svc{n}" for n in range(len(roots)))
    for n, greeting in enumerate(greetings):
        # One answer each. A greeting the killed replica was in the middle of is
        # reported as interrupted (a run is never re-run from an unknown point).
        (answer,) = replies(slack, greeting["ts"])
        assert answer == f"You said: hello {n}" or answer.endswith(texts.INTERRUPTED_RUN), answer
