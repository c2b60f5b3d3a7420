"""Many workspaces: Bolt's installation and OAuth state stores on the bot's own state,
and each workspace's Web API client.

An installation is kept by the workspace (team) it was made in, as Slack's team ids
are unique across Slack; an org-wide install of an Enterprise Grid organization (no
team) by its enterprise, and it speaks for every workspace of the organization. Only
the latest installation of a workspace is kept, with its bot: the app asks for no
user scopes, so an installation carries no token but the bot's.

With token rotation a bot token lasts 12 hours and comes with a refresh token:
``BotRotator`` refreshes it shortly before it expires, once at a time per workspace,
for Bolt (a request's token) and for ``Tokens`` (calls with no request behind them)
alike, and keeps the new one in the store.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from typing import Any
from weakref import WeakValueDictionary

import aiohttp
from cachetools import LRUCache
from slack_sdk.errors import SlackApiError, SlackTokenRotationError
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat_state import InstallationState, RecordState

log = logging.getLogger(__name__)

STATE_TTL = 600
"""Seconds an OAuth state (``/slack/install`` to ``/slack/oauth_redirect``) is valid."""
_STATE = "slack-oauth-state:"
BOT_RECORD = "slack:bot:"
"""The prefix of the record of each installed bot (its token), by workspace."""
_INSTALLATION = "slack:installation:"
_CLIENTS = 10_000
ROTATION_MARGIN_MINUTES = 120
"""A rotated bot token that expires within this many minutes is refreshed before it is
used (Bolt's default; Slack's rotated tokens last 12 hours), by Bolt and ``Tokens``
alike."""
ENTERPRISE_PREFIX = "E"
"""Slack's enterprise (organization) ids start with it, its team ids with ``T``."""


def workspace_of(
    enterprise_id: str | None, team_id: str | None, *, org_wide: bool = False
) -> str | None:
    """The workspace part of a thread key: the team of a workspace's own install; the
    enterprise of an org-wide install, whichever of its workspaces a request comes from
    (Slack's channel and user ids are unique across an organization, so a card in a
    channel shared by two of them is one card)."""
    if team_id and not org_wide and team_id != enterprise_id:
        return team_id
    return enterprise_id or team_id or None


def place_key(enterprise_id: str | None, team_id: str | None, *, org_wide: bool = False) -> str:
    """Where a workspace's installation is kept: its team, or an org-wide install's
    enterprise (also when a request names the enterprise as its team, as an
    organization's own uninstall may)."""
    workspace = workspace_of(enterprise_id, team_id, org_wide=org_wide)
    if workspace is None:
        raise ValueError("a Slack installation names a team or an enterprise")
    return f"enterprise:{workspace}" if workspace == enterprise_id else workspace


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
        await self._records.put_record(BOT_RECORD + key, _dumps(bot.__dict__))

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        key = place_key(enterprise_id, team_id, org_wide=bool(is_enterprise_install))
        found = await self._records.record(BOT_RECORD + key)
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
        await self._records.drop_records([BOT_RECORD + place_key(enterprise_id, team_id)])

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
        await self._records.drop_records([BOT_RECORD + key, _INSTALLATION + key])


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


class BotRotator(AsyncTokenRotator):
    """slack_sdk's token rotator, refreshing each workspace's bot token once at a time in
    this process and keeping the new one in ``installations``: Bolt's for requests (its
    ``token_rotator``) and ``Tokens``'s for calls without one, so neither refreshes
    with a refresh token the other has just used up (Slack revokes it).

    Args:
        installations: Where each workspace's bot is kept.
        client_id: The app's client id (``SLACK_CLIENT_ID``).
        client_secret: The app's client secret.
        client: The client that calls ``oauth.v2.access`` (its address and session).
        margin_minutes: How long before it expires a token is refreshed.
    """

    def __init__(
        self,
        installations: SlackInstallations,
        *,
        client_id: str,
        client_secret: str,
        client: AsyncWebClient,
        margin_minutes: int = ROTATION_MARGIN_MINUTES,
    ) -> None:
        super().__init__(client_id=client_id, client_secret=client_secret, client=client)
        self.installations = installations
        self.margin_minutes = margin_minutes
        # A lock lives while someone holds or awaits it: no entry outlives its use.
        self._locks: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()

    def expiring(self, bot: Bot, minutes: int | None = None) -> bool:
        """Whether ``bot``'s token is due for a refresh (within ``minutes`` of expiring)."""
        margin = self.margin_minutes if minutes is None else minutes
        return bot.bot_refresh_token is not None and _expires_within(bot, margin * 60)

    async def perform_bot_token_rotation(
        self, *, bot: Bot, minutes_before_expiration: int = ROTATION_MARGIN_MINUTES
    ) -> Bot | None:
        """Bolt's hook: the bot with a new token, or ``None`` to keep ``bot``'s."""
        fresh = await self.fresh(bot, minutes_before_expiration)
        return None if fresh.bot_token == bot.bot_token else fresh

    async def fresh(self, bot: Bot, minutes: int | None = None) -> Bot:
        """``bot``, its token refreshed (and kept) if it is due; ``bot`` itself when
        Slack cannot be reached and its token has not expired yet.

        Raises:
            SlackTokenRotationError: Slack refused the refresh (the refresh token was
                revoked): the workspace has to install the app again.
            LookupError: The bot was deleted meanwhile (uninstalled, revoked).
            aiohttp.ClientError, TimeoutError, SlackApiError: Slack could not be reached
                (or answered 5xx, or rate limited) and the token has expired.
        """
        margin = self.margin_minutes if minutes is None else minutes
        if not self.expiring(bot, margin):
            return bot
        place = place_key(bot.enterprise_id, bot.team_id, org_wide=bot.is_enterprise_install)
        lock = self._locks.setdefault(place, asyncio.Lock())
        async with lock:
            stored = await self._stored(bot, place)
            if not self.expiring(stored, margin):
                return stored  # refreshed while this call waited
            try:
                refreshed = await super().perform_bot_token_rotation(
                    bot=stored, minutes_before_expiration=margin
                )
            except SlackTokenRotationError as exc:
                if _out_of_reach(exc.api_error):  # as any call Slack answers so
                    return _still_valid(stored, place, exc.api_error)
                return await self._refused(stored, place, exc)
            except (aiohttp.ClientError, TimeoutError) as exc:
                return _still_valid(stored, place, exc)
            if refreshed is None:  # Slack answered with no bot token: keep the one we have
                return stored
            await self.installations.async_save_bot(refreshed)
            return refreshed

    async def _stored(self, bot: Bot, place: str) -> Bot:
        stored = await self.installations.async_find_bot(
            enterprise_id=bot.enterprise_id,
            team_id=bot.team_id,
            is_enterprise_install=bot.is_enterprise_install,
        )
        if stored is None or not stored.bot_token:
            raise LookupError(f"the Slack app is not installed in {place} any more")
        return stored

    async def _refused(self, tried: Bot, place: str, refusal: SlackTokenRotationError) -> Bot:
        """Another replica may have used the refresh token first: its token, if kept."""
        stored = await self._stored(tried, place)
        if stored.bot_token != tried.bot_token and not self.expiring(stored):
            return stored
        raise refusal


