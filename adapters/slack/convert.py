"""Slack payloads -> bot types, in two steps.

``parse`` runs right after Bolt checked the signature and before anything else
reads the body: it validates the shape (``PayloadError`` -> HTTP 400) and sorts
the request into what the adapter acts on and what it only acknowledges. A
malformed event is acknowledged too (``Ignored.malformed``): Slack would only send
it again, then drop it, and in the end turn the app's events off.
``to_incoming``/``to_click`` then build the chat-neutral types once Bolt knows who
the bot is (its user id for mention stripping, its workspace for thread keys).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from bot import Click, ClickAction, IncomingMessage, ThreadKey

from . import texts
from .viewing import describe, describe_assistant
from .wire import (
    ANSWER_ACTION,
    ANSWER_VIEW,
    APPROVALS_COMMAND,
    APPROVE_ACTION,
    APPROVE_ALL_ACTION,
    ASSISTANT_CONTEXT_EVENT,
    ASSISTANT_STARTED_EVENT,
    CONTEXT_CHANGED_EVENT,
    DECLINE_ACTION,
    DECLINE_ALL_ACTION,
    DECLINE_VIEW,
    EDIT_ACTION,
    EDIT_VIEW,
    FEEDBACK_ACTION,
    FEEDBACK_HELPFUL,
    FEEDBACK_UNHELPFUL,
    FIELD_INPUT,
    GRANT_ACTION_ID,
    HOME_CHANNEL,
    HOME_OPENED_EVENT,
    HOME_TAB,
    MESSAGES_TAB,
    NEVER_ACTION_ID,
    QUESTION_CANCEL_ACTION,
    QUESTION_DECLINE_ACTION,
    REASON_BLOCK,
    REASON_INPUT,
    RESPOND_ACTION,
    RESPOND_VIEW,
    REVOKE_ACTION,
    STOP_ACTION,
    ButtonValue,
    FormMetadata,
    GrantValue,
    ModalMetadata,
    PayloadError,
    decode_button_value,
    decode_metadata,
    decode_stop_value,
    field_block,
)

PLATFORM = "slack"

# Subtypes that are still a person writing; every other subtype (edits, deletions,
# joins, bot messages, ...) is not addressed to the agent.
_PERSON_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
_PASSTHROUGH_TYPES = frozenset({"url_verification", "ssl_check"})
_UNESCAPES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))
_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate (JSON may spell one, ``"\\ud800"``): no store and no platform takes
one. A pair is one character once parsed, so every surrogate left is a lone one."""
_U_ESCAPES = ("\\u", "%5Cu", "%5cu", "%75")
"""How the start of a JSON ``\\u`` escape reads in a raw body, JSON or form-encoded."""
_REPLACEMENT = "\ufffd"
"""What stands for an unreadable character in a person's words (as in any UTF-8 decoder)."""
_ACTIONS: dict[str, ClickAction] = {
    APPROVE_ACTION: "approve",
    DECLINE_ACTION: "decline",
    EDIT_ACTION: "edit",
    RESPOND_ACTION: "respond",
    APPROVE_ALL_ACTION: "approve_all",
    DECLINE_ALL_ACTION: "decline_all",
    ANSWER_ACTION: "answer",
    QUESTION_DECLINE_ACTION: "decline",
    QUESTION_CANCEL_ACTION: "cancel",
    REVOKE_ACTION: "revoke",
}
FormAction = Literal["answer", "edit", "respond"]
_FORMS: dict[str, FormAction] = {ANSWER_VIEW: "answer", EDIT_VIEW: "edit", RESPOND_VIEW: "respond"}


# -- what parse() returns ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Passthrough:
    """A request Bolt answers itself (URL verification, SSL check)."""


@dataclass(frozen=True, kw_only=True)
class Ignored:
    """Acknowledged, not for the agent: a bot's message, an edit, ..., or (``malformed``)
    an event the bot cannot read."""

    why: str
    malformed: bool = False


MessageKind = Literal["mention", "direct", "thread_reply", "group"]


