"""Teams activities -> bot types: thread keys, messages, clicks, conversation references.

Threads: a channel conversation id carries its thread as
``19:...@thread.tacv2;messageid=<root>`` (a new top-level post has no suffix
yet: its own id is the root); personal and group chats are one thread each.
The workspace is the tenant.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final, Literal, Self

from botbuilder.core import TurnContext
from botbuilder.schema import Activity, ConversationReference
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bot import REASON_INPUT, Click, ClickAction, IncomingMessage, MessageRef, ThreadKey

from .cards import (
    FIELD_INPUT_PREFIX,
    INBOX,
    KIND,
    NOTICE_KIND,
    QUESTION_KIND,
    SHOWN_IN,
    STOP_KIND,
)
from .links import MESSAGE_ID, NO_TENANT

REFRESH_VERB: Final = "refresh"
"""The verb of an approval card's ``refresh`` action (``refresh.REFRESH_VERB``)."""
PLATFORM: Final = "teams"
CHAT_ROOT: Final = "chat"
"""The root of a chat's single thread (chats have no threads of their own)."""

_ACTIONS: Final = {
    KIND: ("approve", "decline", "edit", "grant", "never", "respond", "approve_all", "decline_all"),
    QUESTION_KIND: ("answer", "decline", "cancel"),
    NOTICE_KIND: ("revoke",),
}
"""What each kind of card sends: an approval is never answered, a question never approved."""
_WITH_VALUES: Final = ("answer", "edit", "respond")
"""The actions that send a form: a question's answer, an approval's edited arguments,
an answer in the tool's place."""
_FORM_VALUE: Final = (str, bool, int, float)
"""What an input's value may be (Teams sends text; a toggle's is "true"/"false")."""


class _ActionData(BaseModel):
    """The data our card actions send back (inputs such as the reason are merged in)."""

    model_config = ConfigDict(extra="ignore")

    kind: Literal["approval", "question", "notice"]
    action: ClickAction
    run_id: str = Field(min_length=1)
    tool_call_id: str = Field(min_length=1)
    reason: str | None = None
    grant_for: str | None = Field(default=None, min_length=1, strict=True)
    """A grant's duration (``"1h"``): the core takes only one of the card's."""
    ask: str | None = Field(default=None, strict=True)
    """The card's ask (``ApprovalCard.ask``); cards posted before it was sent have none."""

    @model_validator(mode="after")
    def _action_of_its_kind(self) -> Self:
        if self.action not in _ACTIONS[self.kind]:
            raise ValueError(f"a {self.kind} card has no {self.action!r} action")
        if self.action in ("grant", "never") and self.grant_for is None:
            raise ValueError(f"a {self.action} says for how long")
        return self


def is_channel(activity: Activity | ConversationReference) -> bool:
    """Whether the activity (or a reference) is in a team channel (else a personal or
    group chat)."""
    conversation = activity.conversation
    kind = getattr(conversation, "conversation_type", None)
    if kind:
        return bool(kind == "channel")
    return MESSAGE_ID in conversation.id


def is_personal(activity: Activity | ConversationReference) -> bool:
    """Whether the activity (or a reference) is in a one-to-one chat with the bot.

    Teams always names the conversation type; the Bot Framework Emulator names none
    for its one-to-one conversations (nor a group), so one without a type counts too.
    """
    conversation = activity.conversation
    kind = getattr(conversation, "conversation_type", None)
    if kind:
        return bool(kind == "personal")
    return not getattr(conversation, "is_group", None) and not is_channel(activity)


def thread_of(activity: Activity) -> ThreadKey:
    """The thread an activity belongs to."""
    conversation_id: str = activity.conversation.id
    tenant = _tenant(activity)
    if is_channel(activity):
        channel, _, root = conversation_id.partition(MESSAGE_ID)
        return ThreadKey(
            platform=PLATFORM, workspace=tenant, channel=channel, root=root or activity.id or ""
        )
    return ThreadKey(platform=PLATFORM, workspace=tenant, channel=conversation_id, root=CHAT_ROOT)


def reference_of(activity: Activity, thread: ThreadKey) -> dict[str, Any]:
    """The conversation reference (JSON) that posts into the activity's thread later."""
    reference = TurnContext.get_conversation_reference(activity)
    # A copy to change, not the activity's own: shallow, as only its own fields change
    # (not a JSON round trip: this runs before every message's ack).
    conversation = copy.copy(activity.conversation)
    if is_channel(activity):
        # A new top-level post has no ``;messageid=`` yet; replies must carry it.
        conversation.id = f"{thread.channel}{MESSAGE_ID}{thread.root}"
    if thread.workspace != NO_TENANT:
        conversation.tenant_id = thread.workspace
    reference.conversation = conversation
    serialized: dict[str, Any] = reference.serialize()
    return serialized


def mentions_bot(activity: Activity) -> bool:
    """Whether the message @mentions the bot."""
    bot_id = getattr(activity.recipient, "id", None)
    return any(_mentioned_id(entity) == bot_id for entity in _mentions(activity))


