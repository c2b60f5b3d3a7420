"""Signed decisions POSTed to a client's ``callback_url`` until the receiver takes one.

A request with a callback keeps a record (``callback:<approval>``: the tries so far)
and a timer in the chat state, so a restart or another replica carries on: the
timer looks at the approval every ``CHECK`` seconds while it waits, and once it is
decided each try first moves the timer to the next try (``FIRST`` seconds, doubling
up to ``MOST``), then POSTs. A 2xx drops the record; the timer then finds nothing
to do. So a decision is delivered at least once (twice, if a process dies between
a receiver's 2xx and the drop, or two processes try at once): receivers tell copies
apart by the approval's ``id``. After ``ATTEMPTS`` tries (about four days) it is
given up, with an error in the log.

The body is the approval as ``GET /v1/approvals/{id}`` answers it, signed with the
client's token: ``X-Approval-Signature: sha256=<hex HMAC-SHA256 of the body>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import aiohttp

from .chat_state import ChatState

log = logging.getLogger(__name__)

CALLBACK: Final = "callback:"
"""Starts the key of a callback's record and timer."""
CHECK: Final = 600.0
"""Seconds between two looks at an undecided approval with a callback (the decision
itself sends it at once where it is made; this is for a process that died first)."""
FIRST: Final = 2.0
MOST: Final = 3600.0
ATTEMPTS: Final = 120
IN_PROCESS: Final = 4
"""Tries made at once by the process that saw the decision (``FIRST`` apart, doubling);
the timer makes the rest."""
TIMEOUT: Final = 10.0
"""Seconds a receiver has to answer one POST."""
SIGNATURE: Final = "X-Approval-Signature"


def signature(token: str, body: bytes) -> str:
    """The ``X-Approval-Signature`` of ``body`` for a client with ``token``."""
    return "sha256=" + hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Owed:
    """A decision to deliver: where, signed with which token, and the body."""

    url: str
    token: str
    body: bytes


PENDING: Final = "pending"


Lookup = Callable[[str], Awaitable[Owed | str | None]]
"""An approval's callback: ``Owed`` once decided, ``PENDING`` while it waits, ``None``
when there is none (any more)."""


class Callbacks:
    """The callbacks owed, kept in the chat state (see the module's docstring).

    Args:
        chat: Where records and timers are kept.
        lookup: What an approval's callback is now.
        first: Seconds before the first try again (then doubling).
    """

    def __init__(self, chat: ChatState, lookup: Lookup, *, first: float = FIRST) -> None:
        self._chat = chat
        self.first = first
        """Seconds before the first try again (then doubling)."""
        self._lookup = lookup
        """What an approval's callback is now (the service's)."""
        self._session: aiohttp.ClientSession | None = None
        self._delivering: set[str] = set()
        self.delivered = 0
        """Deliveries a receiver took (for metrics and tests)."""

    def _wait(self, attempt: int) -> float:
        return min(MOST, self.first * 2.0**attempt)

    async def expect(self, approval: str) -> None:
        """Owe ``approval``'s decision to its callback: kept before the request is
        answered, so a crash after cannot lose it."""
        key = CALLBACK + approval
        await self._chat.put_record(key, json.dumps({"attempt": 0}))
        await self._chat.set_timer(key, time.time() + CHECK, approval)

    async def due(self, approval: str) -> int:
        """A timer of ``approval`` is due (``Housekeeping``): try once; 1 if delivered."""
        return int(bool(await self._try(approval)))

    async def deliver(self, approval: str) -> None:
        """``approval`` was decided here: try now, and a few times more in this process
        (once at a time: its run's end after its decision changes nothing)."""
        if approval in self._delivering:
            return
        self._delivering.add(approval)
        try:
            for attempt in range(IN_PROCESS):
                if attempt:
                    await asyncio.sleep(self._wait(attempt - 1))
                if await self._try(approval) is not False:
                    return
        finally:
            self._delivering.discard(approval)

    async def _try(self, approval: str) -> bool | None:
        """One try (its timer set for the next first): whether the receiver took it;
        ``None`` when nothing is owed (any more, or yet)."""
        key = CALLBACK + approval
        kept = await self._chat.record(key)
        if kept is None:
            return None
        owed = await self._lookup(approval)
        if owed is None:
            await self._chat.drop_records([key])
            return None
        if isinstance(owed, str):  # still waiting for a decision
            await self._chat.set_timer(key, time.time() + CHECK, approval)
            return None
        attempt = int(json.loads(kept).get("attempt", 0))
        if attempt >= ATTEMPTS:
            log.error("the callback of %s was refused %d times; given up", approval, attempt)
            await self._chat.drop_records([key])
            return None
        # The next try is on record before this one is made.
        await self._chat.set_timer(key, time.time() + self._wait(attempt), approval)
        await self._chat.put_record(key, json.dumps({"attempt": attempt + 1}))
        if not await self._post(approval, owed):
            return False
        await self._chat.drop_records([key])
        self.delivered += 1
        return True

    async def _post(self, approval: str, owed: Owed) -> bool:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT))
        headers = {
            "Content-Type": "application/json",
            SIGNATURE: signature(owed.token, owed.body),
            "X-Approval-Id": approval,
        }
        try:
            async with self._session.post(owed.url, data=owed.body, headers=headers) as response:
                if 200 <= response.status < 300:
                    return True
                log.warning("the callback of %s answered %d", approval, response.status)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("the callback of %s failed: %s", approval, exc or type(exc).__name__)
        return False

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
