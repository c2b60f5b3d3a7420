"""Configuration from the environment (names as in DESIGN.md's public contract).

``load_settings()`` turns a missing or inconsistent setting into a
``SettingsError`` that names the environment variables involved, so a bad
deployment fails at start with one readable line instead of a trace.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agents.stores import store_kind

DEFAULT_AGENT = "examples.ops:build_agent"
"""The bundled example agent: ``module:attribute`` of an ``Agent`` or a factory."""

DEFAULT_STORE_URL = "sqlite:///data/approval-bot.db"
DEFAULT_SLACK_API_URL = "https://slack.com/api/"
DEMO_MODEL = "demo"

_AGENT_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

AppType = Literal["MultiTenant", "SingleTenant", "UserAssignedMSI"]


class SettingsError(Exception):
    """The environment does not describe a runnable bot; ``problems`` lists why."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration: " + "; ".join(problems))
        self.problems = problems
        self.lines = [f"invalid configuration: {problem}" for problem in problems]
        """One readable line per problem."""


class Settings(BaseSettings):
    """Every setting of the bot. Field ``slack_bot_token`` is env ``SLACK_BOT_TOKEN``, etc.

    Secrets are left out of ``repr`` so that logging the settings leaks nothing.
    Empty variables count as unset.
    """

    model_config = SettingsConfigDict(env_ignore_empty=True, extra="ignore", frozen=True)

    slack_bot_token: str | None = Field(default=None, repr=False)
    slack_signing_secret: str | None = Field(default=None, repr=False)
    slack_app_token: str | None = Field(default=None, repr=False)
    slack_api_url: str = DEFAULT_SLACK_API_URL

    microsoft_app_id: str | None = None
    microsoft_app_password: str | None = Field(default=None, repr=False)
    microsoft_app_type: AppType = "MultiTenant"
    microsoft_app_tenant_id: str | None = None
    teams_allow_unauthenticated: bool = False

    anthropic_api_key: str | None = Field(default=None, repr=False)
    anthropic_base_url: str | None = None
    # Unset means AnthropicModel's defaults (4 retries, 60 s); see AnthropicModel.from_env.
    anthropic_max_retries: int | None = Field(default=None, ge=0)
    anthropic_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    bot_model: str | None = None
    bot_agent: str = DEFAULT_AGENT

    store_url: str = DEFAULT_STORE_URL
    approval_policy: Path | None = None
    bot_host: str = "0.0.0.0"
    bot_port: int = Field(default=3978, ge=1, le=65535)

    @field_validator("bot_agent")
    @classmethod
    def _agent_ref(cls, value: str) -> str:
        if not _AGENT_REF.match(value):
            raise ValueError(f"{value!r} is not 'module:attribute' (e.g. {DEFAULT_AGENT})")
        return value

    @field_validator("store_url")
    @classmethod
    def _store_scheme(cls, value: str) -> str:
        store_kind(value)  # raises for a scheme no store has
        return value

    @model_validator(mode="after")
    def _complete(self) -> Settings:
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def problems(self) -> list[str]:
        """Settings that only make sense together but were given alone."""
        out: list[str] = []
        if self.slack_bot_token and not self.slack_signing_secret:
            out.append("SLACK_SIGNING_SECRET is required when SLACK_BOT_TOKEN is set")
        if self.slack_signing_secret and not self.slack_bot_token:
            out.append("SLACK_BOT_TOKEN is required when SLACK_SIGNING_SECRET is set")
        if self.slack_app_token and not self.slack_bot_token:
            out.append("SLACK_APP_TOKEN (Socket Mode) needs SLACK_BOT_TOKEN too")
        if self.microsoft_app_password and not self.microsoft_app_id:
            out.append("MICROSOFT_APP_ID is required when MICROSOFT_APP_PASSWORD is set")
        if self.microsoft_app_id:
            kind = self.microsoft_app_type
            if kind != "UserAssignedMSI" and not self.microsoft_app_password:
                out.append(
                    f"MICROSOFT_APP_PASSWORD is required when MICROSOFT_APP_ID is set "
                    f"(MICROSOFT_APP_TYPE={kind})"
                )
            if kind != "MultiTenant" and not self.microsoft_app_tenant_id:
                out.append(f"MICROSOFT_APP_TENANT_ID is required for MICROSOFT_APP_TYPE={kind}")
        return out

    @property
    def slack_enabled(self) -> bool:
        """Whether the Slack adapter should run."""
        return bool(self.slack_bot_token and self.slack_signing_secret)

    @property
    def teams_enabled(self) -> bool:
        """Whether the Teams adapter should run (with or without authentication)."""
        return bool(self.microsoft_app_id) or self.teams_allow_unauthenticated

    @property
    def teams_unauthenticated(self) -> bool:
        """Teams runs without verifying Bot Framework tokens (local testing only)."""
        return self.teams_allow_unauthenticated and not self.microsoft_app_id

    @property
    def use_demo_model(self) -> bool:
        """The offline demo model is used: asked for, or no Anthropic key to do better."""
        return self.bot_model == DEMO_MODEL or not self.anthropic_api_key


def load_settings(**overrides: Any) -> Settings:
    """Read the settings from the environment (``overrides`` win).

    Raises:
        SettingsError: A value is invalid or the configuration is incomplete.
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(_problems(exc)) from exc


def _problems(exc: ValidationError) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        message = err["msg"].removeprefix("Value error, ")
        if err["loc"]:
            out.append(f"{str(err['loc'][0]).upper()}: {message}")
        else:
            out.extend(message.split("; "))
    return out
