"""Bot views as Teams content: approval cards as Adaptive Cards 1.5, the rest as markdown.

Plain JSON only (no botbuilder types), so the rendering is testable on its own.
A card must stay under Teams' message size limit (about 28 KB), so argument
values are shortened until the whole card fits.

Teams renders TextBlocks, fact titles and fact values as markdown, so every
piece of text that comes from people or the model (arguments, reasons, names,
questions) goes through ``escape``: it shows literally and can add no link,
emphasis, list or date function to a card or prompt.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, Final, Literal, assert_never

from bot import ApprovalCard, Notice, Person, Prompt, Reply

from . import messages

CONTENT_TYPE: Final = "application/vnd.microsoft.card.adaptive"
"""The attachment content type of an Adaptive Card (and of an invoke's card answer)."""

CARD_VERSION: Final = "1.5"
CARD_BUDGET_BYTES: Final = 27_000
"""Teams refuses messages above ~28 KB; leave room for the activity around the card."""

KIND: Final = "approval"
"""Marks our action data, so a submit from some other card is not taken for a click."""

REASON_INPUT: Final = "reason"

_MAX_FACTS: Final = 25
_MAX_LABEL: Final = 80
_MAX_NAME: Final = 200
_VALUE_LIMITS: Final = (1500, 600, 200, 60)

_MARKUP: Final = re.compile(r"[\\`*_\[\]<>~]")
"""Characters that start or end inline markdown: links, emphasis, code, HTML, autolinks."""
_LINE_MARKER: Final = re.compile(r"^([ \t]*)(#|[-+]|\d+[.)])(?=[ \t]|$)", re.MULTILINE)
"""A line start that markdown would turn into a heading or a list item."""
_DATE_FUNCTION: Final = re.compile(r"(?<=\{)\{")
"""The second brace of ``{{``, which opens a Teams ``{{DATE(...)}}`` function."""

Action = Literal["approve", "decline"]


def approval_card(card: ApprovalCard) -> dict[str, Any]:
    """The Adaptive Card for an approval: pending with buttons, or decided without."""
    for limit in _VALUE_LIMITS:
        rendered = _approval_card(card, value_limit=limit)
        if len(json.dumps(rendered).encode()) <= CARD_BUDGET_BYTES:
            return rendered
    return _approval_card(card, value_limit=_VALUE_LIMITS[-1], max_facts=5)


def action_data(card: ApprovalCard, action: Action) -> dict[str, str]:
    """The data an Approve/Decline action carries back to the bot."""
    return {
        "kind": KIND,
        "action": action,
        "run_id": card.run_id,
        "tool_call_id": card.tool_call_id,
    }


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


def summary(card: ApprovalCard) -> str:
    """A one-line plain text for notifications (not markdown: see ``escape``)."""
    return messages.CARD_SUMMARY.format(
        agent=_agent(card.agent_path), tool=_cut(card.tool_name, _MAX_NAME)
    )


def text_of(view: Prompt | Reply | Notice) -> str:
    """Markdown for the views that are plain messages."""
    if isinstance(view, Prompt):
        return prompt_text(view)
    if isinstance(view, Notice) and view.to is not None:
        return f"{person_text(view.to)}: {view.text}"
    return view.text


def person_text(person: Person) -> str:
    """A person as a card or message names them: their name, else their id (escaped)."""
    return escape(_cut(person.name or person.id, _MAX_NAME))


def _people(people: tuple[Person, ...]) -> str:
    return ", ".join(person_text(person) for person in people)


def prompt_text(prompt: Prompt) -> str:
    """A tool's question, with what to reply and, on a re-ask, what was wrong."""
    lines = [
        messages.PROMPT.format(tool=escape(prompt.tool_name), question=escape(prompt.question))
    ]
    if prompt.fields:
        lines.append(messages.PROMPT_FIELDS.format(fields=escape(", ".join(prompt.fields))))
    if prompt.error:
        # The error may quote the reply it refuses: someone's own text.
        lines.insert(0, messages.PROMPT_ERROR.format(error=escape(prompt.error)))
    if len(prompt.agent_path) > 1:
        lines.append(messages.PROMPT_FROM.format(agent=escape(_agent(prompt.agent_path))))
    return "\n\n".join(lines)


# -- internals -------------------------------------------------------------------


def _approval_card(
    card: ApprovalCard, *, value_limit: int, max_facts: int = _MAX_FACTS
) -> dict[str, Any]:
    body: list[dict[str, Any]] = [
        _text(_title(card), weight="Bolder", size="Medium"),
        _text(
            messages.CARD_WANTS_TO_RUN.format(
                agent=escape(_agent(card.agent_path)),
                tool=escape(_cut(card.tool_name, _MAX_NAME)),
            )
        ),
        _args(card.args, value_limit=value_limit, max_facts=max_facts),
        {"type": "FactSet", "facts": _about(card)},
    ]
    if card.status == "pending":
        body.append(_text(messages.CARD_EXPIRES.format(at=_rfc3339(card.expires_at)), size="Small"))
    if card.reason and card.status != "pending":
        reason = escape(_cut(card.reason, value_limit))
        body.append(_text(messages.CARD_REASON.format(reason=reason)))
    content: dict[str, Any] = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "fallbackText": escape(summary(card)),
        "msteams": {"width": "Full"},
        "body": body,
    }
    if card.status == "pending":
        body.append(
            {
                "type": "Input.Text",
                "id": REASON_INPUT,
                "label": messages.CARD_REASON_LABEL,
                "placeholder": messages.CARD_REASON_PLACEHOLDER,
                "isMultiline": True,
                "maxLength": 500,
            }
        )
        content["actions"] = [
            _action(card, "approve", messages.APPROVE, style="positive"),
            _action(card, "decline", messages.DECLINE, style="destructive"),
        ]
    return content


