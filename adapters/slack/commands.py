"""``/approvals``: a person's inbox, answered privately through the command's
``response_url``; ``/approvals revoke`` ends the grants they gave.

A click in the inbox (its Approve and Decline are the card's buttons) is decided
like a click on the card; its answer comes back here, to show the inbox again
with what the click did, or to tell the clicker why not.
"""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot import (
    APPROVALS_USAGE,
    ApprovalCard,
    ChatCore,
    Click,
    ClickResult,
    Rich,
    Text,
    ThreadKey,
    approvals_command,
    inbox_note,
)

from . import texts
from .blocks import SlackMessage
from .convert import CommandIn
from .inbox import inbox_links, inbox_message
from .messenger import SlackMessenger
from .mrkdwn import text_mrkdwn

log = logging.getLogger(__name__)


class Approvals:
    """Answers ``/approvals`` and the clicks made in its answers.

    Args:
        bot: The chat core (``inbox``, ``revoke_given``).
        messenger: For permalinks to the requests the inbox lists.
        client: Its HTTP session is shared with the answers (set once started).
    """

    def __init__(self, bot: ChatCore, messenger: SlackMessenger, client: AsyncWebClient) -> None:
        self.bot = bot
        self.messenger = messenger
        self.client = client

    async def answer(self, command: CommandIn, place: ThreadKey) -> None:
        """Answer ``/approvals [revoke]`` typed at ``place``, to its typist only."""
        asked = approvals_command(command.text, named=True)
        try:
            if asked == "revoke":
                said = await self.bot.revoke_given(place, command.user)
                await self.tell(command.response_url, said)
            elif asked == "list":
                await self.show(place, command.user, command.response_url)
            else:
                await self.tell(command.response_url, (APPROVALS_USAGE,))
        except Exception:
            log.exception("could not answer /approvals for %s", command.user)
            await self.tell(command.response_url, (texts.INBOX_UNAVAILABLE,))

    async def show(
        self,
        place: ThreadKey,
        user_id: str,
        response_url: str,
        *,
        note: Rich = (),
        replace: bool = False,
    ) -> None:
        """Show ``user_id``'s inbox, ``note`` first (in place of the one clicked in, with
        ``replace``)."""
        inbox = await self.bot.inbox(place, user_id)
        links = await inbox_links(inbox, self.messenger.permalink)
        message = inbox_message(inbox, links=links, note=note)
        await self._send(response_url, message, replace=replace)

    async def after_click(self, click: Click, result: ClickResult, response_url: str) -> None:
        """Show what a click in an inbox did there, or tell the clicker why not."""
        if result.accepted and isinstance(result.card, ApprovalCard):
            try:
                await self.show(
                    click.thread,
                    click.user_id,
                    response_url,
                    note=inbox_note(result.card),
                    replace=True,
                )
            except Exception:
                log.exception("could not show the inbox again to %s", click.user_id)
        if result.said:
            await self.tell(response_url, result.said)

    async def tell(self, response_url: str, text: Text) -> None:
        """Say something only the person who typed the command (or clicked) sees."""
        mrkdwn = text_mrkdwn(text)
        message = SlackMessage(text=mrkdwn, blocks=[])
        await self._send(response_url, message, replace=False)

    async def _send(self, response_url: str, message: SlackMessage, *, replace: bool) -> None:
        webhook = AsyncWebhookClient(response_url, session=self.client.session)
        try:
            response = await webhook.send(
                text=message.text,
                blocks=message.blocks or None,
                response_type="ephemeral",
                replace_original=replace,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not answer through the response URL: %s", exc)
            return
        if response.status_code != 200:
            log.warning(
                "Slack refused an answer through the response URL: %s %s",
                response.status_code,
                response.body,
            )
