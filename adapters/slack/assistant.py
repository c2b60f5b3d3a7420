"""The bot's conversations in its direct message: suggested prompts when a person opens
one, and each thread's title from the first request in it.

Slack shapes them two ways. Agent messaging (``features.agent_view``, the only way
for new apps): the person opens the direct message itself (``app_home_opened`` on its
``messages`` tab), where the prompts are set at the top, for no thread (Slack drops
prompts set for one there); each message they write there is a thread of its own,
titled from that message. The assistant view (``features.assistant_view``, apps
created before): opening the view starts a thread (``assistant_thread_started``),
which gets the prompts and is titled from the first request in it.

Both are cosmetic: they run behind the ack, and Slack's refusals are only logged. A
direct message where Slack refused to title a thread of its own (an app still on the
assistant view, whose direct message has none) is not asked again by this process.

An assistant thread's "first request" is known on every replica: the replica Slack sends
``assistant_thread_started`` to notes the thread in the chat state
(``slack-assistant:<team>:<channel>:<thread_ts>`` = ``started``, for
``ASSISTANT_NOTE_TTL``), and whichever replica the core keeps the first direct
message in that thread on reads it, notes ``titled`` and sets the title from that
message. Asking Slack for the thread's history instead would cost a round trip per
message. Each process remembers the threads it saw start and those whose note it
has read once, so a thread's later messages read no note there. A store failure is
logged: the thread keeps Slack's own title ("New chat") unless this replica saw it
start. Two first messages at once on two replicas may both title it (the note is no
transaction): the later title stays, as cosmetic.
"""

from __future__ import annotations

import logging

from cachetools import LRUCache
from slack_sdk.errors import SlackApiError, SlackClientError

from bot import ChatCore, SuggestedPrompt, TaskTracker, ThreadKey, Undeliverable

from . import texts
from ._reach import reaching as _reaching
from .convert import AssistantStartedIn
from .installations import Tokens
from .mrkdwn import clip

log = logging.getLogger(__name__)

_Key = tuple[str, str, str]
"""An assistant thread: (workspace, channel, thread_ts)."""

PROMPTS_LIMIT = 4
"""Suggested prompts Slack shows in one thread."""
PROMPT_TITLE_LIMIT = 75
PROMPT_MESSAGE_LIMIT = 1000
"""A prompt's button label and the message it sends (as ``[[bot.prompts]]`` allows)."""
TITLE_LIMIT = 60
"""A thread's title: one short line, as in the assistant view's history."""
ASSISTANT_NOTE = "slack-assistant"
"""The chat-state note kept for an assistant thread
(``slack-assistant:<team>:<channel>:<thread_ts>``): ``started`` until its first request
titles it, then ``titled``, for the replicas that did not see it start."""
ASSISTANT_NOTE_TTL = 24 * 3600.0
"""Seconds an assistant thread's note is kept: a day, so a view opened and asked in
later that day still gets its title, and abandoned threads cost the store nothing."""
_STARTED = "started"
_TITLED = "titled"
_KNOWN_CACHE = 10_000
"""Threads each process remembers (started here and still without a request, or
settled): the oldest are forgotten, and their note is read again."""
_UNTITLED_CACHE = 10_000
"""Direct messages each process remembers Slack refused a title in."""


def prompts_payload(prompts: tuple[SuggestedPrompt, ...]) -> list[dict[str, str]]:
    """``prompts`` as ``assistant.threads.setSuggestedPrompts`` takes them, within
    Slack's limits."""
    return [
        {
            "title": clip(prompt.title, PROMPT_TITLE_LIMIT),
            "message": clip(prompt.message, PROMPT_MESSAGE_LIMIT),
        }
        for prompt in prompts[:PROMPTS_LIMIT]
    ]


def title_of(request: str) -> str:
    """A thread's title from its first request: its first line, spaces collapsed, cut
    to ``TITLE_LIMIT``; ``""`` for a request with no words."""
    for line in request.splitlines():
        words = " ".join(line.split())
        if words:
            return clip(words, TITLE_LIMIT)
    return ""