@dataclass(frozen=True, kw_only=True)
class MessageIn:
    """A person wrote: a mention, a DM, a reply in a channel thread, or anything in a
    group DM.

    ``thread_reply`` counts only when the bot is active in that thread. A ``group``
    message (a group DM, where several people talk among themselves) is for the bot
    as in a channel: when it mentions the bot, or replies in a thread the bot is in.
    """

    kind: MessageKind
    event_id: str
    team: str
    channel: str
    ts: str
    thread_ts: str | None
    user: str
    text: str
    context: str | None = None
    """What the person looked at as they wrote, when Slack folded it into the message
    (agent messaging's ``app_context``), in words."""

    @property
    def root(self) -> str:
        """The thread root: ``thread_ts or ts``."""
        return self.thread_ts or self.ts


@dataclass(frozen=True, kw_only=True)
class ActionIn:
    """A button pressed: Approve, Decline, Edit or "Approve for this thread" on a card
    (its ``value`` then a ``GrantValue``), Answer…, Decline or Cancel on a question,
    End grant on a grant's notice.

    ``ephemeral``: pressed in a message only the presser sees (the ``/approvals``
    inbox), which cannot be updated like a posted one: it is answered through
    ``response_url``, and its ``root`` is the thread it is in (``""``: none).
    ``home``: pressed in the presser's Home tab, which is in no conversation: its
    ``channel`` is ``HOME_CHANNEL``, its ``root`` and ``message_ts`` are ``""``.
    """

    action: ClickAction
    value: ButtonValue
    team: str
    user: str
    channel: str
    message_ts: str
    root: str
    trigger_id: str
    ephemeral: bool = False
    response_url: str | None = None
    home: bool = False

    @property
    def in_message(self) -> bool:
        """Whether it was pressed in a message everyone in its channel sees (one the
        core can update), not an inbox."""
        return not (self.ephemeral or self.home)


@dataclass(frozen=True, kw_only=True)
class HomeOpenedIn:
    """A person opened the bot's Home tab."""

    team: str
    user: str


@dataclass(frozen=True, kw_only=True)
class MessagesOpenedIn:
    """A person opened their direct message with the bot (its Messages tab), where agent
    messaging holds their conversations; ``context``: what they look at beside it, in
    words, when Slack said (``""``: nothing in particular)."""

    team: str
    user: str
    channel: str
    context: str | None = None


@dataclass(frozen=True, kw_only=True)
class ViewingIn:
    """What a person looks at beside the bot's direct message changed (agent messaging's
    ``app_context_changed``, the assistant view's ``assistant_thread_context_changed``):
    ``context`` in words, ``""`` for nothing in particular."""

    team: str
    user: str
    context: str


@dataclass(frozen=True, kw_only=True)
class AssistantStartedIn:
    """A person opened the bot's assistant view: a new thread (``thread_ts``) in their
    direct message with the bot (``channel``), looking at ``context`` (in words)."""

    team: str
    user: str
    channel: str
    thread_ts: str
    context: str = ""


@dataclass(frozen=True, kw_only=True)
class FeedbackIn:
    """👍 (``helpful``) or 👎 pressed under a finished answer, the run's."""

    team: str
    user: str
    channel: str
    root: str
    run_id: str
    helpful: bool


@dataclass(frozen=True, kw_only=True)
class StopIn:
    """Stop pressed under the text before a card or question, naming the run."""

    team: str
    user: str
    channel: str
    root: str
    run_id: str


@dataclass(frozen=True, kw_only=True)
class ForeignActionIn:
    """One of the bot's buttons pressed with a value the bot never issued."""

    team: str
    user: str
    channel: str
    root: str
    response_url: str | None = None


@dataclass(frozen=True, kw_only=True)
class CommandIn:
    """``/approvals`` (``text`` is what follows it), to be answered through
    ``response_url``, privately. ``root`` is the thread it was typed in (``""``: none)."""

    team: str
    user: str
    channel: str
    root: str
    text: str
    response_url: str


@dataclass(frozen=True, kw_only=True)
class ViewIn:
    """The decline modal was submitted."""

    user: str
    metadata: ModalMetadata
    reason: str | None


@dataclass(frozen=True, kw_only=True)
class FormIn:
    """A form was submitted (a question's answer, a card's edited arguments): its raw
    values by field name."""

    action: FormAction
    user: str
    metadata: FormMetadata
    values: dict[str, str | None]


Inbound = (
    Passthrough
    | Ignored
    | MessageIn
    | ActionIn
    | HomeOpenedIn
    | MessagesOpenedIn
    | ViewingIn
    | AssistantStartedIn
    | FeedbackIn
    | StopIn
    | ForeignActionIn
    | ViewIn
    | FormIn
    | CommandIn
)


