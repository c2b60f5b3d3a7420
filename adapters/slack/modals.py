"""Modals -> Block Kit views: a Decline's reason, a question's answer form, a card's
edit form. Each carries the click that opened it in ``private_metadata``."""

from __future__ import annotations

import json
import re
from typing import Any, assert_never

from bot import Prompt, PromptField

from . import texts
from .blocks import REASON_LIMIT
from .mrkdwn import SECTION_LIMIT, Block, clip, cut, escape, plain, section
from .wire import (
    ANSWER_VIEW,
    DECLINE_VIEW,
    EDIT_VIEW,
    FIELD_INPUT,
    REASON_BLOCK,
    REASON_INPUT,
    RESPOND_VIEW,
    FormMetadata,
    ModalMetadata,
    encode_metadata,
    field_block,
)

LABEL_LIMIT = 2000
"""An input's label and hint."""
OPTION_TEXT_LIMIT = 75
OPTION_VALUE_LIMIT = 150
OPTIONS_LIMIT = 100
"""Options of one select menu."""
MODAL_BLOCKS_LIMIT = 100
TEXT_INPUT_LIMIT = 3000
"""What a ``plain_text_input`` holds (its ``max_length`` at most): a longer value
cannot be shown to start from."""
FORM_ERROR_LIMIT = 150
"""An error shown under a form's input: Slack shows a short line there."""

# What a number_input can start from: plain digits (no exponent), and for a whole
# number no more than 15 of them, which Slack's client holds exactly.
_WHOLE = re.compile(r"-?[0-9]{1,15}")
_DECIMAL = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,15})?")


def decline_modal(metadata: ModalMetadata) -> Block:
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


def answer_modal(metadata: ModalMetadata, question: Prompt) -> Block:
    """The form that answers a question: the question, then one input per field (as
    many as a modal holds), built from the question as it reads now."""
    shown = question.fields[: MODAL_BLOCKS_LIMIT - 1]
    return _form(
        metadata,
        question,
        shown,
        callback_id=ANSWER_VIEW,
        title=texts.FORM_TITLE,
        submit=texts.FORM_SUBMIT,
        close=texts.FORM_CLOSE,
    )


def respond_modal(metadata: ModalMetadata, form: Prompt) -> Block:
    """The form that answers in a tool's place: what it does, then the one text."""
    return _form(
        metadata,
        form,
        form.fields,
        callback_id=RESPOND_VIEW,
        title=texts.RESPOND_TITLE,
        submit=texts.RESPOND_SUBMIT,
        close=texts.RESPOND_CLOSE,
    )


def edit_modal(metadata: ModalMetadata, form: Prompt) -> Block | None:
    """The form that edits a card's arguments and approves them: its intro, then one
    input per argument, each starting from the card's value.

    ``None`` when Slack cannot carry every argument whole (more than a modal holds,
    a value longer than an input, too many names for the metadata): an input cut
    short or left out would run changed, so nothing should open.
    """
    if len(form.fields) > MODAL_BLOCKS_LIMIT - 1 or not all(map(_carried, form.fields)):
        return None
    try:
        return _form(
            metadata,
            form,
            form.fields,
            callback_id=EDIT_VIEW,
            title=texts.EDIT_TITLE,
            submit=texts.EDIT_SUBMIT,
            close=texts.EDIT_CLOSE,
        )
    except ValueError:  # the field names do not fit in private_metadata
        return None


def _form(
    metadata: ModalMetadata,
    prompt: Prompt,
    fields: tuple[PromptField, ...],
    *,
    callback_id: str,
    title: str,
    submit: str,
    close: str,
) -> Block:
    form = FormMetadata(**metadata.model_dump(), fields=tuple(f.name for f in fields))
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": encode_metadata(form),
        "title": plain(title),
        "submit": plain(submit),
        "close": plain(close),
        "blocks": [
            section(cut(escape(prompt.question), SECTION_LIMIT)[0]),
            *(_input(i, field) for i, field in enumerate(fields)),
        ],
    }


def form_error(message: str) -> str:
    """Why a form's answer was not taken, short enough to show under its input."""
    return clip(message, FORM_ERROR_LIMIT) or texts.FORM_REFUSED


def _input(index: int, field: PromptField) -> Block:
    block: Block = {
        "type": "input",
        "block_id": field_block(index),
        "optional": not field.required,
        "label": plain(clip(field.label.strip(), LABEL_LIMIT) or texts.FORM_UNNAMED),
        "element": _element(field),
    }
    if field.description and field.description.strip():
        block["hint"] = plain(clip(field.description.strip(), LABEL_LIMIT))
    return block


def _element(field: PromptField) -> Block:
    """The input element for a field, starting from its value if it has one.

    A choice Slack cannot list, and a value the element cannot show (a number with
    an exponent, a choice not among the choices), become a text input holding it:
    the core checks what comes back either way.
    """
    initial = initial_text(field.value)
    match field.kind:
        case "integer" | "number":
            pattern = _WHOLE if field.kind == "integer" else _DECIMAL
            if initial is None or pattern.fullmatch(initial):
                return _number(decimal=field.kind == "number", initial=initial)
            return _text(initial)
        case "boolean":
            return _select([(texts.FORM_YES, "true"), (texts.FORM_NO, "false")], initial)
        case "choice" if _listable(field.choices):
            choices = dict.fromkeys(field.choices)
            return _select([(clip(c, OPTION_TEXT_LIMIT), c) for c in choices], initial)
        case "text" | "choice":
            return _text(initial)
        case _:
            assert_never(field.kind)


def initial_text(value: Any) -> str | None:
    """A value as the form would send it back: text as it is, ``true``/``false``, a
    number's digits, anything else as JSON; ``None`` for no value."""
    match value:
        case None:
            return None
        case bool():
            return "true" if value else "false"
        case str():
            return value
        case int() | float():
            return repr(value)
        case _:
            return json.dumps(value, ensure_ascii=False, default=str)


def _carried(field: PromptField) -> bool:
    """Whether the field's input can start from its value whole."""
    return len(initial_text(field.value) or "") <= TEXT_INPUT_LIMIT


def _listable(choices: tuple[str, ...]) -> bool:
    return 0 < len(set(choices)) <= OPTIONS_LIMIT and all(
        c.strip() and len(c) <= OPTION_VALUE_LIMIT for c in choices
    )


def _number(*, decimal: bool, initial: str | None) -> Block:
    element: Block = {
        "type": "number_input",
        "action_id": FIELD_INPUT,
        "is_decimal_allowed": decimal,
    }
    if initial is not None:
        element["initial_value"] = initial
    return element


def _text(initial: str | None) -> Block:
    element: Block = {"type": "plain_text_input", "action_id": FIELD_INPUT}
    if initial:
        element["initial_value"] = initial
        if "\n" in initial:
            element["multiline"] = True
    return element


def _select(options: list[tuple[str, str]], initial: str | None) -> Block:
    """A select menu, on the option whose value is ``initial``; a text input holding
    ``initial`` when no option has it (the menu could not show it)."""
    listed = [{"text": plain(text), "value": value} for text, value in options]
    chosen = [option for option in listed if option["value"] == initial]
    if initial is not None and not chosen:
        return _text(initial)
    element: Block = {
        "type": "static_select",
        "action_id": FIELD_INPUT,
        "placeholder": plain(texts.FORM_CHOOSE),
        "options": listed,
    }
    if chosen:
        element["initial_option"] = chosen[0]
    return element
