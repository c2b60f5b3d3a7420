"""How the core talks to Teams: proactive posts and updates via stored references.

Agent work finishes after the HTTP turn is over, so every send continues the
conversation from the thread's stored ``ConversationReference``. Messages go
straight to the connector (``POST``/``PUT /v3/conversations/{id}/activities``):
``TurnContext.send_activity`` would address them as replies to the synthetic
continuation activity.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from botbuilder.core import BotAdapter, TurnContext
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity, ActivityTypes, Attachment, ConversationReference
from botframework.connector.aio import ConnectorClient
from msrest.exceptions import ClientRequestError

from bot import (
    ApprovalCard,
    ChatState,
    MessageRef,
    Notice,
    Prompt,
    Text,
    ThreadKey,
    Undeliverable,
    View,
    plain_text,
)

from . import cards
from .auth import TeamsAuth
from .convert import CHAT_ROOT, message_ref

Send = Callable[[ConnectorClient, ConversationReference], Awaitable[Any]]


class MissingReference(LookupError):
    """The bot never received an activity from this thread, so it cannot post there."""


class TeamsMessenger:
    """The ``Messenger`` for Teams threads."""

    def __init__(self, cloud: CloudAdapter, chat: ChatState, auth: TeamsAuth) -> None:
        self._cloud = cloud
        self._chat = chat
        self._auth = auth

    async def post(self, thread: ThreadKey, view: View) -> MessageRef:
        """Post a view in the thread; return its activity id and conversation."""
        activity = render(view)

        async def send(connector: ConnectorClient, reference: ConversationReference) -> MessageRef:
            conversation_id = reference.conversation.id
            response = await connector.conversations.send_to_conversation(
                conversation_id, _addressed(activity, reference)
            )
            return message_ref(getattr(response, "id", None), conversation_id)

        ref: MessageRef = await self._continue(thread, send)
        return ref

    async def update(self, thread: ThreadKey, ref: MessageRef, view: View) -> None:
        """Replace a posted message (a card once decided) for everyone."""
        activity_id = ref.get("activity_id")
        if not activity_id:
            raise ValueError(f"cannot update a message without its activity id: {ref!r}")
        activity = render(view)

        async def send(connector: ConnectorClient, reference: ConversationReference) -> None:
            conversation_id = ref.get("conversation_id") or reference.conversation.id
            updated = _addressed(activity, reference)
            updated.id = activity_id
            await connector.conversations.update_activity(conversation_id, activity_id, updated)

        await self._continue(thread, send)

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
            typing = _addressed(Activity(type=ActivityTypes.typing), reference)
            await connector.conversations.send_to_conversation(reference.conversation.id, typing)

        await self._continue(thread, send)

    async def _continue(self, thread: ThreadKey, send: Send) -> Any:
        stored = await self._chat.conversation_ref(thread.id)
        if stored is None:
            raise MissingReference(f"no conversation reference stored for {thread.id}")
        reference = ConversationReference().deserialize(stored)
        await self._auth.prefetch_token()
        result: list[Any] = []

        async def callback(context: TurnContext) -> None:
            connector: ConnectorClient = context.turn_state[BotAdapter.BOT_CONNECTOR_CLIENT_KEY]
            result.append(await send(connector, reference))

        try:
            await self._cloud.continue_conversation(
                reference, callback, bot_app_id=self._auth.app_id
            )
        except (ClientRequestError, OSError) as exc:
            # The serviceUrl did not answer (closed port, no such host, a network cut).
            raise Undeliverable(f"{reference.service_url} is unreachable: {exc}") from None
        return result[0] if result else None


def render(view: View) -> Activity:
    """The message activity showing a view: a card attachment or markdown text."""
    if isinstance(view, ApprovalCard):
        return _card(cards.approval_card(view), summary=cards.summary(view))
    if isinstance(view, Prompt):
        return _card(cards.question_card(view), summary=cards.question_summary(view))
    return Activity(type=ActivityTypes.message, text=cards.text_of(view), text_format="markdown")


def _card(content: dict[str, Any], *, summary: str) -> Activity:
    """A message carrying one Adaptive Card; ``summary`` is what notifications show."""
    return Activity(
        type=ActivityTypes.message,
        summary=summary,
        attachments=[Attachment(content_type=cards.CONTENT_TYPE, content=content)],
    )


def _addressed(activity: Activity, reference: ConversationReference) -> Activity:
    """A copy of ``activity`` from the bot into the reference's conversation."""
    out = Activity().deserialize(activity.serialize())
    out.conversation = reference.conversation
    out.from_property = reference.bot
    out.recipient = reference.user
    out.channel_id = reference.channel_id
    out.service_url = reference.service_url
    return out
