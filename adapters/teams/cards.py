"""Bot views as Teams content: approval cards (with an Edit form when the arguments
may be edited) and questions as Adaptive Cards 1.5, the rest as markdown.

Plain JSON only (no botbuilder types), so the rendering is testable on its own.
A card must stay under Teams' message size limit (about 28 KB), so argument
values (and a question's text) are shortened until the whole card fits.

Teams renders TextBlocks, fact titles and fact values as markdown, so every
piece of text that comes from people or the model (arguments, reasons, names,
questions) goes through ``escape``: it shows literally and can add no link,
emphasis, list or date function to a card or message. Input labels,
placeholders, values, toggle titles and choice titles are plain text to every
renderer, so they are shown as given (an escape would show its backslashes).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Final, Literal, assert_never

from bot import (
    EDIT_MARK,
    ApprovalCard,
    ArgChange,
    Notice,
    Outcome,
    Person,
    Prompt,
    PromptField,
    Reply,
    card_outcome,
    change_side,
    question_outcome,
)

from . import links, texts
from .blocks import CARD_BUDGET_BYTES as CARD_BUDGET_BYTES
from .blocks import CARD_VERSION as CARD_VERSION
from .blocks import (
    MAX_LABEL,
    MAX_NAME,
    MAX_SUMMARY,
    agent_name,
    args_facts,
    cut,
    execute,
    fits,
    rfc3339,
    show_value,
    text_block,
    text_markdown,
    tool_name,
    tool_name_text,
)
from .blocks import escape as escape
from .blocks import person_text as person_text

CONTENT_TYPE: Final = "application/vnd.microsoft.card.adaptive"
"""The attachment content type of an Adaptive Card (and of an invoke's card answer)."""

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

REASON_INPUT: Final = "reason"
FIELD_INPUT_PREFIX: Final = "field:"
"""Starts the id of every form input. Teams merges the inputs' values into the action
data, so an input named like one of its keys (``run_id``) must not replace it."""

_MAX_FACTS: Final = 25
_VALUE_LIMITS: Final = (1500, 600, 200, 60)
_QUESTION_LIMITS: Final = ((3000, 300), (1000, 100), (300, 0))
"""(question and error text, field hint) lengths, tried in turn until a question fits."""

_EDIT_HINT_LIMIT: Final = 200
"""How long an edit input's hint may be (its value, never shortened, fills it anyway)."""

_REASON_LIMIT: Final = 500
"""Characters of a decline's reason an outcome line shows."""

_MAX_ACTIONS: Final = 6
"""Teams shows at most six actions of a card: "Approve for this thread" buttons beyond
that are left out (Approve, Decline and Edit always stay)."""

Action = Literal["approve", "decline", "edit", "grant"]
QuestionAction = Literal["answer", "decline", "cancel"]


def approval_card(
    card: ApprovalCard, *, actionable: bool = True, refresh: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The Adaptive Card for an approval: pending with buttons, or decided without.

    A pending card that is ``editable`` also has Edit, which opens a form of the
    arguments (each input holding its current value) with "Approve edited". Those
    values are never shortened (an untouched input would send the shortened one),
    so a form too big for a message is left out: Approve and Decline remain.

    ``actionable=False`` shows a pending card's status only (no buttons, no reason
    box): what people who may not decide it see. ``refresh`` is the card's Universal
    Actions ``refresh`` (see ``refresh``), counted in its size.
    """
    editing = actionable and card.status == "pending" and card.editable and bool(card.fields)
    draw = functools.partial(_approval_card, card, actionable=actionable, refresh=refresh)
    for edit in (True, False) if editing else (False,):
        for limit in _VALUE_LIMITS:
            rendered = draw(value_limit=limit, edit=edit)
            if fits(rendered):
                return rendered
    return draw(value_limit=_VALUE_LIMITS[-1], max_facts=5, edit=False)


def question_card(prompt: Prompt) -> dict[str, Any]:
    """The Adaptive Card for a tool's question.

    Waiting, it has Decline and Cancel, and, when it is a form (``Prompt.form``: it
    asks for several things, or for one that is not free text), one input per field
    and Send; settled, it says who answered, declined or cancelled it (or that it
    expired), without actions.
    """
    for text_limit, hint_limit in _QUESTION_LIMITS:
        rendered = _question_card(prompt, text_limit=text_limit, hint_limit=hint_limit)
        if fits(rendered):
            return rendered
    # A form too big for a message (thousands of choices): a reply in the thread answers it.
    text_limit, hint_limit = _QUESTION_LIMITS[-1]
    return _question_card(prompt, text_limit=text_limit, hint_limit=hint_limit, inputs=False)


def stop_card(run_id: str) -> dict[str, Any]:
    """The card under the text before a card or question of a run still going: one Stop
    (``ChatCore.on_stop``), which sends no inputs."""
    data = {"kind": STOP_KIND, "action": STOP_KIND, "run_id": run_id}
    stop = execute(
        texts.STOP,
        data,
        style="destructive",
        tooltip=texts.STOP_TOOLTIP,
        with_inputs=False,
    )
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "fallbackText": texts.STOP,
        "body": [],
        "actions": [stop],
    }


def action_data(
    card: ApprovalCard, action: Action, *, grant_for: str | None = None, inbox: bool = False
) -> dict[str, str]:
    """The data an Approve/Decline/Approve edited/"Approve for this thread" action carries
    back to the bot (an edit's inputs are merged in; a grant says for how long).

    It carries the card's ask, so a click on a card of an earlier asking is refused
    wherever the card is shown; ``inbox`` marks a button of the ``approvals`` list.
    """
    data = {
        "kind": KIND,
        "action": action,
        "run_id": card.run_id,
        "tool_call_id": card.tool_call_id,
    }
    if card.ask:
        data[ASK] = card.ask
    if grant_for is not None:
        data["grant_for"] = grant_for
    if inbox:
        data[SHOWN_IN] = INBOX
    return data


def question_data(prompt: Prompt, action: QuestionAction) -> dict[str, str]:
    """The data a question's Send/Decline/Cancel carries back (the inputs are merged in)."""
    return {
        "kind": QUESTION_KIND,
        "action": action,
        "run_id": prompt.run_id,
        "tool_call_id": prompt.tool_call_id,
    }


def summary(card: ApprovalCard) -> str:
    """A one-line plain text for notifications (not markdown: see ``escape``)."""
    return texts.CARD_SUMMARY.format(agent=agent_name(card.agent_path), tool=tool_name(card))


def question_summary(prompt: Prompt) -> str:
    """A one-line plain text of a question, for notifications (not markdown)."""
    return texts.QUESTION_SUMMARY.format(
        tool=tool_name(prompt), question=cut(prompt.question, MAX_SUMMARY)
    )


def text_of(view: Reply | Notice) -> str:
    """Markdown for the views that are plain messages."""
    if isinstance(view, Notice) and view.people:
        return f"{_people(view.people)}: {view.text}"
    return view.text


def _people(people: tuple[Person, ...]) -> str:
    return ", ".join(person_text(person) for person in people)


# -- internals -------------------------------------------------------------------


def _approval_card(
    card: ApprovalCard,
    *,
    value_limit: int,
    max_facts: int = _MAX_FACTS,
    edit: bool,
    actionable: bool = True,
    refresh: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: list[dict[str, Any]] = [
        text_block(card_title(card), weight="Bolder", size="Medium"),
        text_block(
            texts.CARD_WANTS_TO_RUN.format(
                agent=escape(agent_name(card.agent_path)),
                tool=tool_name_text(card),
            )
        ),
        args_facts(card.args, value_limit=value_limit, max_facts=max_facts),
    ]
    outcome = card_outcome(card)
    if outcome is not None and outcome.changes:
        body.append(text_block(_edited(outcome, value_limit=value_limit, max_facts=max_facts)))
    body.append({"type": "FactSet", "facts": _about(card)})
    if card.requested_in is not None:
        place = links.place_markdown(card.requested_in)
        body.append(text_block(texts.REQUESTED_IN.format(place=place), size="Small"))
    if card.status == "pending":
        body.append(
            text_block(texts.CARD_EXPIRES.format(at=rfc3339(card.expires_at)), size="Small")
        )
    if outcome is not None and outcome.because:
        body.append(text_block(escape(cut(outcome.because, value_limit))))
    content: dict[str, Any] = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "fallbackText": escape(summary(card)),
        "msteams": {"width": "Full"},
        "body": body,
    }
    if refresh is not None:
        content["refresh"] = refresh
    if card.status == "pending" and not actionable:
        body.append(text_block(texts.CARD_FOR_APPROVERS, isSubtle=True, size="Small"))
    elif card.status == "pending":
        body.append(
            {
                "type": "Input.Text",
                "id": REASON_INPUT,
                "label": texts.CARD_REASON_LABEL,
                "placeholder": texts.CARD_REASON_PLACEHOLDER,
                "isMultiline": True,
                "maxLength": 500,
            }
        )
        content["actions"] = [
            # Approve needs no input: the reason is for a decline, the edit form for an edit.
            _action(card, "approve", texts.APPROVE, style="positive", with_inputs=False),
            _action(card, "decline", texts.DECLINE, style="destructive"),
        ]
        if edit:
            content["actions"].append(_edit_action(card))
        room = _MAX_ACTIONS - len(content["actions"])
        content["actions"] += _grant_actions(card)[: max(0, room)]
    return content


def _grant_actions(card: ApprovalCard) -> list[dict[str, Any]]:
    """ "Approve for this thread (1h)", one per duration the card offers; like Approve,
    they send no inputs."""
    tool = tool_name(card)
    return [
        execute(
            texts.GRANT.format(duration=cut(duration, MAX_LABEL)),
            action_data(card, "grant", grant_for=duration),
            tooltip=texts.GRANT_TOOLTIP.format(duration=cut(duration, MAX_LABEL), tool=tool),
            with_inputs=False,
        )
        for duration in dict.fromkeys(card.grant_for)
    ]


def _edit_action(card: ApprovalCard) -> dict[str, Any]:
    """Edit: a card shown below the buttons, with the arguments as inputs and
    "Approve edited", which sends them (a show card's action gathers its own inputs
    and its parents'; the parent's Approve and Decline never gather these)."""
    form = [_field_input(field, hint_limit=_EDIT_HINT_LIMIT) for field in card.fields]
    return {
        "type": "Action.ShowCard",
        "title": texts.EDIT,
        "card": {
            "type": "AdaptiveCard",
            "body": [text_block(texts.CARD_EDIT_HINT, isSubtle=True), *form],
            "actions": [_action(card, "edit", texts.APPROVE_EDITED, style="positive")],
        },
    }


def _edited(outcome: Outcome, *, value_limit: int, max_facts: int) -> str:
    """ "✏️ Edited by X: key: before → after; ..." (escaped): who edited the arguments and
    what they changed, key by key."""

    def side(change: ArgChange, which: Literal["before", "after"]) -> str:
        return escape(cut(change_side(change, which), value_limit))

    changes = [
        texts.CARD_EDIT_CHANGE.format(
            key=escape(cut(change.name, MAX_LABEL)),
            before=side(change, "before"),
            after=side(change, "after"),
        )
        for change in outcome.changes[:max_facts]
    ]
    if len(outcome.changes) > max_facts:
        changes.append(texts.CARD_MORE_ARGS.format(count=len(outcome.changes) - max_facts))
    who = text_markdown(outcome.edit, limit=MAX_NAME)
    return texts.CARD_EDITED.format(mark=EDIT_MARK, who=who, changes="; ".join(changes))


def _question_card(
    prompt: Prompt, *, text_limit: int, hint_limit: int, inputs: bool = True
) -> dict[str, Any]:
    waiting = prompt.status == "waiting"
    body: list[dict[str, Any]] = [
        text_block(_question_title(prompt), weight="Bolder", size="Medium")
    ]
    if waiting and prompt.error:
        # The error may quote the reply it refuses: someone's own text.
        error = escape(cut(prompt.error, text_limit))
        body.append(text_block(texts.PROMPT_ERROR.format(error=error), color="Attention"))
    body.append(
        text_block(
            texts.PROMPT.format(
                tool=tool_name_text(prompt),
                question=escape(cut(prompt.question, text_limit)),
            )
        )
    )
    if len(prompt.agent_path) > 1:
        agent = escape(cut(agent_name(prompt.agent_path), MAX_NAME))
        body.append(text_block(texts.PROMPT_FROM.format(agent=agent), isSubtle=True, size="Small"))
    content: dict[str, Any] = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "fallbackText": escape(question_summary(prompt)),
        "msteams": {"width": "Full"},
        "body": body,
    }
    if not waiting:
        return content
    actions: list[dict[str, Any]] = []
    if prompt.form and inputs:
        body.extend(_field_input(field, hint_limit=hint_limit) for field in prompt.fields)
        data = question_data(prompt, "answer")
        actions.append(execute(texts.QUESTION_SEND, data, style="positive"))
    else:
        body.append(text_block(_reply_hint(prompt), isSubtle=True))
    actions += [
        execute(
            texts.DECLINE,
            question_data(prompt, "decline"),
            style="destructive",
            tooltip=texts.QUESTION_DECLINE_TOOLTIP,
            with_inputs=False,
        ),
        execute(
            texts.QUESTION_CANCEL,
            question_data(prompt, "cancel"),
            tooltip=texts.QUESTION_CANCEL_TOOLTIP,
            with_inputs=False,
        ),
    ]
    content["actions"] = actions
    return content


def _question_title(prompt: Prompt) -> str:
    outcome = question_outcome(prompt)
    if outcome is None:
        return texts.QUESTION_TITLE_WAITING
    return outcome_markdown(outcome)


def _reply_hint(prompt: Prompt) -> str:
    if not prompt.fields:
        return texts.QUESTION_REPLY
    labels = ", ".join(cut(field.label, MAX_LABEL) for field in prompt.fields)
    return texts.PROMPT_FIELDS.format(fields=escape(labels))


def _field_input(field: PromptField, *, hint_limit: int) -> dict[str, Any]:
    """One form input, holding the field's ``value`` when it has one (as given: an
    input's value is plain text); its label, placeholder and choice titles are too."""
    label = cut(field.label, MAX_LABEL)
    hint = cut(field.description, hint_limit) if field.description and hint_limit else None
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
            # Not ``isRequired``: a required toggle must be switched on, and off is an answer.
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
        element["errorMessage"] = texts.QUESTION_REQUIRED.format(label=label)
    return element


def card_title(card: ApprovalCard) -> str:
    """A card's first line: that it waits, or how it ended (markdown, escaped; a decline's
    reason is a line of its own below)."""
    outcome = card_outcome(card)
    if outcome is None:
        return texts.CARD_TITLE_PENDING
    return f"{outcome.mark} {text_markdown(outcome.headline, limit=_REASON_LIMIT)}"


def outcome_markdown(outcome: Outcome) -> str:
    """An outcome's mark and line ("✅ Approved by X"), as markdown: words escaped."""
    return f"{outcome.mark} {text_markdown(outcome.line, limit=_REASON_LIMIT)}"


def _action(
    card: ApprovalCard, action: Action, title: str, *, style: str, with_inputs: bool = True
) -> dict[str, Any]:
    return execute(title, action_data(card, action), style=style, with_inputs=with_inputs)


def _about(card: ApprovalCard) -> list[dict[str, str]]:
    agent = escape(cut(agent_name(card.agent_path), MAX_NAME))
    facts = [{"title": texts.CARD_AGENT, "value": agent}]
    if card.requester:
        facts.append({"title": texts.CARD_ASKED_BY, "value": person_text(card.requester)})
    if card.status == "pending" and card.quorum > 1:
        who = _people(card.approvals)
        value = texts.CARD_APPROVALS_SO_FAR.format(
            who=who or texts.CARD_NO_APPROVALS, count=len(card.approvals), quorum=card.quorum
        )
        facts.append({"title": texts.CARD_APPROVALS, "value": value})
    return facts


def _is_number(value: Any) -> bool:
    """Whether an Input.Number can hold ``value`` (JSON has no NaN or infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)
