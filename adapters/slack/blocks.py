"""Bot views -> Block Kit, within Slack's limits, always with a top-level ``text``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, assert_never

from bot import (
    EDIT_MARK,
    ApprovalCard,
    CardPointer,
    Notice,
    Outcome,
    Prompt,
    Reply,
    ThreadKey,
    Tone,
    View,
    card_outcome,
    change_side,
    question_outcome,
    tool_label,
)

from . import texts
from .mrkdwn import (
    ELLIPSIS,
    SECTION_LIMIT,
    Block,
    channel_mention,
    clip,
    context,
    cut,
    escape,
    mention,
    mentions,
    mrkdwn,
    place_name,
    plain,
    section,
    slack_date,
    split,
    text_escaped,
    to_mrkdwn,
)
from .wire import (
    ANSWER_ACTION,
    APPROVE_ACTION,
    DECLINE_ACTION,
    EDIT_ACTION,
    FEEDBACK_ACTION,
    FEEDBACK_HELPFUL,
    FEEDBACK_UNHELPFUL,
    QUESTION_CANCEL_ACTION,
    QUESTION_DECLINE_ACTION,
    REVOKE_ACTION,
    STOP_ACTION,
    encode_button_value,
    encode_stop_value,
    grant_action,
)

CONFIRM_TEXT_LIMIT = 300
BUTTON_TEXT_LIMIT = 75
ACTIONS_LIMIT = 25
"""Elements in one actions block."""
REASON_LIMIT = 1000
EDITED_VALUE_LIMIT = 200
"""Characters kept of one value in the "Edited by" line, before an ellipsis: the
arguments block above shows it whole."""
# Text per message when an answer is split: several sections, well below the
# 40,000 characters at which Slack truncates a message.
MESSAGE_TEXT_LIMIT = 12000

_FENCE = "```"
_FENCE_BROKEN = "`\u200b`\u200b`"  # looks the same, cannot close the code block


BAR_COLORS: dict[Tone, str] = {
    "done": "#2EB67D",
    "refused": "#E01E5A",
    "void": "#9A9A9A",
}
"""The colour bar beside a settled card (and its pointer), by its outcome's tone: green,
red, or grey when nobody decided (it expired, or its request was stopped). A pending
card has none."""


@dataclass(frozen=True, kw_only=True)
class Bar:
    """Blocks shown beside a colour bar: Slack's (legacy) attachment, which Block Kit
    has no other way to colour."""

    color: str
    blocks: list[Block]


@dataclass(frozen=True, kw_only=True)
class SlackMessage:
    """One ``chat.postMessage``/``chat.update`` body: fallback ``text``, ``blocks``, and
    the blocks of a colour ``bar`` below them (a settled card's)."""

    text: str
    blocks: list[Block]
    bar: Bar | None = None

    @property
    def shown(self) -> list[Block]:
        """Every block a person sees, in order: the message's, then the bar's."""
        return [*self.blocks, *(self.bar.blocks if self.bar else [])]

    def fields(self, *, replacing: bool = False) -> dict[str, Any]:
        """The Web API arguments: ``text``, ``blocks`` and, with a bar, ``attachments``.

        ``replacing`` (``chat.update``): Slack keeps a message's attachments unless
        told otherwise, so a message without a bar sends none, explicitly.
        """
        args: dict[str, Any] = {"text": self.text, "blocks": self.blocks}
        if self.bar is not None:
            args["attachments"] = [{"color": self.bar.color, "blocks": self.bar.blocks}]
        elif replacing:
            args["attachments"] = []
        return args


def render(view: View, *, link: str | None = None) -> list[SlackMessage]:
    """The messages that show a view (several only for long answers).

    ``link`` is the permalink of the place the view points to, when known: the
    request of a card shown away from it (``ApprovalCard.requested_in``), the card
    a ``CardPointer`` points to.
    """
    match view:
        case ApprovalCard():
            return [approval_card(view, link=link)]
        case Prompt():
            return [prompt(view)]
        case Reply():
            messages = long_text(view.text)
            closing = closing_blocks(feedback=view.feedback, stop=view.stop)
            if closing:
                *before, last = messages
                extended = [*last.blocks, *closing]
                messages = [*before, SlackMessage(text=last.text, blocks=extended, bar=last.bar)]
            return messages
        case Notice():
            lead = f"{', '.join(map(mention, view.people))}: " if view.people else ""
            messages = long_text(view.text, lead=lead)
            if view.revoke is not None:
                *before, last = messages
                messages = [*before, _with_revoke(last, *view.revoke)]
            return messages
        case CardPointer():
            return [card_pointer(view, link=link)]
        case _:
            assert_never(view)


def closing_blocks(*, feedback: str | None = None, stop: str | None = None) -> list[Block]:
    """What ends an answer: 👍 / 👎 under a finished run's (``feedback``), Stop under
    the text before a card or question of a run still going (``stop``)."""
    return [
        *([feedback_block(feedback)] if feedback is not None else []),
        *([stop_block(stop)] if stop is not None else []),
    ]


def stop_block(run_id: str) -> Block:
    """Stop (confirmed first) under the text before a card or question, naming its run."""
    stop = {
        "type": "button",
        "action_id": STOP_ACTION,
        "text": plain(texts.STOP),
        "style": "danger",
        "value": encode_stop_value(run_id),
        "confirm": {
            "title": plain(texts.STOP_CONFIRM_TITLE),
            "text": mrkdwn(cut(texts.STOP_CONFIRM_TEXT, CONFIRM_TEXT_LIMIT)[0]),
            "confirm": plain(texts.STOP_CONFIRM_YES),
            "deny": plain(texts.STOP_CONFIRM_NO),
            "style": "danger",
        },
    }
    return {"type": "actions", "elements": [stop]}


def feedback_block(run_id: str) -> Block:
    """👍 / 👎 under a finished answer (Slack's feedback buttons), naming its run."""
    return {
        "type": "context_actions",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK_ACTION,
                "positive_button": {
                    "text": plain(texts.FEEDBACK_UP),
                    "value": FEEDBACK_HELPFUL + run_id,
                    "accessibility_label": texts.FEEDBACK_UP_LABEL,
                },
                "negative_button": {
                    "text": plain(texts.FEEDBACK_DOWN),
                    "value": FEEDBACK_UNHELPFUL + run_id,
                    "accessibility_label": texts.FEEDBACK_DOWN_LABEL,
                },
            }
        ],
    }


