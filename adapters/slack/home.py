"""Each person's App Home tab: their inbox (``inbox.home_view``), published with
``views.publish`` when they open it, and again whenever what waits for them changes.

Kept current for the people who opened their Home tab in the last ``HOME_NOTE_TTL``,
on whichever replica: Slack sends ``app_home_opened`` to one of them, which keeps a
note of it in the chat state (``slack-home:<team>:<user>``, renewed on each open),
and the replica where a change happens reads it. Everyone else sees a fresh tab when
they open it, since Slack says so each time. Publishing for everyone a change
touches (a user group of hundreds, on every card) would spend Slack's allowance on
tabs nobody looks at. Each process remembers who it knows opened theirs (the most
recent ``KNOWN_HOMES``), so the notes are read only for the others. Publishing is
queued: one publish in flight per person, changes that come meanwhile folded into
one more, and a few people at a time. A failure (Slack's, or the store's while a
note is read or kept) is logged, never raised: the decision it follows stands.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any

import aiohttp
from cachetools import LRUCache
from slack_sdk.errors import SlackApiError, SlackClientError

from bot import ApprovalCard, ChatCore, Click, ClickResult, Rich, TaskTracker, inbox_note

from .convert import home_thread
from .inbox import HOME, Permalink, home_unavailable_view, home_view, inbox_links
from .installations import Tokens

log = logging.getLogger(__name__)

KNOWN_HOMES = 10_000
"""People each process remembers opened their Home tab (the most recent): no note is
read for them."""
HOME_NOTE = "slack-home"
"""The chat-state note kept for a person who opened their Home tab
(``slack-home:<team>:<user>``), for the replicas that did not see it."""
HOME_NOTE_TTL = 30 * 24 * 3600.0
"""Seconds a Home tab is kept current after it was last opened: 30 days, so that a
tab looked at every month stays current, and one abandoned stops costing publishes."""
NOTES_READ_AT_ONCE = 8
"""Notes read at once for a change that touches many people (a user group)."""
PUBLISHING_AT_ONCE = 4
"""``views.publish`` calls in flight at once. Slack allows about 100 a minute (Tier 4)
and the client waits out a 429 before retrying: a burst of changes queues here
rather than fail all together."""

_Key = tuple[str, str]
"""A person's Home tab: (workspace, user id)."""


