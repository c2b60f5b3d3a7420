"""Teams' limits on what the bot sends, in one place: every call to the Bot Connector
(posts, updates, typing, streamed answers, new conversations, replies in a turn) goes
through ``Limits.call``.

Teams throttles a bot per conversation with 429 and ``Retry-After``, and has bad
moments (502, 503, 504, no answer in time). The policy (``RetryPolicy``):

- 429: nothing more goes to that conversation before ``Retry-After`` has passed (without
  one: the back-off below), so the next call waits too.
- 408, 500, 502, 503, 504, a time-out or a dropped connection: tried again after 1, 2,
  4, 8, 15, 15… seconds (``Retry-After`` when the answer has one).
- Bounded: a call gives up when its next try could not start within its budget (60 s
  from the call, about what a card may wait; 5 s for a reply inside a request's turn,
  which Teams gives 15 s in all) and raises ``Undeliverable``, which the core logs in
  one line and keeps.
- A service that refuses the connection, a name that does not resolve: not tried again
  (``Undeliverable`` at once). Other answers (400, 403, 404…) are raised as they came.
- Order: calls to one conversation go one at a time, first come first served, so a
  post waiting on a limit is never overtaken by the next one.

A try that timed out or got a 5xx may have been done by Teams all the same: trying again
may show a message twice, which beats losing it.

msrest (under botbuilder) has a retry policy of its own, inside urllib3, blocking a
thread and blind to ``Retry-After`` on posts: every connector has it turned off
(``TunedConnectors``), so this one is the only one. Token requests are MSAL's, whose
HTTP client keeps to ``Retry-After`` itself; a token that cannot be had is
``Undeliverable`` (``TeamsAuth.prefetch_token``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final, TypeVar

import requests
from botframework.connector.aio import ConnectorClient
from botframework.connector.auth import ConnectorFactory
from msrest.exceptions import ClientRequestError, HttpOperationError
from urllib3.exceptions import ProtocolError
from urllib3.util.retry import Retry

from bot import Undeliverable

T = TypeVar("T")

THROTTLED: Final = 429
TRANSIENT: Final = frozenset({408, 500, 502, 503, 504})
"""Answers that say "not now" rather than "no" (501 and 505 never change)."""


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How long a call to Teams may wait on its limits (seconds)."""

    budget: float = 60.0
    """From the call to the last try that may start: a card posted or updated."""
    reply_budget: float = 5.0
    """The same for a reply inside a request's turn, which Teams waits about 15 s for."""
    first_wait: float = 1.0
    """The wait after a first failure that names none; doubled after each next one."""
    longest_wait: float = 15.0
    attempt_timeout: float = 15.0
    """The longest one request may take to connect, and then between bytes."""

    def backoff(self, failures: int) -> float:
        """The wait after ``failures`` failures in a row that named no wait."""
        return float(min(self.first_wait * 2 ** (failures - 1), self.longest_wait))


@dataclass(frozen=True)
class _Failure:
    """A try that failed in a way this policy handles."""

    reason: str
    again: bool
    """Worth another try (else ``Undeliverable`` at once)."""
    status: int = 0
    retry_after: float | None = None


