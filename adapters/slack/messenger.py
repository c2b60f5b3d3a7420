"""The core's ``Messenger`` for Slack: post, update, tell one person, show a status."""

from __future__ import annotations

import logging

import aiohttp
from cachetools import LRUCache
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot import MessageRef, Text, ThreadKey, View

from .blocks import SlackMessage, render, text_mrkdwn
from .convert import message_ref

log = logging.getLogger(__name__)

_REFUSED_STATUS_CACHE = 10_000
_STATUS_NOT_ALLOWED = frozenset(
    {"not_allowed", "missing_scope", "not_allowed_token_type", "unknown_method", "no_permission"}
)
"""Refusals that mean "never in this channel", as opposed to a passing error."""


class SlackMessenger:
    """Posts views in Slack threads through the Web API.

    Every post goes into the thread (``thread_ts`` = the thread's root); the core
    follows the thread, so that replies there reach the bot.
    """

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        # Channels where Slack refused a status (not an assistant thread, no
        # scope): asking again per message would only cost a round trip.
        self._no_status: LRUCache[str, bool] = LRUCache(maxsize=_REFUSED_STATUS_CACHE)

    async def post(self, thread: ThreadKey, view: View) -> MessageRef:
        """Post a view (several messages for a long answer); return where the first lives."""
        first: MessageRef | None = None
        for message in render(view):
            ref = await self._post(thread, message)
            first = first or ref
        assert first is not None  # render() always returns at least one message
        return first

    async def update(self, thread: ThreadKey, ref: MessageRef, view: View) -> None:
        """Replace a posted view for everyone (``chat.update``)."""
        first, *rest = render(view)
        await self.client.chat_update(
            channel=ref["channel"], ts=ref["ts"], text=first.text, blocks=first.blocks
        )
        for message in rest:
            await self._post(thread, message)

    async def tell(self, thread: ThreadKey, user_id: str, text: Text) -> None:
        """Say something only ``user_id`` sees, in the thread (``chat.postEphemeral``)."""
        await self.client.chat_postEphemeral(
            channel=thread.channel, user=user_id, thread_ts=thread.root, text=text_mrkdwn(text)
        )

    async def set_status(self, thread: ThreadKey, status: str | None) -> None:
        """Show or clear "is thinking…"; silently nothing where Slack refuses it."""
        if thread.channel in self._no_status:
            return
        try:
            await self.client.assistant_threads_setStatus(
                channel_id=thread.channel, thread_ts=thread.root, status=status or ""
            )
        except SlackApiError as exc:
            error = exc.response.get("error")
            log.debug("Slack refused a status in %s: %s", thread.channel, error)
            if error not in _STATUS_NOT_ALLOWED:
                return  # a passing refusal (rate limit, a bad thread): try again next time
            self._no_status[thread.channel] = True
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.debug("no status in %s this time: %s", thread.channel, exc)

    async def _post(self, thread: ThreadKey, message: SlackMessage) -> MessageRef:
        response = await self.client.chat_postMessage(
            channel=thread.channel,
            thread_ts=thread.root,
            text=message.text,
            blocks=message.blocks,
            unfurl_links=False,
            unfurl_media=False,
        )
        return message_ref(str(response["channel"]), str(response["ts"]))
