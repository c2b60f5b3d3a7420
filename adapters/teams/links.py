"""Teams places by their ids: which ids are channels and chats, and deep links to threads.

A channel id is ``19:...@thread.tacv2`` (``@thread.skype`` for older teams); a
group or meeting chat is ``19:...@thread.v2``; the bot's 1:1 chats are ``a:...``,
which no deep link opens. Deep links follow Microsoft's "Deep link to Teams chat"
page: ``/l/message/<channel>/<root>?tenantId=&parentMessageId=`` for a channel
thread (the team's group id is optional), ``/l/chat/<chat>/conversations`` for a
chat.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote, urlencode

from bot import CardPointer, ThreadKey, View

from . import texts

MESSAGE_ID: Final = ";messageid="
"""Joins a channel's id and a post's: the conversation id of that post's thread."""
NO_TENANT: Final = "-"
"""The workspace of a thread whose tenant is not known (the Emulator, tests)."""

TEAMS_WEB: Final = "https://teams.microsoft.com"
_CHANNEL_ID: Final = re.compile(r"^19:[^\s;/?#]+@thread\.(?:tacv2|skype)$")
_CHAT_ID: Final = re.compile(r"^19:[^\s;/?#]+@thread\.v2$")
_ID_SAFE: Final = ":@"
"""Kept as they are in a deep link's path (Teams' own links show ids so)."""


def is_channel_id(channel: str) -> bool:
    """Whether ``channel`` has the shape of a Teams channel id."""
    return bool(_CHANNEL_ID.fullmatch(channel))


def is_chat_id(channel: str) -> bool:
    """Whether ``channel`` has the shape of a group (or meeting) chat id."""
    return bool(_CHAT_ID.fullmatch(channel))


def is_conversation_id(channel: str) -> bool:
    """Whether ``channel`` is a Teams channel or group chat id (a place to post in)."""
    return is_channel_id(channel) or is_chat_id(channel)


def thread_link(thread: ThreadKey) -> str | None:
    """A deep link opening ``thread`` in Teams, or ``None`` when it has none (a 1:1 chat
    with the bot, an id of another shape)."""
    if is_channel_id(thread.channel) and thread.root.isdigit():
        query = {"parentMessageId": thread.root}
        if thread.workspace != NO_TENANT:
            query = {"tenantId": thread.workspace, **query}
        path = f"{quote(thread.channel, safe=_ID_SAFE)}/{quote(thread.root, safe='')}"
        return f"{TEAMS_WEB}/l/message/{path}?{urlencode(query)}"
    if is_chat_id(thread.channel):
        return f"{TEAMS_WEB}/l/chat/{quote(thread.channel, safe=_ID_SAFE)}/conversations"
    return None


def place_words(thread: ThreadKey) -> str:
    """What kind of place ``thread`` is, in words."""
    if is_channel_id(thread.channel):
        return texts.PLACE_CHANNEL
    if is_chat_id(thread.channel):
        return texts.PLACE_GROUP_CHAT
    if thread.channel.startswith("a:"):
        return texts.PLACE_PERSONAL
    return texts.PLACE_ELSEWHERE


def place_markdown(thread: ThreadKey) -> str:
    """``thread`` for a card's markdown: its kind as a link to it, or in words alone."""
    words = place_words(thread)
    url = thread_link(thread)
    return texts.LINK.format(words=words, url=url) if url else words


def card_link(view: View) -> str | None:
    """Where a view's link points: the thread of the card a pointer stands for, when
    Teams can open it."""
    if isinstance(view, CardPointer) and view.at is not None:
        return thread_link(view.at.thread)
    return None
