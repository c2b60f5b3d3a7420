"""Enterprise Grid at the HTTP edge: an org-wide install serves every workspace of its
organization with one token, keys its threads by the enterprise (a card in a channel
two of its workspaces share is one card), and ends for all of them when uninstalled
or revoked."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agents import Store

from .fake_slack import BOT_USER_ID, FakeSlack
from .harness import ALICE, BOB, CHANNEL, mention_event
from .scripted import Ran
from .test_approvals import has_buttons
from .test_oauth import DUE, TEAM_B, TOKEN_B, Workspaces, revoked_event, served

E1, TOKEN_E1 = "E0ORGONE1", "xoxb-org-one"
E2, TOKEN_E2 = "E0ORGTWO1", "xoxb-org-two"
T1, T2 = "T0ORG1WS1", "T0ORG1WS2"
"""Two workspaces of ``E1``."""
T3 = "T0ORG2WS1"
"""A workspace of ``E2``."""
SHARED = CHANNEL
"""A channel ``T1`` and ``T2`` share."""

# As in test_oauth: slack_sdk sends the client id and secret with aiohttp.BasicAuth,
# which aiohttp 3.14 deprecates (aio-libs/aiohttp#12499).
pytestmark = pytest.mark.filterwarnings(
    "ignore:BasicAuth is deprecated:DeprecationWarning:slack_sdk"
)


@pytest.fixture
async def grid(slack: FakeSlack, store: Store, ran: Ran) -> AsyncIterator[Workspaces]:
    async with served(slack, store, ran) as running:
        yield running


async def test_an_org_wide_install_is_kept_under_its_enterprise_for_all_its_workspaces(
    grid: Workspaces,
) -> None:
    assert (await grid.install_org(E1, TOKEN_E1)).status == 200

    found = await grid.installations.async_find_installation(
        enterprise_id=E1, team_id=None, is_enterprise_install=True
    )
    assert found is not None
    assert (found.bot_token, found.team_id, found.is_enterprise_install) == (TOKEN_E1, None, True)
    for team in (T1, T2):  # a request names the workspace it comes from
        bot = await grid.installations.async_find_bot(
            enterprise_id=E1, team_id=team, is_enterprise_install=True
        )
        assert bot is not None
        assert bot.bot_token == TOKEN_E1
    assert (await grid.server.adapter.tokens.client_for(E1)).token == TOKEN_E1


async def test_a_mention_in_a_workspace_of_the_org_is_answered_with_the_org_wide_token(
    grid: Workspaces, slack: FakeSlack
) -> None:
    await grid.install_org(E1, TOKEN_E1)

    await grid.ask_for_deploy(T1, SHARED, user=ALICE, enterprise=E1)

    assert grid.tokens_of("chat.postMessage", SHARED) == {TOKEN_E1}
    assert {c.token for c in slack.calls if c.token is not None} == {TOKEN_E1}


async def test_a_card_is_decided_once_from_any_workspace_of_the_org(
    grid: Workspaces, slack: FakeSlack, ran: Ran
) -> None:
    await grid.install_org(E1, TOKEN_E1)
    card = await grid.ask_for_deploy(T1, SHARED, user=ALICE, enterprise=E1)
    # Alice, in the other workspace, still sees the buttons when Bob's click lands.
    late = grid.approval(T1, card, user=ALICE, enterprise=E1)

    assert await grid.press(T2, card, user=BOB, enterprise=E1) == 200
    await grid.server.idle()
    status, _ = await grid.server.interact(late)
    await grid.server.idle()

    assert status == 200
    assert [d["service"] for d in ran.deploys] == ["api"]
    assert not has_buttons(card)
    assert f"Approved by <@{BOB}>" in card.text
    assert grid.tokens_of("chat.update", SHARED) == {TOKEN_E1}


@pytest.mark.parametrize("other", ["another-org", "a-workspace-install"])
async def test_a_click_through_another_install_decides_nothing(
    grid: Workspaces, slack: FakeSlack, ran: Ran, other: str
) -> None:
    await grid.install_org(E1, TOKEN_E1)
    if other == "another-org":
        await grid.install_org(E2, TOKEN_E2)
    else:
        await grid.install(TEAM_B, TOKEN_B)
    card = await grid.ask_for_deploy(T1, SHARED, user=ALICE, enterprise=E1)
    updates, before = card.updates, len(slack.calls)

    if other == "another-org":
        status, token = await grid.press(T3, card, user=BOB, enterprise=E2), TOKEN_E2
    else:
        status, token = await grid.press(TEAM_B, card, user=BOB), TOKEN_B
    await grid.server.idle()

    assert status == 200
    assert ran.deploys == []
    assert has_buttons(card)
    assert card.updates == updates
    assert TOKEN_E1 not in {c.token for c in slack.calls[before:]}
    told = [(c.args.get("user"), c.token) for c in slack.of("chat.postEphemeral")]
    assert told == [(BOB, token)]


def org_uninstalled(team: str | None) -> dict[str, Any]:
    """``app_uninstalled`` for the org-wide install of ``E1``, naming ``team`` (none, or
    the enterprise itself) as its installation's team."""
    return {
        "token": "legacy",
        "team_id": T1,
        "enterprise_id": E1,
        "api_app_id": "A0APP0001",
        "type": "event_callback",
        "event_id": f"Ev{time.monotonic_ns()}",
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": E1,
                "team_id": team,
                "user_id": BOT_USER_ID,
                "is_bot": True,
                "is_enterprise_install": True,
            }
        ],
        "event": {"type": "app_uninstalled", "event_ts": f"{time.time():.6f}"},
    }