def _title(card: ApprovalCard) -> str:
    who = _people(card.decided_by) or messages.CARD_SOMEONE
    match card.status:
        case "pending":
            return messages.CARD_TITLE_PENDING
        case "approved":
            return messages.CARD_TITLE_APPROVED.format(who=who)
        case "declined":
            return messages.CARD_TITLE_DECLINED.format(who=who)
        case "expired":
            return messages.CARD_TITLE_EXPIRED
        case _:
            assert_never(card.status)


def _action(card: ApprovalCard, action: Action, title: str, *, style: str) -> dict[str, Any]:
    data = action_data(card, action)
    # Clients without Universal Actions (Action.Execute) fall back to a plain submit,
    # which reaches the bot as a message activity carrying ``value``.
    fallback = {"type": "Action.Submit", "title": title, "style": style, "data": data}
    return {
        "type": "Action.Execute",
        "title": title,
        "verb": action,
        "style": style,
        "data": data,
        "fallback": fallback,
    }


def _args(args: dict[str, Any], *, value_limit: int, max_facts: int) -> dict[str, Any]:
    if not args:
        return _text(messages.CARD_NO_ARGS, isSubtle=True)
    items = list(args.items())
    facts = [
        {
            "title": escape(_cut(str(key), _MAX_LABEL)),
            "value": escape(_cut(_show(value), value_limit)),
        }
        for key, value in items[:max_facts]
    ]
    if len(items) > max_facts:
        facts.append(
            {"title": "…", "value": messages.CARD_MORE_ARGS.format(count=len(items) - max_facts)}
        )
    return {"type": "FactSet", "facts": facts}


def _about(card: ApprovalCard) -> list[dict[str, str]]:
    agent = escape(_cut(_agent(card.agent_path), _MAX_NAME))
    facts = [{"title": messages.CARD_AGENT, "value": agent}]
    if card.requester:
        facts.append({"title": messages.CARD_ASKED_BY, "value": person_text(card.requester)})
    if card.status == "pending" and card.quorum > 1:
        who = _people(card.approvals)
        value = messages.CARD_APPROVALS_SO_FAR.format(
            who=who or messages.CARD_NO_APPROVALS, count=len(card.approvals), quorum=card.quorum
        )
        facts.append({"title": messages.CARD_APPROVALS, "value": value})
    return facts


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _agent(path: tuple[str, ...]) -> str:
    return " → ".join(path) if path else messages.CARD_AN_AGENT


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(messages.CARD_TRUNCATED))] + messages.CARD_TRUNCATED


def _rfc3339(at: datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(text: str, **style: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **style}