# -- the shapes we accept (extra fields are Slack's business) ---------------------


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _plain(value: str) -> str:
    if not value.isascii():
        raise ValueError("a Slack id or timestamp is ASCII")
    return value


_Id = Annotated[str, AfterValidator(_plain)]
"""A Slack id or timestamp in an event: one with a character an id never has (such as a
lone surrogate, replaced) names nobody and nothing, and the event is not read."""


class _AssistantThread(_Shape):
    user_id: _Id
    channel_id: _Id
    thread_ts: _Id
    context: Any = None


class _Event(_Shape):
    type: str
    subtype: str | None = None
    bot_id: str | None = None
    hidden: bool = False
    user: _Id | None = None
    text: str | None = None
    channel: _Id | None = None
    channel_type: str | None = None
    ts: _Id | None = None
    thread_ts: _Id | None = None
    tab: str | None = None
    assistant_thread: _AssistantThread | None = None
    context: Any = None
    """What the person looks at (``app_context_changed``, ``app_home_opened``)."""
    app_context: Any = None
    """The same, folded into a direct message."""


class _EventCallback(_Shape):
    type: Literal["event_callback"]
    event_id: _Id
    team_id: _Id
    event: _Event


class _Team(_Shape):
    id: str


class _User(_Shape):
    id: str
    team_id: str | None = None


class _Action(_Shape):
    action_id: str
    value: str | None = None


class _Container(_Shape):
    type: str = "message"
    channel_id: str | None = None
    message_ts: str | None = None
    thread_ts: str | None = None
    is_ephemeral: bool = False


class _ActionView(_Shape):
    """The view a button was pressed in (a Home tab, a modal)."""

    type: str


class _Message(_Shape):
    ts: str
    thread_ts: str | None = None


class _BlockActions(_Shape):
    type: Literal["block_actions"]
    user: _User
    team: _Team | None = None
    trigger_id: str
    actions: list[_Action]
    container: _Container
    message: _Message | None = None
    view: _ActionView | None = None
    response_url: str | None = None


class _View(_Shape):
    callback_id: str
    private_metadata: str = ""
    state: dict[str, Any] = {}


class _ViewSubmission(_Shape):
    type: Literal["view_submission"]
    user: _User
    view: _View


class _Typed(_Shape):
    type: str


class _Command(_Shape):
    command: str
    text: str = ""
    team_id: str
    channel_id: str
    user_id: str
    response_url: str
    thread_ts: str | None = None


# -- step 1: shape and routing ----------------------------------------------------


def parse(body: Any) -> Inbound:
    """Validate a request body and say what it is; ``PayloadError`` when it is malformed."""
    try:
        if isinstance(body, dict) and "command" in body and "type" not in body:
            return _parse_command(_Command.model_validate(body))
        kind = _Typed.model_validate(body).type
        if kind in _PASSTHROUGH_TYPES:
            return Passthrough()
        if kind == "event_callback":
            return _parse_event_callback(body)
        if kind == "block_actions":
            return _parse_action(_BlockActions.model_validate(body))
        if kind == "view_submission":
            return _parse_view(_ViewSubmission.model_validate(body))
    except ValidationError:
        raise PayloadError(texts.BAD_PAYLOAD) from None
    return Ignored(why=f"payload type {kind}")


def is_event(body: Any) -> bool:
    """Whether a request body is an Events API delivery (``event_callback``)."""
    return isinstance(body, dict) and body.get("type") == "event_callback"


def may_hold_lone_surrogate(raw_body: str) -> bool:
    """Whether a request body might hold a lone surrogate once parsed; ``False`` when it
    cannot, which spares a walk over the parsed body.

    ``raw_body`` is the text Bolt parsed (``""`` in Socket Mode, where it might). Text
    without one gets one only from a JSON ``\\u`` escape, whose backslash and ``u``
    a form body may also spell ``%5C`` and ``%75``; form decoding replaces any other
    byte that is no UTF-8.
    """
    if not raw_body:
        return True
    if not raw_body.isascii():
        try:
            raw_body.encode()
        except UnicodeEncodeError:
            return True
    return any(escape in raw_body for escape in _U_ESCAPES)