def message_text(activity: Activity) -> str:
    """The message text without the bot's @mention, stripped.

    ``TurnContext.remove_recipient_mention`` deletes every occurrence of the
    bot's name (not just the mention) and leaves whitespace behind; this removes
    the mention markup only.
    """
    text: str = activity.text or ""
    bot_id = getattr(activity.recipient, "id", None)
    for entity in _mentions(activity):
        if _mentioned_id(entity) != bot_id:
            continue
        props = entity.additional_properties
        name = (props.get("mentioned") or {}).get("name") or ""
        for form in (props.get("text"), f"<at>{name}</at>" if name else None):
            if form:
                text = text.replace(form, "")
    return text.strip()


def incoming_message(activity: Activity, thread: ThreadKey) -> IncomingMessage:
    """A person's message; redeliveries of the same activity share its dedupe key."""
    user_id, user_name = _user(activity)
    return IncomingMessage(
        thread=thread,
        user_id=user_id,
        user_name=user_name,
        text=message_text(activity),
        dedupe_keys=(f"activity:{thread.channel}:{activity.id}",),
    )


def execute_click(activity: Activity, thread: ThreadKey) -> Click | None:
    """The click of an ``adaptiveCard/action`` invoke (Action.Execute), or ``None``."""
    value = activity.value if isinstance(activity.value, dict) else {}
    action = value.get("action")
    if not isinstance(action, dict) or action.get("type", "Action.Execute") != "Action.Execute":
        return None
    data = action.get("data")
    if not isinstance(data, dict) or data.get("action") != action.get("verb"):
        return None
    return _click(activity, thread, data)


class _RefreshData(BaseModel):
    """The data of an approval card's ``refresh`` action (``refresh.block``)."""

    model_config = ConfigDict(extra="ignore")

    kind: Literal["approval"]
    action: Literal["refresh"]
    run_id: str = Field(min_length=1)
    tool_call_id: str = Field(min_length=1)
    ask: str | None = Field(default=None, strict=True)


def refresh_click(activity: Activity, thread: ThreadKey) -> Click | None:
    """An approval card's refresh (an ``adaptiveCard/action`` invoke with the verb
    ``refresh``, Teams' ``trigger: automatic`` or a person's Refresh) as the click that
    names its card for ``ChatCore.card_now``, else ``None``. Its ``action`` is no
    decision: ``card_now`` reads only the ids."""
    value = activity.value if isinstance(activity.value, dict) else {}
    action = value.get("action")
    if not isinstance(action, dict) or action.get("verb") != REFRESH_VERB:
        return None
    try:
        data = _RefreshData.model_validate(action.get("data"))
    except ValidationError:
        return None
    user_id, user_name = _user(activity)
    return Click(
        thread=thread,
        user_id=user_id,
        user_name=user_name,
        run_id=data.run_id,
        tool_call_id=data.tool_call_id,
        action="approve",
        ask=data.ask or None,
    )


class _StopData(BaseModel):
    """The data of Stop under the text before a card (``cards.buttons_card``)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    kind: Literal["stop"]
    action: Literal["stop"]
    run_id: str = Field(min_length=1)


@dataclass(frozen=True, kw_only=True)
class StopPress:
    """A person pressed Stop for the run ``run_id`` in ``thread``."""

    thread: ThreadKey
    user_id: str
    run_id: str


def is_stop(activity: Activity) -> bool:
    """Whether an activity is a press of Stop: an ``adaptiveCard/action`` invoke with its
    verb, or its Action.Submit fallback (a message whose ``value`` is of its kind)."""
    value = activity.value if isinstance(activity.value, dict) else {}
    if activity.type == "invoke":
        action = value.get("action")
        return isinstance(action, dict) and action.get("verb") == STOP_KIND
    return value.get("kind") == STOP_KIND


def stop_press(activity: Activity, thread: ThreadKey) -> StopPress | None:
    """The Stop a press (``is_stop``) carries, or ``None`` when its data is malformed."""
    data: Any = activity.value if isinstance(activity.value, dict) else None
    if activity.type == "invoke" and data is not None:
        action = data.get("action")
        data = action.get("data") if isinstance(action, dict) else None
    try:
        parsed = _StopData.model_validate(data)
    except ValidationError:
        return None
    user_id, _ = _user(activity)
    return StopPress(thread=thread, user_id=user_id, run_id=parsed.run_id)


class _FeedbackAction(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    reaction: Literal["like", "dislike"]
    feedback: str | dict[str, Any] | None = None
    """What the person wrote in Teams' form (JSON text); the bot keeps only the rating."""


class _FeedbackValue(BaseModel):
    """The value of a ``message/submitAction`` invoke from Teams' feedback buttons."""

    model_config = ConfigDict(extra="ignore", strict=True)

    actionName: Literal["feedback"]
    actionValue: _FeedbackAction


@dataclass(frozen=True, kw_only=True)
class Rating:
    """A person's 👍 / 👎 on one of the bot's messages (``message_id``)."""

    thread: ThreadKey
    user_id: str
    message_id: str
    helpful: bool


