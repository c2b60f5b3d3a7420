"""What one incoming Teams activity does: a message, a card click, or nothing.

Runs inside the SDK's turn, which holds the HTTP request open, so every branch
returns fast: the core does agent work in the background and answers later
through the messenger. A reply the turn makes itself waits on Teams' limits only
a few seconds (``RetryPolicy.reply_budget``); when it cannot go out, one line says
so and what the activity did stands.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from http import HTTPStatus
from typing import Any

from botbuilder.core import InvokeResponse, TurnContext
from botbuilder.schema import Activity, ActivityTypes, Attachment
from msrest.exceptions import HttpOperationError

from bot import (
    AdapterState,
    ApprovalCard,
    BatchCard,
    ChatCore,
    Click,
    ClickResult,
    IncomingMessage,
    Overloaded,
    Prompt,
    Text,
    ThreadKey,
    Undeliverable,
    approvals_command,
    compose,
    inbox_note,
)

from . import blocks, cards, convert, feedback, inbox, refresh, texts
from .auth import TeamsAuth
from .limits import Limits
from .nearby import Nearby
from .people import Directory

log = logging.getLogger(__name__)

CARD_ACTION_INVOKE = "adaptiveCard/action"
MESSAGE_RESPONSE_TYPE = "application/vnd.microsoft.activity.message"
ERROR_RESPONSE_TYPE = "application/vnd.microsoft.error"


class TeamsBot:
    """The bot logic handed to ``CloudAdapter.process_activity``."""

    def __init__(
        self,
        bot: ChatCore,
        chat: AdapterState,
        auth: TeamsAuth,
        people: Directory | None = None,
        *,
        limits: Limits | None = None,
        nearby: Nearby | None = None,
    ) -> None:
        self._bot = bot
        self._nearby = nearby or Nearby(chat)
        self._chat = chat
        self._auth = auth
        self._people = people or Directory()
        self._limits = limits or Limits()

    async def on_turn(self, context: TurnContext) -> None:
        """Handle one activity; invokes leave their answer on the turn."""
        activity = context.activity
        sender = activity.from_property
        if sender is not None:
            self._people.learn(getattr(sender, "aad_object_id", None), sender.id)
        if activity.type == ActivityTypes.message:
            if convert.is_submit(activity):
                await self._submit(context)
            else:
                await self._message(context)
        elif activity.type == ActivityTypes.invoke:
            await self._invoke(context)
        # Other activities (conversationUpdate, typing, reactions...) need no answer.

    async def _message(self, context: TurnContext) -> None:
        activity = context.activity
        if convert.from_a_bot(activity):
            return  # the bot's own message, or another bot's: answering could loop
        thread = convert.thread_of(activity)
        message = convert.incoming_message(activity, thread)
        if not message.text:
            return
        command = approvals_command(message.text)
        if command is not None and await self._for_the_bot(activity, thread):
            # The bot's own command, never a request for the agent.
            await self._approvals(context, message, revoke=command == "revoke")
            return
        # With RSC the bot sees every message of a channel or group chat: take the
        # ones addressed to it, and replies in threads it already takes part in
        # (the core knows which). A group chat is one long thread: there, only a
        # mention starts new work; other messages may still answer its question.
        mentioned = convert.is_personal(activity) or convert.mentions_bot(activity)
        group_chat = activity.conversation.conversation_type == "groupChat"
        message = replace(
            message,
            addressed=mentioned or not group_chat,
            only_if_followed=not mentioned,
            reference=convert.reference_of(activity, thread),
            # In a group chat a mention is how new work starts, never how a question is
            # answered; in a channel a reply may have to mention the bot to reach it.
            mentioned=group_chat and convert.mentions_bot(activity),
        )
        await self._bot.on_message(message)
        if mentioned:  # its reference is kept with it: a place to start others from
            await self._nearby.heard(thread)

    async def _invoke(self, context: TurnContext) -> None:
        activity = context.activity
        if activity.name == feedback.SUBMIT_ACTION_INVOKE:
            await self._rated(context)
            return
        if activity.name != CARD_ACTION_INVOKE:
            # Nothing else is declared in the manifest; answer without failing the client.
            await _answer_invoke(context, None)
            return
        if convert.is_stop(activity):
            await self._stop_invoke(context)
            return
        thread = convert.thread_of(activity)
        looking = convert.refresh_click(activity, thread)
        if looking is not None:
            await _answer_invoke(context, await self._refresh(activity, looking))
            return
        click = convert.execute_click(activity, thread)
        if click is None:
            await _answer_invoke(context, _message_body(texts.ACTION_NOT_SUPPORTED))
            return
        await self._remember(activity)
        result = await self._click(click)
        if convert.shown_in_inbox(activity):
            body = await self._inbox_answer(click, result)
        elif result.accepted and result.card is not None:
            body = _card_body(result.card, activity)
        elif result.accepted:
            # Done, with nothing to show in the card's place (an ended grant: the core says so).
            body = _message_body(result.message or texts.CLICK_DONE)
        else:
            # Refused, stale, or a form answer or edit that does not fit: the clicker reads why.
            body = _message_body(result.message or texts.ACTION_FAILED)
        await _answer_invoke(context, body)

    async def _rated(self, context: TurnContext) -> None:
        """A press of Teams' 👍 / 👎 under an answer: kept for the run that message answered.
        Teams thanks the person itself, and takes only an empty answer."""
        activity = context.activity
        rated = convert.rating(activity, convert.thread_of(activity))
        if rated is None:
            await _malformed(context, texts.FEEDBACK_MALFORMED)
            return
        key = feedback.note_key(activity.conversation.id, rated.message_id)
        run_id = await self._chat.note(key)
        if run_id is None:
            log.info("feedback on %s, which the bot does not know (or no longer)", key)
        else:
            await self._bot.on_feedback(rated.thread, rated.user_id, run_id, helpful=rated.helpful)
        await _answer_invoke(context, {})

    async def _stop_invoke(self, context: TurnContext) -> None:
        """Stop under the text before a card: the presser reads that the run stopped, or
        why it did not (the core says in the thread what it ended)."""
        activity = context.activity
        press = convert.stop_press(activity, convert.thread_of(activity))
        if press is None:
            await _malformed(context, texts.STOP_MALFORMED)
            return
        said = await self._stop(activity, press)
        await _answer_invoke(context, _message_body(said or texts.STOPPED))

    async def _stop(self, activity: Activity, press: convert.StopPress) -> str:
        """Stop the run for the presser; why nothing was stopped ("" when it was)."""
        await self._remember(activity)
        try:
            said = await self._bot.on_stop(press.thread, press.user_id, press.run_id)
        except Overloaded:
            raise
        except Exception:
            log.exception("a Teams Stop failed")
            return texts.ACTION_FAILED
        return _markdown(said)

    async def _for_the_bot(self, activity: Activity, thread: ThreadKey) -> bool:
        """Whether a message is for the bot: in its 1:1 chat, with a mention, or a reply in a
        channel thread it takes part in (which the core would take for a request)."""
        if convert.is_personal(activity) or convert.mentions_bot(activity):
            return True
        if not convert.is_channel(activity):
            return False  # a group chat's other messages never start work
        try:
            return await asyncio.wait_for(self._chat.follows(thread.id), 1.0)
        except Exception as exc:
            log.warning("could not tell whether the bot follows %s: %s", thread.id, exc)
            return False

    async def _approvals(
        self, context: TurnContext, message: IncomingMessage, *, revoke: bool
    ) -> None:
        """``approvals``: the person's inbox, as a card; ``approvals revoke``: end the grants
        they gave. Only in their 1:1 chat with the bot: elsewhere others would read it."""
        if not convert.is_personal(context.activity):
            await self._reply(context, texts.APPROVALS_PRIVATE)
            return
        await self._remember(context.activity)
        try:
            if revoke:
                said = await self._bot.revoke_given(message.thread, message.user_id)
                await self._reply(context, _markdown(said))
                return
            shown = await self._bot.inbox(message.thread, message.user_id, message.user_name)
        except Overloaded:
            raise
        except Exception:
            log.exception("the approvals command failed")
            await self._reply(context, texts.ACTION_FAILED)
            return
        await self._reply(
            context, _card_activity(inbox.inbox_card(shown), summary=inbox.summary(shown))
        )

    async def _inbox_answer(self, click: Click, result: ClickResult) -> dict[str, Any]:
        """The answer to a button of the ``approvals`` list: the list as it now reads, topped
        by how the click went (the card in its thread is updated by the core)."""
        decided = result.card if result.accepted and isinstance(result.card, ApprovalCard) else None
        said = result.message or texts.ACTION_FAILED
        note = inbox_note(decided) if decided is not None else (said,)
        try:
            shown = await self._bot.inbox(click.thread, click.user_id, click.user_name)
        except Overloaded:
            raise
        except Exception:
            log.exception("could not show the approvals list again")
            return (
                _card_body(decided, click_from=None) if decided is not None else _message_body(said)
            )
        if decided is not None and decided.status != "pending":
            # Decided: out of the list, even if the store still shows it waiting.
            gone = (decided.run_id, decided.tool_call_id)
            waiting = tuple(c for c in shown.waiting if (c.run_id, c.tool_call_id) != gone)
            shown = replace(shown, waiting=waiting)
        content = inbox.inbox_card(shown, note=note)
        return {"statusCode": 200, "type": cards.CONTENT_TYPE, "value": content}

    async def _refresh(self, activity: Activity, looking: Click) -> dict[str, Any]:
        """The answer to a card's refresh: the card as it now reads for this viewer."""
        try:
            card = await self._bot.card_now(looking)
        except Overloaded:
            raise
        except Exception:
            log.exception("could not draw a Teams card again")
            return _error_body(HTTPStatus.INTERNAL_SERVER_ERROR, texts.ACTION_FAILED)
        if card is None:
            return _error_body(HTTPStatus.NOT_FOUND, texts.CARD_UNKNOWN)
        return _card_body(card, activity)

    async def _submit(self, context: TurnContext) -> None:
        activity = context.activity
        if convert.is_stop(activity):
            press = convert.stop_press(activity, convert.thread_of(activity))
            said = await self._stop(activity, press) if press else texts.ACTION_NOT_SUPPORTED
            if said:  # nothing stopped (when it was, the core said so in the thread)
                await self._reply(context, said)
            return
        click = convert.submit_click(activity, convert.thread_of(activity))
        if click is None:
            await self._reply(context, texts.ACTION_NOT_SUPPORTED)
            return
        await self._remember(activity)
        result = await self._click(click)
        # An accepted click needs no words: the core replaces the card for everyone.
        if not result.accepted:
            await self._reply(context, result.message or texts.ACTION_FAILED)
        elif isinstance(result.card, ApprovalCard) and convert.shown_in_inbox(activity):
            # The list itself stays as it was: say how the click went under it.
            await self._reply(context, blocks.markdown(inbox_note(result.card), card=False))

    async def _reply(self, context: TurnContext, activity: Activity | str) -> None:
        """Answer in the activity's conversation from inside the turn, within the
        policy's ``reply_budget``; when it cannot go out, one line says why (no token,
        no service, throttled, refused) and the turn goes on."""
        conversation = context.activity.conversation.id
        try:
            await self._auth.prefetch_token()
            await self._limits.call(
                conversation,
                lambda: context.send_activity(activity),
                budget=self._limits.policy.reply_budget,
                service_url=context.activity.service_url or "Teams",
            )
        except (Undeliverable, HttpOperationError) as exc:
            log.warning(
                "could not answer a Teams %s in %s: %s", context.activity.type, conversation, exc
            )

    async def _click(self, click: Click) -> ClickResult:
        try:
            return await self._bot.on_click(click)
        except Overloaded:
            raise
        except Exception:
            log.exception("a Teams card click failed")
            return ClickResult(accepted=False, said=(texts.ACTION_FAILED,))

    async def _remember(self, activity: Activity) -> None:
        """Refresh where to post in a click's thread later (a message's travels with it).

        The thread already has its reference (the card was posted with it), so
        refreshing it may fail without losing the click.
        """
        thread = convert.thread_of(activity)
        reference = convert.reference_of(activity, thread)
        try:
            # Bounded: the click itself must still be recorded within the invoke's time.
            await asyncio.wait_for(self._chat.set_conversation_ref(thread.id, reference), 1.0)
        except Exception as exc:
            why = str(exc) or type(exc).__name__
            log.warning("could not refresh the reference of %s: %s", thread.id, why)


