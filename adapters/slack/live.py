"""A live answer in a Slack thread: the text streamed into one message as the model
writes it (``chat.startStream``, ``chat.appendStream``, ``chat.stopStream``), with
each tool call as a task card between the words (``task_update`` chunks, shown as a
timeline).

Text is batched (``FLUSH_CHARS``, ``FLUSH_SECONDS``); a step and the end send
everything that waits. An answer longer than ``MARKDOWN_LIMIT`` goes on in a new
streamed message, as a whole answer goes on in a new post.

A refusal or an outage raises from the method that met it, after the broken stream
is stopped where Slack still takes that: the core then posts the segment's text
whole below it (what was streamed may show twice; nothing is lost). A refusal that
means "never in this channel" is reported to ``refused`` first, so the next answer
there is not streamed at all.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.models.messages.chunk import Chunk, MarkdownTextChunk, TaskUpdateChunk
from slack_sdk.web.async_client import AsyncWebClient

from bot import Person, Reply, Step, Text, ThreadKey, answer_mark, compose

from ._reach import reaching
from .blocks import closing_blocks
from .mrkdwn import ELLIPSIS, Block, clip, escape, mention, to_markdown
from .wire import post_metadata

log = logging.getLogger(__name__)

MARKDOWN_LIMIT = 12_000
"""``markdown_text`` in one call (Slack's documented limit), and in one streamed
message: a longer answer goes on in a new one, as whole answers are split
(``blocks.MESSAGE_TEXT_LIMIT``)."""
FLUSH_CHARS = 400
FLUSH_SECONDS = 1.5
"""Text is appended once this much waits, or once this long has passed since the last
call: about one ``appendStream`` a second at a model's pace, where Slack allows
100+ a minute (Tier 4) per workspace for all of its streams together."""
DETAIL_LIMIT = 256
"""A task's ``details`` (and ``output``), as Slack's task cards take them."""
TITLE_LIMIT = 256
"""No documented limit; tool titles are short, and a long one is cut like details."""
LINK_HELD = 300
"""The longest unfinished ``[label](url`` held back until it is complete (so its
target can be shown): anything longer is no link, only a bracket."""
TASK_DISPLAY = "timeline"
"""Each task as a card where it happened, between the words ("plan" would gather
them in one block)."""

NOT_HERE = frozenset(
    {
        "not_allowed",
        "method_not_supported_for_channel_type",
        "channel_type_not_supported",
        "missing_scope",
        "not_allowed_token_type",
        "no_permission",
        "unknown_method",
        "restricted_action_non_threadable_channel",
    }
)
"""``chat.startStream`` answers that mean "never in this channel", as opposed to a
passing error (a rate limit, an outage) that the next answer tries again."""

_UNFINISHED_LINK = re.compile(r"\[[^\]\n]*(?:\](?:\([^)\s]*)?)?\Z")


class SlackLive:
    """One answer streamed into a thread, started at the first words or step.

    Args:
        client: The Web API client.
        thread: Where the answer goes (``thread_ts`` = its root).
        to: Who asked: the recipient Slack requires outside DMs (``None`` in a DM only).
        refused: Told the channel when Slack will never stream there.
    """

    def __init__(
        self,
        client: AsyncWebClient,
        thread: ThreadKey,
        to: Person | None,
        *,
        refused: Callable[[str], None],
    ) -> None:
        self._client = client
        self._thread = thread
        self._to = to
        self._refused = refused
        self._ts: str | None = None
        self._pending = ""
        """Text written and not sent yet (as the model wrote it, not escaped)."""
        self._shown = 0
        """Markdown characters in the current message."""
        self._last = 0.0
        self._failed = False
        self._closing: list[Block] = []
        """Blocks the stream ends with (the feedback buttons of a finished answer, Stop)."""
        self._metadata: dict[str, Any] | None = None
        """The mark its last message ends with: a finished run's answer (``finish``)."""

    async def write(self, text: str) -> None:
        """Add answer text: sent at once to start the message, then in batches."""
        self._pending += text
        waited = time.monotonic() - self._last >= FLUSH_SECONDS
        if self._ts is None or len(self._pending) >= FLUSH_CHARS or waited:
            await self._flush(held=True)

    async def step(self, step: Step) -> None:
        """Show a tool call as a task (the text before it first)."""
        await self._flush(task=task_chunk(step))

    async def finish(self, *, feedback: str | None = None, stop: str | None = None) -> None:
        """Send what waits and stop the stream: the message is final (with 👍 / 👎 under
        a finished run's answer, ``feedback``; with Stop under the text before a card or
        question of a run still going, ``stop``)."""
        closing = compose(Reply(text="", feedback=feedback, stop=stop))
        self._closing = closing_blocks(closing)
        # Where a crash after this leaves the message unrecorded, it is found by this.
        self._metadata = post_metadata(answer_mark(feedback)) if feedback else None
        await self._flush(final=True)

    async def _flush(
        self, *, held: bool = False, task: TaskUpdateChunk | None = None, final: bool = False
    ) -> None:
        if self._failed:
            raise RuntimeError("this live answer failed already")
        try:
            await self._send_pending(held=held, task=task, final=final)
        except Exception:
            self._failed = True
            await self._abandon()
            raise

    async def _send_pending(self, *, held: bool, task: TaskUpdateChunk | None, final: bool) -> None:
        text = _without_unfinished_link(self._pending) if held else self._pending
        self._pending = self._pending[len(text) :]
        while True:
            if self._shown == 0:
                text = text.lstrip()  # a message starts with words, as a post does
            piece, text = _fit(text, MARKDOWN_LIMIT - self._shown, fresh=self._shown == 0)
            if not text:
                break
            await self._send(_markdown(piece))  # the message is full: go on in a new one
            await self._stop(())
        chunks: list[Chunk] = [*_markdown(piece), *([task] if task else [])]
        if not final:
            await self._send(chunks)
        elif self._ts is not None:
            await self._stop(chunks, blocks=self._closing, metadata=self._metadata)
        elif chunks:
            await self._send(chunks)
            await self._stop((), blocks=self._closing, metadata=self._metadata)

    async def _send(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            return
        if self._ts is None:
            await self._start(chunks)
        else:
            async with reaching():
                await self._client.chat_appendStream(
                    channel=self._thread.channel, ts=self._ts, chunks=chunks
                )
        self._shown += sum(len(c.text) for c in chunks if isinstance(c, MarkdownTextChunk))
        self._last = time.monotonic()

    async def _start(self, chunks: Sequence[Chunk]) -> None:
        recipient: dict[str, str] = {}
        if self._to is not None:
            recipient = {
                "recipient_user_id": self._to.id,
                "recipient_team_id": self._thread.workspace,
            }
        try:
            async with reaching():
                response = await self._client.chat_startStream(
                    channel=self._thread.channel,
                    thread_ts=self._thread.root,
                    task_display_mode=TASK_DISPLAY,
                    chunks=chunks,
                    **recipient,
                )
        except SlackApiError as exc:
            if exc.response.get("error") in NOT_HERE:
                self._refused(self._thread.channel)
            raise
        ts = response.get("ts")
        if not isinstance(ts, str) or not ts:
            raise RuntimeError("chat.startStream gave no ts")
        self._ts, self._shown = ts, 0

    async def _stop(
        self,
        chunks: Sequence[Chunk],
        *,
        blocks: Sequence[Block] = (),
        metadata: dict[str, Any] | None = None,
    ) -> None:
        ts, self._ts, self._shown = self._ts, None, 0
        if ts is None:
            return
        async with reaching():
            await self._client.chat_stopStream(
                channel=self._thread.channel,
                ts=ts,
                chunks=list(chunks) or None,
                blocks=list(blocks) or None,
                metadata=metadata,
            )

    async def _abandon(self) -> None:
        """End a stream that failed, where Slack still takes that (else it ends it itself)."""
        try:
            await self._stop(())
        except Exception as exc:
            log.debug("could not stop the broken stream in %s: %s", self._thread.channel, exc)


def task_chunk(step: Step) -> TaskUpdateChunk:
    """A tool step as Slack's task: its title as is, its detail with people mentioned."""
    return TaskUpdateChunk(
        id=step.id,
        title=clip(step.title, TITLE_LIMIT),
        status=step.status,
        details=task_details(step.detail),
    )


def task_details(detail: Text) -> str | None:
    """A step's detail: words escaped, people as mentions, within ``DETAIL_LIMIT``
    (a person who does not fit is left out, never cut)."""
    shown = ""
    for part in detail:
        piece = escape(part) if isinstance(part, str) else mention(part)
        room = DETAIL_LIMIT - len(shown)
        if len(piece) > room:
            if room > 0:
                shown += clip(piece, room, escaped=True) if isinstance(part, str) else ELLIPSIS
            break
        shown += piece
    return shown.strip() or None


def _markdown(text: str) -> list[Chunk]:
    return [MarkdownTextChunk(text=text)] if text else []


def _without_unfinished_link(text: str) -> str:
    """``text`` up to a Markdown link still being written (sent once it is whole)."""
    unfinished = _UNFINISHED_LINK.search(text[-LINK_HELD:])
    if unfinished is None:
        return text
    return text[: len(text) - len(text[-LINK_HELD:]) + unfinished.start()]


def _fit(text: str, room: int, *, fresh: bool) -> tuple[str, str]:
    """The markdown of as much of ``text`` as fits in ``room``, cut at a paragraph, line or
    word end, and the rest (as written). In a message that already holds text, a piece
    that could only be cut mid-word is left for the next message."""
    shown = to_markdown(text)
    if len(shown) <= room:
        return shown, ""
    at = _fitting(text, room)
    for separator in ("\n\n", "\n", " "):
        found = text.rfind(separator, 0, at)
        if found > at // 2:
            return to_markdown(text[:found].rstrip()), text[found:]
    if not fresh:
        return "", text
    return to_markdown(text[:at]), text[at:]


def _fitting(text: str, room: int) -> int:
    """How many characters of ``text`` fit in ``room`` once escaped."""
    used = 0
    for i, char in enumerate(text):
        used += len(escape(char))
        if used > room:
            return i
    return len(text)
