"""The Home tab over two replicas: kept current by whichever replica a change happens on.

Two bots, each with its own handle on one durable store (one SQLite file, the real
Redis or the real Redis Cluster), served over HTTP against one fake Slack. Slack
sends ``app_home_opened`` to one replica; a call asked or decided on the other must
still show in the tab.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.slack.wire import APPROVE_ACTION
from bot import ApprovalPolicy
from bot import texts as core_texts
from tests.stores.conftest import DURABLE_KINDS, store_url

from .fake_slack import FakeSlack
from .harness import ALICE, BOB, BotServer, replicas_on
from .scripted import Ran, build_agent
from .test_app_home import APPROVED_BY_BOB_OR_CAROL, ask, has_home_buttons, home_text
from .test_approvals import card_text, has_buttons
from .test_inbox import heading
from .test_questions import CAROL


@dataclass
class Replicas:
    """Two replicas on one store, and what their tools did."""

    a: BotServer
    b: BotServer
    ran: Ran


@pytest.fixture(params=DURABLE_KINDS)
async def replicas(
    request: pytest.FixtureRequest, slack: FakeSlack, tmp_path: Path
) -> AsyncIterator[Replicas]:
    ran = Ran()
    policy = ApprovalPolicy.from_toml(APPROVED_BY_BOB_OR_CAROL)
    async with (
        store_url(request.param, tmp_path) as url,
        replicas_on(slack, url, lambda store: build_agent(store, ran), policy=policy) as (a, b),
    ):
        yield Replicas(a=a, b=b, ran=ran)


async def published_by(bot: BotServer, user: str, before: int) -> None:
    """Wait until ``bot`` is idle and ``user``'s Home tab was published after ``before``."""
    await bot.idle()
    await bot.slack.wait_for(
        lambda: bot.slack.publishes(user) > before, what=f"the Home tab of {user} again"
    )


async def test_a_home_opened_on_one_replica_is_kept_current_by_the_other(
    replicas: Replicas, slack: FakeSlack
) -> None:
    a, b = replicas.a, replicas.b
    home = await a.open_home(CAROL)
    assert not has_home_buttons(home)
    await a.close()  # whatever comes next for Carol's tab, replica A plays no part in it
    before = slack.publishes(CAROL)

    _, card = await ask(b, slack)

    await published_by(b, CAROL, before)
    waiting = heading(core_texts.INBOX_WAITING, count=1)
    assert waiting in home_text(slack.home_of(CAROL)), "asked on B"
    before = slack.publishes(CAROL)

    assert await b.press(card, APPROVE_ACTION, user=BOB) == 200

    await published_by(b, CAROL, before)
    home = slack.home_of(CAROL)
    assert "Nothing waits for your decision" in home_text(home), "decided on B"
    assert not has_home_buttons(home)
    assert len(replicas.ran.deploys) == 1
    assert BOB not in slack.homes, "Bob never opened his Home tab: nothing is published"
    assert ALICE not in slack.homes


async def test_a_store_failure_reading_who_opened_their_home_is_logged_and_the_decision_stands(
    replicas: Replicas,
    slack: FakeSlack,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = replicas.a, replicas.b
    await a.open_home(CAROL)
    _, card = await ask(a, slack)
    await a.idle()
    before = slack.publishes(CAROL)

    async def store_down(key: str) -> str | None:
        raise ConnectionError("the store is down")

    monkeypatch.setattr(b.bot.chat, "note", store_down)
    with caplog.at_level(logging.WARNING, logger="adapters.slack.home"):
        assert await b.press(card, APPROVE_ACTION, user=BOB) == 200
        await b.idle()

    assert len(replicas.ran.deploys) == 1
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert not has_buttons(card)
    assert "could not read who opened their Home tab" in caplog.text
    assert slack.publishes(CAROL) == before, "B could not tell that Carol opened hers"
