"""The named lease loop the SQLite and Redis stores share.

A lease is taken by one atomic "take it if free or expired" statement in the
store, polled with a growing, jittered sleep until the caller's ``wait`` runs out,
and given back by deleting it only if it still holds our random token.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from .base import LockTimeout

# A contended lock is usually held for one load-and-save, a few milliseconds: the
# first retry comes quickly so a waiter does not add latency to an approval click.
LOCK_POLL_FIRST = 0.002
# Doubling stops here so a long holder costs each waiter at most ~20 polls a second.
LOCK_POLL_MAX = 0.05

TakeLease = Callable[[str], Awaitable[bool]]
GiveBackLease = Callable[[str], Awaitable[None]]


@asynccontextmanager
async def hold_lease(
    name: str, wait: float, *, take: TakeLease, give_back: GiveBackLease
) -> AsyncIterator[None]:
    """Hold a lease for the ``async with`` block, polling ``take`` for up to ``wait``.

    Args:
        name: The lock's name, for the ``LockTimeout`` message.
        wait: How long to try for the lease (its length is ``take``'s business).
        take: Try once to take the lease for a token; ``True`` when taken.
        give_back: Delete the lease if it still holds the token.

    Raises:
        LockTimeout: The lease was not free within ``ttl``.
    """
    token = secrets.token_hex(16)
    try:
        taken = await _poll(take, token, wait)
    except BaseException:
        # A cancelled attempt may have reached the store anyway; only this token can
        # be deleted, so giving it back is always safe.
        await asyncio.shield(give_back(token))
        raise
    if not taken:
        raise LockTimeout(f"lock {name!r} not acquired within {wait:g}s")
    try:
        yield
    finally:
        # Shielded so a cancelled holder still frees the lock instead of blocking
        # every other process until the lease runs out.
        await asyncio.shield(give_back(token))


async def _poll(take: TakeLease, token: str, wait: float) -> bool:
    deadline = time.monotonic() + wait
    delay = LOCK_POLL_FIRST
    while not await take(token):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        # Jitter keeps waiters in different processes from polling in lockstep.
        await asyncio.sleep(min(delay * random.uniform(0.5, 1.0), remaining))
        delay = min(delay * 2, LOCK_POLL_MAX)
    return True
