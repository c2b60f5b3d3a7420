"""Many workspaces: Bolt's installation and OAuth state stores on the bot's own state,
and each workspace's Web API client.

An installation is kept by the workspace (team) it was made in, as Slack's team ids
are unique across Slack; an org-wide install of an Enterprise Grid organization (no
team) by its enterprise. Only the latest installation of a workspace is kept, with
its bot: the app asks for no user scopes, so an installation carries no token but
the bot's.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from cachetools import LRUCache
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat_state import InstallationState, RecordState

log = logging.getLogger(__name__)

STATE_TTL = 600
"""Seconds an OAuth state (``/slack/install`` to ``/slack/oauth_redirect``) is valid."""
_STATE = "slack-oauth-state:"
_BOT = "slack:bot:"
_INSTALLATION = "slack:installation:"
_CLIENTS = 10_000


def place_key(enterprise_id: str | None, team_id: str | None, *, org_wide: bool = False) -> str:
    """Where a workspace's installation is kept: its team, or an org-wide install's
    enterprise."""
    if team_id and not org_wide:
        return team_id
    if enterprise_id:
        return f"enterprise:{enterprise_id}"
    raise ValueError("a Slack installation names a team or an enterprise")


class SlackInstallations(AsyncInstallationStore):
    """Bolt's ``AsyncInstallationStore`` on the bot's records (JSON, no pickle)."""

    def __init__(self, records: RecordState) -> None:
        self._records = records

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_save(self, installation: Installation) -> None:
        key = place_key(
            installation.enterprise_id,
            installation.team_id,
            org_wide=bool(installation.is_enterprise_install),
        )
        await self._records.put_record(_INSTALLATION + key, _dumps(installation.__dict__))
        await self.async_save_bot(installation.to_bot())

    async def async_save_bot(self, bot: Bot) -> None:
        key = place_key(bot.enterprise_id, bot.team_id, org_wide=bool(bot.is_enterprise_install))
        await self._records.put_record(_BOT + key, _dumps(bot.__dict__))

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        key = place_key(enterprise_id, team_id, org_wide=bool(is_enterprise_install))
        found = await self._records.record(_BOT + key)
        return Bot(**json.loads(found)) if found is not None else None

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        key = place_key(enterprise_id, team_id, org_wide=bool(is_enterprise_install))
        found = await self._records.record(_INSTALLATION + key)
        if found is None:
            return None
        installation = Installation(**json.loads(found))
        if user_id is not None and installation.user_id != user_id:
            return None
        bot = await self.async_find_bot(
            enterprise_id=enterprise_id,
            team_id=team_id,
            is_enterprise_install=is_enterprise_install,
        )
        if bot is None:  # tokens_revoked took the bot's token
            installation.bot_token = installation.bot_refresh_token = None
            installation.bot_token_expires_at = None
        elif bot.bot_token != installation.bot_token:  # rotated since
            installation.bot_token = bot.bot_token
            installation.bot_refresh_token = bot.bot_refresh_token
            installation.bot_token_expires_at = bot.bot_token_expires_at
        return installation

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await self._records.drop_records([_BOT + place_key(enterprise_id, team_id)])

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        key = _INSTALLATION + place_key(enterprise_id, team_id)
        found = await self._records.record(key)
        if found is None:
            return
        if user_id is None or json.loads(found).get("user_id") == user_id:
            await self._records.drop_records([key])

    async def async_delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        key = place_key(enterprise_id, team_id)
        await self._records.drop_records([_BOT + key, _INSTALLATION + key])


class SlackOAuthStates(AsyncOAuthStateStore):
    """Bolt's ``AsyncOAuthStateStore`` on the bot's notes: each state lives
    ``STATE_TTL`` seconds and is consumed once, on any replica."""

    def __init__(self, notes: InstallationState) -> None:
        self._notes = notes

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        state = secrets.token_urlsafe(24)
        await self._notes.set_note(_STATE + state, "issued", ttl=STATE_TTL)
        return state

    async def async_consume(self, state: str) -> bool:
        if not state:
            return False
        return await self._notes.take_note(_STATE + state) is not None


class Tokens:
    """The Web API client of each workspace, all on one HTTP session.

    With one bot token (``installations`` is ``None``) every workspace gets ``client``;
    else a copy of it with the workspace's bot token, from its installation.
    """

    def __init__(
        self, client: AsyncWebClient, installations: SlackInstallations | None = None
    ) -> None:
        self.client = client
        self._installations = installations
        self._clients: LRUCache[str, AsyncWebClient] = LRUCache(maxsize=_CLIENTS)

    @property
    def many(self) -> bool:
        """Whether each workspace has a token of its own (OAuth)."""
        return self._installations is not None

    async def client_for(
        self, team_id: str | None, enterprise_id: str | None = None
    ) -> AsyncWebClient:
        """The client that speaks for the bot in ``team_id``.

        Raises:
            LookupError: The app is not installed there (any more).
        """
        if self._installations is None:
            return self.client
        bot = None
        if team_id:
            bot = await self._installations.async_find_bot(
                enterprise_id=enterprise_id, team_id=team_id
            )
        if bot is None and enterprise_id:
            bot = await self._installations.async_find_bot(
                enterprise_id=enterprise_id, team_id=None, is_enterprise_install=True
            )
        if bot is None or not bot.bot_token:
            raise LookupError(f"the Slack app is not installed in {team_id or enterprise_id}")
        return self._with_token(bot.bot_token)

    def _with_token(self, token: str) -> AsyncWebClient:
        client = self._clients.get(token)
        # A client of the session now open: the adapter opens it at start.
        if client is None or client.session is not self.client.session:
            client = AsyncWebClient(
                token=token,
                base_url=self.client.base_url,
                session=self.client.session,
                timeout=self.client.timeout,
                retry_handlers=self.client.retry_handlers,
                logger=self.client.logger,
            )
            self._clients[token] = client
        return client


def _dumps(fields: dict[str, Any]) -> str:
    return json.dumps(fields, ensure_ascii=False, default=str)
