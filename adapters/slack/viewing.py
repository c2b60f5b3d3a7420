"""What a person is looking at in Slack, in words for the agent, kept for their next request.

Agent messaging (``features.agent_view``) says it with ``app_context_changed`` (also
on the Messages tab's ``app_home_opened``, and folded into a direct message as its
``app_context``): ``context.entities``, most relevant first, each
``{"type": "slack#/types/<kind>", "value": ..., "team_id": ...}``, the kind one of
``channel_id``, ``canvas_id``, ``list_id`` and ``message_context`` (whose value is
``{"channel_id", "message_ts"}``); ``"context": {}`` means nothing in particular.
The assistant view (apps still on ``assistant_view``) says it with
``assistant_thread_started`` and ``assistant_thread_context_changed``: the channel in
``assistant_thread.context.channel_id``.

The words are kept per person in the chat state (``slack-viewing:<team>:<user>``, for
``VIEWING_NOTE_TTL``) for whichever replica their next direct message reaches, which
reads them before it acks that message (within ``VIEWING_READ_TIMEOUT``). Slack sends
ids, not names: the words carry Slack's references (``<#C123>``), which the agent may
repeat in its answer and Slack then shows as links.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from bot import ChatCore, TaskTracker

from . import texts
from .mrkdwn import clip

log = logging.getLogger(__name__)

VIEWING_NOTE = "slack-viewing"
"""The chat-state note of what a person looks at (``slack-viewing:<team>:<user>``): the
words, ``""`` for nothing in particular."""
VIEWING_NOTE_TTL = 3600.0
"""Seconds what a person looks at is believed: Slack says when it changes while the
bot's direct message is open, not when that closes, so an hour-old view is more likely
left than still looked at, and the agent had better hear nothing."""
VIEWING_READ_TIMEOUT = 0.5
"""Seconds a direct message waits for the note before it is acked without it (Slack
waits 3 s for the ack, and the intake queue's write comes after)."""
VIEWING_ENTITIES = 5
"""Entities told the agent, the most relevant first."""
VIEWING_LIMIT = 500
"""Characters of words at most."""
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
"""A Slack id or timestamp: nothing else is put into the agent's input."""
_TYPE = re.compile(r"slack#/types/([a-z][a-z_]{0,39})\Z")


def describe(context: Any) -> str:
    """Agent messaging's ``context`` in words (``""``: nothing in particular, or nothing
    the bot can read); the entities it cannot read are left out."""
    entities = context.get("entities") if isinstance(context, dict) else None
    if not isinstance(entities, list):
        return ""
    words = [w for w in map(_entity_words, entities[:VIEWING_ENTITIES]) if w]
    return clip(texts.VIEWING_SEPARATOR.join(words), VIEWING_LIMIT)


def describe_assistant(context: Any) -> str:
    """The assistant view's ``context`` (``{"channel_id", "team_id", ...}``) in words."""
    channel = context.get("channel_id") if isinstance(context, dict) else None
    return texts.VIEWING_CHANNEL.format(channel=channel) if _is_id(channel) else ""


def _entity_words(entity: Any) -> str:
    if not isinstance(entity, dict) or not isinstance(entity.get("type"), str):
        return ""
    kind = _TYPE.match(entity["type"])
    value = entity.get("value")
    if kind is None:
        return ""
    match kind.group(1):
        case "channel_id" if _is_id(value):
            return texts.VIEWING_CHANNEL.format(channel=value)
        case "canvas_id" if _is_id(value):
            return texts.VIEWING_CANVAS.format(canvas=value)
        case "list_id" if _is_id(value):
            return texts.VIEWING_LIST.format(list=value)
        case "message_context" if isinstance(value, dict):
            channel, ts = value.get("channel_id"), value.get("message_ts")
            if _is_id(channel) and _is_id(ts):
                return texts.VIEWING_MESSAGE.format(channel=channel, ts=ts)
        case other if _is_id(value):  # a kind Slack added since: named as Slack does
            return texts.VIEWING_OTHER.format(kind=other.replace("_", " "), value=value)
    return ""


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and _ID.match(value) is not None


class Viewing:
    """What each person looks at, kept for their next direct message on any replica.

    Args:
        bot: The chat core, whose chat state keeps the words.
        tasks: Where the words are written, behind the ack.
    """

    def __init__(self, bot: ChatCore, *, tasks: TaskTracker) -> None:
        self.bot = bot
        self.tasks = tasks

    def seen(self, workspace: str, user: str, words: str) -> None:
        """``user`` now looks at what ``words`` say (``""``: nothing in particular)."""
        self.tasks.spawn(self._keep(workspace, user, words), name=f"slack-viewing:{user}")

    async def now(self, workspace: str, user: str) -> str | None:
        """What ``user`` looks at, as last said within ``VIEWING_NOTE_TTL``; ``None`` when
        nothing was said, or the store does not answer in time (logged)."""
        try:
            async with asyncio.timeout(VIEWING_READ_TIMEOUT):
                words = await self.bot.chat.note(_note_key(workspace, user))
        except Exception as exc:
            log.warning("could not read what %s is looking at: %r", user, exc)
            return None
        return words or None

    async def _keep(self, workspace: str, user: str, words: str) -> None:
        try:
            await self.bot.chat.set_note(_note_key(workspace, user), words, ttl=VIEWING_NOTE_TTL)
        except Exception:
            # Only the agent's context is lost: the person's next request still runs.
            log.warning("could not note what %s is looking at", user, exc_info=True)


def _note_key(workspace: str, user: str) -> str:
    return f"{VIEWING_NOTE}:{workspace}:{user}"
