"""Slack adapter: events, interactivity and ``/approvals`` over HTTP or Socket Mode; Block Kit."""

from __future__ import annotations

from bot import ChatCore

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
    "load_slack_settings",
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