def _with_revoke(message: SlackMessage, run_id: str, tool_call_id: str) -> SlackMessage:
    """A grant's notice with its End grant button."""
    end = {
        "type": "button",
        "action_id": REVOKE_ACTION,
        "text": plain(texts.END_GRANT),
        "value": encode_button_value(run_id, tool_call_id),
    }
    actions = {"type": "actions", "elements": [end]}
    return SlackMessage(text=message.text, blocks=[*message.blocks, actions], bar=message.bar)


# -- a card shown elsewhere -------------------------------------------------------


def card_pointer(pointer: CardPointer, *, link: str | None = None) -> SlackMessage:
    """The line in the requester's thread for a card sent elsewhere: where it waits
    (with a link to it, ``link``), then how it ended."""
    card = pointer.card
    tool = escape(tool_label(card))
    see = " " + texts.POINTER_LINK.format(url=escape(link)) if link else ""
    outcome = card_outcome(card)
    if outcome is not None:
        lines = [context(edited_text(outcome))] if outcome.changes else []
        lines.append(context(outcome_line(outcome) + see))
        bar = Bar(color=BAR_COLORS[outcome.tone], blocks=lines)
        fallback = settled_fallback(tool, outcome)
        return SlackMessage(text=fallback, blocks=[section(settled_title(card))], bar=bar)
    if pointer.channel is not None:
        channel = channel_mention(pointer.channel)
        line = texts.POINTER_IN_CHANNEL.format(tool=tool, channel=channel, see=see)
    else:
        who = mentions(pointer.people) or texts.UNKNOWN_PERSON
        line = texts.POINTER_TO_PEOPLE.format(tool=tool, who=who)
    if card.quorum > 1:
        line += "\n" + approvals_text(card)
    fallback = texts.DECIDED_FALLBACK.format(tool=tool, outcome=texts.WAITING)
    return SlackMessage(text=fallback, blocks=[section(line)])


def requested_in_text(thread: ThreadKey, link: str | None) -> str:
    """ "#ops (open the thread)": where a card shown elsewhere was asked for."""
    where = place_name(thread.channel)
    if link:
        return texts.REQUESTED_IN_LINKED.format(where=where, url=escape(link))
    return where


# -- approval card ----------------------------------------------------------------


def approval_card(card: ApprovalCard, *, link: str | None = None) -> SlackMessage:
    """The card: what runs, who asks, until when; buttons while pending, the outcome after.

    A pending card is plain Block Kit, its arguments never folded away. Once settled
    its title says how it ended, and the rest sits beside a bar of that colour.
    A card shown away from its request (``requested_in``) says where that was, with
    ``link`` (the request's permalink) when known.
    """
    tool = escape(tool_label(card))
    requester = mention(card.requester) if card.requester else texts.UNKNOWN_PERSON
    facts = [
        texts.CARD_AGENT.format(path=escape(texts.AGENT_PATH_SEPARATOR.join(card.agent_path))),
        texts.CARD_REQUESTER.format(requester=requester),
    ]
    if card.requested_in is not None:
        facts.append(
            texts.CARD_REQUESTED_IN.format(where=requested_in_text(card.requested_in, link))
        )
    if card.status == "pending":
        facts.append(texts.CARD_EXPIRES.format(when=slack_date(card.expires_at)))
        if card.quorum > 1:
            facts.append(approvals_text(card))
    body: list[Block] = [section("\n".join(facts)), *_arguments(card.args)]
    if card.status == "pending":
        title = section(texts.CARD_TITLE.format(tool=tool))
        text = texts.CARD_FALLBACK.format(tool=tool, requester=requester)
        return SlackMessage(text=text, blocks=[title, *body, _buttons(card)])
    outcome = card_outcome(card)
    assert outcome is not None
    if outcome.changes:
        body.append(context(edited_text(outcome)))
    body.append(context(outcome_line(outcome)))
    return SlackMessage(
        text=settled_fallback(tool, outcome),
        blocks=[section(settled_title(card))],
        bar=Bar(color=BAR_COLORS[outcome.tone], blocks=body),
    )


