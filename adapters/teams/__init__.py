"""Microsoft Teams adapter (botbuilder 4.17.1 ``CloudAdapter``), kept behind one class."""

from __future__ import annotations

import logging

from bot import ChatCore
from bot.checks import LiveCheck, variables_of

from . import _msrest
from .adapter import MESSAGES_PATH, TeamsAdapter, TeamsNotConfigured
from .auth import TeamsAuth
from .messenger import MissingReference, TeamsMessenger
from .settings import TeamsSettings, load_teams_settings
from .streaming import StreamPace

__all__ = [
    "MESSAGES_PATH",
    "MissingReference",
    "StreamPace",
    "TeamsAdapter",
    "TeamsMessenger",
    "TeamsNotConfigured",
    "TeamsSettings",
    "configured",
    "from_env",
    "live_checks",
    "load_teams_settings",
    "variables",
]

log = logging.getLogger(__name__)

_msrest.apply()


def configured() -> bool:
    """Whether the environment turns Teams on (``SettingsError`` if it does so badly)."""
    return load_teams_settings().enabled


def from_env(bot: ChatCore) -> TeamsAdapter | None:
    """The Teams adapter the environment configures, or ``None`` when it configures none.

    The adapter itself warns loudly when it runs without authentication.

    Raises:
        SettingsError: The Teams settings are incomplete or invalid.
    """
    settings = load_teams_settings()
    if not settings.enabled:
        return None
    if settings.teams_allow_unauthenticated and not settings.unauthenticated:
        log.warning("TEAMS_ALLOW_UNAUTHENTICATED is ignored: MICROSOFT_APP_ID is set")
    return TeamsAdapter(bot, settings)


def variables() -> frozenset[str]:
    """The environment variables the Teams adapter reads."""
    return variables_of(TeamsSettings)


def live_checks(bot: ChatCore) -> list[LiveCheck]:
    """Getting a Bot Framework token for the app (``check --live``), when Teams is on
    with authentication."""
    settings = load_teams_settings()
    if not settings.enabled or settings.unauthenticated:
        return []

    async def token() -> list[str]:
        auth = TeamsAuth(settings)
        try:
            await auth.credentials.prefetch(auth.app_id)
        except Exception as exc:  # MSAL and the SDK raise many kinds: each is one line
            reason = str(exc) or type(exc).__name__
            return [f"Teams: no Bot Framework token for MICROSOFT_APP_ID={auth.app_id} ({reason})"]
        finally:
            auth.close()
        return []

    return [LiveCheck(name="Teams", run=token)]
