"""Many workspaces at the HTTP edge: Bolt's OAuth flow installs each workspace, each
workspace's requests are answered with its own token, a rotated token is refreshed
before it expires, and an uninstall or a revocation ends it."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from slack_sdk.errors import SlackApiError
from slack_sdk.oauth import OAuthStateUtils

from adapters.slack import SlackAdapter, SlackSettings
from adapters.slack import installations as installations_module
from adapters.slack.installations import BotRotator, SlackInstallations
from adapters.slack.wire import APPROVE_ACTION
from agents import Store
from bot import ChatBot, Settings, build_app

from .fake_slack import (
    BOT_USER_ID,
    CLIENT_ID,
    CLIENT_SECRET,
    ApiCall,
    FakeSlack,
    Posted,
    Scripted,
)
from .harness import (
    ALICE,
    BOB,
    CHANNEL,
    SIGNING_SECRET,
    BotServer,
    block_actions,
    event_body,
    mention_event,
    signed_headers,
)
from .scripted import Ran, build_agent
from .test_approvals import has_buttons

TEAM_A, TOKEN_A = "T0TEAMA01", "xoxb-team-a"
TEAM_B, TOKEN_B = "T0TEAMB01", "xoxb-team-b"
CHANNEL_A, CHANNEL_B = CHANNEL, "C0CHANB01"
STATE_COOKIE = OAuthStateUtils.default_cookie_name

# slack_sdk sends the client id and secret of oauth.v2.access with aiohttp.BasicAuth,
# which aiohttp 3.14 deprecates (aio-libs/aiohttp#12499): under "error" the exchange
# would fail in the library, not in the bot.
pytestmark = pytest.mark.filterwarnings(
    "ignore:BasicAuth is deprecated:DeprecationWarning:slack_sdk"
)


class Workspaces:
    """The bot installed through OAuth, served over HTTP, spoken to from many workspaces."""

    def __init__(self, slack: FakeSlack, server: BotServer) -> None:
        self.slack = slack
        self.server = server
        self.installations = SlackInstallations(server.bot.chat)

    def url(self, path: str) -> str:
        return str(self.server.server.make_url(path))

    async def get(
        self, path: str, *, cookie: str | None = None, **query: str
    ) -> aiohttp.ClientResponse:
        """A browser's GET (with ``cookie``), redirects not followed; the body read."""
        async with self.server.session.get(
            self.url(path) + ("?" + urlencode(query) if query else ""),
            allow_redirects=False,
            headers={"Cookie": cookie} if cookie is not None else {},
        ) as resp:
            await resp.read()
            return resp

    async def start_install(self) -> str:
        """``GET /slack/install``: the state on the way to Slack's consent page."""
        resp = await self.get("/slack/install")
        assert resp.status == 302
        location = urlsplit(resp.headers["Location"])
        assert (location.netloc, location.path) == ("slack.com", "/oauth/v2/authorize")
        query = parse_qs(location.query)
        assert query["client_id"] == [CLIENT_ID]
        (state,) = query["state"]
        assert resp.cookies[STATE_COOKIE].value == state
        return state

    async def install(self, team: str, token: str) -> aiohttp.ClientResponse:
        """A person installs the app in ``team``: consent page, then back with a code."""
        code = f"code-{team}"
        self.slack.installs[code] = (team, token)
        return await self._consent(code)

    async def install_org(self, enterprise: str, token: str) -> aiohttp.ClientResponse:
        """An admin installs the app in every workspace of the Enterprise Grid
        organization ``enterprise`` at once (an org-wide install)."""
        code = f"code-{enterprise}"
        self.slack.org_installs[code] = (enterprise, token)
        return await self._consent(code)

    async def _consent(self, code: str) -> aiohttp.ClientResponse:
        state = await self.start_install()
        return await self.get(
            "/slack/oauth_redirect", code=code, state=state, cookie=f"{STATE_COOKIE}={state}"
        )

    async def send_event(
        self, team: str, event: dict[str, Any], *, enterprise: str | None = None
    ) -> int:
        """An event from ``team``, signed; with ``enterprise``, to the org-wide install of
        that organization (which names no team)."""
        body = self.event_body(team, event, enterprise=enterprise)
        status, _ = await self.server.post(json.dumps(body))
        return status

    def event_body(
        self, team: str, event: dict[str, Any], *, enterprise: str | None = None
    ) -> dict[str, Any]:
        """The Events API envelope Slack sends for ``event`` in ``team``."""
        body = event_body(event)
        body["team_id"] = team
        if enterprise is not None:
            body["enterprise_id"] = enterprise
            body["authorizations"] = [
                {
                    "enterprise_id": enterprise,
                    "team_id": None,
                    "user_id": BOT_USER_ID,
                    "is_bot": True,
                    "is_enterprise_install": True,
                }
            ]
        else:
            body["authorizations"][0]["team_id"] = team
        return body

    async def press(
        self, team: str, card: Posted, *, user: str, enterprise: str | None = None
    ) -> int:
        """``user`` of ``team`` presses Approve on ``card`` (as Slack would send it); with
        ``enterprise``, through the org-wide install of that organization."""
        status, _ = await self.server.interact(
            self.approval(team, card, user=user, enterprise=enterprise)
        )
        return status

    def approval(
        self, team: str, card: Posted, *, user: str, enterprise: str | None = None
    ) -> dict[str, Any]:
        """What Slack sends when ``user`` of ``team`` presses Approve on ``card`` now."""
        payload = block_actions(card, APPROVE_ACTION, user=user)
        payload["team"]["id"] = team
        payload["user"]["team_id"] = team
        if enterprise is not None:
            payload["team"]["enterprise_id"] = enterprise
            payload["enterprise"] = {"id": enterprise, "name": f"Org {enterprise}"}
            payload["is_enterprise_install"] = True
        return payload

    async def ask_for_deploy(
        self, team: str, channel: str, *, user: str, enterprise: str | None = None
    ) -> Posted:
        """``user`` mentions the bot in ``team`` asking for a deploy; the card it posts."""
        event = mention_event("deploy api", user=user, channel=channel)
        assert await self.send_event(team, event, enterprise=enterprise) == 200
        await self.server.idle()
        (card,) = [m for m in self.slack.in_thread(channel, str(event["ts"])) if has_buttons(m)]
        return card

    def tokens_of(self, method: str, channel: str) -> set[str | None]:
        """The tokens the bot called ``method`` with in ``channel``."""
        return {c.token for c in self.slack.of(method) if c.args.get("channel") == channel}


