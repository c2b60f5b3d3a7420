"""Housekeeping: the expiry sweep and crash recovery, with what people are told."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from datetime import datetime

from agents import Agent, ExpiredCall, LockTimeout, PendingInfo, RecoveredRun, RunNotFoundError

from . import messages
from .chat_state import ChatState, ask_of
from .metrics import Metrics
from .presenter import Presenter
from .tasks import KeyedLocks, TaskTracker
from .types import Messenger, ThreadKey
from .views import prompt, thread_of

log = logging.getLogger(__name__)


class Housekeeping:
    """Expires overdue calls and settles runs a crash left in flight.

    Args:
        agent: The root agent, whose runtime finds what is due.
        chat: Card locks (an expiry must not cross a vote).
        presenter: How cards and notices reach people.
        tasks: Where the follow-up work runs.
        threads: The per-thread locks that keep a thread's replies in order.
        metrics: Expiries are counted here.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        chat: ChatState,
        presenter: Presenter,
        tasks: TaskTracker,
        threads: KeyedLocks,
        metrics: Metrics,
    ) -> None:
        self._agent = agent
        self._chat = chat
        self._presenter = presenter
        self._tasks = tasks
        self._threads = threads
        self._metrics = metrics
        self._hold_off_until = 0.0

    # -- expiry -----------------------------------------------------------------

    async def sweep_expired(self, now: datetime | None = None) -> int:
        """Expire every call past its time; cards, notices and answers follow in the background.

        Returns:
            How many pending calls expired.
        """
        expired = await self._agent.expire_due(now)
        by_run: dict[str, list[ExpiredCall]] = defaultdict(list)
        for item in expired:
            self._metrics.decided("expired")
            by_run[item.pending.run_id].append(item)
        for run_id, items in by_run.items():
            # One task per run: the runtime wants a run's streams consumed in order.
            self._tasks.spawn(self._after_expiry(items), name=f"expiry:{run_id}")
        return len(expired)

    async def _after_expiry(self, items: list[ExpiredCall]) -> None:
        run_id = items[0].pending.run_id
        thread = await self._thread_of_run(run_id, items[0].pending)
        messenger = self._presenter.messenger_of(thread)
        if thread is None or messenger is None:
            log.warning("run %s expired outside any known thread; finishing it quietly", run_id)
            for item in items:
                await item.stream.result()
            return
        async with self._threads.hold(thread.id):
            for item in items:
                info = item.pending
                # Looked up under the thread's lock: a card posted just before the
                # sweep is recorded by now.
                await self._close_card(messenger, thread, info)
                template = (
                    messages.EXPIRED_APPROVAL
                    if info.kind == "approval"
                    else messages.EXPIRED_QUESTION
                )
                text = template.format(tool=info.tool_name)
                await self._presenter.say(
                    messenger, thread, self._presenter.notice_for(thread, info.requester, text)
                )
                await self._presenter.consume(thread, messenger, item.stream)

    async def _thread_of_run(self, run_id: str, info: PendingInfo | None) -> ThreadKey | None:
        """Where a run was asked: its card's thread, else what the run remembers."""
        place = await self._presenter.card_place(info) if info is not None else None
        thread = place.thread if place is not None else None
        if thread is None:
            try:
                thread = thread_of((await self._agent.get_run(run_id)).metadata)
            except RunNotFoundError:
                return None
        return thread

    # -- crash recovery ---------------------------------------------------------

    async def recover_interrupted(self, now: datetime | None = None) -> int:
        """Report runs a crash left in flight (repeatable decisions are carried out again).

        Returns:
            How many runs were found.
        """
        found = await self._agent.recover_interrupted(now=now)
        for item in found:
            self._tasks.spawn(self._after_interruption(item), name=f"recover:{item.run_id}")
        return len(found)

    async def _after_interruption(self, item: RecoveredRun) -> None:
        thread = await self._thread_of_run(item.run_id, item.pending)
        messenger = self._presenter.messenger_of(thread)
        if thread is None or messenger is None:
            log.warning("run %s was interrupted outside any known thread", item.run_id)
            if item.stream is not None:
                await item.stream.result()
            return
        async with self._threads.hold(thread.id):
            if item.stream is not None:
                await self._presenter.consume(thread, messenger, item.stream)
                return
            # Cards of the dead run must not keep live buttons.
            for call in item.dropped:
                await self._close_card(messenger, thread, call)
            requester = item.pending.requester if item.pending else item.requester
            notice = self._presenter.notice_for(
                thread, requester, item.error or messages.INTERNAL_ERROR
            )
            await self._presenter.say(messenger, thread, notice)

    async def _close_card(self, messenger: Messenger, thread: ThreadKey, call: PendingInfo) -> None:
        """Show a call's approval card (or question) as expired, without its buttons."""
        place = await self._presenter.card_place(call)
        if place is None:
            return
        if call.kind != "approval":
            await self._presenter.update(
                messenger, thread, place.ref, prompt(call, status="expired")
            )
            return
        expired = self._presenter.card(thread, call, status="expired")
        # A quorum card's votes update it under this lock: take it too, so a vote
        # counted just before cannot show up after the card closed.
        try:
            async with self._chat.card_lock(call.run_id, ask_of(call)):
                await self._presenter.update(messenger, thread, place.ref, expired)
        except LockTimeout:
            await self._presenter.update(messenger, thread, place.ref, expired)

    async def run_once(self) -> None:
        """One pass: expire what is due, then recover what a crash left.

        Not right after trouble with the store (a failed or slow sweep): other
        processes' heartbeats may have failed as ours did, and they are alive.
        """
        lease = self._agent.engine.lease.total_seconds()
        started = time.monotonic()
        try:
            await self.sweep_expired()
        except Exception:
            self._hold_off_until = time.monotonic() + lease
            raise
        if time.monotonic() - started > lease / 3:
            self._hold_off_until = time.monotonic() + lease
        if time.monotonic() < self._hold_off_until:
            log.info("crash recovery waits a lease after trouble with the store")
            return
        await self.recover_interrupted()