def without_lone_surrogates(body: Any) -> Any:
    """A parsed JSON body with each lone surrogate replaced by ``_REPLACEMENT``, in keys
    and values at any depth."""
    if isinstance(body, str):
        return _SURROGATE.sub(_REPLACEMENT, body)
    if isinstance(body, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in body.items()}
    if isinstance(body, list):
        return [without_lone_surrogates(item) for item in body]
    return body


def _parse_event_callback(body: Any) -> Inbound:
    """An event, or (malformed) ``Ignored``: never a ``PayloadError``, as Slack retries an
    event answered with one, then drops it."""
    try:
        return _parse_event(_EventCallback.model_validate(body))
    except (ValidationError, PayloadError):
        return Ignored(why=f"malformed event {_event_type(body)}", malformed=True)


def _event_type(body: dict[str, Any]) -> str:
    """An event's ``type`` fit for a log line (``"?"`` when it has none that is)."""
    event = body.get("event")
    kind = event.get("type") if isinstance(event, dict) else None
    if isinstance(kind, str) and kind.isascii() and kind.isprintable() and len(kind) <= 60:
        return kind
    return "?"


def _parse_event(callback: _EventCallback) -> Inbound:
    event = callback.event
    if event.type == HOME_OPENED_EVENT:
        return _parse_home_opened(callback)
    if event.type == CONTEXT_CHANGED_EVENT:
        return _parse_context_changed(callback)
    if event.type == ASSISTANT_STARTED_EVENT:
        return _parse_assistant_started(callback)
    if event.type == ASSISTANT_CONTEXT_EVENT:
        return _parse_assistant_context(callback)
    if event.type not in ("app_mention", "message"):
        return Ignored(why=f"event {event.type}")
    if event.bot_id or event.hidden or (event.subtype and event.subtype not in _PERSON_SUBTYPES):
        return Ignored(why=f"{event.type} from a bot or of subtype {event.subtype}")
    if not (event.user and event.channel and event.ts):
        raise PayloadError(texts.BAD_PAYLOAD)
    kind: MessageKind
    if event.type == "app_mention":
        kind = "mention"
    elif event.channel_type == "im":
        kind = "direct"
    elif event.channel_type == "mpim":
        # Whether it mentions the bot is known once Bolt knows who the bot is.
        kind = "group"
    elif event.thread_ts:
        kind = "thread_reply"
    else:  # a top-level channel message: mentions arrive as app_mention as well
        return Ignored(why="top-level channel message")
    return MessageIn(
        kind=kind,
        event_id=callback.event_id,
        team=callback.team_id,
        channel=event.channel,
        ts=event.ts,
        thread_ts=event.thread_ts,
        user=event.user,
        text=event.text or "",
        context=(describe(event.app_context) or None) if kind == "direct" else None,
    )


def _parse_home_opened(callback: _EventCallback) -> HomeOpenedIn | MessagesOpenedIn | Ignored:
    event = callback.event
    if event.tab not in (HOME_TAB, MESSAGES_TAB):
        return Ignored(why=f"{event.type} on the {event.tab} tab")
    if not event.user:
        raise PayloadError(texts.BAD_PAYLOAD)
    if event.tab == HOME_TAB:
        return HomeOpenedIn(team=callback.team_id, user=event.user)
    if not event.channel:
        raise PayloadError(texts.BAD_PAYLOAD)
    return MessagesOpenedIn(
        team=callback.team_id,
        user=event.user,
        channel=event.channel,
        context=None if event.context is None else describe(event.context),
    )


def _parse_context_changed(callback: _EventCallback) -> ViewingIn:
    event = callback.event
    if not event.user:
        raise PayloadError(texts.BAD_PAYLOAD)
    return ViewingIn(team=callback.team_id, user=event.user, context=describe(event.context))


def _parse_assistant_started(callback: _EventCallback) -> AssistantStartedIn:
    thread = callback.event.assistant_thread
    if thread is None:
        raise PayloadError(texts.BAD_PAYLOAD)
    return AssistantStartedIn(
        team=callback.team_id,
        user=thread.user_id,
        channel=thread.channel_id,
        thread_ts=thread.thread_ts,
        context=describe_assistant(thread.context),
    )


