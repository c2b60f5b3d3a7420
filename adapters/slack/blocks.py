"""Documents -> Block Kit, within Slack's limits, always with a top-level ``text``.

The core composes every view once as a ``bot.Document`` (``bot.compose``); this module
only draws its primitives: a title and paragraphs as sections, small text as context,
facts as labelled lines, arguments as a code block, an edit's changes on one line, the
agent's markdown as mrkdwn, lists with their buttons, and each button with what it
carries back. A settled view (one with a ``tone``) keeps its title in the message and
its body beside a bar of the tone's colour.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, assert_never

from bot import (
    Arguments,
    Button,
    ButtonAction,
    Changes,
    Confirm,
    Document,
    Facts,
    Item,
    Markdown,
    Paragraph,
    Rich,
    Section,
    TextInput,
    Tone,
    View,
    changes_rich,
    compose,
)
from bot import Block as Piece

from . import texts
from .mrkdwn import (
    CONTEXT_LIMIT,
    ELLIPSIS,
    SECTION_LIMIT,
    Block,
    Places,
    clip,
    context,
    cut,
    escape,
    mrkdwn,
    plain,
    rich_mrkdwn,
    section,
    split,
    to_mrkdwn,
)
from .wire import (
    ANSWER_ACTION,
    APPROVE_ACTION,
    APPROVE_ALL_ACTION,
    DECLINE_ACTION,
    DECLINE_ALL_ACTION,
    EDIT_ACTION,
    FEEDBACK_ACTION,
    FEEDBACK_HELPFUL,
    FEEDBACK_UNHELPFUL,
    QUESTION_CANCEL_ACTION,
    QUESTION_DECLINE_ACTION,
    RESPOND_ACTION,
    REVOKE_ACTION,
    STOP_ACTION,
    encode_button_value,
    encode_stop_value,
    grant_action,
    never_action,
)

CONFIRM_TEXT_LIMIT = 300
CONFIRM_TITLE_LIMIT = 100
CONFIRM_BUTTON_LIMIT = 30
"""A confirmation dialog's Approve / Cancel."""
BUTTON_TEXT_LIMIT = 75
ACTIONS_LIMIT = 25
"""Elements in one actions block."""
REASON_LIMIT = 1000
EDITED_VALUE_LIMIT = 200
"""Characters kept of one value in the "Edited by" line, before an ellipsis: the
arguments block above shows it whole."""
ITEMS_SHOWN = 10
"""Items of a list without buttons shown at most (all in one section)."""
DECIDABLE_SHOWN = 10
"""Items of a list with buttons shown at most in a message (two blocks each, well within
its 50)."""
ITEM_TEXT_LIMIT = 500
"""Characters kept of each piece of words on a list's line (a call's arguments), before
an ellipsis: the request shows them whole."""
# Text per message when an answer is split: several sections, well below the
# 40,000 characters at which Slack truncates a message.
MESSAGE_TEXT_LIMIT = 12000

_FENCE = "```"
_FENCE_BROKEN = "`\u200b`\u200b`"  # looks the same, cannot close the code block
_DIVIDER: Block = {"type": "divider"}

BAR_COLORS: dict[Tone, str] = {
    "done": "#2EB67D",
    "refused": "#E01E5A",
    "void": "#9A9A9A",
}
"""The colour bar beside a settled card (and its pointer, and a settled question), by
its outcome's tone: green, red, or grey when nobody decided (it expired, or its request
was stopped, or the question was cancelled). A pending view has none."""

_ACTION_IDS: dict[ButtonAction, str] = {
    "approve": APPROVE_ACTION,
    "decline": DECLINE_ACTION,
    "edit": EDIT_ACTION,
    "respond": RESPOND_ACTION,
    "approve_all": APPROVE_ALL_ACTION,
    "decline_all": DECLINE_ALL_ACTION,
    "answer": ANSWER_ACTION,
    "question_decline": QUESTION_DECLINE_ACTION,
    "question_cancel": QUESTION_CANCEL_ACTION,
    "stop": STOP_ACTION,
    "revoke": REVOKE_ACTION,
}
"""The ``action_id`` of each button, but a grant's (``grant_action``: by its index) and a
standing decline's (``never_action``)."""


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
    return draw(compose(view), link=link)


