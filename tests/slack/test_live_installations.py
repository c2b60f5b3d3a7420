"""``python -m bot check --live`` in many workspaces: the app's client id and secret,
and each installation's bot token, checked against the fake Web API with the
installations a SQLite store keeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from slack_sdk.oauth.installation_store import Installation

from adapters.slack import LIVE_CALLS_AT_ONCE
from adapters.slack.installations import SlackInstallations
from agents import open_store
from bot import open_chat_state
from tests.bot.test_checks import check_live

from .fake_slack import CLIENT_ID, CLIENT_SECRET, TOKEN, FakeSlack, Scripted

GOOD_TEAM, BAD_TEAM = "T0GOOD001", "T0BAD0001"
REVOKED = "xoxb-revoked"


def installation(
    team: str | None,
    token: str,
    *,
    name: str | None = None,
    enterprise: str | None = None,
    refresh_token: str | None = None,
) -> Installation:
    """An installation as Bolt's OAuth flow saves it (a whole organization's without
    ``team``)."""
    return Installation(
        app_id="A0APP0001",
        enterprise_id=enterprise,
        enterprise_name=f"{name} Org" if enterprise and name else None,
        team_id=team,
        team_name=name if team else None,
        bot_token=token,
        bot_id=f"B{team or enterprise}",
        bot_user_id=f"U{team or enterprise}",
        bot_scopes="chat:write",
        bot_refresh_token=refresh_token,
        bot_token_expires_in=3600 if refresh_token else None,
        is_enterprise_install=team is None,
        user_id="U0INSTALL1",
    )


async def installed(tmp_path: Path, *installations: Installation) -> str:
    """The URL of a SQLite store keeping ``installations``, saved as the adapter saves them."""
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    store = open_store(url)
    chat = open_chat_state(store)
    try:
        for one in installations:
            await SlackInstallations(chat).async_save(one)
    finally:
        await chat.close()
        await store.close()
    return url


async def check_workspaces(
    tmp_path: Path, api: str, *installations: Installation, secret: str = CLIENT_SECRET
) -> tuple[int, str, str]:
    """``check --live`` with OAuth settings, the store keeping ``installations``."""
    return await check_live(
        tmp_path,
        BOT_MODEL="demo",
        STORE_URL=await installed(tmp_path, *installations),
        SLACK_CLIENT_ID=CLIENT_ID,
        SLACK_CLIENT_SECRET=secret,
        SLACK_SIGNING_SECRET="secret",
        SLACK_API_URL=api,
    )


async def test_check_live_names_the_one_workspace_whose_token_slack_refuses(
    tmp_path: Path, slack: FakeSlack
) -> None:
    code, out, err = await check_workspaces(
        tmp_path,
        slack.url,
        installation(GOOD_TEAM, TOKEN, name="Good Co"),
        installation(BAD_TEAM, REVOKED, name="Acme"),
    )
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [
        f"approval-bot: Slack: auth.test refused the token of workspace {BAD_TEAM} (Acme)"
        " (invalid_auth)"
    ]
    assert sorted(str(call.token) for call in slack.of("auth.test")) == sorted([TOKEN, REVOKED])
    assert len(slack.of("oauth.v2.access")) == 1


async def test_check_live_names_a_client_secret_slack_refuses(
    tmp_path: Path, slack: FakeSlack
) -> None:
    code, out, err = await check_workspaces(
        tmp_path, slack.url, installation(GOOD_TEAM, TOKEN), secret="not-the-secret"
    )
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [
        "approval-bot: Slack: oauth.v2.access refused SLACK_CLIENT_SECRET (bad_client_secret)"
    ]
    (exchange,) = slack.of("oauth.v2.access")
    assert exchange.client == (CLIENT_ID, "not-the-secret")


async def test_check_live_says_it_reached_every_installation(
    tmp_path: Path, slack: FakeSlack
) -> None:
    slack.issued["xoxb-team-b"] = "T0TEAMB01"  # as if installed through the fake's OAuth
    code, out, err = await check_workspaces(
        tmp_path,
        slack.url,
        installation(GOOD_TEAM, TOKEN),
        installation("T0TEAMB01", "xoxb-team-b"),
    )
    assert (code, err) == (0, "")
    assert "configuration OK (live: Slack app credentials and 2 installations)" in out


async def test_check_live_with_nothing_installed_says_so_and_is_fine(
    tmp_path: Path, slack: FakeSlack
) -> None:
    code, out, err = await check_workspaces(tmp_path, slack.url)
    assert (code, err) == (0, "")
    assert "(live: Slack app credentials (no workspace has installed the app yet))" in out
    assert slack.of("auth.test") == []
    assert len(slack.of("oauth.v2.access")) == 1


async def test_an_expired_token_bolt_refreshes_is_no_problem(
    tmp_path: Path, slack: FakeSlack
) -> None:
    slack.script("auth.test", Scripted(error="token_expired"))
    code, out, err = await check_workspaces(
        tmp_path, slack.url, installation(GOOD_TEAM, TOKEN, refresh_token="xoxe-1-refresh")
    )
    assert (code, err) == (0, "")
    assert "1 installation (1 with an expired token, refreshed at its next request)" in out


async def test_a_refused_org_wide_install_is_named_by_its_organization(
    tmp_path: Path, slack: FakeSlack
) -> None:
    code, _, err = await check_workspaces(
        tmp_path, slack.url, installation(None, REVOKED, name="Acme", enterprise="E0ORG0001")
    )
    assert code == 2
    assert err.strip().splitlines() == [
        "approval-bot: Slack: auth.test refused the token of organization E0ORG0001 (Acme Org)"
        " (invalid_auth)"
    ]


async def test_an_unreachable_slack_is_one_line_however_many_installations(
    tmp_path: Path,
) -> None:
    teams = [installation(f"T0TEAM{i:03}", f"xoxb-{i}") for i in range(5)]
    code, _, err = await check_workspaces(tmp_path, "http://127.0.0.1:9/api/", *teams)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("approval-bot: Slack: cannot reach http://127.0.0.1:9/api/")


class SlowSlack:
    """A Web API whose ``auth.test`` takes a while, counting how many wait at once."""

    def __init__(self) -> None:
        self.waiting = 0
        self.most_at_once = 0
        self.tokens: list[str] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["method"] == "oauth.v2.access":
            return web.json_response({"ok": False, "error": "invalid_code"})
        self.tokens.append(request.headers["Authorization"].removeprefix("Bearer "))
        self.waiting += 1
        self.most_at_once = max(self.most_at_once, self.waiting)
        try:
            await asyncio.sleep(0.2)  # Slack's time to answer: the calls overlap
        finally:
            self.waiting -= 1
        return web.json_response({"ok": True, "team_id": "T", "user_id": "U"})

    async def __aenter__(self) -> SlowSlack:
        app = web.Application()
        app.router.add_post("/api/{method}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/api/"
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def slow_slack() -> AsyncIterator[SlowSlack]:
    async with SlowSlack() as fake:
        yield fake


async def test_a_large_install_base_is_checked_a_few_tokens_at_a_time(
    tmp_path: Path, slow_slack: SlowSlack
) -> None:
    teams = [installation(f"T0TEAM{i:03}", f"xoxb-{i}") for i in range(3 * LIVE_CALLS_AT_ONCE)]
    code, out, err = await check_workspaces(tmp_path, slow_slack.url, *teams)
    assert (code, err) == (0, "")
    assert f"{len(teams)} installations" in out
    assert sorted(slow_slack.tokens) == sorted(f"xoxb-{i}" for i in range(len(teams)))
    assert slow_slack.most_at_once == LIVE_CALLS_AT_ONCE


async def test_a_policy_naming_a_channel_or_group_stops_a_bot_of_many_workspaces(
    tmp_path: Path, slack: FakeSlack
) -> None:
    """A channel or a user group alone names no workspace: fail closed, at start,
    saying why (plain ``check``, no Slack call needed)."""
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[tools.refund]\nchannel = "C0APPROVERS"\n\n'
        '[tools.deploy_service]\napprovers = ["@oncall"]\n'
    )
    code, out, err = await check_live(
        tmp_path,
        BOT_MODEL="demo",
        APPROVAL_POLICY=str(policy),
        SLACK_CLIENT_ID=CLIENT_ID,
        SLACK_CLIENT_SECRET=CLIENT_SECRET,
        SLACK_SIGNING_SECRET="secret",
        SLACK_API_URL=slack.url,
    )
    assert code != 0, out
    assert "cannot tell whose channel C0APPROVERS is" in err, err
    assert "cannot tell whose group @oncall is" in err, err
    assert "Traceback" not in err
