"""What the adapter puts into Slack and reads back: ids, button values, modal metadata.

Both directions live here so that rendering (``blocks``) and parsing (``convert``)
cannot drift apart.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot import PostKind, PostMark

from . import texts

APPROVE_ACTION = "approval_approve"
DECLINE_ACTION = "approval_decline"
EDIT_ACTION = "approval_edit"
GRANT_ACTION = "approval_grant"
"""Starts the ``action_id`` of each "Approve for this thread" button (``approval_grant:0``,
``approval_grant:1``...): Slack wants the ids in one block unique, so each has its index."""
GRANT_ACTION_ID = re.compile(rf"^{GRANT_ACTION}:[0-9]{{1,2}}\Z")
NEVER_ACTION = "approval_never"
"""Starts the ``action_id`` of each "Decline, don't ask again here" button, by index."""
NEVER_ACTION_ID = re.compile(rf"^{NEVER_ACTION}:[0-9]{{1,2}}\Z")
EDIT_VIEW = "approval_edit_form"
APPROVE_ALL_ACTION = "approval_approve_all"
DECLINE_ALL_ACTION = "approval_decline_all"
"""Approve all and Decline all on a card of several calls (each decides at once)."""
RESPOND_ACTION = "approval_respond"
RESPOND_VIEW = "approval_respond_form"
"""Respond instead: its button opens a form of one text, the answer in the tool's place."""
DECLINE_VIEW = "approval_decline_reason"
REASON_BLOCK = "reason"
REASON_INPUT = "reason"

REVOKE_ACTION = "approval_revoke"
"""The "End grant" button on the notice of a call that ran under a grant."""

FEEDBACK_ACTION = "answer_feedback"
"""The 👍 / 👎 under a finished answer; each button's value is ``FEEDBACK_VALUE``."""
FEEDBACK_HELPFUL = "helpful:"
FEEDBACK_UNHELPFUL = "unhelpful:"
"""A feedback button's value: one of these, then the run's id."""

STOP_ACTION = "stop_run"
"""The Stop under the text before a card or question; its value is the run's id."""
STOP_VALUE = re.compile(r"^[A-Za-z0-9_./:-]{1,255}\Z")
"""The shape of a run id (an intake entry's run names its entry: ``run_inbox_6/1796000000000-0``): a
Stop button's value of any other shape is none the bot issued."""

HOME_OPENED_EVENT = "app_home_opened"
"""A person opened the bot's App Home (its Home tab, or its Messages tab)."""
CONTEXT_CHANGED_EVENT = "app_context_changed"
"""Agent messaging: what a person looks at in Slack changed while the bot's direct
message was open beside it."""
ASSISTANT_STARTED_EVENT = "assistant_thread_started"
"""A person opened the bot's assistant view (apps still on ``assistant_view``): a new
thread in their direct message."""
ASSISTANT_CONTEXT_EVENT = "assistant_thread_context_changed"
"""The assistant view's ``app_context_changed``: the channel a person looks at changed."""
MESSAGES_TAB = "messages"
"""The App Home tab of the bot's direct message (``app_home_opened``'s ``tab``), which
agent messaging opens a conversation with."""
HOME_TAB = "home"
"""The bot's Home tab (``app_home_opened``'s ``tab``): each person's approvals inbox."""
HOME_CHANNEL = "home"
"""The channel of the place a click in someone's Home tab happened (root ``""``): the
Home is no conversation, and no Slack channel id is lowercase."""

APPROVALS_COMMAND = "/approvals"
"""The slash command that shows a person's inbox (``/approvals revoke``: end grants)."""

ANSWER_ACTION = "question_answer"
QUESTION_DECLINE_ACTION = "question_decline"
QUESTION_CANCEL_ACTION = "question_cancel"
ANSWER_VIEW = "question_answer_form"
FIELD_BLOCK = "field-{index}"
FIELD_INPUT = "value"

BUTTON_VALUE_LIMIT = 2000
PRIVATE_METADATA_LIMIT = 3000

POST_EVENT = "approval_bot_post"
"""The ``event_type`` of the message metadata each marked post carries (letters, digits,
``_`` and ``-`` only: Slack ignores metadata of any other type, with a warning)."""


class PayloadError(ValueError):
    """A request Slack signed but whose content does not make sense: answered with 400."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class _Compact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def dump(self) -> str:
        # Unset optional fields stay out: values and metadata issued before they
        # existed read the same as new ones without them.
        shown = self.model_dump(exclude_none=True)
        return json.dumps(shown, separators=(",", ":"), ensure_ascii=False)


class ButtonValue(_Compact):
    """The pending call a button decides: ``{"run": ..., "call": ..., "ask": ...}``.

    ``ask`` is the card's ``ApprovalCard.ask`` (which asking of the call it shows);
    absent on questions' buttons, the End grant button, and cards issued before it.
    """

    run: str = Field(min_length=1)
    call: str = Field(min_length=1)
    ask: str | None = Field(default=None, min_length=1)


class GrantValue(ButtonValue):
    """An "Approve for this thread" button's: the call, and for how long (``"1h"``), one
    of the card's durations (the core refuses any other)."""

    grant: str = Field(min_length=1)


Value = TypeVar("Value", bound=ButtonValue)


