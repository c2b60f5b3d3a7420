"""Slack adapter: events, interactivity and ``/approvals`` over HTTP or Socket Mode; Block Kit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot import ChatCore
from bot.checks import LiveCheck, variables_of

from .app import EVENTS_PATH, LISTENED_EVENTS, SlackAdapter
from .messenger import SlackMessenger
from .settings import SlackSettings, load_slack_settings

__all__ = [
    "EVENTS_PATH",
    "LISTENED_EVENTS",
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


def live_checks() -> list[LiveCheck]:
    """Slack's ``auth.test`` with the bot token, and, for Socket Mode, opening a
    connection with the app token (``check --live``), when Slack is on."""
    settings = load_slack_settings()
    if not settings.enabled or settings.distributed:
        # Many workspaces: each installation's token is the bot's to check, not the
        # environment's (not done yet).
        return []
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


async def _answered(
    call: Callable[[], Awaitable[object]], method: str, token: str, api: str
) -> list[str]:
    """One problem line when Slack refuses ``method`` or cannot be reached."""
    try:
        await call()
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else None
        return [f"Slack: {method} refused {token} ({error or exc})"]
    except (SlackClientError, aiohttp.ClientError, OSError) as exc:
        return [f"Slack: cannot reach {api} ({exc or type(exc).__name__})"]
    return []