@asynccontextmanager
async def served(slack: FakeSlack, store: Store, ran: Ran) -> AsyncIterator[Workspaces]:
    """The scripted agent installed through OAuth, served over HTTP (closed after)."""
    settings = SlackSettings(
        slack_client_id=CLIENT_ID,
        slack_client_secret=CLIENT_SECRET,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack.url,
    )
    bot = ChatBot(build_agent(store, ran))
    adapter = SlackAdapter(bot, settings)
    server = TestServer(build_app(Settings(), bot, [adapter]), host="127.0.0.1")
    await server.start_server()
    # Cookies go by hand: the state cookie is the browser's, sent back as it was set.
    session = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())
    running = BotServer(slack, bot, adapter, server, session)
    try:
        yield Workspaces(slack, running)
    finally:
        await running.close()


@pytest.fixture
async def workspaces(slack: FakeSlack, store: Store, ran: Ran) -> AsyncIterator[Workspaces]:
    async with served(slack, store, ran) as running:
        yield running


async def installed(workspaces: Workspaces, team: str) -> str | None:
    """The bot token kept for ``team``, if installed."""
    found = await workspaces.installations.async_find_installation(enterprise_id=None, team_id=team)
    return found.bot_token if found is not None else None


async def test_installing_exchanges_the_code_and_keeps_each_workspace(
    workspaces: Workspaces, slack: FakeSlack
) -> None:
    first = await workspaces.install(TEAM_A, TOKEN_A)
    assert first.status == 200
    second = await workspaces.install(TEAM_B, TOKEN_B)
    assert second.status == 200
    exchanges = slack.of("oauth.v2.access")
    assert [c.args["code"] for c in exchanges] == [f"code-{TEAM_A}", f"code-{TEAM_B}"]
    assert {c.client for c in exchanges} == {(CLIENT_ID, CLIENT_SECRET)}
    assert await installed(workspaces, TEAM_A) == TOKEN_A
    assert await installed(workspaces, TEAM_B) == TOKEN_B


