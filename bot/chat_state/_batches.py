"""Calls that arrive while one is under way go together in the next, as one batch.

For writes whose fixed cost (a hop to SQLite's thread per statement, a Redis
round trip and connection) is most of their cost: a burst of deliveries then
pays it a few times instead of once each. A call that finds nothing under way
goes at once, alone, as it would unbatched (unless deferred: see ``Batches``);
those that arrive meanwhile wait for the next batch. One write is under way at
a time, so they go in the order they came.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def each_alone_on(
    errors: tuple[type[Exception], ...],
    many: Callable[[list[T]], Awaitable[list[R]]],
    one: Callable[[T], Awaitable[R]],
    items: list[T],
) -> list[R | Exception]:
    """``many(items)``; when it fails with one of ``errors`` (which may be one item's
    own: a value the store refuses), each item again with ``one``, so that a bad item
    fails alone and the rest go in. Any other failure is every item's (raised)."""
    try:
        return list(await many(items))
    except errors:
        pass
    outcomes: list[R | Exception] = []
    for item in items:
        try:
            outcomes.append(await one(item))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


class Batches(Generic[T, R]):
    """Runs ``one(item)`` for a lone call, ``many(items)`` for those that arrived together.

    ``many`` answers each item in order: its result, or the exception that is its own.
    With ``defer``, even a lone call waits for the writer (the next turn of the event
    loop), so that the calls of one turn, a burst's, all go in one batch; without
    it, the first of them goes alone and the rest after it (fine where the write
    itself gathers what comes in the same turn, as SQLite's group commit does).
    """

    def __init__(
        self,
        one: Callable[[T], Awaitable[R]],
        many: Callable[[list[T]], Awaitable[list[R | Exception]]],
        *,
        name: str,
        defer: bool = False,
    ) -> None:
        self._one = one
        self._many = many
        self._name = name
        self._defer = defer
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._alone: asyncio.Future[None] | None = None
        """Done when the lone call under way is."""

    async def __call__(self, item: T) -> R:
        """``item``'s result, alone now or in the next batch."""
        if not self._defer and self._alone is None and not self._waiting:
            alone = self._alone = asyncio.get_running_loop().create_future()
            try:
                return await self._one(item)
            finally:
                self._alone = None
                alone.set_result(None)
        done: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name=self._name)
            self._writer.add_done_callback(self._abandon)
        # A caller that stops waiting cancels only ``done``: its item stays in the batch
        # (a write cut short may land all the same, unbatched too), and the writer
        # passes over its answer.
        return await done

    def _abandon(self, writer: asyncio.Task[None]) -> None:
        """The writer never leaves a caller waiting, whatever ended it (even before it ran)."""
        if writer is not self._writer:
            return  # a newer writer has the queue now
        gone = RuntimeError(f"the {self._name} writer stopped")
        waiting, self._waiting = self._waiting, []
        for _, done in waiting:
            if not done.done():
                done.set_exception(gone)

    async def _write(self) -> None:
        while self._waiting:
            if self._alone is not None:
                await asyncio.shield(self._alone)  # the lone call came first
                continue
            batch = list(self._waiting)  # stays waiting (for _abandon) until answered
            try:
                outcomes = await self._many([item for item, _ in batch])
            except Exception as exc:  # the batch's, so every caller's
                outcomes = [exc] * len(batch)
            self._waiting = self._waiting[len(batch) :]
            for (_, done), outcome in zip(batch, outcomes, strict=True):
                if done.done():
                    continue
                if isinstance(outcome, Exception):
                    done.set_exception(outcome)
                else:
                    done.set_result(outcome)
