"""The conversation goes on while a card waits, across replicas: a follow-up worked on
one replica, the card decided on another, the first call run once, each answer saying
what it answers; on every durable store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest

from adapters.slack.wire import APPROVE_ACTION
from tests.stores.conftest import DURABLE_KINDS, store_url

from .fake_slack import FakeSlack
from .harness import ALICE, BOB, CHANNEL, BotServer, mention_event, message_event, replicas_on
from .scripted import Ran, build_agent
from .test_approvals import the_card


@pytest.fixture(params=DURABLE_KINDS)
async def replicas(
    request: pytest.FixtureRequest, slack: FakeSlack, tmp_path: Path, ran: Ran
) -> AsyncIterator[list[BotServer]]:
    """Two replicas, each with its own handle on one durable store; one record of runs."""
    agent = partial(build_agent, ran=ran)
    async with store_url(request.param, tmp_path) as url, replicas_on(slack, url, agent) as bots:
        yield bots


async def test_a_follow_up_on_one_replica_and_the_decision_on_another_run_the_call_once(
    replicas: list[BotServer], slack: FakeSlack, ran: Ran
) -> None:
    a, b = replicas
    root = mention_event("deploy api", user=ALICE)
    assert await a.send_event(root) == 200
    await a.idle()
    thread = root["ts"]
    card = the_card(slack.in_thread(CHANNEL, thread))

    assert await b.send_event(message_event("status of web?", user=BOB, thread_ts=thread)) == 200
    await b.idle()
    said = [m.text for m in slack.in_thread(CHANNEL, thread)]
    assert said[-1] == "You said: status of web? (still waiting here: deploy)"

    assert await a.press(card, APPROVE_ACTION, user=BOB) == 200
    await a.idle()
    await b.idle()
    assert len(ran.deploys) == 1
    answers = [m.text for m in slack.in_thread(CHANNEL, thread) if "deploy ok" in m.text]
    assert len(answers) == 1
    assert answers[0].startswith("About “deploy api”:")