def rating(activity: Activity, thread: ThreadKey) -> Rating | None:
    """The rating a ``message/submitAction`` invoke carries, or ``None`` when it is not a
    well-formed one (no such action, a field missing or of the wrong type, no message)."""
    try:
        value = _FeedbackValue.model_validate(activity.value)
    except ValidationError:
        return None
    if not isinstance(activity.reply_to_id, str) or not activity.reply_to_id:
        return None
    user_id, _ = _user(activity)
    return Rating(
        thread=thread,
        user_id=user_id,
        message_id=activity.reply_to_id,
        helpful=value.actionValue.reaction == "like",
    )


def viewer_ids(activity: Activity) -> tuple[str, ...]:
    """Every id the sender goes by: their Entra object id and their Teams (``29:``) id."""
    person = activity.from_property
    ids = (getattr(person, "aad_object_id", None), getattr(person, "id", None))
    return tuple(str(i) for i in ids if i)


def submit_click(activity: Activity, thread: ThreadKey) -> Click | None:
    """The click of an Action.Submit fallback (a message carrying ``value``), or ``None``."""
    if not isinstance(activity.value, dict):
        return None
    return _click(activity, thread, activity.value)


def shown_in_inbox(activity: Activity) -> bool:
    """Whether a click (an Action.Execute, or its submit fallback) came from a button of
    the ``approvals`` list rather than a card."""
    data: Any = activity.value if isinstance(activity.value, dict) else {}
    if activity.type == "invoke":
        action = data.get("action")
        data = action.get("data") if isinstance(action, dict) else None
    return isinstance(data, dict) and data.get(SHOWN_IN) == INBOX


def is_submit(activity: Activity) -> bool:
    """Whether a message activity is one of our cards' submits rather than text."""
    return isinstance(activity.value, dict) and activity.value.get("kind") in (
        *_ACTIONS,
        STOP_KIND,
    )


def message_ref(activity_id: str | None, conversation_id: str) -> MessageRef:
    """Where a posted message lives: what ``update`` needs to replace it."""
    return {"activity_id": activity_id, "conversation_id": conversation_id}


# -- internals -------------------------------------------------------------------


def _click(activity: Activity, thread: ThreadKey, data: dict[str, Any]) -> Click | None:
    try:
        parsed = _ActionData.model_validate(data)
    except ValidationError:
        return None
    with_values = parsed.action in _WITH_VALUES
    values = _form_values(data) if with_values else None
    if with_values and values is None:
        return None
    user_id, user_name = _user(activity)
    reason = data.get(REASON_INPUT)
    return Click(
        thread=thread,
        user_id=user_id,
        user_name=user_name,
        run_id=parsed.run_id,
        tool_call_id=parsed.tool_call_id,
        action=parsed.action,
        reason=(reason.strip() or None) if isinstance(reason, str) else None,
        message_ref=message_ref(activity.reply_to_id, activity.conversation.id)
        if activity.reply_to_id
        else None,
        values=values,
        grant_for=parsed.grant_for if parsed.action in ("grant", "never") else None,
        ask=(parsed.ask or None) if parsed.kind == KIND else None,
    )


def _form_values(data: dict[str, Any]) -> dict[str, Any] | None:
    """A form's input values by field name, or ``None`` when one is not a plain value."""
    values = {
        key.removeprefix(FIELD_INPUT_PREFIX): value
        for key, value in data.items()
        if isinstance(key, str) and key.startswith(FIELD_INPUT_PREFIX)
    }
    if not all(value is None or isinstance(value, _FORM_VALUE) for value in values.values()):
        return None
    return values


def _user(activity: Activity) -> tuple[str, str | None]:
    """The person's stable id (their Entra object id when Teams sends it) and name."""
    person = activity.from_property
    if person is None:
        return "", None
    user_id = getattr(person, "aad_object_id", None) or person.id or ""
    return str(user_id), getattr(person, "name", None)


def _tenant(activity: Activity) -> str:
    conversation = activity.conversation
    # The schema spells it ``tenantID``; Teams sends ``tenantId`` (and channelData.tenant).
    tenant = getattr(conversation, "tenant_id", None) or (
        conversation.additional_properties or {}
    ).get("tenantId")
    if not tenant and isinstance(activity.channel_data, dict):
        tenant = (activity.channel_data.get("tenant") or {}).get("id")
    return str(tenant) if tenant else NO_TENANT


def _mentions(activity: Activity) -> list[Any]:
    return [e for e in activity.entities or [] if (e.type or "").lower() == "mention"]


def _mentioned_id(entity: Any) -> str | None:
    mentioned = entity.additional_properties.get("mentioned")
    return mentioned.get("id") if isinstance(mentioned, dict) else None


BOT_ID_PREFIX = "28:"
"""Teams gives bot accounts ids starting ``28:`` (people's start ``29:``)."""


def from_a_bot(activity: Activity) -> bool:
    """Whether an activity was sent by a bot: this one (its own post echoed) or another."""
    sender, recipient = activity.from_property, activity.recipient
    if sender is None or not sender.id:
        return False
    return (
        sender.id.startswith(BOT_ID_PREFIX)
        or getattr(sender, "role", None) == "bot"
        or (recipient is not None and sender.id == recipient.id)
    )
