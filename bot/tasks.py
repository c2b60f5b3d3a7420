"""Tracked background tasks: agent work that outlives the request that started it.

Platform acks must not wait for the agent, so the core runs agent work in tasks.
A bare ``asyncio.create_task`` can be garbage-collected mid-flight and loses its
exceptions; the tracker keeps a reference, logs failures, can wait for all of
them (tests, shutdown) and cancels stragglers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

log = logging.getLogger(__name__)


class TaskTracker:
    """A set of running background tasks that can be drained or cancelled."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()
        self._closed = False

    @property
    def running(self) -> int:
        """How many tracked tasks have not finished yet."""
        return len(self._tasks)

    def spawn(self, work: Coroutine[Any, Any, object], *, name: str | None = None) -> None:
        """Run ``work`` in the background; a failure is logged, never raised.

        Raises:
            RuntimeError: The tracker was closed (the process is shutting down).
        """
        if self._closed:
            work.close()
            raise RuntimeError("background tasks are closed")
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("background task %s failed", task.get_name(), exc_info=exc)

    async def drain(self) -> None:
        """Wait until no tracked task is running, including tasks spawned meanwhile."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 (grace period)
        """Wait up to ``timeout`` seconds for running work, then cancel what is left.

        Work spawned while waiting is still accepted (a click answered during
        shutdown must still be carried out); afterwards ``spawn`` refuses.
        """
        try:
            await asyncio.wait_for(self.drain(), timeout)
        except TimeoutError:
            self._closed = True
            left = set(self._tasks)
            log.warning("cancelling %d background task(s) still running at shutdown", len(left))
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)
        self._closed = True


async def every(interval: float, work: Callable[[], Awaitable[object]], *, what: str) -> None:
    """Call ``work`` every ``interval`` seconds until cancelled; failures are logged."""
    while True:
        await asyncio.sleep(interval)
        try:
            await work()
        except Exception:
            log.exception("periodic %s failed", what)


class KeyedLocks:
    """One asyncio lock per key (a thread id), dropped when nobody holds or awaits it."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the lock of ``key``; waiters get it in arrival order."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key], self._locks[key]
