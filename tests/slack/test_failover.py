"""A Redis Cluster primary killed mid-burst: nothing acked is lost, work resumes in seconds.

A real bot process with the default one-minute lease keeps its state on a private
cluster of three primaries with a replica each (``tests/failover_cluster.py``).
While a burst of mentions in many threads (so on every primary) and a click on a
waiting card arrive, the primary serving the clicks' intake group is killed with
``kill -9``; its replica takes over a few seconds later. Every request is still
acked within Slack's three seconds, each mention is answered once and the card
decided once, and a mention sent right after the promotion, to the failed-over
shard, is answered within seconds, not after a lease.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from redis.crc import key_slot
from redis.exceptions import ResponseError

from adapters.slack.convert import PLATFORM
from adapters.slack.wire import APPROVE_ACTION
from agents.stores import redis_client, split_prefix
from agents.stores.redis_keys import SHARDS, shard_of, shard_tags
from bot.chat_state.redis_keys import INBOX_GROUP, ChatKeys
from tests.failover_cluster import FailoverCluster, failover_cluster
from tests.stores.conftest import with_prefix

from .fake_slack import TEAM_ID, ApiCall, FakeSlack
from .harness import CHANNEL, mention_event, new_ts
from .process import BotProcess
from .test_approvals import has_buttons
from .test_crash import replies, settled_card_for

__all__ = ["failover_cluster"]  # the fixture, imported to be used here

pytestmark = pytest.mark.redis

LEASE = 60.0
"""The default lease: a request left waiting for one is plain to see."""
SLACK_PATIENCE = 3.0
PROMOTED_WITHIN = 15.0
CARRIED_OUT_WITHIN = 15.0
"""After the promotion: a few seconds of retry backoff, far below a lease."""
BURST = 80
GAP = 0.05
"""Between the burst's mentions: it spans the kill, the failover and the promotion."""
KILL_AT = 20
"""Mentions sent before the kill."""
CLICK_SLOT = key_slot(shard_tags(SHARDS)[0].encode())
"""Deliveries without a thread (clicks) go to the first intake group."""


def slot_of(ts: str) -> int:
    """The slot of the intake group of a mention starting a thread at ``ts``."""
    thread = f"{PLATFORM}:{TEAM_ID}:{CHANNEL}:{ts}"
    return key_slot(shard_tags(SHARDS)[shard_of(thread, SHARDS)].encode())


def ts_in(slots: tuple[range, ...]) -> str:
    """A new message timestamp whose thread's intake group is in ``slots``."""
    while not any(slot_of(ts := new_ts()) in owned for owned in slots):
        pass
    return ts


async def timed(request: Awaitable[int]) -> tuple[int, float]:
    """A request's HTTP status and how long it took."""
    started = time.monotonic()
    status = await request
    return status, time.monotonic() - started