def _card_body(
    card: ApprovalCard | Prompt | BatchCard, click_from: Activity | None
) -> dict[str, Any]:
    """The invoke answer showing the clicker (the sender of ``click_from``) the card as it
    now reads: a pending approval as they see it (``refresh.view_for``)."""
    if isinstance(card, ApprovalCard) and click_from is not None:
        viewer = convert.viewer_ids(click_from)
        sender = click_from.from_property
        content = refresh.view_for(card, viewer, getattr(sender, "id", None))
    else:
        content = cards.draw(compose(card))
    return {"statusCode": 200, "type": cards.CONTENT_TYPE, "value": content}


def _error_body(status: HTTPStatus, text: str) -> dict[str, Any]:
    """An invoke answer saying why it failed (Universal Actions' error shape): a card that
    could not be drawn, or an invoke the bot cannot read."""
    return {
        "statusCode": int(status),
        "type": ERROR_RESPONSE_TYPE,
        "value": {"code": status.phrase.replace(" ", ""), "message": text},
    }


def _markdown(text: Text) -> str:
    """Words and people as a Teams message shows them (people by name, escaped)."""
    return "".join(part if isinstance(part, str) else blocks.person_text(part) for part in text)


def _card_activity(content: dict[str, Any], *, summary: str) -> Activity:
    return Activity(
        type=ActivityTypes.message,
        summary=summary,
        attachments=[Attachment(content_type=cards.CONTENT_TYPE, content=content)],
    )


def _message_body(text: str) -> dict[str, Any]:
    return {"statusCode": 200, "type": MESSAGE_RESPONSE_TYPE, "value": text}


async def _malformed(context: TurnContext, text: str) -> None:
    """Answer an invoke the bot cannot read: 400, saying why."""
    bad = HTTPStatus.BAD_REQUEST
    await _answer_invoke(context, _error_body(bad, text), status=bad)


async def _answer_invoke(
    context: TurnContext, body: dict[str, Any] | None, *, status: HTTPStatus = HTTPStatus.OK
) -> None:
    response = InvokeResponse(status=status, body=body)
    await context.send_activity(Activity(type=ActivityTypes.invoke_response, value=response))
