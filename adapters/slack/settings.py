"""The Slack adapter's settings: ``SLACK_*`` from the environment, checked together."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bot import CheckedSettings, load_from_env

DEFAULT_API_URL = "https://slack.com/api/"


class SlackSettings(CheckedSettings):
    """Field ``slack_bot_token`` is env ``SLACK_BOT_TOKEN``, etc. Secrets stay out of ``repr``."""

    slack_bot_token: str | None = Field(default=None, repr=False)
    slack_signing_secret: str | None = Field(default=None, repr=False)
    slack_app_token: str | None = Field(default=None, repr=False)
    slack_api_url: str = DEFAULT_API_URL
    # Read only to refuse them: with both set, Bolt would silently switch to OAuth
    # (multi-workspace) mode, which this single-token bot does not speak.
    slack_client_id: str | None = None
    slack_client_secret: str | None = Field(default=None, repr=False)

    def problems(self) -> list[str]:
        """Settings that only make sense together but were given alone."""
        out: list[str] = []
        if self.slack_bot_token and not self.slack_signing_secret:
            out.append("SLACK_SIGNING_SECRET is required when SLACK_BOT_TOKEN is set")
        if self.slack_signing_secret and not self.slack_bot_token:
            out.append("SLACK_BOT_TOKEN is required when SLACK_SIGNING_SECRET is set")
        if self.slack_app_token and not self.slack_bot_token:
            out.append("SLACK_APP_TOKEN (Socket Mode) needs SLACK_BOT_TOKEN too")
        if self.enabled and self.slack_client_id and self.slack_client_secret:
            out.append("Slack: unset SLACK_CLIENT_ID/SLACK_CLIENT_SECRET: this bot uses one token")
        return out

    @property
    def enabled(self) -> bool:
        """Whether the Slack adapter should run."""
        return bool(self.slack_bot_token and self.slack_signing_secret)


def load_slack_settings(**overrides: Any) -> SlackSettings:
    """The Slack settings from the environment (``overrides`` win); ``SettingsError`` if bad."""
    return load_from_env(SlackSettings, **overrides)
