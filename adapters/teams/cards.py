"""Documents (``bot.compose``) with a title as Adaptive Cards 1.5: approval cards (with
an Edit form when the arguments may be edited), questions, a settled pointer, the
approvals list; and the buttons of a document without a title (a message: see
``notices``) as a small card under it.

Only drawing: the words, and which buttons a view has, are the core's. Plain JSON
only (no botbuilder types), so the drawing is testable on its own. A card must stay
under Teams' message size limit (about 28 KB), so values and texts are shortened
(and an Edit form or a question's inputs left out) until the whole card fits.

Teams renders TextBlocks, fact titles and fact values as markdown, so every
piece of text that comes from people or the model (arguments, reasons, names,
questions) goes through ``escape``: it shows literally and can add no link,
emphasis, list or date function to a card or message. Input labels,
placeholders, values, toggle titles and choice titles are plain text to every
renderer, so they are shown as given (an escape would show its backslashes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, assert_never

from bot import (
    Arguments,
    Block,
    Button,
    Changes,
    Document,
    Facts,
    Markdown,
    Paragraph,
    PromptField,
    Rich,
    Section,
    TextInput,
    changes_rich,
)

from . import texts
from .blocks import CARD_BUDGET_BYTES as CARD_BUDGET_BYTES
from .blocks import (
    CARD_VERSION,
    MAX_LABEL,
    args_facts,
    cut,
    escape,
    execute,
    fits,
    markdown,
    plain,
    show_value,
    text_block,
)

CONTENT_TYPE: Final = "application/vnd.microsoft.card.adaptive"
"""The attachment content type of an Adaptive Card (and of an invoke's card answer)."""
_SCHEMA: Final = "http://adaptivecards.io/schemas/adaptive-card.json"

KIND: Final = "approval"
"""Marks our action data, so a submit from some other card is not taken for a click."""
QUESTION_KIND: Final = "question"
"""Marks the action data of a question's Send, Decline and Cancel."""
NOTICE_KIND: Final = "notice"
"""Marks the data of a notice's End grant."""
STOP_KIND: Final = "stop"
"""Marks the data of Stop under the text before a card or question (also its verb)."""
ASK: Final = "ask"
"""The key of a card's ask in its actions' data."""
SHOWN_IN: Final = "shown_in"
INBOX: Final = "inbox"
"""``data[SHOWN_IN]`` of the buttons of the ``approvals`` list (not a card in a thread)."""

FIELD_INPUT_PREFIX: Final = "field:"
"""Starts the id of every form input. Teams merges the inputs' values into the action
data, so an input named like one of its keys (``run_id``) must not replace it."""

_MAX_ACTIONS: Final = 6
"""Teams shows at most six actions of a card: those beyond go under a sixth, "More…"
(``_fitted``), so none is lost (a card's last "Approve for this thread" and "Decline,
don't ask again here" buttons)."""
_MAX_ITEMS: Final = 10
"""Items a list shows when its drawing sets no cap of its own."""
_STYLES: Final = {"primary": "positive", "danger": "destructive", "plain": None}


@dataclass(frozen=True, kw_only=True)
class Limits:
    """How much of a document a card shows: each value (an argument's, a change's, a list
    item's line), each piece of text, each input's hint, arguments shown, items per list
    (in the order of the lists; ``_MAX_ITEMS`` past them), and whether forms are drawn."""

    value: int
    text: int = 3000
    hint: int = 300
    facts: int = 25
    items: tuple[int, ...] = ()
    forms: bool = True


_LIMITS: Final = (
    Limits(value=1500, text=3000, hint=300),
    Limits(value=600, text=1000, hint=100),
    Limits(value=200, text=300, hint=0),
    Limits(value=60, text=300, hint=0),
)
"""Tried in turn until a card fits; then again without its forms."""


def draw(
    document: Document,
    *,
    refresh: dict[str, Any] | None = None,
    link: str | None = None,
    shown_in: str | None = None,
    limits: Sequence[Limits] = _LIMITS,
) -> dict[str, Any]:
    """The Adaptive Card showing ``document``, shortened until it fits a Teams message.

    A button's form (Edit) opens below the buttons, each input holding its current
    value, never shortened (an untouched input would send the shortened one): a form
    too big for a message is left out with its button, as are a question's inputs
    (a reply in the thread answers it). ``refresh`` is the card's Universal Actions
    ``refresh`` (see ``refresh``), counted in its size; ``link`` is where the
    document's ``Link`` points; ``shown_in`` marks what its buttons send back.
    """
    tries = list(limits)
    if any(button.form is not None for button in document.actions):
        tries += [replace(each, forms=False) for each in limits]
    for each in tries:
        rendered = _Pen(document, each, link=link, shown_in=shown_in).card(refresh)
        if fits(rendered):
            return rendered
    smallest = replace(limits[-1], facts=5, forms=False)
    return _Pen(document, smallest, link=link, shown_in=shown_in).card(refresh)


def buttons_card(document: Document) -> dict[str, Any]:
    """The card under a message (a document without a title) holding its buttons (Stop,
    End grant); they send no inputs."""
    pen = _Pen(document, _LIMITS[0])
    labels = ", ".join(button.label for button in document.actions)
    return {
        "type": "AdaptiveCard",
        "$schema": _SCHEMA,
        "version": CARD_VERSION,
        "fallbackText": escape(labels),
        "body": [],
        "actions": [pen.button(button) for button in document.actions],
    }


def summary(document: Document) -> str:
    """A document's one-line plain text, for notifications (not markdown: see ``escape``)."""
    return plain(document.summary)


def button_data(button: Button, *, shown_in: str | None = None) -> dict[str, str]:
    """The data a button carries back to the bot (inputs are merged in by Teams).

    A card's buttons carry the card's ask, so a click on a card of an earlier asking
    is refused wherever the card is shown, and a grant says for how long; ``shown_in``
    marks a button of the ``approvals`` list.
    """
    target = button.target
    ids = {"run_id": target.run_id, "tool_call_id": target.tool_call_id}
    match button.action:
        case (
            "approve"
            | "decline"
            | "edit"
            | "grant"
            | "never"
            | "respond"
            | "approve_all"
            | "decline_all"
        ):
            data = {"kind": KIND, "action": button.action, **ids}
            if target.ask:
                data[ASK] = target.ask
            if target.grant_for is not None:
                data["grant_for"] = target.grant_for
            if shown_in is not None:
                data[SHOWN_IN] = shown_in
            return data
        case "answer" | "question_decline" | "question_cancel":
            return {"kind": QUESTION_KIND, "action": button.action.removeprefix("question_"), **ids}
        case "stop":
            return {"kind": STOP_KIND, "action": STOP_KIND, "run_id": target.run_id}
        case "revoke":
            return {"kind": NOTICE_KIND, "action": "revoke", **ids}
        case _:
            assert_never(button.action)


def _fitted(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most ``_MAX_ACTIONS`` actions: past five, the rest are shown by a sixth."""
    if len(actions) <= _MAX_ACTIONS:
        return actions
    keep = _MAX_ACTIONS - 1
    more = {"type": "AdaptiveCard", "body": [], "actions": actions[keep:][:_MAX_ACTIONS]}
    return [*actions[:keep], {"type": "Action.ShowCard", "title": texts.MORE_ACTIONS, "card": more}]


# -- internals -------------------------------------------------------------------


class _Pen:
    """Draws one document within one set of limits."""

    def __init__(
        self,
        document: Document,
        limits: Limits,
        *,
        link: str | None = None,
        shown_in: str | None = None,
    ) -> None:
        self.document = document
        self.limits = limits
        self.link = link
        self.shown_in = shown_in
        self.inputs = any(isinstance(block, TextInput) for block in document.body)
        """Whether the card has text inputs, which the buttons that ask for them send."""

    def card(self, refresh: dict[str, Any] | None) -> dict[str, Any]:
        document = self.document
        body: list[dict[str, Any]] = []
        if document.title:
            body.append(text_block(self.text(document.title), weight="Bolder", size="Medium"))
        sections = 0
        for block in document.body:
            body += self.block(block, cap=self._cap(sections))
            sections += isinstance(block, Section)
        actions: list[dict[str, Any]] = []
        for button in document.actions:
            form = button.form
            if form is None:
                actions.append(self.button(button))
            elif not self.limits.forms:
                continue
            elif form.inline:
                body += [self.field(field) for field in form.fields]
                actions.append(self.submit(button))
            else:
                actions.append(self.show_card(button))
        content: dict[str, Any] = {
            "type": "AdaptiveCard",
            "$schema": _SCHEMA,
            "version": CARD_VERSION,
            "fallbackText": escape(plain(document.summary)),
            "msteams": {"width": "Full"},
            "body": body,
        }
        if refresh is not None:
            content["refresh"] = refresh
        if actions:
            content["actions"] = _fitted(actions)
        return content

    def text(self, text: Rich, *, limit: int | None = None) -> str:
        return markdown(text, limit=limit or self.limits.text, link=self.link)

    def block(self, block: Block, *, cap: int) -> list[dict[str, Any]]:
        limits = self.limits
        match block:
            case Paragraph():
                style: dict[str, Any] = {"size": "Small"} if block.small else {}
                if block.emphasis == "subtle":
                    style["isSubtle"] = True
                elif block.emphasis == "attention":
                    style["color"] = "Attention"
                return [text_block(self.text(block.text), **style)]
            case Facts():
                facts = [
                    {"title": escape(fact.label), "value": self.text(fact.value)}
                    for fact in block.facts
                ]
                return [{"type": "FactSet", "facts": facts}]
            case Arguments():
                return args_facts(block, value_limit=limits.value, max_facts=limits.facts)
            case Changes():
                line = changes_rich(block, limit=limits.value, most=limits.facts)
                return [text_block(markdown(line, link=self.link))]
            case Markdown():
                return [text_block(markdown(block.lead, link=self.link) + block.text)]
            case TextInput():
                return [self.text_input(block)]
            case Section():
                return self.section(block, cap=cap)
            case _:
                assert_never(block)

    def section(self, section: Section, *, cap: int) -> list[dict[str, Any]]:
        """A heading, then one container per item (its line, its details, its buttons
        without forms), at most ``cap``, saying how many more there are."""
        title = self.text(section.title)
        shown = [text_block(title, weight="Bolder", separator=True, spacing="Large")]
        if not section.items:
            empty = [text_block(self.text(section.empty), isSubtle=True)] if section.empty else []
            return shown + empty
        value = self.limits.value
        for item in section.items[:cap]:
            parts = [text_block(self.text(item.text, limit=value))]
            if item.details:
                details = self.text(item.details, limit=value)
                parts.append(text_block(details, isSubtle=True, size="Small"))
            buttons = [self.button(button) for button in item.actions if button.form is None]
            if buttons:
                parts.append({"type": "ActionSet", "actions": buttons})
            shown.append({"type": "Container", "separator": True, "items": parts})
        if len(section.items) > cap:
            more = section.more.format(count=len(section.items) - cap)
            shown.append(text_block(escape(more), isSubtle=True))
        return shown

    def button(self, button: Button) -> dict[str, Any]:
        """An Action.Execute; it sends the card's inputs only when the button asks for
        them (Decline, with its reason)."""
        return execute(
            cut(button.label, MAX_LABEL),
            button_data(button, shown_in=self.shown_in),
            style=_STYLES[button.style],
            tooltip=button.tooltip,
            with_inputs=button.inputs and self.inputs,
        )

    def submit(self, button: Button) -> dict[str, Any]:
        """The button sending a form's inputs: the form's words, the button's data."""
        assert button.form is not None
        data = button_data(button, shown_in=self.shown_in)
        return execute(button.form.submit, data, style="positive", tooltip=button.tooltip)

    def show_card(self, button: Button) -> dict[str, Any]:
        """A form shown below the buttons, with its inputs and its submit (a shown card's
        action gathers its own inputs and its parents'; the parent's buttons never
        gather these)."""
        assert button.form is not None
        intro = text_block(self.text(button.form.intro), isSubtle=True)
        return {
            "type": "Action.ShowCard",
            "title": button.label,
            "card": {
                "type": "AdaptiveCard",
                "body": [intro, *(self.field(field) for field in button.form.fields)],
                "actions": [self.submit(button)],
            },
        }

    def text_input(self, block: TextInput) -> dict[str, Any]:
        element: dict[str, Any] = {
            "type": "Input.Text",
            "id": block.name,
            "label": block.label,
            "isMultiline": True,
            "maxLength": block.max_length,
        }
        if block.placeholder:
            element["placeholder"] = block.placeholder
        return element

    def field(self, field: PromptField) -> dict[str, Any]:
        """One form input, holding the field's ``value`` when it has one (as given: an
        input's value is plain text); its label, placeholder and choice titles are too."""
        label = cut(field.label, MAX_LABEL)
        hint_limit = self.limits.hint
        hint = cut(field.description, hint_limit) if field.description and hint_limit else ""
        element: dict[str, Any] = {"id": FIELD_INPUT_PREFIX + field.name, "label": label}
        value = field.value
        match field.kind:
            case "text":
                element["type"] = "Input.Text"
                if value is not None:
                    element["value"] = show_value(value)
                    if "\n" in element["value"]:
                        element["isMultiline"] = True
            case "number" | "integer":
                element["type"] = "Input.Number"
                if _is_number(value):
                    element["value"] = value
            case "boolean":
                # Not ``isRequired``: a required toggle must be switched on; off is an answer.
                element.update(
                    type="Input.Toggle", title=hint or label, valueOn="true", valueOff="false"
                )
                element["value"] = "true" if value is True else "false"
                return element
            case "choice":
                choices = [{"title": cut(c, MAX_LABEL), "value": c} for c in field.choices]
                element.update(type="Input.ChoiceSet", style="compact", choices=choices)
                if value is not None and str(value) in field.choices:
                    element["value"] = str(value)
            case _:
                assert_never(field.kind)
        if hint:
            element["placeholder"] = hint
        if field.required:
            element["isRequired"] = True
            element["errorMessage"] = texts.FIELD_REQUIRED.format(label=label)
        return element

    def _cap(self, index: int) -> int:
        caps = self.limits.items
        return caps[index] if index < len(caps) else _MAX_ITEMS


def _is_number(value: Any) -> bool:
    """Whether an Input.Number can hold ``value`` (JSON has no NaN or infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)
