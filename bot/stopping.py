"""Stopping a thread's work: a Stop button, or a message that only says ``stop``.

Whoever asked may stop their request, and so may anyone who may decide a call it
waits for. The runtime ends the run (``Agent.stop_run``): a run that waits only
for people ends at once; one with work under way ends where that work is next
saved, here or on another replica, and its answer stops where it was. Every
card and question it waited on is shown stopped, without buttons.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from agents import Agent, PendingInfo, RunNotFoundError, RunSnapshot

from . import texts
from .metrics import Metrics
from .presenter import Presenter
from .types import IncomingMessage, Notice, Text, ThreadKey

log = logging.getLogger(__name__)


def says_stop(text: str) -> bool:
    """Whether a whole message only says to stop (``stop``, ``cancel``, ``abort``)."""
    return " ".join(text.lower().strip(" .!").split()) in texts.STOP_WORDS


class Stopper:
    """Stops runs in a thread for the people allowed to, and shows what that ends."""

    def __init__(self, agent: Agent, presenter: Presenter, metrics: Metrics) -> None:
        self._agent = agent
        self._presenter = presenter
        self._metrics = metrics

    async def active(self, thread: ThreadKey) -> list[RunSnapshot]:
        """The thread's runs that work or wait for someone (not stopped yet), oldest first."""
        return await self._agent.thread_runs(thread.id)

    async def stop(self, thread: ThreadKey, user_id: str, run_id: str | None = None) -> Text:
        """Stop ``run_id`` (else every active run of the thread) for ``user_id``.

        What it ended is said in the thread, to them; the returned text (empty when
        something was stopped) is for them only: why nothing was.
        """
        if run_id is None:
            runs = await self.active(thread)
        else:
            try:
                snap = await self._agent.get_run(run_id)
            except RunNotFoundError:
                return (texts.NOTHING_TO_STOP,)
            runs = [snap] if snap.thread_id == thread.id and snap.stop is None else []
        return await self.stop_runs(thread, user_id, runs)

    async def stop_runs(self, thread: ThreadKey, user_id: str, runs: list[RunSnapshot]) -> Text:
        """Stop these runs of ``thread`` (as ``active`` found them) for ``user_id``, as
        ``stop`` does."""
        if not runs:
            return (texts.NOTHING_TO_STOP,)
        allowed = [run for run in runs if await self._may_stop(thread, run, user_id)]
        if not allowed:
            return (texts.STOP_NOT_YOURS,)
        messenger = self._presenter.messenger(thread.platform)
        stopped_any, working = False, False
        for run in allowed:
            try:
                stopped = await self._agent.stop_run(run.run_id, stopped_by=user_id)
            except RunNotFoundError:
                continue
            if stopped is None:
                continue  # it ended meanwhile
            self._metrics.runs_stopped.inc()
            log.info("run %s in %s stopped by %s", run.run_id, thread.id, user_id)
            for call in stopped.dropped:
                await self._presenter.close_card(messenger, thread, call, "stopped", user_id)
            stopped_any = True
            # One that works on ends by itself, its answer cut off where it was.
            working = working or not stopped.ended
        if not stopped_any:
            return (texts.NOTHING_TO_STOP,)
        said = texts.STOPPING if working else texts.STOPPED
        notice = Notice(text=said, to=self._presenter.people.who(thread, user_id))
        await self._presenter.say(messenger, thread, notice)
        return ()

    async def stop_by_words(self, message: IncomingMessage, *, retry: bool) -> bool:
        """Stop the thread's work on a message that only says ``stop``; whether it was
        taken so. A question waiting while nothing works is left to hear ``cancel``."""
        thread = message.thread
        runs = await self.active(thread)
        now = datetime.now(UTC)
        asking = any(
            p.kind == "suspension" and p.state == "pending" and p.expires_at > now
            for run in runs
            for p in run.pending
        )
        if asking and not any(run.in_flight for run in runs):
            return False
        if not runs and (retry or not message.addressed):
            return True  # stopped by this very message before a crash, or not for the bot
        said = await self.stop_runs(thread, message.user_id, runs)
        if said:
            await self._presenter.tell(thread, message.user_id, said)
        return True

    async def _may_stop(self, thread: ThreadKey, run: RunSnapshot, user_id: str) -> bool:
        """Whoever asked, or anyone who may decide a call the run waits for."""
        if user_id == run.resource_id:
            return True
        for waiting in run.pending:
            if waiting.state != "pending":
                continue
            deciders = await self._presenter.people.deciders(
                thread, PendingInfo.of(run.run_id, waiting)
            )
            if not deciders or user_id in deciders:
                return True
        return False