async def until(condition: Callable[[], bool], *, within: float) -> float | None:
    """Seconds until ``condition()`` held, or ``None`` when it did not within ``within``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > within:
            return None
        await asyncio.sleep(0.01)
    return time.monotonic() - started


def seconds(took: float | None) -> str:
    """A duration for the summary."""
    return "never" if took is None else f"{took:.2f}s"


def answered_at(slack: FakeSlack, event: dict[str, Any]) -> float | None:
    """When the bot's answer in a mention's thread was complete (``time.monotonic``)."""
    said = [m for m in slack.in_thread(CHANNEL, event["ts"]) if "You said" in m.text]
    if not said:
        return None

    def making(call: ApiCall) -> bool:  # posted whole, or streamed
        posted = call.args.get("thread_ts") == event["ts"] and "You said" in json.dumps(call.args)
        return posted or call.args.get("ts") == said[0].ts

    return max((call.at for call in slack.calls if making(call)), default=None)


def said_once(slack: FakeSlack, event: dict[str, Any]) -> bool:
    """Whether the bot echoed a mention in its thread exactly once."""
    text = event["text"].split("> ", 1)[1]
    return replies(slack, event["ts"]).count(f"You said: {text}") == 1


def trouble(log: str) -> list[str]:
    """The bot's warnings and errors, most frequent first, with how often each came."""
    lines = [line for line in log.splitlines() if re.search(r"\b(WARNING|ERROR)\b", line)]
    kinds: dict[str, int] = {}
    for line in lines:
        kind = re.sub(r"\d+(\.\d+)?", "N", line.split(" ", 2)[-1])[:160]
        kinds[kind] = kinds.get(kind, 0) + 1
    return [f"{n}x {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1])]


def described(body: str) -> str:
    """An intake entry's delivery, in a few words."""
    delivery = json.loads(body)
    if delivery.get("message"):
        return repr(delivery["message"]["text"])
    return f"a click ({delivery.get('click', {}).get('action')})"


async def left_in_intake(url: str) -> list[str]:
    """What is still in the intake queue, and who holds it since when (for failures)."""
    server, prefix = split_prefix(url)
    keys = ChatKeys(prefix, SHARDS)
    client = redis_client(server)
    left = []
    try:
        for shard in keys.groups:
            stream = keys.inbox(shard)
            # The client decodes; redis-py types its replies loosely.
            entries = cast(list[tuple[str, dict[str, str]]], await client.xrange(stream))
            try:
                found = await client.xpending_range(stream, INBOX_GROUP, "-", "+", 1000)
                pending = cast(list[dict[str, Any]], found)
            except ResponseError:  # no group: never taken
                pending = []
            holders = {p["message_id"]: p for p in pending}
            for entry_id, fields in entries:
                held = holders.get(entry_id)
                how = (
                    f"held by {held['consumer']} for {held['time_since_delivered'] / 1000:.1f}s,"
                    f" taken {held['times_delivered']}x"
                    if held
                    else "never taken"
                )
                left.append(f"group {shard} {entry_id}: {described(fields['body'])} {how}")
    finally:
        await client.aclose()
    return left


@pytest.fixture
async def bot(
    failover_cluster: FailoverCluster, slack: FakeSlack, tmp_path: Path
) -> AsyncIterator[BotProcess]:
    url = with_prefix(failover_cluster.url, f"failover-{uuid.uuid4().hex[:12]}")
    process = BotProcess(slack=slack, store_url=url, workdir=tmp_path, lease=f"{LEASE:g}s")
    await process.start()
    try:
        yield process
    finally:
        await process.stop()


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What one failover came to, in seconds and counts."""

    promoted: float
    """From the kill until every live node agreed on the new primary."""
    acks: list[tuple[int, float]]
    """Each request of the burst: its HTTP status and how long its ack took."""
    fresh: float | None
    """From sending a mention after the promotion until its answer."""
    everything: float | None
    """From the kill until every mention was answered and the card decided."""
    last_mention: float | None
    """From the kill until the last mention sent after it was answered."""
    answered: list[int]
    on_victim: int
    """Mentions of the burst whose intake group was on the killed primary."""
    decisions: int
    deploys: tuple[int, int]
    """How often the tool started and ended."""
    buttons_left: bool
    stopped: float
    """How long the bot took to shut down after it all (``SIGTERM``)."""

    def summary(self) -> str:
        return (
            f"failover: promoted {self.promoted:.1f}s after the kill;"
            f" slowest ack {max(took for _, took in self.acks):.2f}s;"
            f" a mention sent after the promotion answered in {seconds(self.fresh)};"
            f" everything carried out {seconds(self.everything)} after the kill"
            f" (the last mention {seconds(self.last_mention)});"
            f" {len(self.answered)}/{BURST} mentions answered ({self.on_victim} on the killed"
            " primary),"
            f" card decided {self.decisions}x, deploy started/ended {self.deploys};"
            f" the bot stopped in {self.stopped:.1f}s"
        )

    def broken_promises(self) -> list[str]:
        """What a person would have noticed."""
        broken = [f"request {n} got {s}" for n, (s, _) in enumerate(self.acks) if s != 200]
        broken += [
            f"request {n} acked after {took:.2f}s"
            for n, (_, took) in enumerate(self.acks)
            if took >= SLACK_PATIENCE
        ]
        if self.fresh is None:
            broken.append(f"a mention after the promotion not answered in {CARRIED_OUT_WITHIN}s")
        if len(self.answered) < BURST:
            missing = sorted(set(range(BURST)) - set(self.answered))
            broken.append(f"mentions {missing} were not answered exactly once")
        if self.everything is None or self.everything - self.promoted > CARRIED_OUT_WITHIN:
            broken.append(f"not all carried out within {CARRIED_OUT_WITHIN}s of the promotion")
        if self.decisions != 1 or self.deploys != (1, 1) or self.buttons_left:
            broken.append(
                f"the card was decided {self.decisions}x, the deploy started/ended"
                f" {self.deploys}, buttons left: {self.buttons_left}"
            )
        return broken


def paced(bot: BotProcess, events: list[dict[str, Any]]) -> asyncio.Task[list[tuple[int, float]]]:
    """Send ``events`` ``GAP`` apart, each without waiting for the one before."""

    async def send() -> list[tuple[int, float]]:
        sends = []
        for event in events:
            sends.append(asyncio.create_task(timed(bot.send_event(event))))
            await asyncio.sleep(GAP)  # pacing the burst, not waiting for it
        return list(await asyncio.gather(*sends))

    return asyncio.create_task(send())


async def test_a_primary_killed_mid_burst_loses_nothing_and_work_resumes_in_seconds(
    bot: BotProcess, slack: FakeSlack, failover_cluster: FailoverCluster
) -> None:
    cluster = failover_cluster
    card = await settled_card_for(bot, slack, "api")
    root = card.thread_ts or ""
    victim = await cluster.primary_of(CLICK_SLOT)
    victim_slots = await cluster.slots_of(victim)
    events = [mention_event(f"hello {n}") for n in range(BURST)]

    def carried_out() -> bool:
        decided = any("Done." in text for text in replies(slack, root))
        return decided and all(said_once(slack, event) for event in events)

    before = await paced(bot, events[:KILL_AT])
    cluster.kill(victim)
    killed_at = time.monotonic()
    everything = asyncio.create_task(
        until(carried_out, within=PROMOTED_WITHIN + CARRIED_OUT_WITHIN)
    )
    click = asyncio.create_task(timed(bot.press(card, APPROVE_ACTION)))
    after = paced(bot, events[KILL_AT:])
    await cluster.promoted(victim, victim_slots, within=PROMOTED_WITHIN)
    promoted = time.monotonic() - killed_at

    fresh = mention_event("after the failover", ts=ts_in(victim_slots))
    assert await bot.send_event(fresh) == 200
    fresh_took = await until(lambda: said_once(slack, fresh), within=CARRIED_OUT_WITHIN)
    acks = [*before, await click, *await after]
    all_done = await everything
    stopping = time.monotonic()
    await bot.stop()  # anything still to come has come
    stopped = time.monotonic() - stopping

    answers = [answered_at(slack, event) for event in events[KILL_AT:]]
    last = max((at for at in answers if at is not None), default=None)
    measured = Measured(
        promoted=promoted,
        acks=acks,
        fresh=fresh_took,
        everything=all_done,
        last_mention=None if last is None else last - killed_at,
        answered=[n for n, event in enumerate(events) if said_once(slack, event)],
        decisions=sum("Done." in text for text in replies(slack, root)),
        deploys=(len(bot.recorded("deploy-start")), len(bot.recorded("deploy-end"))),
        on_victim=sum(any(slot_of(e["ts"]) in slots for slots in victim_slots) for e in events),
        buttons_left=has_buttons(card),
        stopped=stopped,
    )
    print(f"\n{measured.summary()}")
    if broken := measured.broken_promises():
        left = await left_in_intake(bot.store_url)
        report = [*broken, "left in the intake queue:", *left, "the bot's warnings and errors:"]
        raise AssertionError("\n".join([*report, *trouble(bot.log_text())]))
