"""The pieces every Teams card and message is built of: rich text as markdown, text
blocks, actions with their fallback, argument facts, and markdown escaping (see
``cards`` for why every piece of people's or the model's text is escaped), plus the
size budget of a Teams message.

Plain JSON only, like the cards made of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final, assert_never

from bot import (
    Arguments,
    Channel,
    Code,
    Link,
    Person,
    Place,
    Rich,
    Strong,
    When,
    rich_plain,
)

from . import links, texts

CARD_VERSION: Final = "1.5"
CARD_BUDGET_BYTES: Final = 27_000
"""Teams refuses messages above ~28 KB; leave room for the activity around the card."""

MAX_LABEL: Final = 80
MAX_NAME: Final = 200
MAX_SUMMARY: Final = 200
"""The longest summary line a card or message shows (its fallback, its notification)."""

_MARKUP: Final = re.compile(r"[\\`*_\[\]<>~]")
"""Characters that start or end inline markdown: links, emphasis, code, HTML, autolinks."""
_LINE_MARKER: Final = re.compile(r"^([ \t]*)(#|[-+]|\d+[.)])(?=[ \t]|$)", re.MULTILINE)
"""A line start that markdown would turn into a heading or a list item."""
_DATE_FUNCTION: Final = re.compile(r"(?<=\{)\{")
"""The second brace of ``{{``, which opens a Teams ``{{DATE(...)}}`` function."""


def escape(text: str) -> str:
    """``text`` for Teams markdown, shown exactly as written.

    A backslash (CommonMark escape) before every character that can start
    markup: ``[``/``]`` (links), ``*``/``_``/``~`` (emphasis), backticks,
    ``<``/``>`` (autolinks, ``<at>`` mentions, quotes), a ``{`` that follows
    another (``{{DATE(...)}}``), and a heading or list marker at a line start.
    """
    escaped = _MARKUP.sub(lambda m: "\\" + m.group(), text)
    escaped = _DATE_FUNCTION.sub(r"\\{", escaped)
    return _LINE_MARKER.sub(lambda m: f"{m[1]}{m[2][:-1]}\\{m[2][-1]}", escaped)


def person_text(person: Person) -> str:
    """A person as a card or message names them: their name, else their id (escaped)."""
    return escape(cut(person.name or person.id, MAX_NAME))


def markdown(
    text: Rich,
    *,
    limit: int | None = None,
    link: str | None = None,
    card: bool = True,
    person: Callable[[Person], str] = person_text,
) -> str:
    """Rich text as Teams markdown: words escaped (each cut to ``limit``), people by
    ``person``, strong words and names bold (Adaptive Card markdown has no inline code),
    a moment as Teams' ``DATE``/``TIME`` functions in a ``card`` (in the reader's time
    zone; a message has none: UTC words), a thread as the kind of place it is (linked),
    a channel as the approvers', and a link to ``link`` (left out without one)."""
    parts: list[str] = []
    for span in text:
        match span:
            case str():
                parts.append(escape(span if limit is None else cut(span, limit)))
            case Person():
                parts.append(person(span))
            case Strong() | Code():
                parts.append(f"**{escape(cut(span.text, MAX_NAME))}**")
            case When():
                parts.append(when(span.at) if card else escape(rich_plain((span,))))
            case Place():
                parts.append(links.place_markdown(span.thread))
            case Channel():
                parts.append(texts.APPROVERS_CHANNEL)
            case Link():
                to = span.href or link
                if to:
                    parts.append(texts.LINK.format(words=escape(span.words), url=to))
                elif parts and parts[-1].endswith(" "):
                    parts[-1] = parts[-1][:-1]
            case _:
                assert_never(span)
    return "".join(parts)


def plain(text: Rich) -> str:
    """Rich text as a one-line plain text (not markdown): a notification, a fallback."""
    return cut(rich_plain(text), MAX_SUMMARY)


def when(at: datetime) -> str:
    """A moment as Teams shows it in each reader's own time zone."""
    moment = rfc3339(at)
    return f"{{{{DATE({moment}, SHORT)}}}} {{{{TIME({moment})}}}}"


def text_block(text: str, **style: Any) -> dict[str, Any]:
    """A wrapping TextBlock."""
    return {"type": "TextBlock", "text": text, "wrap": True, **style}


def execute(
    title: str,
    data: dict[str, str],
    *,
    style: str | None = None,
    tooltip: str | None = None,
    with_inputs: bool = True,
) -> dict[str, Any]:
    """An Action.Execute whose verb is ``data["action"]``, with an Action.Submit fallback.

    ``with_inputs=False`` sends no inputs, so the client does not insist on the
    required ones first (Decline and Cancel of a form, Approve of a card).
    """
    shown: dict[str, Any] = {"title": title}
    if style is not None:
        shown["style"] = style
    if tooltip:
        shown["tooltip"] = tooltip
    if not with_inputs:
        shown["associatedInputs"] = "none"
    # Clients without Universal Actions (Action.Execute) fall back to a plain submit,
    # which reaches the bot as a message activity carrying ``value``.
    fallback = {"type": "Action.Submit", **shown, "data": data}
    return {
        "type": "Action.Execute",
        "verb": data["action"],
        **shown,
        "data": data,
        "fallback": fallback,
    }


def args_facts(block: Arguments, *, value_limit: int, max_facts: int) -> list[dict[str, Any]]:
    """A call's arguments under their label, as a FactSet (names and values escaped,
    values cut to ``value_limit``, at most ``max_facts``)."""
    label = text_block(escape(block.label), weight="Bolder")
    if not block.args:
        return [label, text_block(escape(block.empty), isSubtle=True)]
    items = list(block.args.items())
    facts = [
        {
            "title": escape(cut(str(key), MAX_LABEL)),
            "value": escape(cut(show_value(value), value_limit)),
        }
        for key, value in items[:max_facts]
    ]
    if len(items) > max_facts:
        more = block.more.format(count=len(items) - max_facts)
        facts.append({"title": "…", "value": escape(more)})
    return [label, {"type": "FactSet", "facts": facts}]


def show_value(value: Any) -> str:
    """A value as a card shows it: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying so."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(texts.TRUNCATED))] + texts.TRUNCATED


def fits(card: dict[str, Any]) -> bool:
    """Whether a card stays within the budget of a Teams message."""
    return len(json.dumps(card).encode()) <= CARD_BUDGET_BYTES


def rfc3339(at: datetime) -> str:
    """``at`` as the RFC 3339 time Teams' ``DATE``/``TIME`` functions take (UTC)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