def _parse_assistant_context(callback: _EventCallback) -> ViewingIn:
    thread = callback.event.assistant_thread
    if thread is None:
        raise PayloadError(texts.BAD_PAYLOAD)
    return ViewingIn(
        team=callback.team_id, user=thread.user_id, context=describe_assistant(thread.context)
    )


def _parse_command(command: _Command) -> CommandIn | Ignored:
    if command.command != APPROVALS_COMMAND:
        return Ignored(why=f"command {command.command}")
    if not (command.team_id and command.channel_id and command.user_id and command.response_url):
        raise PayloadError(texts.BAD_PAYLOAD)
    return CommandIn(
        team=command.team_id,
        user=command.user_id,
        channel=command.channel_id,
        root=command.thread_ts or "",
        text=command.text.strip(),
        response_url=command.response_url,
    )


def _action_of(action_id: str) -> ClickAction | None:
    """What pressing the button ``action_id`` does, or ``None`` for a button not ours."""
    if GRANT_ACTION_ID.search(action_id):
        return "grant"
    if NEVER_ACTION_ID.search(action_id):
        return "never"
    return _ACTIONS.get(action_id)


def _parse_feedback(payload: _BlockActions, action: _Action) -> FeedbackIn:
    """A 👍 / 👎: its value names the run (``helpful:<run>`` or ``unhelpful:<run>``)."""
    value = action.value or ""
    helpful = value.startswith(FEEDBACK_HELPFUL)
    run_id = value.removeprefix(FEEDBACK_HELPFUL if helpful else FEEDBACK_UNHELPFUL)
    if run_id == value or not run_id:
        raise PayloadError(texts.BAD_PAYLOAD)
    team, channel, root = _answer_place(payload)
    return FeedbackIn(
        team=team,
        user=payload.user.id,
        channel=channel,
        root=root,
        run_id=run_id,
        helpful=helpful,
    )


def _parse_stop(payload: _BlockActions, action: _Action) -> StopIn:
    """A Stop: its value is the run's id."""
    run_id = decode_stop_value(action.value)
    team, channel, root = _answer_place(payload)
    return StopIn(team=team, user=payload.user.id, channel=channel, root=root, run_id=run_id)


def _answer_place(payload: _BlockActions) -> tuple[str, str, str]:
    """The workspace, channel and thread root of a press on a message the bot wrote in a
    thread (an answer's 👍 / 👎 or Stop)."""
    team = payload.team.id if payload.team else payload.user.team_id
    if not team:
        raise PayloadError(texts.BAD_PAYLOAD)
    channel, message_ts = _in_message(payload)
    message_thread = payload.message.thread_ts if payload.message else None
    return team, channel, payload.container.thread_ts or message_thread or message_ts


def _parse_action(payload: _BlockActions) -> ActionIn | FeedbackIn | StopIn | ForeignActionIn:
    feedback = next((a for a in payload.actions if a.action_id == FEEDBACK_ACTION), None)
    if feedback is not None:
        return _parse_feedback(payload, feedback)
    stop = next((a for a in payload.actions if a.action_id == STOP_ACTION), None)
    if stop is not None:
        return _parse_stop(payload, stop)
    ours = [(a, kind) for a in payload.actions if (kind := _action_of(a.action_id))]
    if not ours:
        raise PayloadError(texts.UNKNOWN_ACTION)
    action, kind = ours[0]
    container = payload.container
    message_thread = payload.message.thread_ts if payload.message else None
    team = payload.team.id if payload.team else payload.user.team_id
    if not team:
        raise PayloadError(texts.BAD_PAYLOAD)
    home = _in_home(payload)
    ephemeral = not home and container.is_ephemeral
    if home:  # no conversation at all: the place is the presser's Home
        channel, message_ts, root = HOME_CHANNEL, "", ""
    else:
        channel, message_ts = _in_message(payload)
        # In an inbox there is no message anyone else could reply under.
        root = container.thread_ts or ("" if ephemeral else message_thread or message_ts)
    response_url = payload.response_url if ephemeral else None
    try:
        # A grant's value has its duration, and no other button's has one.
        timed = kind in ("grant", "never")
        value = decode_button_value(action.value, GrantValue if timed else ButtonValue)
    except PayloadError:
        # Signed by Slack, so a person pressed it: they are told, nothing is decided.
        return ForeignActionIn(
            team=team,
            user=payload.user.id,
            channel=channel,
            root=root,
            response_url=response_url,
        )
    return ActionIn(
        action=kind,
        value=value,
        team=team,
        user=payload.user.id,
        channel=channel,
        message_ts=message_ts,
        root=root,
        trigger_id=payload.trigger_id,
        ephemeral=ephemeral,
        response_url=response_url,
        home=home,
    )


