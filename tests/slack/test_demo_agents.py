"""The bundled "ops" agents on the offline demo model, driven through Slack."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.slack.wire import APPROVE_ACTION, DECLINE_ACTION, EDIT_ACTION
from agents import Store
from agents.models.demo import DemoModel
from examples.ops import build_agent
from tests.examples.conftest import deployed

from .conftest import StartBot
from .fake_slack import FakeSlack
from .harness import BOB, CHANNEL, BotServer, mention_event, message_event, view_submission
from .test_approvals import ask_for_deploy, card_text, has_buttons
from .test_edit import prefilled
from .test_questions import submission


@pytest.fixture
async def ops(serve: StartBot, store: Store, tmp_path: Path) -> BotServer:
    return await serve(build_agent(DemoModel(), store, db_path=tmp_path / "ops.db"))


def answers(slack: FakeSlack, root: str) -> str:
    return "\n".join(m.text for m in slack.in_thread(CHANNEL, root))


async def test_a_production_deploy_is_approved_and_reported(
    ops: BotServer, slack: FakeSlack
) -> None:
    card = await ask_for_deploy(ops, slack, service="api 1.4.2 to production")
    text = card_text(card)
    assert "deploy_service" in text
    assert "ops › deploy" in text
    assert "production" in text
    await ops.press(card, APPROVE_ACTION, user=BOB)
    await ops.idle()
    assert not has_buttons(card)
    assert f"Approved by <@{BOB}>" in card_text(card)
    assert "1.4.2" in answers(slack, card.thread_ts or "").split("Approved by")[-1]


async def test_a_missing_version_is_asked_and_the_reply_deploys_it(
    ops: BotServer, slack: FakeSlack
) -> None:
    root = mention_event("deploy web to staging")
    await ops.send_event(root)
    await ops.idle()
    assert "version" in answers(slack, root["ts"]).lower()
    await ops.send_event(message_event("2.0.1", thread_ts=root["ts"]))
    await ops.idle()
    assert "2.0.1" in slack.in_thread(CHANNEL, root["ts"])[-1].text


async def test_a_declined_deletion_is_reported_with_the_reason(
    ops: BotServer, slack: FakeSlack
) -> None:
    root = mention_event("delete record abc-123")
    await ops.send_event(root)
    await slack.wait_for(lambda: any(has_buttons(m) for m in slack.messages.values()))
    card = next(m for m in slack.messages.values() if has_buttons(m))
    await ops.press(card, DECLINE_ACTION, user=BOB)
    await slack.wait_for(lambda: bool(slack.of("views.open")))
    view = slack.of("views.open")[0].args["view"]
    await ops.interact(view_submission(view, user=BOB, reason="keep it for the audit"))
    await ops.idle()
    assert "Declined by" in card_text(card)
    assert "keep it for the audit" in card_text(card)
    last = slack.in_thread(CHANNEL, root["ts"])[-1].text
    assert "not approved" in last.lower() or "declined" in last.lower()


async def test_the_production_card_shows_the_checked_version_and_that_version_deploys(
    ops: BotServer, slack: FakeSlack, tmp_path: Path
) -> None:
    root = mention_event("deploy worker to production")
    await ops.send_event(root)
    await ops.idle()
    for reply in ("not 1.4.1 - use 1.5.0", "find user 42"):
        await ops.send_event(message_event(reply, thread_ts=root["ts"]))
        await ops.idle()
        again = slack.in_thread(CHANNEL, root["ts"])[-1]
        assert "Which version of worker should I deploy to production?" in card_text(again)
        assert f"'{reply}' is not a version" in card_text(again)
    assert not any(has_buttons(m) for m in slack.messages.values())

    await ops.send_event(message_event("1.5.0", thread_ts=root["ts"]))
    await slack.wait_for(lambda: any(has_buttons(m) for m in slack.messages.values()))
    card = next(m for m in slack.messages.values() if has_buttons(m))
    assert '"version": "1.5.0"' in card_text(card)
    assert "not 1.4.1" not in card_text(card)
    await ops.press(card, APPROVE_ACTION, user=BOB)
    await ops.idle()
    assert deployed(tmp_path / "ops.db") == [("worker", "production", "1.5.0")]
    assert "version: 1.5.0" in answers(slack, root["ts"]).split("Approved by")[-1]


async def test_deleting_a_record_that_is_not_there_gets_an_answer_and_no_card(
    ops: BotServer, slack: FakeSlack
) -> None:
    root = mention_event("delete record zzz-999")
    await ops.send_event(root)
    await ops.idle()
    assert not any(has_buttons(m) for m in slack.messages.values())
    assert "No record with id 'zzz-999'" in slack.in_thread(CHANNEL, root["ts"])[-1].text


async def test_a_deploy_edited_to_staging_is_reported_as_staging(
    ops: BotServer, slack: FakeSlack
) -> None:
    card = await ask_for_deploy(ops, slack, service="api 1.4.2 to production")
    assert await ops.press(card, EDIT_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    view = slack.of("views.open")[0].args["view"]
    values = {**prefilled(view), "environment": "staging"}
    assert await ops.interact(submission(view, values, user=BOB)) == (200, "")
    await ops.idle()
    shown = card_text(card)
    assert f"✏️ Edited by <@{BOB}>: `environment`: production → staging" in shown
    (updated,) = [c for c in slack.of("chat.update") if c.args["ts"] == card.ts][-1:]
    assert "(edited: environment: production → staging)" in updated.args["text"]
    answer = answers(slack, card.thread_ts or "").split("Edited by")[-1]
    assert "Deployed api to staging (arguments edited before approval)" in answer
    assert "to production" not in answer
