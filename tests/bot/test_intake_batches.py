"""Deliveries that arrive together are written together (SQLite, Redis), as if one by one.

The outcome of a burst must be the one writing them one at a time, in arrival
order, gives (the memory chat state does exactly that): which are copies, which
threads are followed, each thread's reference, and the order they are taken in.
A Redis Cluster is not batched: there each delivery goes on its own, at once.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from agents import open_store
from bot import ChatState, ThreadNote, open_chat_state
from bot.chat_state import MemoryChatState
from bot.chat_state._batches import Batches
from bot.chat_state._redis_intake import BatchedScript, ScriptCall
from tests.bot.test_chat_state import chat_state_of
from tests.stores.conftest import REDIS_URL, redis_prefix

THREADS = [f"slack:T1:C1:17000000{n}.000100" for n in range(4)]
KEYS = [f"slack:event:Ev{n}" for n in range(8)]

Delivery = tuple[str, tuple[str, ...], ThreadNote | None]


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def chat(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ChatState]:
    """The chat states whose intake writes are batched: SQLite, Redis."""
    async with chat_state_of(request.param, tmp_path) as state:
        yield state


def burst(rnd: random.Random, name: str, size: int) -> list[Delivery]:
    """Deliveries sharing keys and threads: copies, replies, follows, references."""
    deliveries: list[Delivery] = []
    for n in range(size):
        keys = tuple(rnd.sample(KEYS, rnd.randint(0, 3)))
        note = None
        if rnd.random() < 0.7:
            reply = rnd.random() < 0.5
            note = ThreadNote(
                thread_id=rnd.choice(THREADS),
                only_if_followed=reply,
                follow=not reply and rnd.random() < 0.6,
                reference={"n": n} if rnd.random() < 0.5 else None,
            )
        deliveries.append((f"{name}-{n}", keys, note))
    return deliveries


async def one_by_one(chat: ChatState, deliveries: list[Delivery]) -> list[bool]:
    return [
        await chat.enqueue(body, keys=keys, ttl=60, note=note) is not None
        for body, keys, note in deliveries
    ]


async def together(chat: ChatState, deliveries: list[Delivery]) -> list[bool]:
    written = await asyncio.gather(
        *(chat.enqueue(body, keys=keys, ttl=60, note=note) for body, keys, note in deliveries)
    )
    return [entry_id is not None for entry_id in written]


@pytest.mark.parametrize("seed", range(6))
async def test_a_burst_written_together_ends_as_one_written_one_by_one(
    chat: ChatState, seed: int
) -> None:
    rnd = random.Random(seed)
    alone = MemoryChatState()
    for name in ("first", "second", "third"):
        deliveries = burst(rnd, name, rnd.randint(2, 30))
        assert await together(chat, deliveries) == await one_by_one(alone, deliveries)
    for thread in THREADS:
        assert await chat.follows(thread) == await alone.follows(thread)
        assert await chat.conversation_ref(thread) == await alone.conversation_ref(thread)
    taken = [entry.body for entry in await chat.take("w1", count=200, lease=60)]
    assert taken == [entry.body for entry in await alone.take("w1", count=200, lease=60)]


async def test_entry_ids_of_a_burst_are_each_deliverys_own(chat: ChatState) -> None:
    bodies = [f"delivery {n}" for n in range(40)]
    ids = await asyncio.gather(*(chat.enqueue(body, keys=(), ttl=60) for body in bodies))
    taken = {entry.id: entry.body for entry in await chat.take("w1", count=100, lease=60)}
    assert [taken[entry_id] for entry_id in ids if entry_id is not None] == bodies


# The batching itself


class Recorder:
    """``one`` and ``many`` for ``Batches``, recording what went together."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def one(self, item: int) -> str:
        self.calls.append([item])
        await self.gate.wait()
        return f"#{item}"

    async def many(self, items: list[int]) -> list[str | Exception]:
        self.calls.append(items)
        await self.gate.wait()
        return [ValueError(item) if item < 0 else f"#{item}" for item in items]


async def test_calls_that_arrive_during_a_write_go_together_after_it() -> None:
    recorder = Recorder()
    batches: Batches[int, str] = Batches(recorder.one, recorder.many, name="test")
    recorder.gate.clear()
    calls = [asyncio.ensure_future(batches(n)) for n in range(5)]
    await asyncio.sleep(0.01)
    assert recorder.calls == [[0]]  # the lone one first; the others wait for it
    recorder.gate.set()
    assert await asyncio.gather(*calls) == ["#0", "#1", "#2", "#3", "#4"]
    assert recorder.calls == [[0], [1, 2, 3, 4]]