def _in_home(payload: _BlockActions) -> bool:
    """Whether the button was in a Home tab (``PayloadError`` for another view: the
    bot's modals have none of its buttons)."""
    if payload.container.type != "view":
        return False
    if payload.view is None or payload.view.type != "home":
        raise PayloadError(texts.BAD_PAYLOAD)
    return True


def _in_message(payload: _BlockActions) -> tuple[str, str]:
    """The channel and ``ts`` of the message the button was in (its blocks, or those of
    one of its attachments)."""
    container = payload.container
    if not container.channel_id or not container.message_ts:
        raise PayloadError(texts.BAD_PAYLOAD)
    return container.channel_id, container.message_ts


def _parse_view(payload: _ViewSubmission) -> ViewIn | FormIn:
    view = payload.view
    if view.callback_id in _FORMS:
        metadata = decode_metadata(view.private_metadata, FormMetadata)
        return FormIn(
            action=_FORMS[view.callback_id],
            user=payload.user.id,
            metadata=metadata,
            values=_form_values(view.state, metadata.fields),
        )
    if view.callback_id != DECLINE_VIEW:
        raise PayloadError(texts.UNKNOWN_ACTION)
    return ViewIn(
        user=payload.user.id,
        metadata=decode_metadata(view.private_metadata, ModalMetadata),
        reason=_reason(view.state),
    )


def _reason(state: dict[str, Any]) -> str | None:
    value = _state_value(state, REASON_BLOCK, REASON_INPUT)
    return (value or "").strip() or None


def _form_values(state: dict[str, Any], names: tuple[str, ...]) -> dict[str, str | None]:
    """Each field's value as Slack sent it: text, a number as text, a chosen option's value."""
    return {
        name: _state_value(state, field_block(index), FIELD_INPUT)
        for index, name in enumerate(names)
    }


def _state_value(state: dict[str, Any], block_id: str, action_id: str) -> str | None:
    """One input's value in a submitted view's ``state`` (``None`` when left empty)."""
    values = state.get("values")
    block = values.get(block_id) if isinstance(values, dict) else None
    field = block.get(action_id) if isinstance(block, dict) else None
    if not isinstance(field, dict):
        return None
    value = field.get("value")
    if "selected_option" in field:
        option = field["selected_option"]
        if option is not None and not isinstance(option, dict):
            raise PayloadError(texts.BAD_PAYLOAD)
        value = option.get("value") if option is not None else None
    if value is not None and not isinstance(value, str):
        raise PayloadError(texts.BAD_PAYLOAD)
    return value


# -- step 2: bot types ------------------------------------------------------------


def thread_key(workspace: str, channel: str, root: str) -> ThreadKey:
    """The core's key for a Slack thread."""
    return ThreadKey(platform=PLATFORM, workspace=workspace, channel=channel, root=root)


def to_incoming(
    message: MessageIn, *, workspace: str | None, bot_user_id: str | None
) -> IncomingMessage | None:
    """The message for the core, or ``None`` when it is not for the bot (a group DM's
    message that does not mention it, outside its threads) or nothing is left once the
    mention is gone.

    Dedupe keys: the event id (Slack's retries) and the message itself, because an
    @mention arrives twice, as ``app_mention`` and as ``message.channels`` (or
    ``message.mpim``).
    """
    addressed = message.kind != "group" or mentions_bot(message.text, bot_user_id)
    if not addressed and message.thread_ts is None:
        return None  # people talking among themselves in a group DM
    text = strip_mention(message.text, bot_user_id)
    if not text:
        return None
    return IncomingMessage(
        thread=thread_key(workspace or message.team, message.channel, message.root),
        user_id=message.user,
        text=text,
        dedupe_keys=(
            f"event:{message.event_id}",
            f"message:{message.channel}:{message.ts}",
        ),
        only_if_followed=message.kind == "thread_reply" or not addressed,
        # "@bot ..." in a thread: a new request, not a plain reply (both events say so).
        mentioned=bool(bot_user_id) and message.text.lstrip().startswith(f"<@{bot_user_id}"),
        context=message.context,
    )


