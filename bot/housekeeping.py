"""Housekeeping: the expiry sweep, crash recovery and the retention prune, with what
people are told."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from agents import (
    Agent,
    ExpiredCall,
    PendingCall,
    PendingInfo,
    RecoveredRun,
    RunNotFoundError,
)
from agents.chain import Seal

from . import texts
from .chat_state import CardPlace, ShownState, ask_of
from .documents import ViewDocumentError, load_view
from .metrics import Metrics
from .policy import ApprovalPolicy
from .presenter import Presenter
from .records import ESCALATED, REMINDED, call_entry
from .tasks import KeyedLocks, TaskTracker
from .timers import DELIVER, TIMER, UNDELIVERED, Timer, Undelivered, deliver_later
from .traces import run_span, waited
from .types import Messenger, Notice, ThreadKey, Undeliverable
from .views import post_mark, thread_of

log = logging.getLogger(__name__)

DEFAULT_RUN_RETENTION = timedelta(days=30)
"""How long finished runs and an idle thread's history are kept (``RUN_RETENTION``)."""
PRUNE_INTERVAL = 3600.0
"""Seconds between two retention prunes of one replica: old records are no hurry, and
replicas that overlap only repeat idempotent deletes."""
CHECKPOINT_INTERVAL = 900.0
"""Seconds between two signed checkpoints of the audit chain by one replica (and one
more on shutdown): what was written since the last one is not signed yet."""
PRUNE_BATCHES = 50
"""Batches (``Agent.prunable``'s or ``Agent.prune_audit``'s default size each) one prune
pass removes at most; the rest waits for the next pass, so a backlog never holds the
sweep up for long."""