class ModalMetadata(_Compact):
    """Carried by a modal from the click that opened it to its submission.

    ``ts`` is the clicked message; absent (and ``root`` empty, unless the inbox is
    in a thread) for a click in an inbox, a message only its reader sees, which is
    answered through ``response_url`` instead. ``ask`` as on the button.
    """

    run: str = Field(min_length=1)
    call: str = Field(min_length=1)
    team: str = Field(min_length=1)
    channel: str = Field(min_length=1)
    root: str
    ts: str | None = Field(default=None, min_length=1)
    ask: str | None = Field(default=None, min_length=1)
    response_url: str | None = Field(default=None, min_length=1)


class FormMetadata(ModalMetadata):
    """A form's metadata (a question's answer, a card's edited arguments): also the
    field names, in the order of the inputs."""

    fields: tuple[str, ...] = Field(min_length=1)


Metadata = TypeVar("Metadata", bound=ModalMetadata)


class PostPayload(_Compact):
    """The ``event_payload`` of a marked post: which post it is (``PostMark``), ids only,
    since any app or person in the workspace may read a message's metadata."""

    run: str = Field(min_length=1)
    post: PostKind
    call: str | None = Field(default=None, min_length=1)
    ask: str | None = Field(default=None, min_length=1)
    cause: str | None = Field(default=None, min_length=1)


def encode_button_value(
    run_id: str, tool_call_id: str, *, grant_for: str | None = None, ask: str | None = None
) -> str:
    """The button ``value`` for one pending call, with the duration of an "Approve for
    this thread" button and the card's ``ask`` (raises if it cannot fit)."""
    ask = ask or None  # a card that does not say which asking it shows carries none
    value = (
        ButtonValue(run=run_id, call=tool_call_id, ask=ask)
        if grant_for is None
        else GrantValue(run=run_id, call=tool_call_id, grant=grant_for, ask=ask)
    ).dump()
    if len(value) > BUTTON_VALUE_LIMIT:
        raise ValueError(f"button value of {len(value)} characters exceeds Slack's limit")
    return value


@overload
def decode_button_value(value: str | None) -> ButtonValue: ...


@overload
def decode_button_value(value: str | None, model: type[Value]) -> Value: ...


def decode_button_value(value: str | None, model: type[ButtonValue] = ButtonValue) -> ButtonValue:
    """Parse a button ``value`` of the ``model`` its button carries (a grant's has its
    duration, no other has one); ``PayloadError`` when it is not one of ours."""
    try:
        return model.model_validate_json(value or "")
    except ValidationError:
        raise PayloadError(texts.BAD_ACTION_VALUE) from None


def encode_stop_value(run_id: str) -> str:
    """A Stop button's ``value``: the run's id (raises if it does not look like one)."""
    if not STOP_VALUE.search(run_id):
        raise ValueError(f"run id {run_id!r} cannot be a Stop button's value")
    return run_id


def decode_stop_value(value: str | None) -> str:
    """The run a Stop button names; ``PayloadError`` when the bot never issued ``value``."""
    if value is None or not STOP_VALUE.search(value):
        raise PayloadError(texts.BAD_ACTION_VALUE)
    return value


def grant_action(index: int) -> str:
    """The ``action_id`` of a card's ``index``-th "Approve for this thread" button."""
    return f"{GRANT_ACTION}:{index}"


def never_action(index: int) -> str:
    """The ``action_id`` of a card's ``index``-th "Decline, don't ask again here" button."""
    return f"{NEVER_ACTION}:{index}"


def field_block(index: int) -> str:
    """The ``block_id`` of the form's input for its ``index``-th field."""
    return FIELD_BLOCK.format(index=index)


def encode_metadata(metadata: ModalMetadata) -> str:
    """The modal's ``private_metadata``."""
    value = metadata.dump()
    if len(value) > PRIVATE_METADATA_LIMIT:
        raise ValueError(f"private_metadata of {len(value)} characters exceeds Slack's limit")
    return value


def decode_metadata(value: str | None, model: type[Metadata]) -> Metadata:
    """Parse a modal's ``private_metadata``; ``PayloadError`` when it is not ours."""
    try:
        return model.model_validate_json(value or "")
    except ValidationError:
        raise PayloadError(texts.BAD_VIEW_METADATA) from None


def post_metadata(mark: PostMark) -> dict[str, Any]:
    """The ``metadata`` of a marked post (``chat.postMessage``, ``chat.stopStream``)."""
    payload = PostPayload(
        run=mark.run_id, post=mark.post, call=mark.call, ask=mark.ask, cause=mark.cause
    )
    return {"event_type": POST_EVENT, "event_payload": payload.model_dump(exclude_none=True)}


def mark_of(metadata: object) -> PostMark | None:
    """The mark a message's ``metadata`` holds (read back with ``include_all_metadata``),
    or ``None``: no metadata, another app's, or not one this code wrote."""
    if not isinstance(metadata, dict) or metadata.get("event_type") != POST_EVENT:
        return None
    try:
        payload = PostPayload.model_validate(metadata.get("event_payload"))
    except ValidationError:
        return None
    return PostMark(
        run_id=payload.run,
        post=payload.post,
        call=payload.call,
        ask=payload.ask,
        cause=payload.cause,
    )