async def test_each_workspace_sees_its_card_posted_and_decided_with_its_own_token(
    workspaces: Workspaces, slack: FakeSlack, ran: Ran
) -> None:
    await workspaces.install(TEAM_A, TOKEN_A)
    await workspaces.install(TEAM_B, TOKEN_B)
    card_a = await workspaces.ask_for_deploy(TEAM_A, CHANNEL_A, user=ALICE)
    card_b = await workspaces.ask_for_deploy(TEAM_B, CHANNEL_B, user=BOB)
    assert workspaces.tokens_of("chat.postMessage", CHANNEL_A) == {TOKEN_A}
    assert workspaces.tokens_of("chat.postMessage", CHANNEL_B) == {TOKEN_B}

    assert await workspaces.press(TEAM_A, card_a, user=ALICE) == 200
    assert await workspaces.press(TEAM_B, card_b, user=BOB) == 200
    await workspaces.server.idle()

    assert sorted(d["service"] for d in ran.deploys) == ["api", "api"]
    assert not has_buttons(card_a)
    assert not has_buttons(card_b)
    assert workspaces.tokens_of("chat.update", CHANNEL_A) == {TOKEN_A}
    assert workspaces.tokens_of("chat.update", CHANNEL_B) == {TOKEN_B}
    assert workspaces.tokens_of("chat.postMessage", CHANNEL_A) == {TOKEN_A}
    assert workspaces.tokens_of("chat.postMessage", CHANNEL_B) == {TOKEN_B}


async def test_a_click_from_another_workspace_decides_nothing(
    workspaces: Workspaces, slack: FakeSlack, ran: Ran
) -> None:
    await workspaces.install(TEAM_A, TOKEN_A)
    await workspaces.install(TEAM_B, TOKEN_B)
    card_a = await workspaces.ask_for_deploy(TEAM_A, CHANNEL_A, user=ALICE)
    updates, before = card_a.updates, len(slack.calls)

    assert await workspaces.press(TEAM_B, card_a, user=BOB) == 200
    await workspaces.server.idle()

    assert ran.deploys == []
    assert has_buttons(card_a)
    assert card_a.updates == updates
    assert TOKEN_A not in {c.token for c in slack.calls[before:]}
    told = [(c.args.get("user"), c.token) for c in slack.of("chat.postEphemeral")]
    assert told == [(BOB, TOKEN_B)]


async def test_an_uninstalled_workspace_is_forgotten_and_its_mentions_ignored(
    workspaces: Workspaces, slack: FakeSlack, ran: Ran
) -> None:
    await workspaces.install(TEAM_A, TOKEN_A)
    await workspaces.install(TEAM_B, TOKEN_B)

    uninstalled = {"type": "app_uninstalled", "event_ts": f"{time.time():.6f}"}
    assert await workspaces.send_event(TEAM_B, uninstalled) == 200
    await workspaces.server.idle()
    assert await installed(workspaces, TEAM_B) is None
    assert await installed(workspaces, TEAM_A) == TOKEN_A

    status = await workspaces.send_event(
        TEAM_B, mention_event("deploy api", user=BOB, channel=CHANNEL_B)
    )
    await workspaces.server.idle()
    assert 200 <= status < 300
    assert slack.of("chat.postMessage") == []
    assert ran.deploys == []


@pytest.mark.parametrize("cookie", [None, "bogus"], ids=["no-cookie", "cookie-of-the-state"])
async def test_a_bogus_state_answers_400_and_installs_nothing(
    workspaces: Workspaces, slack: FakeSlack, cookie: str | None
) -> None:
    slack.installs["x"] = (TEAM_A, TOKEN_A)
    sent = f"{STATE_COOKIE}={cookie}" if cookie is not None else None
    resp = await workspaces.get("/slack/oauth_redirect", cookie=sent, code="x", state="bogus")
    assert resp.status == 400
    assert slack.of("oauth.v2.access") == []
    assert await installed(workspaces, TEAM_A) is None


async def test_a_state_is_used_once(workspaces: Workspaces, slack: FakeSlack) -> None:
    state = await workspaces.start_install()
    slack.installs["first"] = (TEAM_A, TOKEN_A)
    slack.installs["again"] = (TEAM_B, TOKEN_B)
    cookie = f"{STATE_COOKIE}={state}"
    first = await workspaces.get("/slack/oauth_redirect", code="first", state=state, cookie=cookie)
    again = await workspaces.get("/slack/oauth_redirect", code="again", state=state, cookie=cookie)
    assert (first.status, again.status) == (200, 400)
    assert await installed(workspaces, TEAM_B) is None


