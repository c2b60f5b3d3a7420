"""The Teams adapter's settings: ``MICROSOFT_APP_*`` and ``TEAMS_*``, checked together."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, field_validator

from bot import CheckedSettings, load_from_env

AppType = Literal["MultiTenant", "SingleTenant", "UserAssignedMSI"]

DEFAULT_APP_TYPE: Final[AppType] = "SingleTenant"
"""What Azure creates for a new Azure Bot (and the README tells people to create)."""

_YES: Final = frozenset({"1", "true", "yes", "on"})
_NO: Final = frozenset({"0", "false", "no", "off", ""})


class TeamsSettings(CheckedSettings):
    """Field ``microsoft_app_id`` is env ``MICROSOFT_APP_ID``, etc. Secrets stay out of ``repr``."""

    microsoft_app_id: str | None = None
    microsoft_app_password: str | None = Field(default=None, repr=False)
    microsoft_app_type: AppType = DEFAULT_APP_TYPE
    microsoft_app_tenant_id: str | None = None
    teams_allow_unauthenticated: bool = False

    @field_validator("teams_allow_unauthenticated", mode="before")
    @classmethod
    def _yes_or_no(cls, value: Any) -> Any:
        # Stricter than pydantic's bool: a typo such as "ture" must not read as either.
        if isinstance(value, bool):
            return value
        word = value.strip().lower() if isinstance(value, str) else None
        if word in _YES:
            return True
        if word in _NO:
            return False
        raise ValueError(
            f"Input should be true, 1, yes or on (Teams without authentication, for local "
            f"testing) or false, 0, no, off; got {value!r}"
        )

    def problems(self) -> list[str]:
        """Settings that only make sense together but were given alone."""
        out: list[str] = []
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
                default = "" if "microsoft_app_type" in self.model_fields_set else " (the default)"
                out.append(
                    f"MICROSOFT_APP_TENANT_ID is required for MICROSOFT_APP_TYPE={kind}{default}: "
                    "the Directory (tenant) ID of the bot's app registration "
                    "(set MICROSOFT_APP_TYPE=MultiTenant for a bot registered as multi-tenant)"
                )
        return out

    @property
    def enabled(self) -> bool:
        """Whether the Teams adapter should run (with or without authentication)."""
        return bool(self.microsoft_app_id) or self.teams_allow_unauthenticated

    @property
    def unauthenticated(self) -> bool:
        """Teams runs without verifying Bot Framework tokens (local testing only)."""
        return self.teams_allow_unauthenticated and not self.microsoft_app_id


def load_teams_settings(**overrides: Any) -> TeamsSettings:
    """The Teams settings from the environment (``overrides`` win); ``SettingsError`` if bad."""
    return load_from_env(TeamsSettings, **overrides)