class Housekeeping:
    """Expires overdue calls and settles runs a crash left in flight.

    Args:
        agent: The root agent, whose runtime finds what is due.
        policy: Who a reminder pings, and who an escalation adds.
        chat: Card locks (an expiry must not cross a vote); reminders due.
        presenter: How cards and notices reach people.
        tasks: Where the follow-up work runs.
        threads: The per-thread locks that keep a thread's replies in order.
        metrics: Expiries are counted here.
        retention: How long finished runs, and a thread's history once it has no
            newer run, are kept before the prune removes them.
        audit_retention: How long audit entries are kept before the prune removes them,
            oldest first (``None``: for ever).
        seal: Signs the audit chain's head every ``CHECKPOINT_INTERVAL``, and the anchor
            a prune leaves (``None``: nothing is signed).
    """

    def __init__(
        self,
        *,
        agent: Agent,
        policy: ApprovalPolicy,
        chat: ShownState,
        presenter: Presenter,
        tasks: TaskTracker,
        threads: KeyedLocks,
        metrics: Metrics,
        retention: timedelta = DEFAULT_RUN_RETENTION,
        audit_retention: timedelta | None = None,
        seal: Seal | None = None,
    ) -> None:
        self._agent = agent
        self.retention = retention
        self.audit_retention = audit_retention
        self.seal = seal
        self._policy = policy
        self._chat = chat
        self._presenter = presenter
        self._tasks = tasks
        self._threads = threads
        self._metrics = metrics
        self._hold_off_until = 0.0
        self._next_prune = 0.0
        self._next_seal = time.monotonic() + CHECKPOINT_INTERVAL
        self.timed: dict[str, Callable[[str], Awaitable[int]]] = {}
        """Handlers of other timed jobs, by the start of their key: each gets the job's
        data when due, and says how many things it sent (the client callbacks')."""

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
        for item in items:
            info = item.pending
            tier = self._policy.rule(info.tool_name, info).tier
            waited(info, tier=tier, outcome="expired", decided_by=None)
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
                place = await self._presenter.close_card(messenger, thread, info, "expired")
                template = (
                    texts.EXPIRED_APPROVAL if info.kind == "approval" else texts.EXPIRED_QUESTION
                )
                text = template.format(tool=info.tool_name)
                await self._presenter.say(
                    messenger, thread, self._presenter.notice_for(thread, info.requester, text)
                )
                with run_span("chat.expire", info.run_id, info.trace):
                    await self._presenter.consume(
                        thread,
                        messenger,
                        item.stream,
                        requester=info.requester,
                        about=place.about if place is not None else None,
                    )

    # -- reminders and escalations -----------------------------------------------

    async def send_reminders(self, now: datetime | None = None) -> int:
        """Ping the approvers of calls undecided past ``remind_after``, and tell the
        ``escalate_to`` people of those past ``escalate_after`` that they may decide.

        Each job is handed to exactly one process (the chat state's ``take_due``), so
        a reminder goes out once across replicas and restarts. Returns how many went
        out (a call decided meanwhile gets none).
        """
        now = now or datetime.now(UTC)
        sent = 0
        for key, data in await self._chat.take_due(now.timestamp()):
            try:
                handler = next((h for p, h in self.timed.items() if key.startswith(p)), None)
                if handler is not None:
                    sent += await handler(data)
                    continue
                if key.startswith(DELIVER):
                    sent += await self._deliver(UNDELIVERED.validate_json(data))
                    continue
                job = TIMER.validate_json(data)
            except (ValueError, ViewDocumentError):
                log.error("a timed job %s could not be read; dropped", key)
                continue
            sent += await self._remind(job, now)
        return sent

    async def _deliver(self, kept: Undelivered) -> int:
        """Make a post or update the platform could not take before (kept again, with
        a longer wait, while it still cannot)."""
        view = load_view(kept.view)
        messenger = self._presenter.messenger_of(kept.thread)
        if messenger is None:
            return 0
        try:
            if kept.ref is not None:
                await messenger.update(kept.thread, kept.ref, view)
            else:
                await messenger.post(kept.thread, view, mark=post_mark(view))
        except Undeliverable as exc:
            log.warning("posting a kept %s to %s failed again: %s", view.kind, kept.thread.id, exc)
            await deliver_later(
                self._chat,
                kept.thread,
                view,
                ref=kept.ref,
                attempt=kept.attempt + 1,
            )
            return 0
        except Exception:
            log.exception("posting a kept %s to %s failed", view.kind, kept.thread.id)
            return 0
        return 1

    async def _remind(self, job: Timer, now: datetime) -> int:
        try:
            snap = await self._agent.get_run(job.run_id)
        except RunNotFoundError:
            return 0
        call = snap.find_pending(job.tool_call_id)
        if job.kind == "repost":
            return await self._repost(job, call, snap.metadata)
        if call is None or call.state != "pending" or call.kind != "approval":
            return 0  # decided (or gone) since
        info = PendingInfo.of(job.run_id, call)
        place = await self._presenter.card_place(info)
        messenger = self._presenter.messenger_of(place.thread if place else None)
        if place is None or messenger is None:
            return 0
        thread, tool = place.thread, info.tool_name
        if job.kind == "remind":
            people = sorted(self._policy.deciders_of(info, now))
            text = texts.REMINDER.format(tool=tool)
        else:
            people = sorted(self._policy.rule(tool, info).escalate_to)
            text = texts.ESCALATED.format(tool=tool)
            if any(copy.to.user_id for copy in place.copies):
                place = await self._send_to_escalation(messenger, place, info, people)
        if not place.copies:
            named = tuple(self._presenter.people.who(thread, user) for user in people)
            await self._presenter.say(messenger, thread, Notice(text=text, also=named))
        for copy in place.copies:
            # Under the card in the approvers' channel, or in each direct message.
            mine = (copy.to.user_id,) if copy.to.user_id else people
            named = tuple(self._presenter.people.who(thread, user) for user in mine if user)
            notice = Notice(text=text, also=named)
            await self._presenter.say(messenger, copy.thread, notice, follow=False)
        event = REMINDED if job.kind == "remind" else ESCALATED
        told = ",".join(people) or None
        try:
            await self._agent.record(call_entry(event, info, snap.thread_id, actor=told))
        except Exception:  # sent: the other jobs taken with it go on
            log.exception("could not put the %s of %s on record", event, info.tool_call_id)
        return 1

    async def _repost(self, job: Timer, call: PendingCall | None, metadata: dict[str, Any]) -> int:
        """Post again a card or question whose post failed, if its call still waits and
        it has not been posted since (a failure again keeps it for later)."""
        if call is None or call.state != "pending":
            return 0
        info = PendingInfo.of(job.run_id, call)
        thread = thread_of(metadata)
        messenger = self._presenter.messenger_of(thread)
        if thread is None or messenger is None or await self._presenter.card_place(info):
            return 0
        await self._presenter.show_pending(messenger, thread, info, attempt=job.attempt + 1)
        return 1

    async def _send_to_escalation(
        self, messenger: Messenger, place: CardPlace, info: PendingInfo, names: list[str]
    ) -> CardPlace:
        """A card sent by direct message goes to the people an escalation adds, too."""
        people = await self._presenter.people.groups.expand(place.thread.platform, messenger, names)
        sent = {copy.to.user_id for copy in place.copies}
        more = [to for to in self._presenter.direct(info, people) if to.user_id not in sent]
        card = self._presenter.card(place.thread, info)
        copies = await self._presenter.send_copies(messenger, place.thread, card, more)
        if not copies:
            return place
        wider = replace(place, copies=place.copies + copies)
        try:
            await self._chat.set_card(info.run_id, ask_of(info), wider)
        except Exception:
            log.exception("could not remember the escalated copies of %s", info.tool_call_id)
        if wider.ref:
            pointer = self._presenter.pointer(wider, card)
            await self._presenter.update(messenger, wider.thread, wider.ref, pointer)
        return wider

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

    async def recover_run(self, run_id: str) -> bool:
        """Take on one run now if its process handed it back or crashed (see
        ``recover_interrupted``); whether it was."""
        item = await self._agent.recover_run(run_id)
        if item is None:
            return False
        self._tasks.spawn(self._after_interruption(item), name=f"recover:{item.run_id}")
        return True

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
                # It may have been cut while its answer was written live, since it began.
                with run_span("chat.recover", item.run_id, item.trace):
                    await self._presenter.consume(
                        thread,
                        messenger,
                        item.stream,
                        requester=item.requester,
                        cut_since=item.created_at,
                    )
                return
            # Cards of the dead run must not keep live buttons.
            for call in item.dropped:
                await self._presenter.close_card(messenger, thread, call, "expired")
            requester = item.pending.requester if item.pending else item.requester
            notice = self._presenter.notice_for(
                thread, requester, item.error or texts.INTERNAL_ERROR
            )
            await self._presenter.say(messenger, thread, notice)

    # -- retention --------------------------------------------------------------

    async def prune_finished(self, now: datetime | None = None) -> int:
        """Remove finished runs older than the retention, and the chat state's records
        of them and of threads left with no run, in batches (see ``Agent.prunable``).

        Returns:
            How many runs (sub-agent runs included) were removed.
        """
        before = (now or datetime.now(UTC)) - self.retention
        removed = 0
        for _ in range(PRUNE_BATCHES):
            due = await self._agent.prunable(before)
            if not due.run_ids and not due.thread_ids and not due.more:
                break
            # Forgotten before they go: a crash in between leaves the runs for the next
            # pass to find again, never chat records of runs nothing finds any more.
            await self._chat.forget(due.run_ids, due.thread_ids)
            pruned = await self._agent.prune(due)
            unforeseen = sorted(set(pruned.run_ids) - set(due.run_ids))
            if unforeseen:
                await self._chat.forget(unforeseen, ())
            removed += len(pruned.run_ids)
            if not pruned.run_ids and not pruned.thread_ids and not due.more:
                break  # all of it was saved, or its threads started a run, since
        if removed:
            log.info("removed %d runs finished over %s ago", removed, self.retention)
        return removed

    async def prune_audit(self, now: datetime | None = None) -> int:
        """Remove audit entries older than the audit retention, oldest first, in batches
        (see ``Agent.prune_audit``); none while it is unset.

        Returns:
            How many entries were removed.
        """
        if self.audit_retention is None:
            return 0
        before = (now or datetime.now(UTC)) - self.audit_retention
        removed = 0
        for _ in range(PRUNE_BATCHES):
            batch = await self._agent.prune_audit(before, seal=self.seal)
            removed += batch
            if not batch:
                break
        if removed:
            log.info("removed %d audit entries over %s old", removed, self.audit_retention)
        return removed

    async def seal_audit(self) -> int:
        """Sign each audit chain's head with a checkpoint, unless it ends in one (see
        ``Agent.seal_audit``); none without a key. A store that does not answer is
        logged: the next pass (or replica) signs what this one could not.

        Returns:
            How many checkpoints were appended.
        """
        if self.seal is None:
            return 0
        try:
            return await self._agent.seal_audit(self.seal)
        except Exception:
            log.exception("could not sign the audit log's head")
            return 0

    async def _seal_when_due(self) -> None:
        """A checkpoint of the audit chain, at most once per ``CHECKPOINT_INTERVAL``."""
        if self.seal is None or time.monotonic() < self._next_seal:
            return
        self._next_seal = time.monotonic() + CHECKPOINT_INTERVAL
        await self.seal_audit()

    async def _prune_when_due(self) -> None:
        """The retention prunes, at most once per ``PRUNE_INTERVAL`` in this process."""
        if time.monotonic() < self._next_prune:
            return
        self._next_prune = time.monotonic() + PRUNE_INTERVAL
        await self.prune_finished()
        await self.prune_audit()

    async def run_once(self) -> None:
        """One pass: expire what is due, then recover what a crash left, then (hourly)
        prune what the retention let go.

        Not right after trouble with the store (a failed or slow sweep): other
        processes' heartbeats may have failed as ours did, and they are alive.
        """
        lease = self._agent.lease.total_seconds()
        started = time.monotonic()
        try:
            await self.sweep_expired()
            await self.send_reminders()
        except Exception:
            self._hold_off_until = time.monotonic() + lease
            raise
        if time.monotonic() - started > lease / 3:
            self._hold_off_until = time.monotonic() + lease
        if time.monotonic() < self._hold_off_until:
            log.info("crash recovery waits a lease after trouble with the store")
            return
        await self.recover_interrupted()
        await self._prune_when_due()
        await self._seal_when_due()
