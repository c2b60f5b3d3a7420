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
    # Without SLACK_BOT_TOKEN, both switch on Bolt's OAuth flow: the app is installed
    # in many workspaces, each with a token of its own (``installations``).
    slack_client_id: str | None = None
    slack_client_secret: str | None = Field(default=None, repr=False)

    def problems(self) -> list[str]:
        """Settings that only make sense together but were given alone."""
        out: list[str] = []
        token, oauth = self.slack_bot_token, self.slack_client_id or self.slack_client_secret
        if token and not self.slack_signing_secret:
            out.append("SLACK_SIGNING_SECRET is required when SLACK_BOT_TOKEN is set")
        if self.slack_signing_secret and not token and not oauth:
            out.append("SLACK_BOT_TOKEN is required when SLACK_SIGNING_SECRET is set")
        if self.slack_app_token and not token:
            out.append("SLACK_APP_TOKEN (Socket Mode) needs SLACK_BOT_TOKEN too")
        if token and oauth:
            out.append("Slack: unset SLACK_CLIENT_ID/SLACK_CLIENT_SECRET: this bot uses one token")
        elif oauth:
            if not self.slack_client_id:
                out.append("SLACK_CLIENT_ID is required when SLACK_CLIENT_SECRET is set")
            if not self.slack_client_secret:
                out.append("SLACK_CLIENT_SECRET is required when SLACK_CLIENT_ID is set")
            if not self.slack_signing_secret:
                out.append("SLACK_SIGNING_SECRET is required when SLACK_CLIENT_ID is set")
        return out

    @property
    def distributed(self) -> bool:
        """Whether the app is installed through OAuth, in many workspaces."""
        return bool(
            self.slack_client_id
            and self.slack_client_secret
            and self.slack_signing_secret
            and not self.slack_bot_token
        )

    @property
    def enabled(self) -> bool:
        """Whether the Slack adapter should run."""
        return bool(self.slack_bot_token and self.slack_signing_secret) or self.distributed


def load_slack_settings(**overrides: Any) -> SlackSettings:
    """The Slack settings from the environment (``overrides`` win); ``SettingsError`` if bad."""
    return load_from_env(SlackSettings, **overrides)
