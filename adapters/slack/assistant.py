"""Slack's assistant view: suggested prompts when a person opens a thread there, and
the thread's title from the first request in it.

Both are cosmetic: they run behind the ack, and Slack's refusals are only logged.

"First request" is known in process only: a thread counts once the adapter has seen
it start (``assistant_thread_started``), and its title is set from the first message
the core keeps in it. A thread started before a restart keeps Slack's own title
("New chat"); asking Slack for the thread's history on every message would cost a
round trip per message for a title.
"""

from __future__ import annotations

import logging

from cachetools import LRUCache
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot import ChatCore, SuggestedPrompt, TaskTracker, ThreadKey, Undeliverable

from . import texts
from ._reach import reaching as _reaching
from .convert import AssistantStartedIn

log = logging.getLogger(__name__)

PROMPTS_LIMIT = 4
"""Suggested prompts Slack shows in one thread."""
PROMPT_TITLE_LIMIT = 75
PROMPT_MESSAGE_LIMIT = 1000
"""A prompt's button label and the message it sends (as ``[[bot.prompts]]`` allows)."""
TITLE_LIMIT = 60
"""A thread's title: one short line, as in the assistant view's history."""
_STARTED_CACHE = 10_000
"""Threads started and still without a request: one entry per person who opened the
view and asked nothing yet; the oldest are forgotten (their title stays Slack's)."""
_ELLIPSIS = "…"


def prompts_payload(prompts: tuple[SuggestedPrompt, ...]) -> list[dict[str, str]]:
    """``prompts`` as ``assistant.threads.setSuggestedPrompts`` takes them, within
    Slack's limits."""
    return [
        {
            "title": _cut(prompt.title, PROMPT_TITLE_LIMIT),
            "message": _cut(prompt.message, PROMPT_MESSAGE_LIMIT),
        }
        for prompt in prompts[:PROMPTS_LIMIT]
    ]


def title_of(request: str) -> str:
    """A thread's title from its first request: its first line, spaces collapsed, cut
    to ``TITLE_LIMIT``; ``""`` for a request with no words."""
    for line in request.splitlines():
        words = " ".join(line.split())
        if words:
            return _cut(words, TITLE_LIMIT)
    return ""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(_ELLIPSIS)].rstrip() + _ELLIPSIS


class AssistantThreads:
    """The assistant view's threads: prompts when one starts, a title on its first request.

    Args:
        bot: The chat core, whose ``suggested_prompts`` are offered.
        client: The adapter's Web API client.
        tasks: Where the calls run, behind the ack.
    """

    def __init__(self, bot: ChatCore, client: AsyncWebClient, *, tasks: TaskTracker) -> None:
        self.bot = bot
        self.client = client
        self.tasks = tasks
        self._untitled: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=_STARTED_CACHE)

    def started(self, thread: AssistantStartedIn) -> None:
        """A person opened the view: offer the prompts (none configured: nothing), and
        title the thread from its first request."""
        self._untitled[(thread.channel, thread.thread_ts)] = True
        prompts = prompts_payload(self.bot.suggested_prompts)
        if prompts:
            self.tasks.spawn(
                self._suggest(thread.channel, thread.thread_ts, prompts),
                name=f"slack-prompts:{thread.channel}:{thread.thread_ts}",
            )

    def requested(self, thread: ThreadKey, request: str) -> None:
        """The core kept a request in ``thread``: the first in a started thread titles it."""
        key = (thread.channel, thread.root)
        title = title_of(request)
        if not title or self._untitled.pop(key, None) is None:
            return
        self.tasks.spawn(
            self._title(thread.channel, thread.root, title),
            name=f"slack-title:{thread.channel}:{thread.root}",
        )

    async def _suggest(self, channel: str, thread_ts: str, prompts: list[dict[str, str]]) -> None:
        try:
            async with _reaching():
                await self.client.assistant_threads_setSuggestedPrompts(
                    channel_id=channel,
                    thread_ts=thread_ts,
                    title=texts.SUGGESTED_PROMPTS_TITLE,
                    prompts=prompts,
                )
        except (SlackClientError, Undeliverable) as exc:
            log.info("no suggested prompts in %s/%s: %s", channel, thread_ts, exc)

    async def _title(self, channel: str, thread_ts: str, title: str) -> None:
        try:
            async with _reaching():
                await self.client.assistant_threads_setTitle(
                    channel_id=channel, thread_ts=thread_ts, title=title
                )
        except (SlackClientError, Undeliverable) as exc:
            log.info("no title for %s/%s: %s", channel, thread_ts, exc)
