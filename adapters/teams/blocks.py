"""The pieces every Teams card is built of: text blocks, actions with their fallback,
argument facts, and markdown escaping (see ``cards`` for why every piece of people's
or the model's text is escaped), plus the size budget of a Teams message.

Plain JSON only, like the cards made of them.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, Final

from bot import ApprovalCard, Person, Prompt, Text, tool_label

from . import texts

CARD_VERSION: Final = "1.5"
CARD_BUDGET_BYTES: Final = 27_000
"""Teams refuses messages above ~28 KB; leave room for the activity around the card."""

MAX_LABEL: Final = 80
MAX_NAME: Final = 200
MAX_SUMMARY: Final = 200
"""The longest summary line a card or notice shows (its fallback, a question's start)."""

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


def text_markdown(text: Text, *, limit: int) -> str:
    """Words and people as card markdown: words escaped (each cut to ``limit``),
    people by name."""
    return "".join(
        escape(cut(part, limit)) if isinstance(part, str) else person_text(part) for part in text
    )


def tool_name(view: ApprovalCard | Prompt) -> str:
    """The tool a card or question names (with its MCP server), cut to fit: plain text,
    for summaries and tooltips."""
    return cut(tool_label(view), MAX_NAME)


def tool_name_text(view: ApprovalCard | Prompt) -> str:
    """``tool_name`` for a card's or message's markdown (escaped)."""
    return escape(tool_name(view))


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
    if tooltip is not None:
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


def args_facts(args: dict[str, Any], *, value_limit: int, max_facts: int) -> dict[str, Any]:
    """Arguments as a FactSet (names and values escaped, values cut to ``value_limit``)."""
    if not args:
        return text_block(texts.CARD_NO_ARGS, isSubtle=True)
    items = list(args.items())
    facts = [
        {
            "title": escape(cut(str(key), MAX_LABEL)),
            "value": escape(cut(show_value(value), value_limit)),
        }
        for key, value in items[:max_facts]
    ]
    if len(items) > max_facts:
        facts.append(
            {"title": "…", "value": texts.CARD_MORE_ARGS.format(count=len(items) - max_facts)}
        )
    return {"type": "FactSet", "facts": facts}


def show_value(value: Any) -> str:
    """A value as a card shows it: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def agent_name(path: tuple[str, ...]) -> str:
    """An agent path as cards name it (``ops → billing``)."""
    return " → ".join(path) if path else texts.CARD_AN_AGENT


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying so."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(texts.CARD_TRUNCATED))] + texts.CARD_TRUNCATED


def fits(card: dict[str, Any]) -> bool:
    """Whether a card stays within the budget of a Teams message."""
    return len(json.dumps(card).encode()) <= CARD_BUDGET_BYTES


def rfc3339(at: datetime) -> str:
    """``at`` as the RFC 3339 time Teams' ``DATE``/``TIME`` functions take (UTC)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
