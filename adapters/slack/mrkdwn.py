"""Slack's mrkdwn: escaping, mentions, dates, links, and the text objects and blocks
that carry it, each within Slack's limits."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, assert_never

from bot import Channel, Code, Link, Person, Place, Rich, Strong, Text, ThreadKey, When

from . import texts

SECTION_LIMIT = 3000
CONTEXT_LIMIT = 2000

Block = dict[str, Any]

ELLIPSIS = "…"


_MARKDOWN_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")


def to_mrkdwn(markdown: str) -> str:
    """Escape for Slack and turn the common Markdown marks into mrkdwn.

    The result never holds ``<`` or ``>``: nothing the agent writes becomes a
    mention, a channel ping or a link whose target is hidden behind its label.
    """
    text = escape(markdown)
    text = re.sub(r"\*\*(.+?)\*\*", r"*\1*", text)
    text = re.sub(r"^#{1,6}\s+(.+)$", r"*\1*", text, flags=re.MULTILINE)
    return _MARKDOWN_LINK.sub(_visible_link, text)


def to_markdown(markdown: str) -> str:
    """Escape Markdown for a streamed answer (``markdown_text``), links shown with their
    targets: as with ``to_mrkdwn``, nothing the agent writes pings anyone or hides
    where a link goes. Never longer than ``escape(markdown)``."""
    return _MARKDOWN_LINK.sub(_visible_link, escape(markdown))


def _visible_link(link: re.Match[str]) -> str:
    """``[label](url)`` as "label (url)": the reader sees where it goes; Slack links the URL."""
    label, url = link.group(1), link.group(2)
    return url if label == url else f"{label} ({url})"


def split(text: str, limit: int) -> list[str]:
    """Cut text into pieces of at most ``limit``, at paragraph, line or word ends."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        at = _split_point(rest, limit)
        pieces.append(rest[:at].rstrip())
        rest = rest[at:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces or [""]


def _split_point(text: str, limit: int) -> int:
    for separator in ("\n\n", "\n", " "):
        at = text.rfind(separator, 0, limit)
        if at > limit // 2:
            return at
    return _entity_safe(text, limit)


def escape(text: str) -> str:
    """Slack's three control characters as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cut(escaped: str, limit: int) -> tuple[str, int]:
    """Shorten escaped text to ``limit`` without splitting an entity; also how much was dropped."""
    if len(escaped) <= limit:
        return escaped, 0
    kept = escaped[: _entity_safe(escaped, limit)]
    return kept, len(_unescape(escaped)) - len(_unescape(kept))


def clip(text: str, limit: int, *, escaped: bool = False) -> str:
    """``text`` within ``limit`` characters, ending in an ellipsis when it is shortened.

    Plain text (a label, a title: Slack never parses it) is cut anywhere; ``escaped``
    mrkdwn never inside an entity.
    """
    if len(text) <= limit:
        return text
    room = limit - len(ELLIPSIS)
    kept = cut(text, room)[0] if escaped else text[:room]
    return kept.rstrip() + ELLIPSIS


def _entity_safe(escaped: str, limit: int) -> int:
    amp = escaped.rfind("&", max(0, limit - 4), limit)
    return amp if amp != -1 and ";" not in escaped[amp:limit] else limit


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


_GROUP_ID = re.compile(r"S[0-9A-Z]{2,}")
"""A Slack user group's id (``S0GROUP``); people's are ``U…`` or ``W…``."""


def is_group_id(name: str) -> bool:
    """Whether ``name`` is a Slack user group's id."""
    return _GROUP_ID.fullmatch(name) is not None


def mention(person: Person) -> str:
    """``<@U…>``: Slack shows everyone the person's current name, and links it. A user
    group (the policy's ``S0GROUP``) as ``<!subteam^S…>``; a handle (``@oncall``) as
    written: a policy may name one, which is no user id to mention."""
    if is_group_id(person.id):
        return f"<!subteam^{person.id}>"
    if person.id.startswith("@"):
        return escape(person.id)
    return f"<@{escape(person.id)}>"


def text_mrkdwn(text: Text) -> str:
    """Words as mrkdwn and people as mentions."""
    return "".join(to_mrkdwn(part) if isinstance(part, str) else mention(part) for part in text)


Places = Callable[[ThreadKey], str | None]
"""The permalink of a thread, when known."""


def rich_mrkdwn(
    text: Rich, *, link: str | None = None, places: Places | None = None, limit: int | None = None
) -> str:
    """A document's text as mrkdwn: words escaped (each cut to ``limit``), people
    mentioned, a thread by its place's name (linked to ``places``' permalink of it, else
    to ``link``), and the words of a ``Link`` linked to ``link`` (left out, with the
    space before them, without one)."""
    parts: list[str] = []
    for span in text:
        match span:
            case str():
                parts.append(escape(span if limit is None else clip(span, limit)))
            case Person():
                parts.append(mention(span))
            case Strong():
                parts.append(f"*{escape(span.text)}*" if span.text else "")
            case Code():
                parts.append(code(span.text))
            case When():
                parts.append(slack_date(span.at))
            case Place():
                where = places(span.thread) if places is not None else link
                parts.append(place_text(span.thread, where))
            case Channel():
                parts.append(channel_mention(span.id))
            case Link():
                to = span.href or link
                if to:
                    parts.append(linked(span.words, to))
                elif parts and parts[-1].endswith(" "):
                    parts[-1] = parts[-1][:-1]
            case _:
                assert_never(span)
    return "".join(parts)


def code(text: str) -> str:
    """ "`deploy`": a name as inline code, escaped, on one line; a backtick in it is
    shown as a look-alike, which cannot close the code."""
    shown = escape(text).replace("`", _BACKTICK).replace("\n", " ")
    return f"`{shown}`" if shown.strip() else escape(text)


_BACKTICK = "\u02cb"  # "ˋ", the modifier letter grave accent


def linked(words: str, url: str) -> str:
    """Words linked to ``url``; words in parentheses keep them outside the link, which
    Slack would otherwise underline: "(<url|see the card>)"."""
    if len(words) > 2 and words.startswith("(") and words.endswith(")"):
        return f"(<{escape(url)}|{escape(words[1:-1])}>)"
    return f"<{escape(url)}|{escape(words)}>"


def place_text(thread: ThreadKey, link: str | None) -> str:
    """ "#ops (open the request)": where a card shown elsewhere was asked for, linked to
    the request when its permalink is known."""
    where = place_name(thread.channel)
    if link:
        return texts.REQUESTED_IN_LINKED.format(where=where, url=escape(link))
    return where


def slack_date(when: datetime) -> str:
    """A date every reader sees in their own time zone, with a UTC fallback."""
    aware = when if when.tzinfo else when.replace(tzinfo=UTC)
    fallback = aware.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(aware.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"


def plain(text: str) -> dict[str, Any]:
    """A ``plain_text`` object."""
    return {"type": "plain_text", "text": text, "emoji": True}


def mrkdwn(text: str) -> dict[str, Any]:
    """A ``mrkdwn`` text object."""
    return {"type": "mrkdwn", "text": text}


def section(text: str) -> Block:
    """A section block (text already escaped and within limits)."""
    return {"type": "section", "text": mrkdwn(cut(text, SECTION_LIMIT)[0])}


def context(text: str) -> Block:
    """A context block with one mrkdwn element."""
    return {"type": "context", "elements": [mrkdwn(cut(text, CONTEXT_LIMIT)[0])]}


def place_name(channel: str) -> str:
    """A channel as a mention everyone sees by its name; a direct message as words."""
    return texts.A_DIRECT_MESSAGE if channel.startswith("D") else channel_mention(channel)


def channel_mention(channel: str) -> str:
    """``<#C…>``: Slack shows the channel's name, and links it."""
    return f"<#{escape(channel)}>"