def draw(
    document: Document,
    *,
    link: str | None = None,
    places: Places | None = None,
    decidable_shown: int = DECIDABLE_SHOWN,
) -> list[SlackMessage]:
    """The messages that show ``document`` (several only for long markdown).

    ``link``: where the document's ``Link`` (and, without ``places``, its ``Place``)
    leads; ``places``: the permalinks of the threads it names; ``decidable_shown``: the
    items with buttons a list shows (the surface's room).
    """
    pen = _Pen(link=link, places=places, decidable_shown=decidable_shown)
    text = clip(pen.text(document.summary), SECTION_LIMIT, escaped=True)
    head = [section(pen.text(document.title))] if document.title else []
    pages = pen.body(document.body)
    closing = closing_blocks(document)
    if document.tone is not None:
        shown = [block for _, blocks in pages for block in blocks]
        bar = Bar(color=BAR_COLORS[document.tone], blocks=shown) if shown else None
        return [SlackMessage(text=text, blocks=[*head, *closing], bar=bar)]
    (_, first), *rest = pages
    messages = [SlackMessage(text=text, blocks=[*head, *first])]
    messages += [SlackMessage(text=page_text, blocks=blocks) for page_text, blocks in rest]
    *before, last = messages
    return [*before, SlackMessage(text=last.text, blocks=[*last.blocks, *closing])]


def closing_blocks(document: Document) -> list[Block]:
    """What ends a document: 👍 / 👎 under a finished run's answer (``feedback``), then
    its buttons."""
    blocks = [feedback_block(document.feedback)] if document.feedback is not None else []
    if document.actions:
        blocks.append(actions_block(document.actions))
    return blocks


@dataclass(frozen=True, kw_only=True)
class _Pen:
    """Draws one document's blocks, with the links it knows and the room it has."""

    link: str | None
    places: Places | None
    decidable_shown: int

    def text(self, rich: Rich, *, limit: int | None = None) -> str:
        """Rich text as mrkdwn, with the links this document knows."""
        return rich_mrkdwn(rich, link=self.link, places=self.places, limit=limit)

    def body(self, body: tuple[Piece, ...]) -> list[tuple[str, list[Block]]]:
        """The body's blocks, in pages: a new message where long markdown needs one (each
        continuation with its own text)."""
        pages: list[tuple[str, list[Block]]] = [("", [])]
        for block in body:
            if isinstance(block, Markdown):
                first, *more = long_text(block.text, lead=self.text(block.lead))
                pages[-1][1].extend(first.blocks)
                pages += [(message.text, message.blocks) for message in more]
                continue
            if isinstance(block, Section) and pages[-1][1]:
                pages[-1][1].append(_DIVIDER)
            pages[-1][1].extend(self.block(block))
        return pages

    def block(self, block: Piece) -> list[Block]:
        """The Block Kit blocks of one of the document's blocks."""
        match block:
            case Paragraph():
                shown = self.text(block.text)
                if not shown.strip():
                    return []
                return [context(shown) if block.small else section(shown)]
            case Facts():
                lines = [f"*{escape(f.label)}:* {self.text(f.value)}" for f in block.facts]
                return [section("\n".join(lines))] if lines else []
            case Arguments():
                return arguments(block)
            case Changes():
                return [context(self.changes(block))]
            case Markdown():  # all in one message (``body`` splits messages)
                messages = long_text(block.text, lead=self.text(block.lead))
                return [shown for message in messages for shown in message.blocks]
            case TextInput():
                return []  # Slack asks for it in a modal, when its button is pressed
            case Section():
                return self.section(block)
            case _:
                assert_never(block)

    def changes(self, block: Changes) -> str:
        """An edit's changes on one line, as many as a context holds (saying how many
        more)."""
        most = len(block.changes)
        while True:
            shown = self.text(
                changes_rich(block, limit=EDITED_VALUE_LIMIT + len(ELLIPSIS), most=most)
            )
            if len(shown) <= CONTEXT_LIMIT or most <= 1:
                return shown
            most -= 1

    def section(self, block: Section) -> list[Block]:
        """A titled list: each item with buttons in a section of its own, followed by them
        (as many as the surface has room for); items without, one line each in one
        section; or what is said when there are none."""
        title = f"*{self.text(block.title)}*"
        if not block.items:
            return [section(f"{title}\n{self.text(block.empty)}")]
        if not any(item.actions for item in block.items):
            return [self.listing(title, block)]
        blocks = [section(title)]
        for item in block.items[: self.decidable_shown]:
            blocks.append(section(self.item(item)))
            if item.actions:
                blocks.append(actions_block(item.actions))
        hidden = len(block.items) - self.decidable_shown
        if hidden > 0:
            blocks.append(context(escape(block.more.format(count=hidden))))
        return blocks

    def listing(self, title: str, block: Section) -> Block:
        """One section: the title, then as many items as fit, and how many more there are."""
        shown: list[str] = []
        size = len(title) + 200  # room for the "and N more" line
        for item in block.items[:ITEMS_SHOWN]:
            line = f"• {self.item(item)}"
            if size + len(line) + 1 > SECTION_LIMIT:
                break
            shown.append(line)
            size += len(line) + 1
        hidden = len(block.items) - len(shown)
        if hidden:
            shown.append(escape(block.more.format(count=hidden)))
        return section("\n".join([title, *shown]))

    def item(self, item: Item) -> str:
        """A list's item: its line, and the line under it (each piece of words cut short)."""
        lines = [self.text(item.text, limit=ITEM_TEXT_LIMIT)]
        if item.details:
            lines.append(self.text(item.details, limit=ITEM_TEXT_LIMIT))
        return "\n".join(lines)


