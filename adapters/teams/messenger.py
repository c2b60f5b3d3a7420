"""How the core talks to Teams: proactive posts and updates via stored references.

Agent work finishes after the HTTP turn is over, so every send continues the
conversation from the thread's stored ``ConversationReference``. Messages go
straight to the connector (``POST``/``PUT /v3/conversations/{id}/activities``):
``TurnContext.send_activity`` would address them as replies to the synthetic
continuation activity.

A card the policy sends elsewhere starts a new conversation (``POST
/v3/conversations`` through ``CloudAdapter.create_conversation``) on the service
URL, with the bot and tenant, of the requester's thread: a new post in a channel
(``channel_data.channel.id``, the card as its first activity), or the 1:1 chat
with a person (``members`` with their Entra object id: the bot must be installed
for them). Its reference is stored like any thread's, so later posts and updates
there work the same way.

Every call to Teams keeps to its limits (``limits``): waited for when throttled, tried
again a bounded while, in order within a conversation; one that cannot be made raises
``Undeliverable``, as does a token Entra will not give.

Marked posts (``PostMark``: an answer, a card, a question, a run's error, a notice) are
found again after a crash only through the chat state: the Bot Framework connector cannot
read a Teams conversation back, and Teams picks each activity's id as it takes it (an id
sent along is ignored). So each marked post's id is noted right after Teams took it
(``MARK_TTL``), and ``find_post`` reads that note. A process that dies between Teams
taking the post and the note leaves nothing to find: the post is made again (twice,
never lost).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from botbuilder.core import BotAdapter, TurnContext
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import (
    Activity,
    ActivityTypes,
    Attachment,
    ChannelAccount,
    ConversationAccount,
    ConversationParameters,
    ConversationReference,
)
from botframework.connector.aio import ConnectorClient
from cachetools import TTLCache
from pydantic import TypeAdapter, ValidationError

from bot import (
    AdapterState,
    ApprovalCard,
    Destination,
    Live,
    MessageRef,
    Notice,
    NotReachedYet,
    Person,
    Posted,
    PostMark,
    Reply,
    Text,
    ThreadKey,
    View,
    answer_mark,
    compose,
    plain_text,
)

from . import cards, feedback, links, mentions, notices, refresh
from .auth import TeamsAuth
from .connector import Send, StreamChannel, addressed, members
from .convert import CHAT_ROOT, PLATFORM, is_personal, message_ref
from .limits import Limits
from .links import MESSAGE_ID, NO_TENANT
from .nearby import Nearby
from .people import LOOKUP_TIMEOUT, Directory
from .streaming import StreamPace, StreamRefused, open_stream, split_text

log = logging.getLogger(__name__)

CHANNEL_ID: Final = "msteams"
NO_STREAMING_TTL: Final = 3600.0
"""How long (seconds) a chat where Teams refused streaming gets whole messages only."""
MARK_NOTE_PREFIX: Final = "teams-post:"
"""``teams-post:<thread id>:<destination>:<mark>`` -> where that marked post is (JSON)."""
MARK_TTL: Final = 7 * 24 * 3600.0
"""How long (seconds) a marked post is found again: work taken over after a crash looks
within minutes, or once the store is back after an outage; a week covers both."""
_POSTED: Final = TypeAdapter(Posted)


StopPressed = Callable[[ThreadKey, str], None]
"""A person (the core's user id) pressed Teams' Stop on a streamed answer in a thread."""


class MissingReference(LookupError):
    """The bot never received an activity from this thread, so it cannot post there."""


def _no_stop(thread: ThreadKey, user_id: str) -> None:
    return None


class TeamsMessenger:
    """The ``Messenger`` for Teams threads.

    Args:
        stop_pressed: Called at once (not awaited) when the person a streamed answer
            is addressed to presses Teams' Stop on it, while its run still goes on.
        limits: Teams' limits, shared with everything else the adapter sends.
    """

    def __init__(
        self,
        cloud: CloudAdapter,
        chat: AdapterState,
        auth: TeamsAuth,
        *,
        people: Directory | None = None,
        pace: StreamPace | None = None,
        stop_pressed: StopPressed = _no_stop,
        limits: Limits | None = None,
    ) -> None:
        self._cloud = cloud
        self._chat = chat
        self._auth = auth
        self.nearby = Nearby(chat)
        """A conversation the bot heard from, per tenant (where new ones start)."""
        self.limits = limits or Limits()
        self.people = people or Directory()
        self.pace = pace or StreamPace()
        """How often a streamed answer sends (tests make it quick)."""
        self._stop_pressed = stop_pressed
        self._streaming: set[str] = set()
        """1:1 chats with a streamed answer under way (Teams streams one at a time)."""
        self._no_streaming: TTLCache[str, bool] = TTLCache(maxsize=10_000, ttl=NO_STREAMING_TTL)

    @property
    def waiting(self) -> int:
        """Calls to Teams waiting now on a limit or a retry (the core's metrics read it)."""
        return self.limits.waiting

    async def post(
        self, thread: ThreadKey, view: View, *, mark: PostMark | None = None
    ) -> MessageRef:
        """Post a view in the thread; return its activity id and conversation (an answer
        too long for one Teams message goes in several: the last one's). ``mark``: the
        last one's id is noted under it once Teams took it (``find_post``)."""
        reference = await self._reference(thread)
        await self._auth.prefetch_token()  # before the lookups of who sees what
        if isinstance(view, Reply) and len(parts := split_text(view.text)) > 1:
            for part in parts[:-1]:
                await self.post(thread, replace(view, text=part, feedback=None, stop=None))
            view = replace(view, text=parts[-1])
        activity = render(view, await self._audience(reference, view))
        run_id = view.feedback if isinstance(view, Reply) else None
        if run_id is not None:
            feedback.offer(activity)

        async def send(connector: ConnectorClient, reference: ConversationReference) -> MessageRef:
            conversation_id = reference.conversation.id
            response = await connector.conversations.send_to_conversation(
                conversation_id, addressed(activity, reference)
            )
            return message_ref(getattr(response, "id", None), conversation_id)

        ref: MessageRef = await self._send(reference, send)
        if mark is not None:
            await self._note_mark(thread, mark, Posted(thread=thread, ref=ref))
        if run_id is not None:
            await feedback.keep(
                self._chat, reference.conversation.id, ref.get("activity_id"), run_id
            )
        return ref

    async def update(
        self, thread: ThreadKey, ref: MessageRef, view: View, *, mark: PostMark | None = None
    ) -> None:
        """Replace a posted message (a card once decided) for everyone; ``mark`` is noted
        once Teams took it, as a post's is."""
        activity_id = ref.get("activity_id")
        if not activity_id:
            raise ValueError(f"cannot update a message without its activity id: {ref!r}")
        reference = await self._reference(thread)
        await self._auth.prefetch_token()
        activity = render(view, await self._audience(reference, view))
        conversation_id = ref.get("conversation_id") or reference.conversation.id

        async def send(connector: ConnectorClient, reference: ConversationReference) -> None:
            updated = addressed(activity, reference)
            updated.id = activity_id
            await connector.conversations.update_activity(conversation_id, activity_id, updated)

        await self._send(reference, send, conversation=conversation_id)
        if mark is not None:
            await self._note_mark(thread, mark, Posted(thread=thread, ref=ref))

    async def tell(self, thread: ThreadKey, user_id: str, text: Text) -> None:
        """Say something meant for one person.

        Teams has no private messages inside a channel thread or group chat, so
        this posts in the thread.
        """
        await self.post(thread, Notice(text=plain_text(text)))

    async def set_status(self, thread: ThreadKey, status: str | None) -> None:
        """Show the typing indicator while the agent works (Teams has no status text).

        Channels do not show typing indicators, so only chats get one.
        """
        if status is None or thread.root != CHAT_ROOT:
            return

        async def send(connector: ConnectorClient, reference: ConversationReference) -> None:
            typing = addressed(Activity(type=ActivityTypes.typing), reference)
            await connector.conversations.send_to_conversation(reference.conversation.id, typing)

        # One try, queued behind nothing: a typing indicator that comes late says nothing.
        await self._send(await self._reference(thread), send, ordered=False, budget=0.0)

    async def start_live(self, thread: ThreadKey, to: Person | None) -> Live | None:
        """A streamed answer in a Teams 1:1 chat (``streaming``); ``None`` in group chats
        and channels (Teams streams only in 1:1 chats), on other channels (the
        Emulator), while another answer streams in the chat, or where Teams refused
        streaming lately: the core posts whole messages.

        Raises:
            MissingReference: The bot never heard from this chat.
            Undeliverable: Teams could not be reached.
        """
        if thread.root != CHAT_ROOT:
            return None
        reference = await self._reference(thread)
        chat = reference.conversation.id
        if (
            (reference.channel_id or CHANNEL_ID) != CHANNEL_ID  # the Emulator streams no Teams way
            or not is_personal(reference)
            or chat in self._streaming
            or chat in self._no_streaming
        ):
            return None

        async def rated(activity_id: str | None, run_id: str) -> None:
            # The last message of a finished run's answer: its mark is noted here too.
            if activity_id:
                posted = Posted(thread=thread, ref=message_ref(activity_id, chat))
                await self._note_mark(thread, answer_mark(run_id), posted)
            await feedback.keep(self._chat, chat, activity_id, run_id)

        # The requester; in a 1:1 chat that is the one person chatting.
        user_id = to.id if to is not None else _user_id(reference)

        self._streaming.add(chat)
        try:
            return await open_stream(
                StreamChannel(self._send, reference),
                pace=self.pace,
                done=lambda: self._streaming.discard(chat),
                stopped=lambda: self._stop_pressed(thread, user_id),
                rated=rated,
            )
        except StreamRefused as exc:
            if exc.not_here:
                self._no_streaming[chat] = True
            log.info("no streamed answer in %s: %s", chat, exc)
            return None

    async def post_elsewhere(
        self, near: ThreadKey, to: Destination, view: View, *, mark: PostMark | None = None
    ) -> Posted:
        """Start a new conversation with ``view`` where ``near``'s service and tenant are:
        a new post in the channel ``to.channel`` (a group chat's id: a message in that
        chat), or the 1:1 chat with ``to.user_id`` (an Entra object id). ``mark`` as on
        ``post``.

        Raises:
            MissingReference: The bot never heard from ``near``.
            ValueError: ``to.channel`` is no Teams channel or chat id.
            Undeliverable: The service did not answer.
        """
        posted = await self._post_elsewhere(near, to, view)
        if mark is not None:
            await self._note_mark(near, mark, posted, to=to)
        return posted

    async def find_post(
        self,
        near: ThreadKey,
        mark: PostMark,
        *,
        since: datetime,
        to: Destination | None = None,
    ) -> Posted | None:
        """Where the post marked ``mark`` went, as noted once Teams took it (``since`` is
        not needed: notes lapse after ``MARK_TTL``). ``None`` also when the process died
        between Teams taking it and the note: Teams cannot be asked, so it is posted
        again (see the module's docstring)."""
        stored = await self._chat.note(_mark_key(near, mark, to))
        if stored is None:
            return None
        try:
            return _POSTED.validate_json(stored)
        except ValidationError:
            log.warning("an unreadable note of where the %s of %s went", mark.post, mark.run_id)
            return None

    async def find_cut_live(self, near: ThreadKey, *, since: datetime, words: str) -> Posted | None:
        """Teams cannot be read back, and ends a stream left unfinished itself (after
        two minutes, with what it showed): the answer is posted again."""
        return None

    async def _note_mark(
        self, near: ThreadKey, mark: PostMark, posted: Posted, *, to: Destination | None = None
    ) -> None:
        """Note where a marked post went. It is out already, so a failure is logged: after
        a crash it would be posted again, it is not lost."""
        if not posted.ref.get("activity_id"):
            log.info("Teams gave the %s of %s no id: it cannot be found", mark.post, mark.run_id)
            return
        try:
            value = _POSTED.dump_json(posted).decode()
            await self._chat.set_note(_mark_key(near, mark, to), value, ttl=MARK_TTL)
        except Exception:
            log.exception("could not note where the %s of %s went", mark.post, mark.run_id)

    async def _post_elsewhere(self, near: ThreadKey, to: Destination, view: View) -> Posted:
        near_ref = await self._reference(near)
        await self._auth.prefetch_token()
        if to.channel is not None:
            if not links.is_conversation_id(to.channel):
                raise ValueError(f"{to.channel!r} is no Teams channel or chat id")
            there = _reference(near_ref, ConversationAccount(id=to.channel, is_group=True))
            activity = render(view, await self._audience(there, view))
            if links.is_channel_id(to.channel):
                return await self._new_post(near, near_ref, to.channel, activity)
            return await self._chat_post(near, near_ref, to.channel, activity)
        if to.user_id:
            person = (to.user_id,)
            audience = refresh.personal(view, person) if isinstance(view, ApprovalCard) else None
            return await self._direct(near, near_ref, to.user_id, render(view, audience))
        raise ValueError(f"a destination names a channel or a person: {to!r}")

    async def inboxes_changed(self, thread: ThreadKey, people: frozenset[str]) -> None:
        """Nothing to redraw: Teams shows a person's approvals only when they ask for them
        (``approvals`` in their 1:1 chat), as they read then."""

    async def channel_place(self, channel: str, workspace: str | None = None) -> ThreadKey | None:
        """Where a new conversation in ``channel`` (a Teams channel or group chat id) of
        tenant ``workspace`` (any the bot heard from, without one) starts: Teams starts
        one only near a conversation the bot was addressed in (``Nearby``); ``None`` for
        an id of another platform.

        Raises:
            NotReachedYet: The bot was never addressed in that tenant.
        """
        if not links.is_conversation_id(channel):
            return None
        near = await self.nearby.near(workspace)
        if near is None:
            where = f"tenant {workspace}" if workspace else "Teams"
            raise NotReachedYet(
                f"the bot cannot post in {channel} before someone talks to it in {where} "
                "(mention it once, or write to it)"
            )
        return near

    async def knows_channel(self, channel: str) -> bool:
        """Whether ``channel`` has the shape of a Teams channel or group chat id (Teams
        cannot be asked without a team to ask about: a wrong id shows on the first post)."""
        return links.is_conversation_id(channel)

    async def group_members(self, name: str) -> frozenset[str] | None:
        """Teams has no user groups the bot can read: approvers are Entra object ids."""
        return None

    async def _new_post(
        self, near: ThreadKey, near_ref: ConversationReference, channel: str, activity: Activity
    ) -> Posted:
        """A new top-level post in a channel: its own thread, rooted at the post."""
        tenant = _tenant_of(near, near_ref)
        parameters = ConversationParameters(
            is_group=True,
            bot=near_ref.bot,
            channel_data={"channel": {"id": channel}, **_tenant_data(tenant)},
            tenant_id=tenant,
            activity=activity,
        )
        conversation_id, activity_id = await self._create(near_ref, parameters, queue=channel)
        # Teams answers ``<channel>;messageid=<post id>`` and the post's id.
        root = conversation_id.partition(MESSAGE_ID)[2] or activity_id or ""
        if not root:
            raise ValueError(f"Teams created {conversation_id!r} for a post in {channel!r}")
        thread = ThreadKey(platform=PLATFORM, workspace=near.workspace, channel=channel, root=root)
        reference = _reference(
            near_ref,
            ConversationAccount(
                id=f"{channel}{MESSAGE_ID}{root}",
                conversation_type="channel",
                is_group=True,
                tenant_id=tenant,
            ),
        )
        await self._keep(thread, reference)
        return Posted(thread=thread, ref=message_ref(root, reference.conversation.id))

    async def _chat_post(
        self, near: ThreadKey, near_ref: ConversationReference, chat: str, activity: Activity
    ) -> Posted:
        """A message in a group chat the bot is in (one thread, like every chat)."""
        tenant = _tenant_of(near, near_ref)
        account = ConversationAccount(
            id=chat, conversation_type="groupChat", is_group=True, tenant_id=tenant
        )
        reference = _reference(near_ref, account)
        thread = ThreadKey(
            platform=PLATFORM, workspace=near.workspace, channel=chat, root=CHAT_ROOT
        )

        async def send(connector: ConnectorClient, to: ConversationReference) -> Any:
            return await connector.conversations.send_to_conversation(chat, addressed(activity, to))

        response = await self._send(reference, send)
        await self._keep(thread, reference)
        return Posted(thread=thread, ref=message_ref(getattr(response, "id", None), chat))

    async def _direct(
        self, near: ThreadKey, near_ref: ConversationReference, user_id: str, activity: Activity
    ) -> Posted:
        """The 1:1 chat with a person (created, or the one they have), then the view in it."""
        tenant = _tenant_of(near, near_ref)
        person = ChannelAccount(id=user_id)
        parameters = ConversationParameters(
            is_group=False,
            bot=near_ref.bot,
            members=[person],
            channel_data=_tenant_data(tenant),
            tenant_id=tenant,
        )
        chat, _ = await self._create(near_ref, parameters, queue=f"1:1 with {user_id}")
        account = ConversationAccount(id=chat, conversation_type="personal", tenant_id=tenant)
        reference = _reference(
            near_ref, account, user=ChannelAccount(id=user_id, aad_object_id=user_id)
        )

        async def send(connector: ConnectorClient, to: ConversationReference) -> Any:
            return await connector.conversations.send_to_conversation(chat, addressed(activity, to))

        response = await self._send(reference, send)
        thread = ThreadKey(
            platform=PLATFORM, workspace=near.workspace, channel=chat, root=CHAT_ROOT
        )
        await self._keep(thread, reference)
        return Posted(thread=thread, ref=message_ref(getattr(response, "id", None), chat))

    async def _create(
        self, near_ref: ConversationReference, parameters: ConversationParameters, *, queue: str
    ) -> tuple[str, str | None]:
        """``POST /v3/conversations`` on ``near_ref``'s service; the new conversation's id
        and its first activity's id. ``queue``: what the new conversation is for (a
        channel's new posts go out in order)."""
        await self._auth.prefetch_token()
        created: list[tuple[str, str | None]] = []

        async def callback(context: TurnContext) -> None:
            created.append((context.activity.conversation.id, context.activity.id))

        async def attempt() -> None:
            await self._cloud.create_conversation(
                self._auth.app_id,
                callback,
                parameters,
                near_ref.channel_id or CHANNEL_ID,
                near_ref.service_url,
                None,
            )

        await self.limits.call(queue, attempt, service_url=near_ref.service_url)
        if not created:
            raise ValueError("Teams created no conversation")
        return created[-1]

    async def _keep(self, thread: ThreadKey, reference: ConversationReference) -> None:
        """Remember how to post in a conversation the bot started. The view is out already,
        so a failure is logged: its later updates fail, it is not posted twice."""
        try:
            await self._chat.set_conversation_ref(thread.id, reference.serialize())
        except Exception:
            log.exception("could not keep the reference of %s", thread.id)

    async def _reference(self, thread: ThreadKey) -> ConversationReference:
        stored = await self._chat.conversation_ref(thread.id)
        if stored is None:
            raise MissingReference(f"no conversation reference stored for {thread.id}")
        reference: ConversationReference = ConversationReference().deserialize(stored)
        return reference

    async def _audience(
        self, reference: ConversationReference, view: View
    ) -> refresh.Audience | None:
        """Who sees a pending card how, where ``reference`` points (``refresh``)."""
        if not isinstance(view, ApprovalCard) or view.status != "pending":
            return None
        if is_personal(reference):
            person = reference.user
            ids = [getattr(person, "aad_object_id", None), getattr(person, "id", None)]
            return refresh.personal(view, [i for i in ids if i])
        if not view.deciders:
            return refresh.EVERYONE
        users = [*view.deciders, *([view.requester.id] if view.requester else [])]
        conversation = reference.conversation.id.partition(MESSAGE_ID)[0]

        async def fetch(missing: list[str]) -> dict[str, str | None]:
            async def lookup(connector: ConnectorClient, _: ConversationReference) -> Any:
                return await members(connector, conversation, missing)

            # Never behind posts, nor waiting longer than the lookup may take.
            found: dict[str, str | None] = await self._send(
                reference, lookup, conversation=conversation, ordered=False, budget=LOOKUP_TIMEOUT
            )
            return found

        found = await self.people.find(users, conversation=conversation, fetch=fetch)
        return refresh.among(view, found.ids, unknown=found.unknown)

    async def _send(
        self,
        reference: ConversationReference,
        send: Send,
        *,
        conversation: str | None = None,
        ordered: bool = True,
        budget: float | None = None,
    ) -> Any:
        """``send`` with a connector to ``reference``'s service, under Teams' limits for
        ``conversation`` (the reference's own unless given; see ``Limits.call``).

        Raises:
            Undeliverable: No token, the service cannot be reached, or Teams did not
                take the call within its budget.
        """
        await self._auth.prefetch_token()
        return await self.limits.call(
            conversation or reference.conversation.id,
            lambda: self._connected(reference, send),
            ordered=ordered,
            budget=budget,
            service_url=reference.service_url or "Teams",
        )

    async def _connected(self, reference: ConversationReference, send: Send) -> Any:
        """One try: ``send`` with the connector of a proactive turn in ``reference``'s
        conversation."""
        result: list[Any] = []

        async def callback(context: TurnContext) -> None:
            connector: ConnectorClient = context.turn_state[BotAdapter.BOT_CONNECTOR_CLIENT_KEY]
            result.append(await send(connector, reference))

        await self._cloud.continue_conversation(reference, callback, bot_app_id=self._auth.app_id)
        return result[0] if result else None


def render(view: View, audience: refresh.Audience | None = None) -> Activity:
    """The message activity showing a view, as the core composes it: a card for a
    document with a title (a pending approval card as ``audience`` sees it, with its
    refresh), else markdown text with its buttons in a small card under it."""
    actionable = audience is None or audience.actionable
    document = compose(view, actionable=actionable)
    link = links.card_link(view)
    if document.title:
        updates = None
        if isinstance(view, ApprovalCard) and view.status == "pending" and audience is not None:
            updates = refresh.block(view, audience.user_ids)
        content = cards.draw(document, refresh=updates, link=link)
        return _card(content, summary=cards.summary(document))
    shown = notices.message(document, link=link)
    activity = _markdown(shown.text, entities=shown.entities)
    if document.actions:
        # Teams' own Stop shows on streamed answers only: a whole one carries ours.
        activity.attachments = [_attachment(cards.buttons_card(document))]
    return activity


def _markdown(text: str, *, entities: tuple[dict[str, Any], ...] = ()) -> Activity:
    return Activity(
        type=ActivityTypes.message,
        text=text,
        text_format="markdown",
        entities=mentions.activity_entities(entities) or None,
    )


def _reference(
    near: ConversationReference,
    conversation: ConversationAccount,
    *,
    user: ChannelAccount | None = None,
) -> ConversationReference:
    """A reference to a conversation the bot started, on ``near``'s service as its bot."""
    return ConversationReference(
        bot=near.bot,
        user=user,
        conversation=conversation,
        channel_id=near.channel_id or CHANNEL_ID,
        service_url=near.service_url,
    )


def _mark_key(near: ThreadKey, mark: PostMark, to: Destination | None) -> str:
    """The note of a marked post in ``near`` (or sent from it to ``to``)."""
    where = "" if to is None else f"channel={to.channel}" if to.channel else f"user={to.user_id}"
    return f"{MARK_NOTE_PREFIX}{near.id}:{where}:{mark.key}"


def _user_id(reference: ConversationReference) -> str:
    """The core's id of the person a reference points to (as ``convert`` reads a sender)."""
    person = reference.user
    return str(getattr(person, "aad_object_id", None) or getattr(person, "id", None) or "")


def _tenant_of(near: ThreadKey, reference: ConversationReference) -> str | None:
    tenant = getattr(reference.conversation, "tenant_id", None)
    if tenant:
        return str(tenant)
    return near.workspace if near.workspace != NO_TENANT else None


def _tenant_data(tenant: str | None) -> dict[str, Any]:
    """Teams reads the tenant of a new conversation from ``channelData.tenant``."""
    return {"tenant": {"id": tenant}} if tenant else {}


def _card(content: dict[str, Any], *, summary: str) -> Activity:
    """A message carrying one Adaptive Card; ``summary`` is what notifications show."""
    return Activity(
        type=ActivityTypes.message,
        summary=summary,
        attachments=[_attachment(content)],
    )


def _attachment(content: dict[str, Any]) -> Attachment:
    return Attachment(content_type=cards.CONTENT_TYPE, content=content)
