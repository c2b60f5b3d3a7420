"""The bundled ops example (supervisor + demo model) driven through Teams."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from agents import MemoryStore
from agents.models.demo import DemoModel
from examples.ops import build_agent
from tests.examples.conftest import deployed

from . import activities as act
from .conftest import MakeBot
from .fake_connector import FakeConnector
from .signed import form


def record_ids(db_path: Path) -> set[str]:
    """The ids in the ops database's ``records`` table, read from the file itself."""
    with closing(sqlite3.connect(db_path)) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM records")}


async def test_a_delete_is_approved_on_its_card_and_the_record_goes(
    make_bot: MakeBot, connector: FakeConnector, tmp_path: Path
) -> None:
    db_path = tmp_path / "ops.db"
    ops = build_agent(DemoModel(), MemoryStore(), db_path=db_path)
    teams = await make_bot(agent=ops)
    root = act.next_id()
    thread = f"{act.CHANNEL};messageid={root}"
    await teams.post(
        act.channel_post(connector.url, "delete record abc-123", activity_id=root, mention=True)
    )
    await teams.bot.drain()
    (posted,) = connector.cards(thread)
    assert posted.card is not None
    assert posted.card_text.splitlines()[:2] == [
        "🔒 **Approval needed:** **delete\\_record**",
        "Agent: ops › records",
    ]
    assert "abc-123" in record_ids(db_path)  # nothing deleted before the approval

    answer = await teams.post(
        act.execute(
            connector.url,
            posted.card,
            "approve",
            conversation=act.channel_conversation(root),
            card_id=posted.response_id,
        )
    )
    assert answer.body["type"] == "application/vnd.microsoft.card.adaptive"
    await teams.bot.drain()
    assert any("Deleted record abc-123" in t for t in connector.texts(thread))
    remaining = record_ids(db_path)
    assert "abc-123" not in remaining
    assert {"abc-124", "def-456", "ghi-789"} <= remaining  # only that one record went


async def test_a_deploy_without_a_version_asks_in_the_group_chat_and_the_reply_resumes(
    make_bot: MakeBot, connector: FakeConnector, tmp_path: Path
) -> None:
    ops = build_agent(DemoModel(), MemoryStore(), db_path=tmp_path / "ops.db")
    teams = await make_bot(agent=ops)
    chat = act.chat_conversation("groupChat")
    await teams.post(
        act.message(connector.url, "deploy web to staging", conversation=chat, mention=True)
    )
    await teams.bot.drain()
    (asked,) = connector.cards(act.GROUP_CHAT, kind="question")
    assert "Which version of web should I deploy to staging?" in asked.card_text

    await teams.post(act.message(connector.url, "1.4.2", conversation=chat, user=act.BOB))
    await teams.bot.drain()
    assert "Deployed web to staging" in connector.texts(act.GROUP_CHAT)[-1]
    (answered,) = [u for u in connector.updates() if u.activity_id == asked.response_id]
    assert answered.card_text.splitlines()[-1] == "✅ Answered by Bob"


async def test_the_production_card_shows_the_checked_version_and_that_version_deploys(
    make_bot: MakeBot, connector: FakeConnector, tmp_path: Path
) -> None:
    db_path = tmp_path / "ops.db"
    teams = await make_bot(agent=build_agent(DemoModel(), MemoryStore(), db_path=db_path))
    chat = act.chat_conversation("groupChat")
    await teams.post(
        act.message(connector.url, "deploy worker to production", conversation=chat, mention=True)
    )
    await teams.bot.drain()
    for reply in ("not 1.4.1 - use 1.5.0", "find user 42"):
        await teams.post(act.message(connector.url, reply, conversation=chat))
        await teams.bot.drain()
        again = connector.cards(act.GROUP_CHAT)[-1].card_text
        assert "Which version of worker should I deploy to production?" in again
        assert f"'{reply}' is not a version" in again
    assert connector.cards(act.GROUP_CHAT, kind="approval") == []

    await teams.post(act.message(connector.url, "1.5.0", conversation=chat))
    await teams.bot.drain()
    (posted,) = connector.cards(act.GROUP_CHAT, kind="approval")
    assert posted.card is not None
    facts = {
        fact["title"]: fact["value"]
        for element in posted.card["body"]
        if element["type"] == "FactSet"
        for fact in element["facts"]
    }
    assert facts["version"] == "1.5.0"
    await teams.post(
        act.execute(
            connector.url, posted.card, "approve", conversation=chat, card_id=posted.response_id
        )
    )
    await teams.bot.drain()
    assert deployed(db_path) == [("worker", "production", "1.5.0")]
    assert "version: 1.5.0" in connector.texts(act.GROUP_CHAT)[-1]


async def test_deleting_a_record_that_is_not_there_gets_an_answer_and_no_card(
    make_bot: MakeBot, connector: FakeConnector, tmp_path: Path
) -> None:
    teams = await make_bot(agent=build_agent(DemoModel(), MemoryStore(), db_path=tmp_path / "o.db"))
    chat = act.chat_conversation("groupChat")
    await teams.post(
        act.message(connector.url, "delete record zzz-999", conversation=chat, mention=True)
    )
    await teams.bot.drain()
    assert connector.cards(act.GROUP_CHAT) == []
    assert "No record with id 'zzz-999'" in connector.texts(act.GROUP_CHAT)[-1]


async def test_a_deploy_edited_to_staging_is_reported_as_staging(
    make_bot: MakeBot, connector: FakeConnector, tmp_path: Path
) -> None:
    ops = build_agent(DemoModel(), MemoryStore(), db_path=tmp_path / "ops.db")
    teams = await make_bot(agent=ops)
    root = act.next_id()
    thread = f"{act.CHANNEL};messageid={root}"
    await teams.post(
        act.channel_post(
            connector.url, "deploy api 1.4.2 to production", activity_id=root, mention=True
        )
    )
    await teams.bot.drain()
    (posted,) = connector.cards(thread)
    assert posted.card is not None
    values = {"service": "api", "environment": "staging", "version": "1.4.2"}
    answer = await teams.post(
        act.execute(
            connector.url,
            posted.card,
            "edit",
            conversation=act.channel_conversation(root),
            card_id=posted.response_id,
            inputs=form(**values),
        )
    )
    approved = answer.body["value"]
    shown = [e["text"] for e in approved["body"] if e["type"] == "TextBlock"]
    assert "✏️ Edited by Bob: **environment**: production → staging" in shown
    await teams.bot.drain()
    said = "\n".join(connector.texts(thread))
    assert "Deployed api to staging (arguments edited before approval)" in said
    assert "to production" not in said
