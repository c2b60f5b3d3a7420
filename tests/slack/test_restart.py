"""A restart between the card (or question) and the answer: the new process resumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.slack.wire import APPROVE_ACTION
from agents import open_store
from tests.stores.conftest import DURABLE_KINDS, store_url

from .fake_slack import FakeSlack
from .harness import CHANNEL, mention_event, message_event, start_bot
from .scripted import Ran, build_agent
from .test_approvals import ask_for_deploy, card_text, has_buttons


@pytest.mark.parametrize("kind", DURABLE_KINDS)
async def test_a_click_after_a_restart_resumes_the_run(
    kind: str, slack: FakeSlack, tmp_path: Path
) -> None:
    ran = Ran()
    async with store_url(kind, tmp_path) as url:
        store = open_store(url)
        before = await start_bot(slack, build_agent(store, ran))
        card = await ask_for_deploy(before, slack)
        await before.close()
        await store.close()

        store = open_store(url)
        after = await start_bot(slack, build_agent(store, ran))
        try:
            assert await after.press(card, APPROVE_ACTION) == 200
            await after.idle()
        finally:
            await after.close()
            await store.close()

    assert len(ran.deploys) == 1
    assert not has_buttons(card)
    assert "Approved by" in card_text(card)
    assert "deploy ok" in slack.in_thread(CHANNEL, card.thread_ts or "")[-1].text


@pytest.mark.parametrize("kind", DURABLE_KINDS)
async def test_a_thread_reply_after_a_restart_answers_the_question(
    kind: str, slack: FakeSlack, tmp_path: Path
) -> None:
    ran = Ran()
    root = mention_event("release web")
    async with store_url(kind, tmp_path) as url:
        store = open_store(url)
        before = await start_bot(slack, build_agent(store, ran))
        await before.send_event(root)
        await before.idle()
        await before.close()
        await store.close()

        store = open_store(url)
        after = await start_bot(slack, build_agent(store, ran))
        try:
            # No mention: the new process knows the bot is active in this thread.
            await after.send_event(message_event("3.1.0", thread_ts=root["ts"]))
            await after.idle()
        finally:
            await after.close()
            await store.close()

    assert ran.releases == [{"service": "web", "version": "3.1.0"}]
    assert "release ok" in slack.in_thread(CHANNEL, root["ts"])[-1].text
