"""Housekeeping: the expiry sweep and crash recovery, with what people are told."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from datetime import datetime

from agents import ExpiredCall, LockTimeout, PendingInfo, RecoveredRun, RunNotFoundError

from . import messages
from ._base import CoreBase
from .tasks import every
from .types import ThreadKey
from .views import thread_of

log = logging.getLogger(__name__)


class Housekeeping(CoreBase):
    """Expires overdue calls and settles runs a crash left in flight, on a timer."""

    # -- expiry -----------------------------------------------------------------

    async def sweep_expired(self, now: datetime | None = None) -> int:
        """Expire every call past its time; cards, notices and answers follow in the background.

        Returns:
            How many waiting calls expired.
        """
        expired = await self.agent.expire_due(now)
        by_run: dict[str, list[ExpiredCall]] = defaultdict(list)
        for item in expired:
            self.metrics.decided("expired")
            by_run[item.pending.run_id].append(item)
        for run_id, items in by_run.items():
            # One task per run: the runtime wants a run's streams consumed in order.
            self.tasks.spawn(self._after_expiry(items), name=f"expiry:{run_id}")
        return len(expired)

    async def _after_expiry(self, items: list[ExpiredCall]) -> None:
        run_id = items[0].pending.run_id
        thread = await self._thread_of_run(run_id, items[0].pending)
        messenger = self._messengers.get(thread.platform) if thread else None
        if thread is None or messenger is None:
            log.warning("run %s expired outside any known thread; finishing it quietly", run_id)
            for item in items:
                await item.stream.result()
            return
        async with self._locks.hold(thread.id):
            for item in items:
                info = item.pending
                # Looked up under the thread's lock: a card posted just before the
                # sweep is recorded by now.
                place = await self._card_place(info.run_id, info.tool_call_id)
                if info.kind == "approval" and place is not None:
                    ref = place.ref
                    expired = self._card(info, status="expired")
                    # A quorum card's votes update it under this lock: take it too, so
                    # a vote counted just before the expiry cannot show up after it.
                    try:
                        async with self.chat.card_lock(info.run_id, info.tool_call_id):
                            await self._update(messenger, thread, ref, expired)
                    except LockTimeout:
                        await self._update(messenger, thread, ref, expired)
                template = (
                    messages.EXPIRED_APPROVAL
                    if info.kind == "approval"
                    else messages.EXPIRED_QUESTION
                )
                text = template.format(tool=info.tool_name)
                await self._say(messenger, thread, self._notice_for(info.requester, text))
                await self._consume(thread, messenger, item.stream)

    async def _thread_of_run(self, run_id: str, info: PendingInfo | None) -> ThreadKey | None:
        """Where a run was asked: its card's thread, else what the run remembers."""
        place = await self._card_place(run_id, info.tool_call_id) if info is not None else None
        thread = place.thread if place is not None else None
        if thread is None:
            try:
                thread = thread_of((await self.agent.get_run(run_id)).metadata)
            except RunNotFoundError:
                return None
        return thread

    # -- crash recovery ---------------------------------------------------------

    async def recover_interrupted(self, now: datetime | None = None) -> int:
        """Report runs a crash left in flight (repeatable decisions are carried out again).

        Returns:
            How many runs were found.
        """
        found = await self.agent.recover_interrupted(older_than=self.interrupted_after, now=now)
        for item in found:
            self.tasks.spawn(self._after_interruption(item), name=f"recover:{item.run_id}")
        return len(found)

    async def _after_interruption(self, item: RecoveredRun) -> None:
        thread = await self._thread_of_run(item.run_id, item.pending)
        messenger = self._messengers.get(thread.platform) if thread else None
        if thread is None or messenger is None:
            log.warning("run %s was interrupted outside any known thread", item.run_id)
            if item.stream is not None:
                await item.stream.result()
            return
        async with self._locks.hold(thread.id):
            if item.stream is not None:
                await self._consume(thread, messenger, item.stream)
                return
            # Cards of the dead run must not keep live buttons.
            for call in item.dropped:
                place = await self._card_place(call.run_id, call.tool_call_id)
                if call.kind == "approval" and place is not None:
                    expired = self._card(call, status="expired")
                    await self._update(messenger, thread, place.ref, expired)
            requester = item.pending.requester if item.pending else item.requester
            notice = self._notice_for(requester, item.error or messages.INTERNAL_ERROR)
            await self._say(messenger, thread, notice)

    async def _housekeeping(self) -> None:
        await self.sweep_expired()
        await self.recover_interrupted()

    def start_sweeper(self, interval: float = 30.0) -> None:
        """Expire overdue calls and recover interrupted ones every ``interval`` s, until closed."""
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(
                every(interval, self._housekeeping, what="expiry sweep"), name="expiry-sweeper"
            )
