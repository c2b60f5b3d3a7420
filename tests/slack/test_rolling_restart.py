"""A rolling restart: SIGTERM to one of two replicas while requests are in flight.

Two real ``python -m bot`` processes share the real Redis with a one-minute
lease. The first is working on requests, some in their model turn (the model
thinks for a minute), some waiting for a click on their card, when it gets
SIGTERM. It stops taking work, and what it cannot finish within its grace it
hands back: the intake entries return to the queue and the runs are released,
so the other replica goes on with them at once, not a lease later. Every
request is carried out once, and nobody is told a deploy "may or may not"
have happened.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.slack.wire import APPROVE_ACTION
from tests.stores.conftest import store_url

from .fake_slack import FakeSlack, Posted
from .harness import CHANNEL, mention_event
from .process import BotProcess
from .test_approvals import has_buttons
from .test_crash import replies

pytestmark = pytest.mark.redis

HOLDS = 8
DEPLOYS = 6
GRACE = 10.0
"""The bot's shutdown grace (``bot.server.SHUTDOWN_GRACE``)."""
LEASE = "60s"


@pytest.fixture
async def replicas(
    slack: FakeSlack, tmp_path: Path
) -> AsyncIterator[tuple[BotProcess, BotProcess]]:
    async with store_url("redis", tmp_path) as url:
        first = BotProcess(slack=slack, store_url=url, workdir=tmp_path, lease=LEASE)
        second = BotProcess(slack=slack, store_url=url, workdir=tmp_path, lease=LEASE)
        await first.start()
        try:
            yield first, second
        finally:
            await first.stop()
            await second.stop()


async def test_a_replica_stopped_mid_work_hands_everything_to_the_other(
    replicas: tuple[BotProcess, BotProcess], slack: FakeSlack
) -> None:
    leaving, staying = replicas
    holds = [mention_event(f"hold {n}") for n in range(HOLDS)]
    deploys = [mention_event(f"deploy svc-{n}") for n in range(DEPLOYS)]
    for event in [*holds, *deploys]:
        assert await leaving.send_event(event) == 200

    def cards() -> list[Posted]:
        found = [
            next((m for m in slack.in_thread(CHANNEL, e["ts"]) if has_buttons(m)), None)
            for e in deploys
        ]
        return [card for card in found if card is not None]

    await slack.wait_for(
        lambda: len(leaving.recorded("hold")) == HOLDS and len(cards()) == DEPLOYS,
        what="every request worked on by the first replica",
    )
    await staying.start()

    assert leaving.process is not None
    leaving.process.terminate()  # SIGTERM: a rolling restart
    asked = time.monotonic()
    for card in cards():  # the clicks come while it goes, to the other replica
        assert await staying.press(card, APPROVE_ACTION) == 200
    await asyncio.wait_for(leaving.process.wait(), GRACE + 10)
    gone_in = time.monotonic() - asked

    def carried_out() -> bool:
        held = all(f"You said: hold {n}" in replies(slack, e["ts"]) for n, e in enumerate(holds))
        deployed = all(any("Done." in t for t in replies(slack, e["ts"])) for e in deploys)
        return held and deployed

    await slack.wait_for(carried_out, within=GRACE + 20, what="every request carried out")
    answered_in = time.monotonic() - asked
    print(f"rolling restart: gone in {gone_in:.1f} s, all carried out in {answered_in:.1f} s")
    await leaving.start()  # the new replica of the rolling restart
    await asyncio.sleep(2)  # anything still to come has come
    for n, event in enumerate(holds):
        said = replies(slack, event["ts"])
        assert said == [f"You said: hold {n}"], (said, staying.log_text())
    for event in deploys:
        said = replies(slack, event["ts"])
        assert sum("Done." in t for t in said) == 1, said
        assert not any("may or may not" in t for t in said), said
    assert len(staying.recorded("deploy-end")) == DEPLOYS  # each deploy once
    assert len(staying.recorded("hold")) == HOLDS  # each model turn cut off once
    assert gone_in < GRACE + 5, f"the stopped replica took {gone_in:.1f} s to go"
    # Within its grace and a poll, not a lease (60 s) later.
    assert answered_in < GRACE + 10, f"carried out {answered_in:.1f} s after the SIGTERM"