class HomeTab:
    """Publishes people's Home tabs and keeps them current.

    Args:
        bot: The chat core (``inbox``).
        tokens: Each workspace's client, for ``views.publish``.
        permalink: The permalink of a message, for the requests the tab links to.
        tasks: Where publishing runs (the adapter's, drained with it).
    """

    def __init__(
        self,
        bot: ChatCore,
        tokens: Tokens,
        *,
        permalink: Permalink,
        tasks: TaskTracker,
    ) -> None:
        self._bot = bot
        self._tokens = tokens
        self._permalink = permalink
        self._tasks = tasks
        # Who opened their Home tab, each with the note shown at its top: what their
        # last click there did, or why it was refused.
        self._known: LRUCache[_Key, Rich] = LRUCache(maxsize=KNOWN_HOMES)
        self._due: set[_Key] = set()
        self._publishing: set[_Key] = set()
        self._slots = asyncio.Semaphore(PUBLISHING_AT_ONCE)
        self._reads = asyncio.Semaphore(NOTES_READ_AT_ONCE)

    def opened(self, workspace: str, user: str) -> None:
        """``user`` opened their Home tab: show it as it is now, without the last note,
        and note for every replica that they did."""
        key = (workspace, user)
        self._known[key] = ()
        self._schedule(key)
        self._spawn(self._remember(key), name=f"slack-home-note:{user}")

    def changed(self, workspace: str, people: frozenset[str]) -> None:
        """What waits for ``people`` changed: show again the Home tabs of those who
        opened theirs (here, or on another replica)."""
        unknown: list[_Key] = []
        for user in people:
            key = (workspace, user)
            if key in self._known:
                self._schedule(key)
            else:
                unknown.append(key)
        if unknown:
            self._spawn(self._schedule_noted(unknown), name=f"slack-home-notes:{workspace}")

    def note(self, workspace: str, user: str, text: Rich) -> None:
        """Tell ``user`` something at the top of their Home tab; the Home is no
        conversation, and it is where they are looking."""
        key = (workspace, user)
        self._known[key] = text
        self._schedule(key)

    def after_click(self, click: Click, result: ClickResult) -> None:
        """Show at the top of the clicker's Home tab what their click there did, or why
        it was refused, with the tab as it is now."""
        note: Rich = ()
        if result.accepted and isinstance(result.card, ApprovalCard):
            note = inbox_note(result.card)
        if result.said:
            note = (*note, "\n", *result.said) if note else result.said
        key = (click.thread.workspace, click.user_id)
        self._known[key] = note
        self._schedule(key)

    def _schedule(self, key: _Key) -> None:
        self._due.add(key)
        if key in self._publishing:
            return  # its publisher publishes once more when it is done
        self._publishing.add(key)
        if not self._spawn(self._publisher(key), name=f"slack-home:{key[1]}"):
            self._publishing.discard(key)
            self._due.discard(key)

    def _spawn(self, work: Coroutine[Any, Any, None], *, name: str) -> bool:
        try:
            self._tasks.spawn(work, name=name)
        except RuntimeError:  # shutting down: the tab is shown afresh when opened next
            return False
        return True

    async def _remember(self, key: _Key) -> None:
        try:
            await self._bot.chat.set_note(_note_key(key), str(int(time.time())), ttl=HOME_NOTE_TTL)
        except Exception:
            # Published all the same; only the other replicas will not keep it current.
            log.warning("could not note that %s opened their Home tab", key[1], exc_info=True)

    async def _schedule_noted(self, keys: list[_Key]) -> None:
        failed: list[BaseException] = []

        async def noted(key: _Key) -> bool:
            async with self._reads:
                try:
                    return await self._bot.chat.note(_note_key(key)) is not None
                except Exception as exc:
                    failed.append(exc)
                    return False

        found = await asyncio.gather(*(noted(key) for key in keys))
        if failed:  # once for the change, not once per person
            log.warning(
                "could not read who opened their Home tab (%d of %d people): %r",
                len(failed),
                len(keys),
                failed[0],
                exc_info=failed[0],
            )
        for key, has_note in zip(keys, found, strict=True):
            if has_note:
                self._known.setdefault(key, ())  # keeps a note a click just set
                self._schedule(key)

    async def _publisher(self, key: _Key) -> None:
        try:
            while key in self._due:
                async with self._slots:
                    # Taken off only now: what changed while this waited for a slot
                    # is in the one publish.
                    self._due.discard(key)
                    await self._publish(key)
        finally:
            self._publishing.discard(key)

    async def _publish(self, key: _Key) -> None:
        workspace, user = key
        try:
            inbox = await self._bot.inbox(home_thread(workspace), user)
        except Exception:
            log.exception("could not read the inbox of %s for their Home tab", user)
            view = home_unavailable_view()
        else:
            links = await inbox_links(inbox, self._permalink, HOME)
            view = home_view(inbox, links=links, note=self._known.get(key, ()))
        try:
            client = await self._tokens.client_for(workspace)
            await client.views_publish(user_id=user, view=view)
        except SlackApiError as exc:
            log.warning("Slack refused the Home tab of %s: %s", user, exc.response.get("error"))
        except (SlackClientError, aiohttp.ClientError, TimeoutError, LookupError) as exc:
            log.warning("could not publish the Home tab of %s: %s", user, exc)


def _note_key(key: _Key) -> str:
    workspace, user = key
    return f"{HOME_NOTE}:{workspace}:{user}"