class AssistantThreads:
    """The direct message's conversations: prompts when one opens, a title on its first
    request.

    Args:
        bot: The chat core, whose ``suggested_prompts`` are offered.
        tokens: Each workspace's Web API client.
        tasks: Where the calls run, behind the ack.
    """

    def __init__(self, bot: ChatCore, tokens: Tokens, *, tasks: TaskTracker) -> None:
        self.bot = bot
        self.tokens = tokens
        self.tasks = tasks
        self._started_here: LRUCache[_Key, bool] = LRUCache(maxsize=_KNOWN_CACHE)
        self._settled: LRUCache[_Key, bool] = LRUCache(maxsize=_KNOWN_CACHE)
        self._untitled: LRUCache[str, bool] = LRUCache(maxsize=_UNTITLED_CACHE)

    def opened(self, channel: str, *, workspace: str | None) -> None:
        """A person opened their direct message with the bot (``channel``; agent
        messaging): offer the prompts at its top (none configured: nothing)."""
        prompts = prompts_payload(self.bot.suggested_prompts)
        if prompts:
            self.tasks.spawn(
                self._suggest(workspace, channel, None, prompts), name=f"slack-prompts:{channel}"
            )

    def started(self, thread: AssistantStartedIn, *, workspace: str) -> None:
        """A person opened the view in ``workspace``: offer the prompts (none
        configured: nothing), and note the thread so that its first request titles it,
        on any replica."""
        key = (workspace, thread.channel, thread.thread_ts)
        self._started_here[key] = True
        self.tasks.spawn(
            self._note(key, _STARTED),
            name=f"slack-assistant-note:{thread.channel}:{thread.thread_ts}",
        )
        prompts = prompts_payload(self.bot.suggested_prompts)
        if prompts:
            self.tasks.spawn(
                self._suggest(workspace, thread.channel, thread.thread_ts, prompts),
                name=f"slack-prompts:{thread.channel}:{thread.thread_ts}",
            )

    def requested(self, thread: ThreadKey, request: str, *, new: bool) -> None:
        """The core kept a direct message in ``thread``: one that starts its thread
        (``new``: agent messaging's) titles it, as does the first in a started assistant
        thread."""
        key = (thread.workspace, thread.channel, thread.root)
        title = title_of(request)
        if not title or key in self._settled:
            return
        self._settled[key] = True  # only the first request this replica sees reads the note
        if new:
            if thread.channel not in self._untitled:
                self.tasks.spawn(
                    self._title(key, title, new=True),
                    name=f"slack-title:{thread.channel}:{thread.root}",
                )
            return
        self.tasks.spawn(
            self._title_first(key, title, started_here=self._started_here.pop(key, False)),
            name=f"slack-title:{thread.channel}:{thread.root}",
        )

    async def _title_first(self, key: _Key, title: str, *, started_here: bool) -> None:
        try:
            noted = await self.bot.chat.note(_note_key(key))
        except Exception:
            log.warning("could not read whether %s/%s is untitled", *key[1:], exc_info=True)
            noted = None
        # Seen starting here, no note yet: its own note may not have landed (or failed).
        if noted == _STARTED or (noted is None and started_here):
            # Noted before Slack is asked: another replica's next request leaves it alone.
            await self._note(key, _TITLED)
            await self._title(key, title)

    async def _note(self, key: _Key, state: str) -> None:
        try:
            await self.bot.chat.set_note(_note_key(key), state, ttl=ASSISTANT_NOTE_TTL)
        except Exception:
            # Cosmetic: only the replicas that did not see it cannot tell.
            log.warning("could not note that %s/%s was %s", key[1], key[2], state, exc_info=True)

    async def _suggest(
        self,
        workspace: str | None,
        channel: str,
        thread_ts: str | None,
        prompts: list[dict[str, str]],
    ) -> None:
        try:
            async with _reaching():
                client = await self.tokens.client_for(workspace)
                # None is left out: under agent messaging Slack drops a call naming a thread.
                await client.assistant_threads_setSuggestedPrompts(
                    channel_id=channel,
                    thread_ts=thread_ts,
                    title=texts.SUGGESTED_PROMPTS_TITLE,
                    prompts=prompts,
                )
        except (SlackClientError, Undeliverable, LookupError) as exc:
            log.info("no suggested prompts in %s/%s: %s", channel, thread_ts or "-", exc)

    async def _title(self, key: _Key, title: str, *, new: bool = False) -> None:
        workspace, channel, thread_ts = key
        try:
            async with _reaching():
                client = await self.tokens.client_for(workspace)
                await client.assistant_threads_setTitle(
                    channel_id=channel, thread_ts=thread_ts, title=title
                )
        except SlackApiError as exc:
            if new:  # no threads of its own here (the assistant view): not asked again
                self._untitled[channel] = True
            log.info("no title for %s/%s: %s", channel, thread_ts, exc)
        except (SlackClientError, Undeliverable, LookupError) as exc:
            log.info("no title for %s/%s: %s", channel, thread_ts, exc)


def _note_key(key: _Key) -> str:
    workspace, channel, thread_ts = key
    return f"{ASSISTANT_NOTE}:{workspace}:{channel}:{thread_ts}"
