"""Bot views -> Block Kit, within Slack's limits, always with a top-level ``text``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, assert_never

from bot import ApprovalCard, Notice, Person, Prompt, Reply, Text, View

from . import texts
from .wire import (
    APPROVE_ACTION,
    DECLINE_ACTION,
    DECLINE_VIEW,
    REASON_BLOCK,
    REASON_INPUT,
    DeclineMetadata,
    encode_button_value,
    encode_metadata,
)

SECTION_LIMIT = 3000
CONFIRM_TEXT_LIMIT = 300
CONTEXT_LIMIT = 2000
REASON_LIMIT = 1000
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
            lead = f"{mention(view.to)}: " if view.to is not None else ""
            return long_text(view.text, lead=lead)
        case _:
            assert_never(view)


# -- approval card ----------------------------------------------------------------


def approval_card(card: ApprovalCard) -> SlackMessage:
    """The card: what runs, who asks, until when; buttons while pending, the outcome after."""
    tool = escape(card.tool_name)
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
    else:
        outcome = outcome_text(card)
        blocks.append(context(outcome))
        text = texts.DECIDED_FALLBACK.format(tool=tool, outcome=outcome)
    return SlackMessage(text=text, blocks=blocks)


def approvals_text(card: ApprovalCard) -> str:
    """ "Approvals: @a (1 of 2)" on a pending card that needs several approvals."""
    who = mentions(card.approvals) or texts.NO_APPROVALS
    return texts.CARD_APPROVALS.format(who=who, count=len(card.approvals), quorum=card.quorum)


def outcome_text(card: ApprovalCard) -> str:
    """ "Approved by @x" (or "@x, @y" for a quorum), "Declined by @x: reason" or "Expired"."""
    who = mentions(card.decided_by) or texts.UNKNOWN_PERSON
    match card.status:
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
    confirm, _ = cut(texts.CONFIRM_TEXT.format(tool=escape(card.tool_name)), CONFIRM_TEXT_LIMIT)
    return {
        "type": "actions",
        "elements": [
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
        ],
    }


def decline_modal(metadata: DeclineMetadata) -> dict[str, Any]:
    """The modal that asks for an optional reason before declining."""
    return {
        "type": "modal",
        "callback_id": DECLINE_VIEW,
        "private_metadata": encode_metadata(metadata),
        "title": plain(texts.MODAL_TITLE),
        "submit": plain(texts.MODAL_SUBMIT),
        "close": plain(texts.MODAL_CLOSE),
        "blocks": [
            section(texts.MODAL_INTRO),
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": plain(texts.MODAL_REASON_LABEL),
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_INPUT,
                    "multiline": True,
                    "max_length": REASON_LIMIT,
                    "placeholder": plain(texts.MODAL_REASON_PLACEHOLDER),
                },
            },
        ],
    }


# -- prompt and text --------------------------------------------------------------


def prompt(view: Prompt) -> SlackMessage:
    """A tool's question in the thread; a reply in the thread answers it."""
    blocks: list[Block] = []
    if view.error:
        blocks.append(section(texts.PROMPT_RETRY.format(error=escape(view.error))))
    title = texts.PROMPT_TITLE.format(tool=escape(view.tool_name))
    blocks.append(section(f"{title}\n{escape(view.question)}"))
    if view.fields:
        fields = ", ".join(f"`{escape(f)}`" for f in view.fields)
        blocks.append(context(texts.PROMPT_FIELDS.format(fields=fields)))
    blocks.append(context(texts.PROMPT_HINT))
    fallback, _ = cut(escape(view.question), SECTION_LIMIT)
    return SlackMessage(text=fallback, blocks=blocks)


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