def to_click(action: ActionIn, *, workspace: str | None) -> Click:
    """The click for the core (a card's Decline goes through the reason modal first).

    Its thread is where the button was pressed, even on a card away from its run's
    thread (the core finds the run's); a message only its reader sees (an inbox) is
    no message the core could update, so the click names none; nor does one in a Home
    tab, whose thread is ``home_thread``.
    """
    return Click(
        thread=thread_key(workspace or action.team, action.channel, action.root),
        user_id=action.user,
        run_id=action.value.run,
        tool_call_id=action.value.call,
        action=action.action,
        message_ref=message_ref(action.channel, action.message_ts) if action.in_message else None,
        grant_for=action.value.grant if isinstance(action.value, GrantValue) else None,
        ask=action.value.ask,
    )


def modal_metadata(action: ActionIn, *, workspace: str | None) -> ModalMetadata:
    """What a modal opened by this click must carry to build the click on submission."""
    return ModalMetadata(
        run=action.value.run,
        call=action.value.call,
        team=workspace or action.team,
        channel=action.channel,
        root=action.root,
        ts=action.message_ts if action.in_message else None,
        ask=action.value.ask,
        response_url=action.response_url,
    )


def to_decline_click(view: ViewIn) -> Click:
    """The Decline click, with its reason, from the modal submission."""
    return _modal_click(view.metadata, view.user, "decline", reason=view.reason)


def to_form_click(form: FormIn) -> Click:
    """The click a form submission makes (an answer, an edit), with the form's values."""
    return _modal_click(form.metadata, form.user, form.action, values=dict(form.values))


def _modal_click(
    meta: ModalMetadata,
    user: str,
    action: ClickAction,
    *,
    reason: str | None = None,
    values: dict[str, Any] | None = None,
) -> Click:
    return Click(
        thread=thread_key(meta.team, meta.channel, meta.root),
        user_id=user,
        run_id=meta.run,
        tool_call_id=meta.call,
        action=action,
        reason=reason,
        message_ref=message_ref(meta.channel, meta.ts) if meta.ts else None,
        values=values,
        ask=meta.ask,
    )


def home_thread(workspace: str) -> ThreadKey:
    """The place of everything done in a Home tab of ``workspace`` (whose, the click or
    the person says)."""
    return thread_key(workspace, HOME_CHANNEL, "")


def is_home(thread: ThreadKey) -> bool:
    """Whether ``thread`` is a Home tab (``home_thread``), not a conversation."""
    return thread.platform == PLATFORM and thread.channel == HOME_CHANNEL and not thread.root


def command_thread(command: CommandIn, *, workspace: str | None) -> ThreadKey:
    """Where ``/approvals`` was typed: the place its answer (an inbox) is shown."""
    return thread_key(workspace or command.team, command.channel, command.root)


def message_ref(channel: str, ts: str) -> dict[str, Any]:
    """Where a Slack message lives, as the core keeps it."""
    return {"channel": channel, "ts": ts}


def mentions_bot(text: str, bot_user_id: str | None) -> bool:
    """Whether the text mentions the bot anywhere (``<@U…>`` or ``<@U…|name>``), as an
    ``app_mention`` does."""
    if not bot_user_id:
        return False
    return _mention_of(bot_user_id).search(text) is not None


def strip_mention(text: str, bot_user_id: str | None) -> str:
    """The text without the bot's mention, with Slack's HTML escapes undone."""
    if bot_user_id:
        text = _spoken_mention_of(bot_user_id).sub("", text)
    for escaped, plain in _UNESCAPES:
        text = text.replace(escaped, plain)
    return text.strip()


# Built once per bot user id (one, or one per workspace), not once per message.
@functools.lru_cache(maxsize=1024)
def _mention_of(bot_user_id: str) -> re.Pattern[str]:
    """The bot's mention, as ``mentions_bot`` looks for it."""
    return re.compile(rf"<@{re.escape(bot_user_id)}[|>]")


@functools.lru_cache(maxsize=1024)
def _spoken_mention_of(bot_user_id: str) -> re.Pattern[str]:
    """The bot's mention with its display name, if any, and one space after it."""
    return re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?> ?")