def arguments(block: Arguments) -> list[Block]:
    """What a call runs with, as a code block, never folded away; cut to a section's
    size, saying how much was left out."""
    label = f"*{escape(block.label)}*"
    if not block.args:
        return [section(f"{label}\n_{escape(block.empty)}_")]
    pretty = json.dumps(block.args, indent=2, ensure_ascii=False, default=str)
    head, tail = f"{label}\n{_FENCE}\n", f"\n{_FENCE}"
    room = SECTION_LIMIT - len(head) - len(tail)
    body, dropped = cut(escape(pretty).replace(_FENCE, _FENCE_BROKEN), room)
    blocks = [section(head + body + tail)]
    if dropped:
        blocks.append(context(texts.ARGUMENTS_TRUNCATED.format(count=dropped)))
    return blocks


# -- buttons ------------------------------------------------------------------------


def actions_block(buttons: tuple[Button, ...]) -> Block:
    """Buttons in one actions block (as many as it holds); each "Approve for this
    thread" with its index, since Slack wants the ids in a block unique."""
    elements: list[Block] = []
    grants = nevers = 0
    for button in buttons[:ACTIONS_LIMIT]:
        if button.action == "grant":
            action_id, grants = grant_action(grants), grants + 1
        elif button.action == "never":
            action_id, nevers = never_action(nevers), nevers + 1
        else:
            action_id = _ACTION_IDS[button.action]
        elements.append(button_element(button, action_id))
    return {"type": "actions", "elements": elements}


def button_element(button: Button, action_id: str) -> Block:
    """One button: its words, its look, what it carries back (the run for Stop, else the
    call, the card's asking and a grant's duration), and its confirmation."""
    target = button.target
    value = (
        encode_stop_value(target.run_id)
        if button.action == "stop"
        else encode_button_value(
            target.run_id, target.tool_call_id, grant_for=target.grant_for, ask=target.ask
        )
    )
    element: Block = {
        "type": "button",
        "action_id": action_id,
        "text": plain(clip(button.label, BUTTON_TEXT_LIMIT)),
        "value": value,
    }
    if button.style != "plain":
        element["style"] = button.style
    if button.confirm is not None:
        element["confirm"] = confirm_dialog(button.confirm, danger=button.style == "danger")
    return element


def confirm_dialog(confirm: Confirm, *, danger: bool = False) -> Block:
    """The question Slack asks before a button takes effect."""
    return {
        "title": plain(clip(confirm.title, CONFIRM_TITLE_LIMIT)),
        "text": mrkdwn(cut(rich_mrkdwn(confirm.text), CONFIRM_TEXT_LIMIT)[0]),
        "confirm": plain(clip(confirm.yes, CONFIRM_BUTTON_LIMIT)),
        "deny": plain(clip(confirm.no, CONFIRM_BUTTON_LIMIT)),
        "style": "danger" if danger else "primary",
    }


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


# -- long text ----------------------------------------------------------------------


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
