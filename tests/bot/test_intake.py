"""The intake on its own: writes that fail wait in the buffer, and what it refuses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest

from bot import IncomingMessage, MemoryChatState, Overloaded, ThreadKey
from bot.chat_state import IntakeEntry
from bot.intake import BUFFERED, DELIVERY, Attempt, Delivery, Intake
from bot.tasks import TaskTracker

THREAD = ThreadKey(platform="test", workspace="w", channel="c", root="r")


def intake(worked: list[str]) -> Intake:
    async def work(delivery: Delivery, entry: IntakeEntry, attempt: Attempt) -> None:
        assert delivery.message is not None
        worked.append(delivery.message.text)

    chat = MemoryChatState()
    return Intake(chat, work, tasks=TaskTracker(), lease=5.0)


def writer(box: Intake, body: str, failures: list[int]) -> Callable[[], Awaitable[str | None]]:
    """A write that fails while ``failures[0]`` is above zero (-1: always)."""

    async def write() -> str | None:
        if failures[0]:
            failures[0] -= 1 if failures[0] > 0 else 0
            raise ConnectionError("store down")
        said = Delivery(message=IncomingMessage(thread=THREAD, user_id="U1", text=body))
        return await box.chat.enqueue(DELIVERY.dump_json(said).decode(), keys=(), ttl=60)

    return write


async def settled(box: Intake) -> None:
    for _ in range(500):
        if not box.busy:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the intake did not settle")


async def test_writes_that_fail_wait_and_go_in_once_the_store_answers() -> None:
    worked: list[str] = []
    box = intake(worked)
    failures = [2]
    assert await box.submit(writer(box, "one", failures), Delivery()) is BUFFERED
    assert await box.submit(writer(box, "two", [0]), Delivery()) is BUFFERED  # behind "one"
    await settled(box)
    assert worked == ["one", "two"]
    await box.aclose()


def other_thread(body: str) -> Delivery:
    thread = ThreadKey(platform="test", workspace="w", channel="c", root=body)
    return Delivery(message=IncomingMessage(thread=thread, user_id="U1", text=body))


async def test_a_write_refused_while_others_go_in_is_kept_until_it_goes_in() -> None:
    """A shard failing over refuses one thread's delivery while the others' go in:
    it is tried again (never taken for the culprit and dropped), and its thread's
    next delivery waits behind it."""
    worked: list[str] = []
    box = intake(worked)
    refusals = [4]
    thread = Delivery(message=IncomingMessage(thread=THREAD, user_id="U1", text="x"))
    assert await box.submit(writer(box, "refused a while", refusals), thread) is BUFFERED
    assert await box.submit(writer(box, "after it", [0]), thread) is BUFFERED
    for n in range(3):
        body = f"elsewhere {n}"
        await box.submit(writer(box, body, [0]), other_thread(body))
    await settled(box)
    assert refusals == [0]
    assert worked[-2:] == ["refused a while", "after it"]
    assert sorted(worked[:3]) == ["elsewhere 0", "elsewhere 1", "elsewhere 2"]
    await box.aclose()


async def test_an_outage_is_one_log_line_not_one_per_delivery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    worked: list[str] = []
    box = intake(worked)
    down = [3]  # the store refuses the first three writes, whichever they are
    for n in range(20):
        body = f"thread {n}"
        assert await box.submit(writer(box, body, down), other_thread(body)) is BUFFERED
    assert box.buffered == 20  # the first refusal keeps the rest without trying
    await settled(box)
    assert sorted(worked) == sorted(f"thread {n}" for n in range(20))
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and r.name == "bot.intake"]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    await box.aclose()


async def test_a_full_buffer_and_a_closed_intake_refuse_so_the_platform_resends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bot.intake.BUFFER_LIMIT", 1)
    box = intake([])
    assert await box.submit(writer(box, "kept", [-1]), Delivery()) is BUFFERED
    with pytest.raises(Overloaded):
        await box.submit(writer(box, "one too many", [0]), Delivery())
    await box.aclose(timeout=0.1)
    with pytest.raises(Overloaded):
        await box.submit(writer(box, "after the end", [0]), Delivery())


async def test_work_cancelled_at_shutdown_is_handed_back_for_another_replica() -> None:
    started = asyncio.Event()

    async def work(delivery: Delivery, entry: IntakeEntry, attempt: Attempt) -> None:
        started.set()
        await asyncio.sleep(3600)  # longer than any grace

    chat = MemoryChatState()
    tasks = TaskTracker()
    box = Intake(chat, work, tasks=tasks, lease=60.0)
    said = Delivery(message=IncomingMessage(thread=THREAD, user_id="U1", text="slow"))
    body = DELIVERY.dump_json(said).decode()

    async def write() -> str | None:
        return await chat.enqueue(body, keys=(), ttl=60)

    entry_id = await box.submit(write, said)
    await asyncio.wait_for(started.wait(), 5)
    await box.aclose(timeout=0.1)
    await tasks.aclose(timeout=0.1)
    (taken,) = await chat.take("another replica", count=1, lease=60.0)
    assert taken.id == entry_id  # at once, not a lease (60 s) later


async def test_a_take_that_fails_is_one_warning_and_tried_again_when_a_write_goes_in(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Failing(MemoryChatState):
        failures = 3

        async def take(
            self, worker: str, *, count: int, lease: float, take_over: bool = True
        ) -> list[IntakeEntry]:
            if self.failures:
                self.failures -= 1
                raise ConnectionError("the primary is failing over")
            return await super().take(worker, count=count, lease=lease, take_over=take_over)

    worked: list[str] = []

    async def work(delivery: Delivery, entry: IntakeEntry, attempt: Attempt) -> None:
        assert delivery.message is not None
        worked.append(delivery.message.text)

    caplog.set_level(logging.INFO, logger="bot.intake")
    chat = Failing()
    box = Intake(chat, work, tasks=TaskTracker(), lease=5.0)
    assert await box.submit(writer(box, "one", [0]), Delivery()) is not BUFFERED
    for n in range(3):  # each write that goes in wakes the failed take at once
        await asyncio.sleep(0.05)
        await box.submit(writer(box, f"more {n}", [0]), Delivery())
    await settled(box)
    assert sorted(worked) == ["more 0", "more 1", "more 2", "one"]
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and r.name == "bot.intake"]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert any("taking from the intake queue again" in r.getMessage() for r in caplog.records)
    await box.aclose()
