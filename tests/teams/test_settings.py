"""The Teams settings a new user writes: yes/no switches, the app type Azure creates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.teams import load_teams_settings
from adapters.teams.settings import DEFAULT_APP_TYPE
from bot import SettingsError
from bot.__main__ import main, platforms_configured

README = Path(__file__).resolve().parents[2] / "README.md"


def teams_section() -> str:
    """The README's "Connecting Microsoft Teams" section, up to the next section."""
    text = README.read_text(encoding="utf-8")
    start = text.index("## Connecting Microsoft Teams")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def problems_of(monkeypatch: pytest.MonkeyPatch, **env: str) -> list[str]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as raised:
        load_teams_settings()
    return raised.value.problems


@pytest.mark.parametrize("value", ["1", "true", "True", "TRUE", "yes", "Yes", "on", " on "])
def test_the_usual_true_values_turn_teams_on_without_authentication(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("TEAMS_ALLOW_UNAUTHENTICATED", value)
    settings = load_teams_settings()
    assert settings.enabled
    assert settings.unauthenticated


@pytest.mark.parametrize("value", ["0", "false", "FALSE", "no", "No", "off", "", " "])
def test_the_usual_false_values_and_empty_leave_teams_off(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("TEAMS_ALLOW_UNAUTHENTICATED", value)
    settings = load_teams_settings()
    assert not settings.enabled
    assert not settings.teams_allow_unauthenticated


@pytest.mark.parametrize("value", ["maybe", "ture", "t", "y", "2", "enabled"])
def test_anything_else_is_one_clear_settings_line(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    (problem,) = problems_of(monkeypatch, TEAMS_ALLOW_UNAUTHENTICATED=value)
    assert problem.startswith("TEAMS_ALLOW_UNAUTHENTICATED: Input should be true, 1, yes or on")
    assert "false, 0, no, off" in problem
    assert problem.endswith(f"got {value!r}")


@pytest.mark.parametrize("command", [[], ["console"]], ids=["serve", "console"])
def test_a_value_that_is_no_yes_or_no_stops_the_bot_instead_of_starting_the_console(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    for name in ("ANTHROPIC_API_KEY", "BOT_MODEL", "BOT_AGENT", "BOT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STORE_URL", "memory://")
    monkeypatch.setenv("TEAMS_ALLOW_UNAUTHENTICATED", "ture")
    assert platforms_configured(), "make run must take the serving path, which says why"
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("approval-bot: invalid configuration: TEAMS_ALLOW_UNAUTHENTICATED:")
    assert "got 'ture'" in err


def test_the_app_type_defaults_to_single_tenant_as_the_readme_says() -> None:
    assert DEFAULT_APP_TYPE == "SingleTenant"
    assert load_teams_settings().microsoft_app_type == DEFAULT_APP_TYPE
    section = teams_section()
    assert f"(type **{DEFAULT_APP_TYPE}**)" in section
    assert re.search(rf"`MICROSOFT_APP_TYPE`[^.]*defaults to `{DEFAULT_APP_TYPE}`", section)


def test_a_single_tenant_bot_without_its_tenant_id_is_told_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (problem,) = problems_of(monkeypatch, MICROSOFT_APP_ID="app", MICROSOFT_APP_PASSWORD="secret")
    assert problem.startswith(
        "MICROSOFT_APP_TENANT_ID is required for MICROSOFT_APP_TYPE=SingleTenant (the default): "
    )
    assert "Directory (tenant) ID" in problem
    assert "MICROSOFT_APP_TYPE=MultiTenant" in problem


def test_a_named_app_type_is_not_called_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    (problem,) = problems_of(
        monkeypatch,
        MICROSOFT_APP_ID="app",
        MICROSOFT_APP_TYPE="UserAssignedMSI",
    )
    assert problem.startswith(
        "MICROSOFT_APP_TENANT_ID is required for MICROSOFT_APP_TYPE=UserAssignedMSI: "
    )


def test_a_single_tenant_bot_with_its_tenant_id_is_complete(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MICROSOFT_APP_ID", "app")
    monkeypatch.setenv("MICROSOFT_APP_PASSWORD", "secret")
    monkeypatch.setenv("MICROSOFT_APP_TENANT_ID", "tenant")
    settings = load_teams_settings()
    assert settings.enabled
    assert not settings.unauthenticated
    assert (settings.microsoft_app_type, settings.microsoft_app_tenant_id) == (
        "SingleTenant",
        "tenant",
    )


def test_a_multi_tenant_bot_says_so_and_needs_no_tenant_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MICROSOFT_APP_ID", "app")
    monkeypatch.setenv("MICROSOFT_APP_PASSWORD", "secret")
    monkeypatch.setenv("MICROSOFT_APP_TYPE", "MultiTenant")
    assert load_teams_settings().enabled
