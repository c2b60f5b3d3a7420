"""Slack adapter: events, interactivity and ``/approvals`` over HTTP or Socket Mode; Block Kit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.oauth.installation_store import Bot
from slack_sdk.web.async_client import AsyncWebClient

from bot import ChatCore
from bot.chat_state import RecordState
from bot.checks import LiveAnswer, LiveCheck, variables_of

from .app import EVENTS_PATH, LISTENED_EVENTS, SlackAdapter
from .installations import BOT_RECORD
from .messenger import SlackMessenger
from .settings import SlackSettings, load_slack_settings

__all__ = [
    "EVENTS_PATH",
    "LISTENED_EVENTS",
    "LIVE_CALLS_AT_ONCE",
    "SlackAdapter",
    "SlackMessenger",
    "SlackSettings",
    "configured",
    "from_env",
    "live_checks",
    "load_slack_settings",
    "variables",
]


def configured() -> bool:
    """Whether the environment turns Slack on (``SettingsError`` if it does so badly)."""
    return load_slack_settings().enabled


def from_env(bot: ChatCore) -> SlackAdapter | None:
    """The Slack adapter the environment configures, or ``None`` when it configures none.

    Raises:
        SettingsError: The Slack settings are incomplete or invalid.
    """
    settings = load_slack_settings()
    return SlackAdapter(bot, settings) if settings.enabled else None


def variables() -> frozenset[str]:
    """The environment variables the Slack adapter reads."""
    return variables_of(SlackSettings)


LIVE_TIMEOUT = 10
"""Seconds one Web API call of a live check may take."""

LIVE_CALLS_AT_ONCE = 8
"""``auth.test`` calls ``check --live`` makes at once, one per installation: a large
install base checked without tripping Slack's rate limits."""

_NO_CODE = "approval-bot-check-live"
"""The code ``check --live`` exchanges: no code Slack issued, so Slack answers
``invalid_code`` when the client id and secret are right."""

_CREDENTIAL_REFUSED = {
    "invalid_client_id": "SLACK_CLIENT_ID",
    "bad_client_secret": "SLACK_CLIENT_SECRET",
}
"""What ``oauth.v2.access`` answers for a wrong client id or secret, and which it is."""


def live_checks(bot: ChatCore) -> list[LiveCheck]:
    """What ``check --live`` reaches when Slack is on. One token: ``auth.test`` with the
    bot token and, for Socket Mode, opening a connection with the app token. Many
    workspaces: the client id and secret, and ``auth.test`` with each installation's
    bot token (the installations ``bot``'s chat state keeps)."""
    settings = load_slack_settings()
    if not settings.enabled:
        return []
    if settings.distributed:

        async def installations() -> LiveAnswer:
            return await _check_installations(settings, bot.chat)

        # No bound on the whole: it takes a call per installation, each bounded.
        return [LiveCheck(name="Slack", run=installations, within=None)]
    api = settings.slack_api_url

    async def bot_token() -> list[str]:
        client = AsyncWebClient(token=settings.slack_bot_token, base_url=api, timeout=LIVE_TIMEOUT)
        return await _answered(client.auth_test, "auth.test", "SLACK_BOT_TOKEN", api)

    async def app_token() -> list[str]:
        client = AsyncWebClient(base_url=api, timeout=LIVE_TIMEOUT)
        app = settings.slack_app_token or ""
        return await _answered(
            lambda: client.apps_connections_open(app_token=app),
            "apps.connections.open",
            "SLACK_APP_TOKEN",
            api,
        )

    checks = [LiveCheck(name="Slack", run=bot_token)]
    if settings.slack_app_token:
        checks.append(LiveCheck(name="Slack Socket Mode", run=app_token))
    return checks


async def _check_installations(settings: SlackSettings, records: RecordState) -> LiveAnswer:
    """The client id and secret, and each installed bot's token, a few at a time; one
    line per problem, the same line once (an unreachable Slack is one line)."""
    api = settings.slack_api_url
    try:
        async with asyncio.timeout(LIVE_TIMEOUT):
            found = await records.records(BOT_RECORD)
    except TimeoutError:
        unread = f"Slack: the installations were not read from the store within {LIVE_TIMEOUT} s"
        return LiveAnswer(problems=(unread,))
    at_once = asyncio.Semaphore(LIVE_CALLS_AT_ONCE)
    async with aiohttp.ClientSession() as session:

        def client(token: str | None = None) -> AsyncWebClient:
            return AsyncWebClient(token=token, base_url=api, session=session, timeout=LIVE_TIMEOUT)

        async def one(key: str, record: str) -> _Installed:
            async with at_once:
                return await _installed(key.removeprefix(BOT_RECORD), record, client, api)

        credentials, installed = await asyncio.gather(
            _credentials(client(), settings, api),
            asyncio.gather(*(one(key, record) for key, record in found)),
        )
    problems = [*credentials, *(i.problem for i in installed if i.problem is not None)]
    if problems:
        return LiveAnswer(problems=tuple(dict.fromkeys(problems)))
    return LiveAnswer(reached=_reached(len(installed), sum(i.expired for i in installed)))