class Tokens:
    """The Web API client of each workspace, all on one HTTP session.

    With one bot token (``installations`` is ``None``) every workspace gets ``client``;
    else a copy of it with the workspace's bot token, from its installation, refreshed
    first by ``rotator`` when it is about to expire.
    """

    def __init__(
        self,
        client: AsyncWebClient,
        installations: SlackInstallations | None = None,
        *,
        rotator: BotRotator | None = None,
    ) -> None:
        self.client = client
        self.rotator = rotator
        self._installations = installations
        self._clients: LRUCache[str, AsyncWebClient] = LRUCache(maxsize=_CLIENTS)

    @property
    def many(self) -> bool:
        """Whether each workspace has a token of its own (OAuth)."""
        return self._installations is not None

    async def client_for(
        self, workspace: str | None, enterprise_id: str | None = None
    ) -> AsyncWebClient:
        """The client that speaks for the bot in ``workspace``: a team (``T…``), whose own
        installation it finds (else, given its ``enterprise_id``, the org-wide one), or
        an enterprise (``E…``, as ``workspace_of`` names an org-wide install's), whose
        org-wide installation it finds. Telling the two apart by Slack's id prefixes
        costs one store read where trying both would cost two per call.

        Raises:
            LookupError: The app is not installed there (any more), or Slack refused to
                refresh its token.
        """
        if self._installations is None:
            return self.client
        bot = await self._bot(self._installations, workspace, enterprise_id)
        if bot is None or not bot.bot_token:
            raise LookupError(f"the Slack app is not installed in {workspace or enterprise_id}")
        if self.rotator is not None:
            try:
                bot = await self.rotator.fresh(bot)
            except SlackTokenRotationError as exc:
                error = _error_of(exc.api_error)
                log.warning("Slack refused to refresh the bot token of %s: %s", workspace, error)
                raise LookupError(f"the Slack app is not installed in {workspace}") from None
        return self._with_token(bot.bot_token)

    @staticmethod
    async def _bot(
        installations: SlackInstallations, workspace: str | None, enterprise_id: str | None
    ) -> Bot | None:
        if workspace and workspace.startswith(ENTERPRISE_PREFIX):
            return await installations.async_find_bot(
                enterprise_id=workspace, team_id=None, is_enterprise_install=True
            )
        bot = None
        if workspace:
            bot = await installations.async_find_bot(enterprise_id=enterprise_id, team_id=workspace)
        if bot is None and enterprise_id:
            bot = await installations.async_find_bot(
                enterprise_id=enterprise_id, team_id=None, is_enterprise_install=True
            )
        return bot

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


def _expires_within(bot: Bot, seconds: float) -> bool:
    expires_at = bot.bot_token_expires_at
    return expires_at is not None and expires_at <= time.time() + seconds


def _out_of_reach(error: SlackApiError) -> bool:
    """Whether a failed refresh was Slack's trouble (5xx, rate limited), not a refusal."""
    status = getattr(error.response, "status_code", 0)
    return status >= 500 or status == 429 or _error_of(error) == "ratelimited"


def _error_of(error: SlackApiError) -> str | None:
    """Slack's error code, if it answered with one (a 5xx page has none)."""
    data = getattr(error.response, "data", None)
    code = data.get("error") if isinstance(data, dict) else None
    return code if isinstance(code, str) else None


def _still_valid(bot: Bot, place: str, failure: Exception) -> Bot:
    """A token Slack could not refresh, kept until it expires."""
    if _expires_within(bot, 0):
        raise failure
    log.warning(
        "could not refresh the Slack token of %s (%r): using it until it expires", place, failure
    )
    return bot


def _dumps(fields: dict[str, Any]) -> str:
    return json.dumps(fields, ensure_ascii=False, default=str)