def settled_fallback(tool: str, outcome: Outcome) -> str:
    """A settled card's notification text: the tool, how it ended, what an edit changed."""
    text = texts.DECIDED_FALLBACK.format(tool=tool, outcome=outcome_line(outcome))
    return clip(text + outcome.edit_note(escape), SECTION_LIMIT, escaped=True)


def settled_title(card: ApprovalCard) -> str:
    """The title of a card: ":lock: *Approval needed:* `deploy`" while it waits, then
    its outcome's ("✅ *Approved:* `deploy`")."""
    tool = escape(tool_label(card))
    outcome = card_outcome(card)
    if outcome is None:
        return texts.CARD_TITLE.format(tool=tool)
    return texts.SETTLED_TITLE.format(mark=outcome.mark, title=outcome.title, tool=tool)


def approvals_text(card: ApprovalCard) -> str:
    """ "Approvals: @a (1 of 2)" on a pending card that needs several approvals."""
    who = mentions(card.approvals) or texts.NO_APPROVALS
    return texts.CARD_APPROVALS.format(who=who, count=len(card.approvals), quorum=card.quorum)


def outcome_text(card: ApprovalCard) -> str:
    """The card's outcome line as mrkdwn ("✅ Approved by @x"), empty while it waits."""
    outcome = card_outcome(card)
    return "" if outcome is None else outcome_line(outcome)


def outcome_line(outcome: Outcome) -> str:
    """An outcome's mark and line: words escaped (the core keeps a reason short), people
    mentioned."""
    return f"{outcome.mark} {text_escaped(outcome.line)}"


def edited_text(outcome: Outcome) -> str:
    """ "✏️ Edited by @x: `amount`: 150 → 120; ..." on a card approved as edited: the
    arguments that changed, before and after (the arguments block shows what ran)."""
    changes = [
        texts.EDITED_CHANGE.format(
            name=escape(change.name),
            before=_compact(change_side(change, "before")),
            after=_compact(change_side(change, "after")),
        )
        for change in outcome.changes
    ]
    return texts.EDITED_BY.format(
        mark=EDIT_MARK, who=text_escaped(outcome.edit), changes=texts.EDITED_SEPARATOR.join(changes)
    )


def _compact(value: str) -> str:
    """A value on one line, escaped and short (the arguments block shows it whole)."""
    return clip(escape(value), EDITED_VALUE_LIMIT + len(ELLIPSIS), escaped=True)


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
    elements = decision_buttons(card) + edit_button(card)
    elements += _grant_buttons(card, room=ACTIONS_LIMIT - len(elements))
    return {"type": "actions", "elements": elements}


def decision_buttons(card: ApprovalCard) -> list[Block]:
    """Approve (confirmed first) and Decline: the card's, also in the inboxes
    (``/approvals``, the Home tab), where they decide exactly as on the card."""
    value = encode_button_value(card.run_id, card.tool_call_id, ask=card.ask)
    confirm, _ = cut(texts.CONFIRM_TEXT.format(tool=escape(tool_label(card))), CONFIRM_TEXT_LIMIT)
    return [
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
    ]


def edit_button(card: ApprovalCard) -> list[Block]:
    """Edit, on a card whose arguments may be edited before approving (also in the
    inboxes)."""
    if not card.editable:
        return []
    value = encode_button_value(card.run_id, card.tool_call_id, ask=card.ask)
    return [{"type": "button", "action_id": EDIT_ACTION, "text": plain(texts.EDIT), "value": value}]


def _grant_buttons(card: ApprovalCard, *, room: int) -> list[Block]:
    """ "Approve for this thread (1h)", one per duration the card offers (as many as the
    block has room for), each confirmed first: it approves later calls too."""
    tool = escape(tool_label(card))
    buttons: list[Block] = []
    for index, duration in enumerate(list(dict.fromkeys(card.grant_for))[:room]):
        label = clip(texts.GRANT.format(duration=duration), BUTTON_TEXT_LIMIT)
        confirm, _ = cut(
            texts.GRANT_CONFIRM_TEXT.format(tool=tool, duration=escape(duration)),
            CONFIRM_TEXT_LIMIT,
        )
        buttons.append(
            {
                "type": "button",
                "action_id": grant_action(index),
                "text": plain(label),
                "value": encode_button_value(
                    card.run_id, card.tool_call_id, grant_for=duration, ask=card.ask
                ),
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
    when it is a form (several things, or one that is not free text: a choice, a number,
    yes or no); Decline and Cancel end it. Once settled, who did."""
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
    """ "✅ Answered by @x", "🚫 Cancelled by @x"... once settled; empty while it waits."""
    outcome = question_outcome(view)
    return "" if outcome is None else outcome_line(outcome)


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
