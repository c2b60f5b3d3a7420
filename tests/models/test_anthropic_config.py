"""Retries and timeouts of AnthropicModel from the environment, and the bot's model wiring."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from agents.messages import Message
from agents.models.anthropic import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    USER_MESSAGES,
    AnthropicModel,
)
from agents.models.base import ModelError, ModelRequest
from bot import SettingsError, load_settings
from bot.__main__ import build_model

from .fake_anthropic import FakeAnthropic, Text, overloaded_reply, stream_reply

HELLO = ModelRequest(system="", messages=[Message.user("hello")])
CONFIG_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "BOT_MODEL",
    "ANTHROPIC_MAX_RETRIES",
    "ANTHROPIC_TIMEOUT",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in CONFIG_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
async def fake(clean_env: pytest.MonkeyPatch) -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        clean_env.setenv("ANTHROPIC_API_KEY", "env-key")
        clean_env.setenv("ANTHROPIC_BASE_URL", server.base_url)
        yield server


async def drain(model: AnthropicModel) -> None:
    try:
        async for _ in model.stream(HELLO):
            pass
    finally:
        await model.aclose()


async def test_max_retries_comes_from_the_environment(
    fake: FakeAnthropic, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("ANTHROPIC_MAX_RETRIES", "1")
    fake.script(overloaded_reply(), overloaded_reply(), overloaded_reply())

    with pytest.raises(ModelError) as caught:
        await drain(AnthropicModel.from_env())

    assert caught.value.user_message == USER_MESSAGES["overloaded"]
    assert len(fake.requests) == 2  # the first try and one retry
    assert fake.unused_replies == 1


async def test_zero_retries_means_one_attempt(
    fake: FakeAnthropic, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("ANTHROPIC_MAX_RETRIES", "0")
    fake.script(overloaded_reply(), stream_reply(Text(pieces=["never sent"])))

    with pytest.raises(ModelError):
        await drain(AnthropicModel.from_env())

    assert len(fake.requests) == 1


async def test_timeout_comes_from_the_environment(
    fake: FakeAnthropic, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("ANTHROPIC_TIMEOUT", "0.2")
    clean_env.setenv("ANTHROPIC_MAX_RETRIES", "0")
    never = asyncio.Event()
    reply = stream_reply(Text(pieces=["a", "b"]))
    fake.script(dataclasses.replace(reply, hold=never, hold_after=4))

    with pytest.raises(ModelError) as caught:
        async with asyncio.timeout(5):
            await drain(AnthropicModel.from_env())

    assert caught.value.user_message == USER_MESSAGES["timeout"]


def test_defaults_when_unset_or_empty(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ANTHROPIC_MAX_RETRIES", "")
    model = AnthropicModel.from_env(api_key="k")
    client = model._client
    assert client.max_retries == DEFAULT_MAX_RETRIES == 4
    assert client.timeout == DEFAULT_TIMEOUT == 60.0


def test_arguments_win_over_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ANTHROPIC_MAX_RETRIES", "9")
    clean_env.setenv("ANTHROPIC_TIMEOUT", "90")
    model = AnthropicModel.from_env(api_key="k", max_retries=2, timeout=7.5)
    assert (model._client.max_retries, model._client.timeout) == (2, 7.5)
    from_env = AnthropicModel.from_env(api_key="k")
    assert (from_env._client.max_retries, from_env._client.timeout) == (9, 90.0)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ANTHROPIC_MAX_RETRIES", "three", "ANTHROPIC_MAX_RETRIES must be a whole number"),
        ("ANTHROPIC_MAX_RETRIES", "2.5", "ANTHROPIC_MAX_RETRIES must be a whole number"),
        ("ANTHROPIC_MAX_RETRIES", "-1", "ANTHROPIC_MAX_RETRIES must be a whole number, 0 or more"),
        ("ANTHROPIC_TIMEOUT", "soon", "ANTHROPIC_TIMEOUT must be a number of seconds above 0"),
        ("ANTHROPIC_TIMEOUT", "0", "ANTHROPIC_TIMEOUT must be a number of seconds above 0"),
        ("ANTHROPIC_TIMEOUT", "-5", "ANTHROPIC_TIMEOUT must be a number of seconds above 0"),
        ("ANTHROPIC_TIMEOUT", "inf", "ANTHROPIC_TIMEOUT must be a number of seconds above 0"),
        ("ANTHROPIC_TIMEOUT", "nan", "ANTHROPIC_TIMEOUT must be a number of seconds above 0"),
    ],
)
def test_invalid_values_are_refused_naming_the_variable(
    clean_env: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    clean_env.setenv(name, value)

    with pytest.raises(ValueError, match=message) as caught:
        AnthropicModel.from_env(api_key="k")

    assert repr(value) in str(caught.value) or value in str(caught.value)


# -- the bot's composition root -----------------------------------------------


async def test_the_bot_builds_claude_with_the_configured_retries(
    fake: FakeAnthropic, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("ANTHROPIC_MAX_RETRIES", "1")
    clean_env.setenv("ANTHROPIC_TIMEOUT", "12.5")
    clean_env.setenv("BOT_MODEL", "claude-haiku-5-5")
    settings = load_settings()
    assert (settings.anthropic_max_retries, settings.anthropic_timeout) == (1, 12.5)
    fake.script(overloaded_reply(), overloaded_reply())

    model = build_model(settings)

    assert isinstance(model, AnthropicModel)
    assert model.model_name == "claude-haiku-5-5"
    assert model._client.timeout == 12.5
    with pytest.raises(ModelError):
        await drain(model)
    assert len(fake.requests) == 2
    assert fake.requests[0].headers["authorization"] == "Bearer env-key"


def test_the_bot_uses_settings_given_in_code(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ANTHROPIC_MAX_RETRIES", "7")
    settings = load_settings(
        anthropic_api_key="sk", anthropic_max_retries=0, anthropic_timeout=3, bot_model="claude-x"
    )

    model = build_model(settings)

    assert isinstance(model, AnthropicModel)
    assert (model.model_name, model._client.max_retries, model._client.timeout) == (
        "claude-x",
        0,
        3.0,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ANTHROPIC_MAX_RETRIES", "-1"),
        ("ANTHROPIC_MAX_RETRIES", "lots"),
        ("ANTHROPIC_TIMEOUT", "0"),
        ("ANTHROPIC_TIMEOUT", "inf"),
    ],
)
def test_the_bot_refuses_invalid_values_at_start(
    clean_env: pytest.MonkeyPatch, name: str, value: str
) -> None:
    clean_env.setenv(name, value)

    with pytest.raises(SettingsError) as caught:
        load_settings()

    [problem] = caught.value.problems
    assert problem.startswith(f"{name}: ")