@dataclass
class _Queue:
    """The calls to one conversation: one at a time, in the order they came."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class Limits:
    """Teams' limits as the bot meets them: which conversations are throttled until
    when, and the calls waiting on them. One per adapter, shared by every send path.

    Args:
        policy: How long calls may wait (tests make it quick).
        clock: Seconds, monotonic.
    """

    def __init__(
        self, policy: RetryPolicy | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.policy = policy or RetryPolicy()
        self.throttled = 0
        """429 answers met."""
        self.retried = 0
        """Tries made again after a failure."""
        self.given_up = 0
        """Calls that raised ``Undeliverable`` after waiting or trying again."""
        self._waiting = 0
        self._clock = clock
        self._closed: dict[str, float] = {}
        """Conversations Teams throttled, and the time before which nothing goes there."""
        self._queues: dict[str, _Queue] = {}

    @property
    def waiting(self) -> int:
        """Calls waiting right now for a ``Retry-After`` to pass or to try again."""
        return self._waiting

    async def call(
        self,
        conversation: str,
        attempt: Callable[[], Awaitable[T]],
        *,
        budget: float | None = None,
        ordered: bool = True,
        service_url: str = "Teams",
    ) -> T:
        """``attempt()`` under Teams' limits for ``conversation``: waited for, tried again
        within ``budget`` seconds (the policy's unless given); ``ordered=False`` for a
        call that need not wait for earlier ones (a lookup), though it keeps to a
        ``Retry-After`` all the same.

        Raises:
            Undeliverable: ``service_url`` cannot be reached, or could not take the call
                within its budget.
        """
        deadline = self._clock() + (self.policy.budget if budget is None else budget)
        if not ordered:
            return await self._tries(conversation, attempt, deadline, service_url)
        async with self._turn(conversation, deadline):
            return await self._tries(conversation, attempt, deadline, service_url)

    async def _tries(
        self,
        conversation: str,
        attempt: Callable[[], Awaitable[T]],
        deadline: float,
        service_url: str,
    ) -> T:
        failures = 0
        while True:
            await self._open(conversation, deadline)
            try:
                return await attempt()
            except Exception as exc:
                failure = _failure(exc)
                if failure is None:
                    raise
                if not failure.again:
                    raise Undeliverable(f"{service_url} is unreachable: {failure.reason}") from None
            failures += 1
            named = failure.retry_after
            wait = named if named is not None else self.policy.backoff(failures)
            if failure.status == THROTTLED:
                self.throttled += 1
                self._close(conversation, self._clock() + wait)
            if self._clock() + wait > deadline:
                self.given_up += 1
                raise Undeliverable(
                    f"{service_url} did not take a call to {conversation} after {failures} "
                    f"tries ({failure.reason}; next try in {wait:g} s is past its budget)"
                )
            self.retried += 1
            with self._counted():
                await _sleep_until(self._clock, self._clock() + wait)

    async def _open(self, conversation: str, deadline: float) -> None:
        """Wait until Teams takes calls to ``conversation`` again (Undeliverable when that
        is past ``deadline``)."""
        until = self._closed.get(conversation, 0.0)
        if until <= self._clock():
            return
        if until > deadline:
            self.given_up += 1
            left = until - self._clock()
            raise Undeliverable(
                f"Teams throttles {conversation} for {left:.0f} s more (Retry-After), "
                "past this call's budget"
            )
        with self._counted():
            await _sleep_until(self._clock, until)

    def _close(self, conversation: str, until: float) -> None:
        now = self._clock()
        self._closed = {c: t for c, t in self._closed.items() if t > now}
        self._closed[conversation] = max(until, self._closed.get(conversation, 0.0))

    @contextlib.asynccontextmanager
    async def _turn(self, conversation: str, deadline: float) -> AsyncIterator[None]:
        """This call's turn in ``conversation``, after every call that came before it."""
        queue = self._queues.setdefault(conversation, _Queue())
        queue.users += 1
        try:
            try:
                async with asyncio.timeout(deadline - self._clock()):
                    await queue.lock.acquire()
            except TimeoutError:
                self.given_up += 1
                raise Undeliverable(
                    f"earlier calls to {conversation} still wait on Teams' limits"
                ) from None
            try:
                yield
            finally:
                queue.lock.release()
        finally:
            queue.users -= 1
            if not queue.users:
                del self._queues[conversation]

    @contextlib.contextmanager
    def _counted(self) -> Iterator[None]:
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1


class TunedConnectors(ConnectorFactory):  # type: ignore[misc]  # botbuilder is untyped
    """Makes the SDK's connectors with this module as their only retry policy, and each
    request bounded by ``RetryPolicy.attempt_timeout`` (msrest's default: 100 s)."""

    def __init__(self, inner: ConnectorFactory, limits: Limits) -> None:
        self._inner = inner
        self._limits = limits

    async def create(self, service_url: str, audience: str | None = None) -> ConnectorClient:
        """A connector for ``service_url`` as the SDK makes it, tuned."""
        client: ConnectorClient = await self._inner.create(service_url, audience)
        # Changed in place: the client's session already holds this very object.
        retry: Retry = client.config.retry_policy.policy
        retry.total = retry.connect = retry.read = 0
        retry.status_forcelist = frozenset()
        retry.respect_retry_after_header = False
        client.config.connection.timeout = self._limits.policy.attempt_timeout
        return client


def retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (seconds or an HTTP date), or
    ``None`` when it is absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _failure(exc: Exception) -> _Failure | None:
    """What this policy makes of a failed try (``None``: not its business, raised as is)."""
    if isinstance(exc, HttpOperationError):
        response: Any = exc.response
        status = int(getattr(response, "status_code", 0) or 0)
        if status != THROTTLED and status not in TRANSIENT:
            return None
        headers = getattr(response, "headers", None) or {}
        wait = retry_after(headers.get("Retry-After"))
        return _Failure(f"{status} {exc}", again=True, status=status, retry_after=wait)
    if isinstance(exc, ClientRequestError):
        inner = exc.inner_exception
        return _Failure(str(inner or exc), again=_timed_out_or_dropped(inner))
    if isinstance(exc, TimeoutError):
        return _Failure("no answer in time", again=True)
    if isinstance(exc, PermissionError):  # the SDK's way to say it has no token
        return _Failure(f"no Bot Framework token: {exc}", again=False)
    if isinstance(exc, OSError):
        return _Failure(str(exc) or type(exc).__name__, again=False)
    return None


def _timed_out_or_dropped(exc: BaseException | None) -> bool:
    """A request that got no answer in time, or whose connection broke on the way: a
    bad moment. Not one that could not connect at all (refused, no such host, TLS)."""
    if isinstance(exc, requests.exceptions.Timeout):
        return True
    if isinstance(exc, requests.exceptions.SSLError):
        return False
    if not isinstance(exc, requests.exceptions.ConnectionError):
        return False
    return any(isinstance(cause, ProtocolError) for cause in _causes(exc))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps (requests and urllib3 keep the cause in ``args`` and
    ``reason``)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        nested = [*current.args, getattr(current, "reason", None), current.__cause__]
        todo += [n for n in nested if isinstance(n, BaseException)]


async def _sleep_until(clock: Callable[[], float], when: float) -> None:
    """Sleep until ``clock()`` reaches ``when`` (never wakes early, whatever the timer)."""
    # Not polling for another task: a timer may fire up to the clock's resolution early,
    # and a Retry-After is kept to the letter.
    while (left := when - clock()) > 0:  # noqa: ASYNC110
        await asyncio.sleep(left)
