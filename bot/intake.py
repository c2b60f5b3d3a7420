"""Durable intake: a message or click is in the intake queue before the platform's ack.

``ChatBot`` hands every delivery to ``Intake.submit`` as a *write*: the few
store steps that decide whether it is for the bot, then the intake queue write, which
is also its dedupe claim (``ChatState.enqueue``). Once that returns, the
adapter acks. Workers, in every process, take entries with a lease they renew,
do the work and remove the entry; the entry of a worker that died is taken
over once its lease lapsed, by another replica or by this one restarted. At
most ``workers`` entries are worked on per process at once, so a burst waits
in the intake queue instead of failing, and acks stay fast.

Outages delay work, they do not lose it. A write that fails waits in a bounded
buffer in this process and is written once the store answers again, each on a
backoff of its own and behind nothing but the older deliveries of its thread, so
a cluster shard failing over delays only the threads it holds. Nothing acked is
dropped; when even the buffer is full, ``Overloaded`` tells the adapter to
withhold the ack (HTTP 503), so the platform sends the request again. Work that
fails is retried with backoff, holding its entry, for up to ``retry_for``
seconds; its last try is told so, to say what went wrong instead of failing
again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from .chat_state import IntakeEntry, IntakeSignal, IntakeState
from .tasks import TaskTracker
from .types import Click, IncomingMessage

log = logging.getLogger(__name__)

DEFAULT_WORKERS = 32
"""Entries one process works on at once (a run each): the Redis pool holds 64."""
WRITE_TIMEOUT = 2.0
"""How long a delivery's write may take before it is kept in this process (Slack waits 3 s)."""
BUFFER_LIMIT = 1000
"""Deliveries one process keeps while the store is unreachable; past it, 503."""
RETRY_FIRST = 0.25
RETRY_MAX = 5.0
RETRY_FOR = 15 * 60.0
"""How long failing work is retried before its last try says it failed."""
MAX_TAKES = 5
"""An entry taken this many times (its workers kept dying) gets its last try."""
POLL_INTERVAL = 1.0
"""How often a started intake looks for entries other processes left or wrote."""

BUFFERED: Literal["buffered"] = "buffered"


class Overloaded(Exception):
    """The store is unreachable and the buffer is full: do not ack, let it come again."""


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """What an intake entry holds: one message or one click."""

    message: IncomingMessage | None = None
    click: Click | None = None


DELIVERY = TypeAdapter(Delivery)


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """Which try of an entry's work this is."""

    retry: bool
    """Whether the work may have been started before (by this or another process)."""
    last: bool
    """The last try: report a failure instead of raising."""


Write = Callable[[], Awaitable[str | None]]
"""Decide whether a delivery is for the bot and write it: its entry id, or ``None``."""
Work = Callable[[Delivery, IntakeEntry, Attempt], Awaitable[None]]
"""Do an entry's work; raise to have it retried."""


def delivery_place(delivery: Delivery) -> str:
    """The thread a delivery is for: its deliveries are written in arrival order."""
    if delivery.message is not None:
        return delivery.message.thread.id
    if delivery.click is not None:
        return delivery.click.thread.id
    return ""


@dataclass(eq=False, kw_only=True)
class _Kept:
    """A delivery waiting in this process for the store, on its own backoff."""

    write: Write
    place: str
    failures: int = 0
    due: float = 0.0
    """When to try it again (``time.monotonic``)."""
    singled_out: bool = False
    """Whether it was refused while others went in (said once)."""