def _reached(installations: int, expired: int) -> str:
    """What a many-workspaces check reached, for the report."""
    if not installations:
        return "Slack app credentials (no workspace has installed the app yet)"
    plural = "" if installations == 1 else "s"
    reached = f"Slack app credentials and {installations} installation{plural}"
    if expired:
        reached += f" ({expired} with an expired token, refreshed at its next request)"
    return reached


async def _credentials(client: AsyncWebClient, settings: SlackSettings, api: str) -> list[str]:
    """``oauth.v2.access`` with the client id and secret and a code Slack never issued:
    ``invalid_code`` means both are right."""
    answer = await _ask(
        lambda: client.oauth_v2_access(
            client_id=settings.slack_client_id or "",
            client_secret=settings.slack_client_secret or "",
            code=_NO_CODE,
        ),
        api,
    )
    if answer.unreachable is not None:
        return [answer.unreachable]
    if answer.error in (None, "invalid_code"):
        return []
    which = _CREDENTIAL_REFUSED.get(answer.error, "SLACK_CLIENT_ID/SLACK_CLIENT_SECRET")
    return [f"Slack: oauth.v2.access refused {which} ({answer.error})"]


@dataclass(frozen=True, kw_only=True)
class _Installed:
    """What ``auth.test`` made of one installation's bot token."""

    problem: str | None = None
    expired: bool = False
    """Its token expired, and Bolt refreshes it (token rotation) at its next request."""


async def _installed(
    place: str, record: str, client: Callable[[str], AsyncWebClient], api: str
) -> _Installed:
    """``auth.test`` with the bot token of the installation kept at ``place`` (a team id,
    or ``enterprise:<id>`` for an org-wide install)."""
    try:
        bot = Bot(**json.loads(record))
    except (ValueError, TypeError) as exc:  # as the adapter would fail to read it
        return _Installed(problem=f"Slack: cannot read the installation of {place} ({exc})")
    where = _workspace(place, bot)
    if not bot.bot_token:
        return _Installed(problem=f"Slack: the installation of {where} has no bot token")
    answer = await _ask(client(bot.bot_token).auth_test, api)
    if answer.unreachable is not None:
        return _Installed(problem=answer.unreachable)
    if answer.error == "token_expired" and bot.bot_refresh_token:
        return _Installed(expired=True)
    if answer.error is not None:
        return _Installed(problem=f"Slack: auth.test refused the token of {where} ({answer.error})")
    return _Installed()


def _workspace(place: str, bot: Bot) -> str:
    """An installation as a problem line names it: its id, and its name when known."""
    enterprise = place.removeprefix("enterprise:")
    if enterprise != place:
        named = f"organization {enterprise}"
        name = bot.enterprise_name
    else:
        named, name = f"workspace {place}", bot.team_name
    return f"{named} ({name})" if name else named


@dataclass(frozen=True, kw_only=True)
class _Answer:
    """How Slack answered one call: ok, an ``error``, or not at all (``unreachable``)."""

    error: str | None = None
    unreachable: str | None = None
    """The problem line when Slack could not be reached."""


async def _ask(call: Callable[[], Awaitable[object]], api: str) -> _Answer:
    """Make one Web API call and say how Slack answered."""
    try:
        await call()
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else None
        return _Answer(error=str(error or exc))
    except TimeoutError:
        return _Answer(unreachable=f"Slack: no answer from {api} within {LIVE_TIMEOUT} s")
    except (SlackClientError, aiohttp.ClientError, OSError) as exc:
        return _Answer(unreachable=f"Slack: cannot reach {api} ({exc or type(exc).__name__})")
    return _Answer()


async def _answered(
    call: Callable[[], Awaitable[object]], method: str, token: str, api: str
) -> list[str]:
    """One problem line when Slack refuses ``method`` or cannot be reached."""
    answer = await _ask(call, api)
    if answer.unreachable is not None:
        return [answer.unreachable]
    if answer.error is not None:
        return [f"Slack: {method} refused {token} ({answer.error})"]
    return []