async def assert_gone_for_every_workspace(
    grid: Workspaces, slack: FakeSlack, ran: Ran, *, before: int
) -> None:
    """Nothing of ``E1``'s install answers any more, from any of its workspaces."""
    with pytest.raises(LookupError):
        await grid.server.adapter.tokens.client_for(E1)
    for team in (T1, T2):
        mention = mention_event("deploy api", user=ALICE, channel=SHARED)
        assert await grid.send_event(team, mention, enterprise=E1) == 200
    await grid.server.idle()
    since = slack.calls[before:]
    assert TOKEN_E1 not in {c.token for c in since}
    assert [c for c in since if c.method == "chat.postMessage"] == []
    assert ran.deploys == []


@pytest.mark.parametrize("team", [None, E1], ids=["no-team", "the-enterprise-as-team"])
async def test_uninstalling_an_org_wide_install_forgets_it_for_every_workspace(
    grid: Workspaces, slack: FakeSlack, ran: Ran, team: str | None
) -> None:
    await grid.install_org(E1, TOKEN_E1)
    await grid.ask_for_deploy(T1, SHARED, user=ALICE, enterprise=E1)

    status, _ = await grid.server.post(json.dumps(org_uninstalled(team)))
    await grid.server.idle()

    assert status == 200
    found = await grid.installations.async_find_installation(
        enterprise_id=E1, team_id=None, is_enterprise_install=True
    )
    assert found is None
    del slack.issued[TOKEN_E1]
    await assert_gone_for_every_workspace(grid, slack, ran, before=len(slack.calls))


async def test_a_revoked_org_wide_token_stops_every_workspace_of_the_org(
    grid: Workspaces, slack: FakeSlack, ran: Ran
) -> None:
    await grid.install_org(E1, TOKEN_E1)
    await grid.install(TEAM_B, TOKEN_B)
    await grid.ask_for_deploy(T1, SHARED, user=ALICE, enterprise=E1)

    assert await grid.send_event(T2, revoked_event(), enterprise=E1) == 200
    await grid.server.idle()
    del slack.issued[TOKEN_E1]

    await assert_gone_for_every_workspace(grid, slack, ran, before=len(slack.calls))
    assert (await grid.server.adapter.tokens.client_for(TEAM_B)).token == TOKEN_B


async def test_an_org_wide_token_is_refreshed_before_it_expires(
    grid: Workspaces, slack: FakeSlack
) -> None:
    slack.token_lifetime = DUE
    await grid.install_org(E1, TOKEN_E1)
    refreshed = f"{TOKEN_E1}~1"

    assert (await grid.server.adapter.tokens.client_for(E1)).token == refreshed
    await grid.ask_for_deploy(T2, SHARED, user=BOB, enterprise=E1)

    assert slack.rotations == [(TOKEN_E1, refreshed)]
    assert grid.tokens_of("chat.postMessage", SHARED) == {refreshed}