def worker_name() -> str:
    """A name for this process's workers, unique across hosts and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Intake:
    """The intake queue's writer and this process's workers.

    Args:
        chat: The chat state holding the intake queue.
        work: What to do with an entry (``Work``).
        tasks: Where entries are worked on (drained and closed with the bot).
        lease: Seconds an entry stays with a worker that stopped renewing it;
            the same on every replica.
        workers: Entries worked on at once in this process.
        on_delay: Called once per delivery that has to wait for the store.
    """

    def __init__(
        self,
        chat: IntakeState,
        work: Work,
        *,
        tasks: TaskTracker,
        lease: float,
        workers: int = DEFAULT_WORKERS,
        on_delay: Callable[[Delivery], Coroutine[Any, Any, None]] | None = None,
        retry_for: float = RETRY_FOR,
    ) -> None:
        self.chat = chat
        self._work = work
        self._tasks = tasks
        self.lease = lease
        self.workers = workers
        self._on_delay = on_delay
        self.retry_for = retry_for
        self.name = worker_name()
        self._held: set[str] = set()
        self._buffer: list[_Kept] = []
        self._places: Counter[str] = Counter()  # threads of what is kept, and how many
        self._away = False  # the last writes failed: keep deliveries without trying
        self._store_back = asyncio.Event()  # a write went in: a failed take tries again
        self._wanted = asyncio.Event()
        self._taking = False
        self._saturated = False
        self._troubled_until = 0.0
        self._loops: list[asyncio.Task[None]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def _patience(self) -> float:
        """How long one background store call may take before it counts as failed."""
        return max(self.lease / 3, WRITE_TIMEOUT)

    @property
    def busy(self) -> bool:
        """Whether deliveries are buffered, being taken or worked on in this process."""
        return bool(self._held or self._buffer or self._wanted.is_set() or self._taking)

    @property
    def buffered(self) -> int:
        """Deliveries waiting in this process for the store to answer."""
        return len(self._buffer)

    # -- writing ----------------------------------------------------------------

    async def submit(
        self, write: Write, delivery: Delivery, *, say_delayed: bool = True
    ) -> str | Literal["buffered"] | None:
        """Run ``write`` now: the new entry's id, ``None`` (a copy, or not for the bot),
        or ``BUFFERED`` when the store failed and the delivery waits in this process
        (``on_delay`` is told, unless ``say_delayed`` is off: the caller says it).

        Raises:
            Overloaded: The store failed and the buffer is full: withhold the ack.
        """
        if self._closed:
            raise Overloaded("this process is shutting down")
        # Behind the thread's kept deliveries (its order); behind all while the
        # store is away, so the ack does not wait for a write bound to time out.
        if self._away or self._places[delivery_place(delivery)]:
            return self._keep(write, delivery, None, say_delayed)
        try:
            # Bounded, so the ack stays within the platform's patience. A write cut
            # short may still land: its retry is then a copy (dedupe keys). A timeout
            # scope, not wait_for: on Python 3.11 that runs the write in a task of its
            # own, a cost every ack paid. (Timeout scopes throughout this module: 3.11's
            # wait_for also swallows a cancel that comes as its awaitable finishes, so a
            # loop cancelled at close went on, and the close waited for it for ever.)
            async with asyncio.timeout(WRITE_TIMEOUT):
                entry_id = await write()
        except Exception as exc:  # TimeoutError included
            self._trouble()
            self._away = True
            return self._keep(write, delivery, exc, say_delayed)
        self._away = False
        self._store_back.set()
        if entry_id is not None:
            self.want()
        return entry_id

    def _keep(
        self, write: Write, delivery: Delivery, error: Exception | None, say_delayed: bool
    ) -> Literal["buffered"]:
        if len(self._buffer) >= BUFFER_LIMIT:
            raise Overloaded(f"{len(self._buffer)} deliveries wait for the store already")
        if not self._buffer:  # an outage begins: one line, not one per delivery
            why = f": {error or type(error).__name__}" if error is not None else ""
            log.warning("the store did not take a delivery; keeping deliveries here%s", why)
        self._buffer.append(_Kept(write=write, place=delivery_place(delivery)))
        self._places[self._buffer[-1].place] += 1
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="intake-flush")
        if say_delayed and self._on_delay is not None:
            self._tasks.spawn(self._on_delay(delivery), name="intake-delayed")
        return BUFFERED

    async def _flush(self) -> None:
        """Write what is kept until none is left: pass after pass, backing off while
        nothing goes in. Nothing kept is ever dropped (it was acked)."""
        delay = RETRY_FIRST
        while self._buffer:
            delay = RETRY_FIRST if await self._flush_pass() else min(delay * 2, RETRY_MAX)
            if not self._buffer:
                break
            earliest = min(kept.due for kept in self._buffer) - time.monotonic()
            await asyncio.sleep(max(earliest, delay))
        log.info("every delivery kept during the outage is in the intake queue")

    async def _flush_pass(self) -> bool:
        """Try each kept delivery that is due, oldest first; whether any went in.

        A delivery refused goes on a backoff of its own, and the deliveries of its
        thread wait behind it (their order is kept). Two refusals in a row end the
        pass: the store is away, and trying every delivery would only wait longer. A
        delivery refused while others go in (its shard of a cluster is failing over)
        is tried again, never taken for the culprit and dropped.
        """
        now = time.monotonic()
        behind: set[str] = set()  # threads with an older delivery still kept
        refused = 0
        wrote = False
        for kept in list(self._buffer):
            if kept.place in behind or kept.due > now:
                behind.add(kept.place)
                continue
            try:
                async with asyncio.timeout(self._patience):
                    entry_id = await kept.write()
            except Exception as exc:  # TimeoutError included
                self._refused(kept, exc, others=wrote)
                behind.add(kept.place)
                refused += 1
                if refused >= 2:
                    self._away = True
                    return wrote
                continue
            refused = 0
            wrote, self._away = True, False
            self._store_back.set()
            self._buffer.remove(kept)
            self._places[kept.place] -= 1
            if not self._places[kept.place]:
                del self._places[kept.place]
            if entry_id is not None:
                self.want()
        return wrote

    def _refused(self, kept: _Kept, error: Exception, *, others: bool) -> None:
        kept.failures += 1
        kept.due = time.monotonic() + min(RETRY_FIRST * 2 ** (kept.failures - 1), RETRY_MAX)
        why = str(error) or type(error).__name__
        if others and not kept.singled_out:  # a state change of this delivery: say it once
            kept.singled_out = True
            log.warning(
                "the store refuses a kept delivery while it takes others; trying it again: %s", why
            )
        else:
            log.debug("a kept delivery was refused (%d times): %s", kept.failures, why)

    # -- taking -----------------------------------------------------------------

    def want(self) -> None:
        """Look for entries to take now (a delivery was written, a slot freed)."""
        if self._closed:
            return
        self._wanted.set()
        if not self._loops:
            self._loops = [
                asyncio.create_task(self._take_loop(), name="intake-take"),
                asyncio.create_task(self._renew_loop(), name="intake-renew"),
            ]

    def start(self, poll: float = POLL_INTERVAL) -> None:
        """Also look every ``poll`` s: entries other processes wrote or left behind
        (and at once when the intake queue says another process wrote one)."""
        self.want()
        self._loops.append(asyncio.create_task(self._poll(poll), name="intake-poll"))

    async def _poll(self, interval: float) -> None:
        # Word of new entries (PostgreSQL's NOTIFY) saves waiting for the next look;
        # the looks go on, for lapsed leases and for word lost.
        signal = self.chat if isinstance(self.chat, IntakeSignal) else None
        while True:
            if signal is None:
                await asyncio.sleep(interval)
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(interval):
                        await signal.wait_for_entries()
            self.want()

    async def _take_loop(self) -> None:
        delay = RETRY_FIRST
        while True:
            await self._wanted.wait()
            self._taking = True
            self._wanted.clear()
            try:
                await self._take_all()
                if delay > RETRY_FIRST:  # a state change: one line, as when it began
                    log.info("taking from the intake queue again")
                delay = RETRY_FIRST
            except Exception as exc:
                self._trouble()
                why = str(exc) or type(exc).__name__
                if delay == RETRY_FIRST:
                    log.warning("could not take from the intake queue, trying again: %s", why)
                else:
                    log.debug("still cannot take from the intake queue: %s", why)
                # Again after the backoff, or at once when a write shows the store back.
                self._store_back.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._store_back.wait()
                delay = min(delay * 2, RETRY_MAX)
                self._wanted.set()
            finally:
                self._taking = False

    def _trouble(self) -> None:
        """The store failed us: for a lease, take over nobody's entries.

        Their workers may be alive and only unable to renew, as we were; once the
        store is back, they renew within seconds.
        """
        self._troubled_until = time.monotonic() + self.lease

    async def _take_all(self) -> None:
        # Saturated: every slot was filled, so more may be waiting; a freed slot looks.
        self._saturated = True
        while (free := self.workers - len(self._held)) > 0:
            take_over = time.monotonic() >= self._troubled_until
            taking = self.chat.take(self.name, count=free, lease=self.lease, take_over=take_over)
            async with asyncio.timeout(self._patience):
                entries = await taking
            for entry in entries:
                if entry.id in self._held:
                    # Ours already: its lease lapsed while the store was away and the
                    # take renewed it. It is being worked on; do not start it twice.
                    continue
                self._held.add(entry.id)
                self._tasks.spawn(self._run(entry), name=f"intake:{entry.id}")
            if len(entries) < free:
                self._saturated = False
                return

    async def _renew_loop(self) -> None:
        pause = self.lease / 3
        while True:
            await asyncio.sleep(pause)
            pause = self.lease / 3
            if self._held:
                renewing = self.chat.renew(self.name, sorted(self._held), lease=self.lease)
                try:
                    async with asyncio.timeout(self._patience):
                        await renewing
                except Exception as exc:
                    self._trouble()
                    why = str(exc) or type(exc).__name__
                    log.warning("could not renew %d intake lease(s): %s", len(self._held), why)
                    pause = min(pause, RETRY_MAX)  # before the lease lapses, if it comes back

    # -- working ----------------------------------------------------------------

    async def _run(self, entry: IntakeEntry) -> None:
        try:
            try:
                delivery = DELIVERY.validate_json(entry.body)
            except ValidationError:
                log.error("intake entry %s is not a delivery; dropping it", entry.id)
            else:
                await self._retrying(delivery, entry)
            await self._done(entry.id)
        except asyncio.CancelledError:
            if self._closed:  # shutting down: another replica takes it now, not a lease later
                await asyncio.shield(self._hand_back(entry.id))
            raise
        finally:
            self._held.discard(entry.id)
            if self._saturated:
                self.want()

    async def _retrying(self, delivery: Delivery, entry: IntakeEntry) -> None:
        give_up = time.monotonic() + self.retry_for
        delay = RETRY_FIRST
        tries = 0
        while True:
            last = entry.attempts >= MAX_TAKES or time.monotonic() >= give_up
            attempt = Attempt(retry=entry.attempts > 1 or tries > 0, last=last)
            try:
                await self._work(delivery, entry, attempt)
                return
            except Exception as exc:
                if last:
                    log.exception("intake entry %s failed on its last try", entry.id)
                    return
                self._trouble()
                log.warning("intake entry %s failed, again in %.1fs: %s", entry.id, delay, exc)
                if tries == 0 and self._on_delay is not None:
                    await self._on_delay(delivery)
            tries += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    async def _hand_back(self, entry_id: str) -> None:
        try:
            async with asyncio.timeout(self._patience):
                await self.chat.release(self.name, [entry_id])
        except Exception as exc:  # the store is away: the entry waits for its lease
            log.info("could not hand intake entry %s back: %s", entry_id, exc)

    async def _done(self, entry_id: str) -> None:
        """Remove a worked-off entry, trying for half a lease (a failover takes
        seconds); if the store keeps failing, its lease lapses and whoever takes it
        finds the work done (``Attempt.retry``)."""
        delay = RETRY_FIRST
        give_up = time.monotonic() + self.lease / 2
        while True:
            try:
                await self.chat.done(entry_id)
                return
            except Exception as exc:
                if time.monotonic() + delay > give_up:
                    log.warning("could not mark intake entry %s done: %s", entry_id, exc)
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)

    # -- lifecycle --------------------------------------------------------------

    async def aclose(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109 (grace period)
        """Stop taking; write what is buffered within ``timeout`` s (it was acked).

        What is held is finished or cancelled with the bot's tasks, and what is
        cancelled is handed back, for another replica to take at once; from now on
        ``submit`` raises ``Overloaded``, so the platform sends it elsewhere.
        """
        self._closed = True
        if self._flusher is not None and not self._flusher.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._flusher), timeout)
        loops = [*self._loops, *([self._flusher] if self._flusher else [])]
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        self._loops = []
        if self._buffer:
            log.error(
                "%d deliveries never reached the store and are lost with this process",
                len(self._buffer),
            )
