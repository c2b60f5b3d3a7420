"""Bot views -> Block Kit, within Slack's limits, always with a top-level ``text``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, assert_never

from bot import ApprovalCard, Notice, Person, Prompt, Reply, Text, View, tool_label

from . import texts
from .wire import (
    ANSWER_ACTION,
    APPROVE_ACTION,
    DECLINE_ACTION,
    EDIT_ACTION,
    QUESTION_CANCEL_ACTION,
    QUESTION_DECLINE_ACTION,
    encode_button_value,
    grant_action,
)

SECTION_LIMIT = 3000
CONFIRM_TEXT_LIMIT = 300
BUTTON_TEXT_LIMIT = 75
ACTIONS_LIMIT = 25
"""Elements in one actions block."""
CONTEXT_LIMIT = 2000
REASON_LIMIT = 1000
EDITED_VALUE_LIMIT = 200
"""One value in the "Edited by" line: the arguments block above shows it whole."""
# Text per message when an answer is split: several sections, well below the
# 40,000 characters at which Slack truncates a message.
MESSAGE_TEXT_LIMIT = 12000

Block = dict[str, Any]

_FENCE = "```"
_FENCE_BROKEN = "`\u200b`\u200b`"  # looks the same, cannot close the code block


@dataclass(frozen=True, kw_only=True)
class SlackMessage:
    """One ``chat.postMessage``/``chat.update`` body: fallback ``text`` plus ``blocks``."""

    text: str
    blocks: list[Block]


def render(view: View) -> list[SlackMessage]:
    """The messages that show a view (several only for long answers)."""
    match view:
        case ApprovalCard():
            return [approval_card(view)]
        case Prompt():
            return [prompt(view)]
        case Reply():
            return long_text(view.text)
        case Notice():
            lead = f"{', '.join(map(mention, view.people))}: " if view.people else ""
            return long_text(view.text, lead=lead)
        case _:
            assert_never(view)


# -- approval card ----------------------------------------------------------------


def approval_card(card: ApprovalCard) -> SlackMessage:
    """The card: what runs, who asks, until when; buttons while pending, the outcome after."""
    tool = escape(tool_label(card))
    requester = mention(card.requester) if card.requester else texts.UNKNOWN_PERSON
    facts = [
        texts.CARD_AGENT.format(path=escape(texts.AGENT_PATH_SEPARATOR.join(card.agent_path))),
        texts.CARD_REQUESTER.format(requester=requester),
    ]
    if card.status == "pending":
        facts.append(texts.CARD_EXPIRES.format(when=slack_date(card.expires_at)))
        if card.quorum > 1:
            facts.append(approvals_text(card))
    blocks: list[Block] = [
        section(texts.CARD_TITLE.format(tool=tool)),
        section("\n".join(facts)),
        *_arguments(card.args),
    ]
    if card.status == "pending":
        blocks.append(_buttons(card))
        text = texts.CARD_FALLBACK.format(tool=tool, requester=requester)
        return SlackMessage(text=text, blocks=blocks)
    outcome = outcome_text(card)
    fallback = texts.DECIDED_FALLBACK
    if card.previous_args is not None:
        blocks.append(context(edited_text(card)))
        fallback = texts.EDITED_FALLBACK
    blocks.append(context(outcome))
    return SlackMessage(text=fallback.format(tool=tool, outcome=outcome), blocks=blocks)


def approvals_text(card: ApprovalCard) -> str:
    """ "Approvals: @a (1 of 2)" on a pending card that needs several approvals."""
    who = mentions(card.approvals) or texts.NO_APPROVALS
    return texts.CARD_APPROVALS.format(who=who, count=len(card.approvals), quorum=card.quorum)


def outcome_text(card: ApprovalCard) -> str:
    """ "Approved by @x" (or "@x, @y" for a quorum), "Declined by @x: reason" or "Expired"."""
    who = mentions(card.decided_by) or texts.UNKNOWN_PERSON
    match card.status:
        case "approved" if card.granted_for:
            return texts.APPROVED_FOR.format(who=who, duration=escape(card.granted_for))
        case "approved":
            return texts.APPROVED_BY.format(who=who)
        case "declined" if card.reason:
            reason, _ = cut(escape(card.reason), REASON_LIMIT)
            return texts.DECLINED_BY_REASON.format(who=who, reason=reason)
        case "declined":
            return texts.DECLINED_BY.format(who=who)
        case "expired":
            return texts.EXPIRED
        case "pending":
            return ""
        case _:
            assert_never(card.status)


_ABSENT = object()
"""An argument one side of an edit does not have."""


def edited_text(card: ApprovalCard) -> str:
    """ "Edited by @x: `amount`: 150 → 120; ..." on a card approved as edited: the
    arguments that changed, before and after (the arguments block shows what ran)."""
    who = mention(card.edited_by) if card.edited_by else texts.UNKNOWN_PERSON
    before, after = card.previous_args or {}, card.args
    changes = [
        texts.EDITED_CHANGE.format(
            name=escape(name),
            before=_compact(before.get(name, _ABSENT)),
            after=_compact(after.get(name, _ABSENT)),
        )
        for name in dict.fromkeys([*before, *after])
        if before.get(name, _ABSENT) != after.get(name, _ABSENT)
    ]
    if not changes:
        return texts.EDITED_UNCHANGED.format(who=who)
    return texts.EDITED_BY.format(who=who, changes=texts.EDITED_SEPARATOR.join(changes))


def _compact(value: Any) -> str:
    """A value on one line, as JSON (as the arguments block shows it), escaped and short."""
    if value is _ABSENT:
        return texts.EDITED_ABSENT
    shown = json.dumps(value, ensure_ascii=False, default=str)
    kept, dropped = cut(escape(shown), EDITED_VALUE_LIMIT)
    return f"{kept}…" if dropped else kept


def _arguments(args: dict[str, Any]) -> list[Block]:
    if not args:
        return [section(f"{texts.CARD_ARGUMENTS}\n{texts.CARD_NO_ARGUMENTS}")]
    pretty = json.dumps(args, indent=2, ensure_ascii=False, default=str)
    head, tail = f"{texts.CARD_ARGUMENTS}\n{_FENCE}\n", f"\n{_FENCE}"
    body, dropped = cut(escape(pretty).replace(_FENCE, _FENCE_BROKEN), SECTION_LIMIT - 40)
    blocks = [section(head + body + tail)]
    if dropped:
        blocks.append(context(texts.CARD_TRUNCATED.format(count=dropped)))
    return blocks


def _buttons(card: ApprovalCard) -> Block:
    value = encode_button_value(card.run_id, card.tool_call_id)
    confirm, _ = cut(texts.CONFIRM_TEXT.format(tool=escape(tool_label(card))), CONFIRM_TEXT_LIMIT)
    elements: list[Block] = [
        {
            "type": "button",
            "action_id": APPROVE_ACTION,
            "text": plain(texts.APPROVE),
            "style": "primary",
            "value": value,
            "confirm": {
                "title": plain(texts.CONFIRM_TITLE),
                "text": mrkdwn(confirm),
                "confirm": plain(texts.CONFIRM_YES),
                "deny": plain(texts.CONFIRM_NO),
                "style": "primary",
            },
        },
        {
            "type": "button",
            "action_id": DECLINE_ACTION,
            "text": plain(texts.DECLINE),
            "style": "danger",
            "value": value,
        },
        *_edit_button(card, value),
    ]
    elements += _grant_buttons(card, room=ACTIONS_LIMIT - len(elements))
    return {"type": "actions", "elements": elements}


def _edit_button(card: ApprovalCard, value: str) -> list[Block]:
    """Edit, on a card whose arguments may be edited before approving."""
    if not card.editable:
        return []
    return [{"type": "button", "action_id": EDIT_ACTION, "text": plain(texts.EDIT), "value": value}]


def _grant_buttons(card: ApprovalCard, *, room: int) -> list[Block]:
    """ "Approve for this thread (1h)", one per duration the card offers (as many as the
    block has room for), each confirmed first: it approves later calls too."""
    tool = escape(tool_label(card))
    buttons: list[Block] = []
    for index, duration in enumerate(list(dict.fromkeys(card.grant_for))[:room]):
        label = texts.GRANT.format(duration=duration)
        if len(label) > BUTTON_TEXT_LIMIT:
            label = label[: BUTTON_TEXT_LIMIT - 1] + "…"
        confirm, _ = cut(
            texts.GRANT_CONFIRM_TEXT.format(tool=tool, duration=escape(duration)),
            CONFIRM_TEXT_LIMIT,
        )
        buttons.append(
            {
                "type": "button",
                "action_id": grant_action(index),
                "text": plain(label),
                "value": encode_button_value(card.run_id, card.tool_call_id, grant_for=duration),
                "confirm": {
                    "title": plain(texts.GRANT_CONFIRM_TITLE),
                    "text": mrkdwn(confirm),
                    "confirm": plain(texts.GRANT_CONFIRM_YES),
                    "deny": plain(texts.CONFIRM_NO),
                    "style": "primary",
                },
            }
        )
    return buttons


# -- prompt and text --------------------------------------------------------------


def prompt(view: Prompt) -> SlackMessage:
    """A tool's question in the thread: answered by a reply, or with the Answer… form
    when it asks for several things; Decline and Cancel end it. Once settled, who did."""
    title = texts.PROMPT_TITLE.format(tool=escape(tool_label(view)))
    question = section(f"{title}\n{escape(view.question)}")
    if view.status != "waiting":
        outcome = prompt_outcome(view)
        fallback = texts.DECIDED_FALLBACK.format(tool=escape(tool_label(view)), outcome=outcome)
        return SlackMessage(text=fallback, blocks=[question, context(outcome)])
    blocks: list[Block] = []
    if view.error:
        blocks.append(section(texts.PROMPT_RETRY.format(error=escape(view.error))))
    blocks.append(question)
    if view.fields:
        fields = ", ".join(f"`{escape(f.name)}`" for f in view.fields)
        blocks.append(context(texts.PROMPT_FIELDS.format(fields=fields)))
    blocks.append(context(texts.PROMPT_FORM_HINT if view.form else texts.PROMPT_HINT))
    blocks.append(_question_buttons(view))
    fallback, _ = cut(escape(view.question), SECTION_LIMIT)
    return SlackMessage(text=fallback, blocks=blocks)


def prompt_outcome(view: Prompt) -> str:
    """ "Answered by @x", "Declined by @x", "Cancelled by @x" or "Expired" once settled."""
    who = mention(view.decided_by) if view.decided_by else texts.UNKNOWN_PERSON
    match view.status:
        case "answered":
            return texts.ANSWERED_BY.format(who=who)
        case "declined":
            return texts.QUESTION_DECLINED_BY.format(who=who)
        case "cancelled":
            return texts.CANCELLED_BY.format(who=who)
        case "expired":
            return texts.QUESTION_EXPIRED
        case "waiting":
            return ""
        case _:
            assert_never(view.status)


def _question_buttons(view: Prompt) -> Block:
    """Answer… (for a form), Decline and Cancel."""
    value = encode_button_value(view.run_id, view.tool_call_id)
    elements: list[Block] = []
    if view.form:
        elements.append(
            {
                "type": "button",
                "action_id": ANSWER_ACTION,
                "text": plain(texts.ANSWER),
                "style": "primary",
                "value": value,
            }
        )
    elements += [
        {
            "type": "button",
            "action_id": QUESTION_DECLINE_ACTION,
            "text": plain(texts.QUESTION_DECLINE),
            "style": "danger",
            "value": value,
        },
        {
            "type": "button",
            "action_id": QUESTION_CANCEL_ACTION,
            "text": plain(texts.QUESTION_CANCEL),
            "value": value,
        },
    ]
    return {"type": "actions", "elements": elements}


def long_text(text: str, *, lead: str = "") -> list[SlackMessage]:
    """An answer as sections of at most 3000 characters, several messages if needed.

    ``lead`` is mrkdwn put before the text (a mention of whom a notice is for);
    the text itself is escaped, so the agent's own words never ping anyone.
    """
    messages: list[SlackMessage] = []
    chunks: list[str] = []
    mrkdwn_text = lead + to_mrkdwn(text)
    for chunk in split(mrkdwn_text, SECTION_LIMIT):
        if chunks and sum(map(len, chunks)) + len(chunk) > MESSAGE_TEXT_LIMIT:
            messages.append(_text_message(chunks))
            chunks = []
        chunks.append(chunk)
    if chunks:
        messages.append(_text_message(chunks))
    return messages


def _text_message(chunks: list[str]) -> SlackMessage:
    return SlackMessage(text="\n".join(chunks), blocks=[section(c) for c in chunks])


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


# -- small helpers ----------------------------------------------------------------


def escape(text: str) -> str:
    """Slack's three control characters as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cut(escaped: str, limit: int) -> tuple[str, int]:
    """Shorten escaped text to ``limit`` without splitting an entity; also how much was dropped."""
    if len(escaped) <= limit:
        return escaped, 0
    kept = escaped[: _entity_safe(escaped, limit)]
    return kept, len(_unescape(escaped)) - len(_unescape(kept))


def _entity_safe(escaped: str, limit: int) -> int:
    amp = escaped.rfind("&", max(0, limit - 4), limit)
    return amp if amp != -1 and ";" not in escaped[amp:limit] else limit


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def mention(person: Person) -> str:
    """``<@U…>``: Slack shows everyone the person's current name, and links it."""
    return f"<@{escape(person.id)}>"


def text_mrkdwn(text: Text) -> str:
    """Words as mrkdwn and people as mentions."""
    return "".join(to_mrkdwn(part) if isinstance(part, str) else mention(part) for part in text)


def mentions(people: tuple[Person, ...]) -> str:
    """People as comma-separated mentions."""
    return ", ".join(mention(person) for person in people)


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
