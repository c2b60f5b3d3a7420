"""The memory store's lock and cancellation: a waiter cancelled as the lock frees is
cancelled, never let in (a swallowed cancel kept a bot's sweeper alive after
``aclose`` cancelled it, and ``aclose`` waited for it for ever)."""

from __future__ import annotations

import asyncio

from agents.stores.memory import MemoryStore


async def test_a_waiter_cancelled_as_the_lock_frees_is_cancelled_and_the_lock_free() -> None:
    store = MemoryStore()
    let_in = 0

    async def wait_for_it() -> None:
        nonlocal let_in
        async with store.lock("run:1", wait=5):
            let_in += 1

    for _ in range(50):
        holding = store.lock("run:1")
        await holding.__aenter__()
        waiter = asyncio.create_task(wait_for_it())
        for _ in range(3):
            await asyncio.sleep(0)  # the waiter waits on the lock
        await holding.__aexit__(None, None, None)  # frees it: the waiter's turn...
        waiter.cancel()  # ... as it is cancelled, before it ran again
        await asyncio.gather(waiter, return_exceptions=True)
        assert waiter.cancelled(), "a cancel while taking the lock must not be swallowed"
        async with store.lock("run:1", wait=0.5):  # and the lock is free again
            pass
    assert let_in == 0
