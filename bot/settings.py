"""Configuration from the environment (names as in DESIGN.md's public contract).

``load_settings()`` turns a missing or inconsistent setting into a
``SettingsError`` that names the environment variables involved, so a bad
deployment fails at start with one readable line instead of a trace.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Self, TypeVar
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agents import DEFAULT_LEASE
from agents.stores import store_kind

from .housekeeping import DEFAULT_RUN_RETENTION
from .intake import DEFAULT_WORKERS
from .policy import Duration
from .sink import sink_target

DEFAULT_AGENT = "examples.ops:build_agent"
"""The bundled example agent: ``module:attribute`` of an ``Agent`` or a factory."""

DEFAULT_STORE_URL = "sqlite:///data/approval-bot.db"
DEMO_MODEL = "demo"

_AGENT_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class SettingsError(Exception):
    """The environment does not describe a runnable bot; ``problems`` lists why."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration: " + "; ".join(problems))
        self.problems = problems
        self.lines = [f"invalid configuration: {problem}" for problem in problems]
        """One readable line per problem."""


ENV_CONFIG = SettingsConfigDict(env_ignore_empty=True, extra="ignore", frozen=True)
"""How every settings class reads the environment: empty variables count as unset."""


class CheckedSettings(BaseSettings):
    """Settings from the environment whose fields must also make sense together.

    Subclasses list what does not in ``problems()``; ``load_from_env`` reports
    each as one line.
    """

    model_config = ENV_CONFIG

    def problems(self) -> list[str]:
        """Settings that only make sense together but were given alone."""
        return []

    @model_validator(mode="after")
    def _complete(self) -> Self:
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self


class Settings(BaseSettings):
    """The chat-neutral settings. Field ``store_url`` is env ``STORE_URL``, etc.

    Each platform adapter reads its own (``adapters/<platform>/settings.py``).
    Secrets are left out of ``repr`` so that logging the settings leaks nothing.
    """

    model_config = ENV_CONFIG

    anthropic_api_key: str | None = Field(default=None, repr=False)
    anthropic_base_url: str | None = None
    # Unset means AnthropicModel's defaults (4 retries, 60 s); see AnthropicModel.from_env.
    anthropic_max_retries: int | None = Field(default=None, ge=0)
    anthropic_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    bot_model: str | None = None
    bot_agent: str = DEFAULT_AGENT
    bot_config: Path | None = None
    """A TOML file declaring the agents, their tools and MCP servers (``bot/config.py``);
    replaces ``bot_agent`` when set."""

    store_url: str = DEFAULT_STORE_URL
    approval_policy: Path | None = None
    policy_mode: Literal["enforce", "shadow"] = "enforce"
    """``shadow``: also look up each call in ``shadow_policy`` and log where it would
    treat it otherwise, acting only on ``approval_policy``."""
    shadow_policy: Path | None = None
    bot_host: str = "0.0.0.0"
    bot_port: int = Field(default=3978, ge=1, le=65535)
    bot_workers: int = Field(default=DEFAULT_WORKERS, ge=1, le=1000)
    """Messages and clicks one replica works on at once; the rest wait in the inbox."""
    bot_lease: Duration = DEFAULT_LEASE
    """How long a replica's work outlives its last heartbeat: after a crash, its runs
    are recovered (retried when safe, else reported as interrupted) and the messages
    and clicks it had taken are taken over once this lapsed. The same on every replica."""
    run_retention: Duration = DEFAULT_RUN_RETENTION
    """How long a finished run is kept (``30d``), and a thread's history once it has no
    newer run; then both are removed. Waiting and working runs are always kept; the
    audit log is kept as ``audit_retention`` says."""
    audit_retention: Duration | None = None
    """How long audit entries are kept (``365d``); then they are removed, oldest first.
    Unset: the audit log is kept for ever."""
    audit_signing_key: Path | None = None
    """An Ed25519 private key (PEM): the bot signs the audit chain's head with it now and
    then and on shutdown, and the anchor a retention prune leaves (``bot.evidence``)."""
    audit_sink: str | None = Field(default=None, repr=False)
    """Where every audit entry also goes, as one JSON line (``bot.sink``): a file
    (``file:///var/log/approvals.jsonl``) or a webhook (``https://siem.example.com/in``;
    out of ``repr``, as its path or query may hold a credential)."""
    audit_sink_secret: SecretStr | None = Field(default=None, repr=False)
    """The HMAC-SHA256 key a webhook ``audit_sink``'s batches are signed with."""

    public_url: str | None = None
    """Where people's browsers reach the bot (``https://approvals.example.com``): decision
    links are made with it, and cards sent to one approver carry theirs. Unset: links
    are paths (in the API's answers), and direct messages carry none."""

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{value!r} is not an http(s) address (https://bot.example.com)")
        if parts.query or parts.fragment:
            raise ValueError(f"{value!r}: an address without ?query or #fragment")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _shadow(self) -> Self:
        if self.policy_mode == "shadow" and self.shadow_policy is None:
            raise ValueError("POLICY_MODE=shadow needs SHADOW_POLICY (the policy to try)")
        if self.policy_mode != "shadow" and self.shadow_policy is not None:
            raise ValueError("SHADOW_POLICY is read only with POLICY_MODE=shadow")
        return self

    @model_validator(mode="after")
    def _audit_sink(self) -> Self:
        secret = self.audit_sink_secret
        if self.audit_sink is None:
            if secret is not None:
                raise ValueError("AUDIT_SINK_SECRET is read only with AUDIT_SINK (a webhook)")
            return self
        sink_target(self.audit_sink, secret.get_secret_value() if secret else None)
        return self

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

    @property
    def use_demo_model(self) -> bool:
        """The offline demo model is used: asked for, or no Anthropic key to do better."""
        return self.bot_model == DEMO_MODEL or not self.anthropic_api_key


SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def load_settings(**overrides: Any) -> Settings:
    """Read the settings from the environment (``overrides`` win).

    Raises:
        SettingsError: A value is invalid or the configuration is incomplete.
    """
    return load_from_env(Settings, **overrides)


def load_from_env(cls: type[SettingsT], **overrides: Any) -> SettingsT:
    """Read one settings class from the environment (``overrides`` win).

    A model validator that raises ``ValueError("a; b")`` reports settings that
    only make sense together; each becomes one problem.

    Raises:
        SettingsError: A value is invalid or the configuration is incomplete.
    """
    try:
        return cls(**overrides)
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
