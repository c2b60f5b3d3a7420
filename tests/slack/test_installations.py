"""Many workspaces: the settings that turn OAuth on, and Bolt's installation and state
stores on the bot's own state."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from slack_sdk.oauth.installation_store import Installation
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import SlackSettings
from adapters.slack.installations import SlackInstallations, SlackOAuthStates, Tokens
from bot.chat_state import MemoryChatState


def installation(team: str, token: str, *, enterprise: str | None = None) -> Installation:
    return Installation(
        app_id="A1",
        enterprise_id=enterprise,
        team_id=team,
        bot_token=token,
        bot_id=f"B{team}",
        bot_user_id=f"U{team}",
        bot_scopes="chat:write",
        user_id="U0INSTALLER",
    )


def test_client_id_and_secret_without_a_bot_token_turn_on_many_workspaces() -> None:
    settings = SlackSettings(
        slack_client_id="1.2", slack_client_secret="cs", slack_signing_secret="s"
    )
    assert settings.problems() == []
    assert settings.distributed
    assert settings.enabled


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (
            {"slack_client_id": "1.2", "slack_signing_secret": "s"},
            "SLACK_CLIENT_SECRET is required",
        ),
        (
            {"slack_client_id": "1.2", "slack_client_secret": "cs"},
            "SLACK_SIGNING_SECRET is required",
        ),
        (
            {
                "slack_bot_token": "xoxb-1",
                "slack_signing_secret": "s",
                "slack_client_id": "1.2",
                "slack_client_secret": "cs",
            },
            "unset SLACK_CLIENT_ID/SLACK_CLIENT_SECRET",
        ),
    ],
)
def test_a_client_id_alone_or_beside_a_bot_token_is_a_problem(
    fields: dict[str, str], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem):
        SlackSettings.model_validate(fields)


async def test_an_installation_is_found_by_its_workspace_until_uninstalled() -> None:
    store = SlackInstallations(MemoryChatState())
    await store.async_save(installation("T1", "xoxb-1"))
    await store.async_save(installation("T2", "xoxb-2", enterprise="E1"))
    bot = await store.async_find_bot(enterprise_id=None, team_id="T1")
    assert bot is not None
    assert bot.bot_token == "xoxb-1"
    found = await store.async_find_installation(enterprise_id="E1", team_id="T2")
    assert found is not None
    assert found.bot_token == "xoxb-2"
    await store.async_delete_all(enterprise_id=None, team_id="T1")
    assert await store.async_find_bot(enterprise_id=None, team_id="T1") is None
    assert await store.async_find_installation(enterprise_id=None, team_id="T1") is None
    assert await store.async_find_bot(enterprise_id="E1", team_id="T2") is not None


async def test_a_revoked_bot_token_leaves_the_installation_without_one() -> None:
    store = SlackInstallations(MemoryChatState())
    await store.async_save(installation("T1", "xoxb-1"))
    await store.async_delete_bot(enterprise_id=None, team_id="T1")
    found = await store.async_find_installation(enterprise_id=None, team_id="T1")
    assert found is not None
    assert found.bot_token is None


async def test_an_oauth_state_is_consumed_once() -> None:
    states = SlackOAuthStates(MemoryChatState())
    state = await states.async_issue()
    assert await states.async_consume(state) is True
    assert await states.async_consume(state) is False
    assert await states.async_consume("never-issued") is False


async def test_each_workspace_gets_a_client_with_its_own_token() -> None:
    store = SlackInstallations(MemoryChatState())
    await store.async_save(installation("T1", "xoxb-1"))
    await store.async_save(installation("T2", "xoxb-2"))
    shared = AsyncWebClient(base_url="http://127.0.0.1:9/api/")
    tokens = Tokens(shared, store)
    assert (await tokens.client_for("T1")).token == "xoxb-1"
    assert (await tokens.client_for("T2")).token == "xoxb-2"
    assert (await tokens.client_for("T2")).base_url == shared.base_url
    with pytest.raises(LookupError):
        await tokens.client_for("T3")
    assert await Tokens(shared).client_for("T3") is shared  # one token: one client
