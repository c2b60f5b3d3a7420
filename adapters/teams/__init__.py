"""Microsoft Teams adapter (botbuilder 4.17.1 ``CloudAdapter``), kept behind one class."""

from __future__ import annotations

import logging

from bot import ChatCore

from . import _msrest
from .adapter import MESSAGES_PATH, TeamsAdapter, TeamsNotConfigured
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
    "load_teams_settings",
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