async def test_a_store_that_fails_during_an_install_gets_a_page_not_a_traceback(
    workspaces: Workspaces, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    async def down(installation: object) -> None:
        raise ConnectionError("the store is down")

    store = workspaces.server.adapter.app.installation_store
    assert store is not None
    store.async_save = down  # type: ignore[method-assign]
    resp = await workspaces.install(TEAM_A, TOKEN_A)
    assert resp.status == 503
    assert "try again" in (await resp.text())
    assert "Traceback" not in caplog.text


def revoked_event() -> dict[str, Any]:
    """``tokens_revoked``: Slack revoked the bot's token (the app's bot user)."""
    return {
        "type": "tokens_revoked",
        "tokens": {"oauth": [], "bot": [BOT_USER_ID]},
        "event_ts": f"{time.time():.6f}",
    }


async def test_a_revoked_bot_token_stops_its_workspace_and_no_other(
    workspaces: Workspaces, slack: FakeSlack, ran: Ran
) -> None:
    await workspaces.install(TEAM_A, TOKEN_A)
    await workspaces.install(TEAM_B, TOKEN_B)

    assert await workspaces.send_event(TEAM_A, revoked_event()) == 200
    await workspaces.server.idle()
    del slack.issued[TOKEN_A]  # Slack takes it no more
    assert await installed(workspaces, TEAM_A) is None
    with pytest.raises(LookupError):
        await workspaces.server.adapter.tokens.client_for(TEAM_A)

    before = len(slack.calls)
    mention = mention_event("deploy api", user=ALICE, channel=CHANNEL_A)
    assert await workspaces.send_event(TEAM_A, mention) == 200
    await workspaces.server.idle()
    assert TOKEN_A not in {c.token for c in slack.calls[before:]}
    assert slack.of("chat.postMessage") == []
    await workspaces.ask_for_deploy(TEAM_B, CHANNEL_B, user=BOB)
    assert workspaces.tokens_of("chat.postMessage", CHANNEL_B) == {TOKEN_B}
    assert ran.deploys == []


REFRESHED_A = f"{TOKEN_A}~1"
"""The fake's token for ``TEAM_A`` after its first refresh."""
DUE = 60
"""A token's lifetime well inside the margin of its refresh: due at once."""


def refreshes(slack: FakeSlack) -> list[ApiCall]:
    """The calls that refreshed a token (``oauth.v2.access`` with a refresh token)."""
    return [c for c in slack.of("oauth.v2.access") if c.args.get("grant_type") == "refresh_token"]


async def test_a_due_token_is_refreshed_once_for_a_mention_and_its_retry_and_used_from_then_on(
    workspaces: Workspaces, slack: FakeSlack, ran: Ran
) -> None:
    slack.token_lifetime = DUE
    await workspaces.install(TEAM_A, TOKEN_A)
    mention = mention_event("deploy api", user=ALICE, channel=CHANNEL_A)
    body = json.dumps(workspaces.event_body(TEAM_A, mention))
    # Slack's retry of the mention lands while the bot still handles the first delivery.
    retry = signed_headers(body) | {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "timeout"}
    sent = await asyncio.gather(
        workspaces.server.post(body), workspaces.server.post(body, headers=retry)
    )
    assert [status for status, _ in sent] == [200, 200]
    await workspaces.server.idle()
    (card,) = [m for m in slack.in_thread(CHANNEL_A, str(mention["ts"])) if has_buttons(m)]
    assert await workspaces.press(TEAM_A, card, user=ALICE) == 200
    await workspaces.server.idle()

    assert [d["service"] for d in ran.deploys] == ["api"]
    assert not has_buttons(card)
    (refresh,) = refreshes(slack)
    assert slack.rotations == [(TOKEN_A, REFRESHED_A)]
    after = slack.calls[slack.calls.index(refresh) + 1 :]
    assert {c.method for c in after} >= {"auth.test", "chat.postMessage", "chat.update"}
    assert {c.token for c in after} == {REFRESHED_A}
    assert await installed(workspaces, TEAM_A) == REFRESHED_A


async def test_a_due_token_is_refreshed_once_for_calls_without_a_request(
    workspaces: Workspaces, slack: FakeSlack
) -> None:
    slack.token_lifetime = DUE
    await workspaces.install(TEAM_A, TOKEN_A)
    tokens = workspaces.server.adapter.tokens

    clients = await asyncio.gather(*(tokens.client_for(TEAM_A) for _ in range(3)))
    assert {c.token for c in clients} == {REFRESHED_A}
    assert (await tokens.client_for(TEAM_A)).token == REFRESHED_A
    assert len(refreshes(slack)) == 1
    assert await installed(workspaces, TEAM_A) == REFRESHED_A
    bot = await workspaces.installations.async_find_bot(enterprise_id=None, team_id=TEAM_A)
    assert bot is not None
    assert bot.bot_refresh_token == f"xoxe-1-{REFRESHED_A}"


async def test_a_refused_refresh_is_one_log_line_and_the_workspace_counts_as_uninstalled(
    workspaces: Workspaces, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    slack.token_lifetime = DUE
    await workspaces.install(TEAM_A, TOKEN_A)
    slack.refresh_tokens.clear()  # revoked: Slack answers invalid_refresh_token

    logged = caplog.at_level(logging.WARNING, logger=installations_module.__name__)
    with logged, pytest.raises(LookupError):
        await workspaces.server.adapter.tokens.client_for(TEAM_A)
    (line,) = [r for r in caplog.records if r.name == installations_module.__name__]
    assert "invalid_refresh_token" in line.getMessage()

    mention = mention_event("deploy api", user=ALICE, channel=CHANNEL_A)
    assert await workspaces.send_event(TEAM_A, mention) == 200
    await workspaces.server.idle()
    assert slack.of("chat.postMessage") == []


async def test_a_refresh_slack_cannot_answer_keeps_the_old_token_until_slack_answers(
    workspaces: Workspaces, slack: FakeSlack
) -> None:
    slack.token_lifetime = DUE
    await workspaces.install(TEAM_A, TOKEN_A)
    tokens = workspaces.server.adapter.tokens
    slack.script("oauth.v2.access", Scripted(status=503))

    assert (await tokens.client_for(TEAM_A)).token == TOKEN_A  # valid for a minute more
    assert (await tokens.client_for(TEAM_A)).token == REFRESHED_A
    assert slack.rotations == [(TOKEN_A, REFRESHED_A)]


async def test_a_token_another_replica_refreshed_first_is_used_not_taken_as_a_refusal(
    workspaces: Workspaces, slack: FakeSlack
) -> None:
    slack.token_lifetime = DUE
    await workspaces.install(TEAM_A, TOKEN_A)
    adapter = workspaces.server.adapter
    stale = await workspaces.installations.async_find_bot(enterprise_id=None, team_id=TEAM_A)
    assert stale is not None
    # Another replica: its own handle on the same state, its own rotator and lock.
    other = BotRotator(
        SlackInstallations(workspaces.server.bot.chat),
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        client=adapter.client,
    )

    async def other_replica_refreshes_first() -> None:
        await other.fresh(stale)

    slack.before_refresh = other_replica_refreshes_first
    client = await adapter.tokens.client_for(TEAM_A)

    assert slack.rotations == [(TOKEN_A, REFRESHED_A)]
    assert len(refreshes(slack)) == 2  # this replica's, refused: its refresh token was used
    assert client.token == REFRESHED_A


async def test_an_expired_token_slack_cannot_refresh_is_slack_out_of_reach(
    workspaces: Workspaces, slack: FakeSlack
) -> None:
    slack.token_lifetime = DUE
    await workspaces.install(TEAM_A, TOKEN_A)
    bot = await workspaces.installations.async_find_bot(enterprise_id=None, team_id=TEAM_A)
    assert bot is not None
    bot.bot_token_expires_at = int(time.time()) - 1
    await workspaces.installations.async_save_bot(bot)
    slack.script("oauth.v2.access", Scripted(status=503))

    with pytest.raises(SlackApiError) as answered:  # as any call Slack answers 503
        await workspaces.server.adapter.tokens.client_for(TEAM_A)
    assert answered.value.response.status_code == 503
    assert await installed(workspaces, TEAM_A) == TOKEN_A  # still installed: tried again later