async def test_deferred_calls_of_one_turn_all_go_in_one_batch() -> None:
    recorder = Recorder()
    batches: Batches[int, str] = Batches(recorder.one, recorder.many, name="test", defer=True)
    assert await asyncio.gather(*(batches(n) for n in range(4))) == ["#0", "#1", "#2", "#3"]
    assert await batches(7) == "#7"
    assert recorder.calls == [[0, 1, 2, 3], [7]]


async def test_an_error_of_one_call_in_a_batch_is_its_own() -> None:
    recorder = Recorder()
    batches: Batches[int, str] = Batches(recorder.one, recorder.many, name="test")
    recorder.gate.clear()
    calls = [asyncio.ensure_future(batches(n)) for n in (0, 1, -2, 3)]
    await asyncio.sleep(0.01)
    recorder.gate.set()
    outcomes: list[Any] = await asyncio.gather(*calls, return_exceptions=True)
    assert recorder.calls == [[0], [1, -2, 3]]
    assert outcomes[0:2] == ["#0", "#1"]
    assert isinstance(outcomes[2], ValueError)
    assert outcomes[3] == "#3"


async def test_a_stopped_batch_writer_fails_its_callers() -> None:
    recorder = Recorder()
    batches: Batches[int, str] = Batches(recorder.one, recorder.many, name="test")
    recorder.gate.clear()
    calls = [asyncio.ensure_future(batches(n)) for n in range(4)]
    await asyncio.sleep(0.01)
    writer = batches._writer
    assert writer is not None
    writer.cancel()
    recorder.gate.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 5)
    assert outcomes[0] == "#0"
    assert all(isinstance(o, RuntimeError) for o in outcomes[1:]), outcomes
    assert await batches(9) == "#9"  # a new writer, or none needed


async def test_a_delivery_sqlite_refuses_fails_alone_in_its_batch(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'bot.db'}")
    chat = open_chat_state(store)
    try:
        bodies: list[Any] = ["first", "second", object(), "fourth"]  # no column takes an object
        outcomes = await asyncio.gather(
            *(chat.enqueue(body, keys=(f"k{n}",), ttl=60) for n, body in enumerate(bodies)),
            return_exceptions=True,
        )
        assert isinstance(outcomes[2], sqlite3.Error)
        assert all(isinstance(outcome, str) for n, outcome in enumerate(outcomes) if n != 2)
        taken = [entry.body for entry in await chat.take("w1", count=10, lease=60)]
        assert taken == ["first", "second", "fourth"]
    finally:
        await chat.close()
        await store.close()


# A script that answers its first argument, but fails on "incr" (INCR of a key that
# holds no number), and replies nil for "nil".
_ECHO_OR_FAIL = """
local function call(KEYS, ARGV)
  if ARGV[1] == 'incr' then return redis.call('INCR', KEYS[1]) end
  if ARGV[1] == 'nil' then return false end
  return ARGV[1] .. ':' .. #KEYS .. ':' .. #ARGV
end
"""


@pytest.mark.redis
async def test_a_call_redis_refuses_fails_alone_in_its_batch() -> None:
    async with redis_prefix() as prefix:
        client = Redis.from_url(REDIS_URL, decode_responses=True)
        try:
            word = f"{prefix}:word"
            await client.set(word, "no number")
            script = BatchedScript(client, _ECHO_OR_FAIL, name="test")
            calls = [
                ScriptCall([word], ["first"]),
                ScriptCall([word, f"{prefix}:other"], ["incr"]),
                ScriptCall([], ["nil", "extra"]),
                ScriptCall([word], ["last", "a", "b"]),
            ]
            outcomes = await asyncio.gather(*map(script, calls), return_exceptions=True)
            assert outcomes[0] == "first:1:1"
            assert isinstance(outcomes[1], ResponseError)
            assert "not an integer" in str(outcomes[1])
            assert outcomes[2] is None
            assert outcomes[3] == "last:1:3"
            assert await script(ScriptCall([word], ["alone"])) == "alone:1:1"
        finally:
            await client.aclose()
