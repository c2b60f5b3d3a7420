"""Slack adapter: Events API and interactivity over HTTP or Socket Mode, Block Kit cards."""

from .app import EVENTS_PATH, LISTENED_EVENTS, SlackAdapter
from .messenger import SlackMessenger

__all__ = ["EVENTS_PATH", "LISTENED_EVENTS", "SlackAdapter", "SlackMessenger"]
