"""Slack's rate limits and passing failures, met without losing a message.

``chat.postMessage`` allows about one message a second per channel, ``chat.update``
is Tier 3 per workspace, and Slack answers ``429`` with ``Retry-After`` when a
workspace goes over. The Web API client retries a 429 a couple of times on its own;
what is still refused comes here. Every call that posts or changes a message goes
through one ``Pacer``:

- calls for one channel are made one at a time, in the order they were asked for,
  so the order of posts in a thread is kept;
- a 429 is waited out for its ``Retry-After`` (nothing of that kind is sent to
  that place before then), then sent again;
- a 5xx answer, a timeout or a dropped connection is tried again with backoff;
- a connection Slack refuses (or a name that does not resolve) is ``Undeliverable``
  at once, as is a call still not made after ``patience`` seconds: the core logs it.

Refusals that will not change (``channel_not_found``, ``invalid_blocks``) are raised
at once, as before.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError

from bot import KeyedLocks, Undeliverable

log = logging.getLogger(__name__)

T = TypeVar("T")

PATIENCE: Final = 300.0
"""Seconds one call may wait (limits, retries) before it is given up as undeliverable."""
BACKOFF_FIRST: Final = 1.0
BACKOFF_MOST: Final = 30.0
"""A passing failure is tried again after 1 s, 2 s, 4 s... (jittered), at most 30 s apart."""
DEFAULT_RETRY_AFTER: Final = 1.0
"""Seconds waited after a 429 that names no ``Retry-After``."""


class Pacer:
    """Makes Web API calls within Slack's limits; see the module's docstring.

    ``clock`` and ``sleep`` are the event loop's by default (tests may pass their own).
    """

    def __init__(
        self,
        *,
        patience: float = PATIENCE,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._patience = patience
        self._clock = clock
        self._sleep = sleep
        self._turns = KeyedLocks()
        self._blocked: dict[str, float] = {}
        self.waiting = 0
        """Calls waiting now on a limit or a retry (a metric)."""

    async def call(self, place: str, limit: str, send: Callable[[], Awaitable[T]]) -> T:
        """``send()`` once it may be made: after the calls asked for before it for
        ``place`` (a channel), and once ``limit`` (what Slack limits it by: a channel,
        a method in a workspace) is past any ``Retry-After``.

        Raises:
            Undeliverable: It could not be made within the patience.
            SlackApiError: Slack refused it for good.
        """
        async with self._turns.hold(place):
            deadline = self._clock() + self._patience
            failures = 0
            while True:
                await self._wait(self._blocked.get(limit, 0.0) - self._clock(), deadline)
                try:
                    return await send()
                except SlackApiError as exc:
                    status = exc.response.status_code
                    if status == 429:
                        after = _retry_after(exc)
                        self._blocked[limit] = self._clock() + after
                        log.info("Slack limits %s: waiting %.1f s", limit, after)
                        continue
                    if status < 500:
                        raise
                    reason = f"HTTP {status}"
                except aiohttp.ClientConnectorError as exc:
                    raise Undeliverable(f"Slack could not be reached: {exc}") from None
                except (aiohttp.ClientError, TimeoutError) as exc:
                    reason = str(exc) or type(exc).__name__
                failures += 1
                pause = min(BACKOFF_MOST, BACKOFF_FIRST * 2 ** (failures - 1))
                log.info("Slack call for %s failed (%s): again in %.1f s", place, reason, pause)
                await self._wait(pause * random.uniform(0.8, 1.2), deadline)

    async def _wait(self, seconds: float, deadline: float) -> None:
        """Sleep ``seconds`` (counted as waiting), or give up if that passes the deadline."""
        if seconds <= 0:
            return
        if self._clock() + seconds > deadline:
            raise Undeliverable("Slack's limits or failures outlasted the patience")
        self.waiting += 1
        try:
            await self._sleep(seconds)
        finally:
            self.waiting -= 1


def _retry_after(exc: SlackApiError) -> float:
    """The seconds a 429 asks to wait (its ``Retry-After``)."""
    headers = exc.response.headers or {}
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    try:
        return max(0.0, float(value)) if value is not None else DEFAULT_RETRY_AFTER
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER
