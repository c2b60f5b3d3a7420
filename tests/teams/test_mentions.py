"""Notices for people @mention them, so that Teams notifies them: the ``<at>`` text and a
``mention`` entity with their Entra object id, in messages and in cards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.teams import mentions
from adapters.teams.messenger import render
from bot import Notice, Person, people_rich
from bot import texts as core_texts
from bot.policy import ApprovalPolicy

from . import activities as act
from .conftest import MakeBot
from .fake_connector import FakeConnector
from .test_flows import ask_for_deploy, in_thread

ANN = Person(id="aad-ann", name="Ann")


def mention(user_id: str, name: str) -> dict[str, Any]:
    return {
        "type": "mention",
        "text": f"<at>{name}</at>",
        "mentioned": {"id": user_id, "name": name},
    }


# -- rendering ------------------------------------------------------------------------


def test_a_notice_for_someone_is_a_message_that_mentions_them() -> None:
    activity = render(Notice(text="your request expired", to=ANN))
    assert activity.text == "<at>Ann</at>: your request expired"
    body = activity.serialize()
    assert body["entities"] == [mention("aad-ann", "Ann")]


def test_a_notice_for_several_people_mentions_each_once_in_order() -> None:
    bob = Person(id="aad-bob")
    notice = Notice(text="reminder", to=ANN, also=(bob, ANN, Person(id="aad-cy", name="Cy")))
    body = render(notice).serialize()
    assert body["text"] == "<at>Ann</at>, <at>aad-bob</at>, <at>Cy</at>: reminder"
    assert body["entities"] == [
        mention("aad-ann", "Ann"),
        mention("aad-bob", "aad-bob"),
        mention("aad-cy", "Cy"),
    ]


def test_a_name_cannot_close_the_mention_or_bring_markdown_into_it() -> None:
    sly = Person(id="aad-eve", name="*Eve*</at> <at>[boss](https://x.example)")
    (entity,) = mentions.mentioning((sly,)).entities
    assert entity["text"] == "<at>Eve /at at boss (https://x.example)</at>"
    assert entity["mentioned"] == {"id": "aad-eve", "name": "Eve /at at boss (https://x.example)"}
    assert mentions.label(Person(id="aad-x", name="***")) == "someone"


def test_someone_without_an_id_is_named_but_not_mentioned() -> None:
    named = mentions.mentioning(people_rich((Person(id="", name="*Ann*"), ANN)))
    assert named.text == r"\*Ann\*, <at>Ann</at>"
    assert named.entities == (mention("aad-ann", "Ann"),)


def test_a_notice_for_everyone_mentions_nobody() -> None:
    activity = render(Notice(text="the store is back"))
    assert (activity.text, activity.entities) == ("the store is back", None)


# -- at the HTTP edge -------------------------------------------------------------------


async def test_the_requester_is_mentioned_when_their_request_expires(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    await ask_for_deploy(teams, connector)

    assert await teams.bot.sweep_expired(datetime.now(UTC) + timedelta(days=2)) == 1
    await teams.bot.drain()

    expired = core_texts.EXPIRED_APPROVAL.format(tool="deploy")
    (notice,) = [c for c in connector.messages(in_thread("1700000001000")) if expired in c.text]
    assert notice.text == f"<at>Alice</at>: {expired}"
    assert notice.mentions == [mention("aad-alice", "Alice")]
    assert notice.body["textFormat"] == "markdown"


async def test_a_reminder_mentions_each_approver(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    policy = ApprovalPolicy.from_toml(
        '[tools.deploy]\napprovers = ["aad-bob", "aad-carol"]\nremind_after = "30m"\n'
    )
    teams = await make_bot(policy=policy)
    # Bob said something to the bot before: his name is known, Carol's is not.
    await teams.post(
        act.message(connector.url, "hello", conversation=act.chat_conversation(), user=act.BOB)
    )
    await teams.bot.drain()
    await ask_for_deploy(teams, connector)

    assert await teams.bot.send_reminders(datetime.now(UTC) + timedelta(hours=1)) == 1
    await teams.bot.drain()

    reminder = core_texts.REMINDER.format(tool="deploy")
    (notice,) = [c for c in connector.messages() if reminder in c.text]
    assert notice.conversation_id == in_thread("1700000001000")
    assert notice.text == f"<at>Bob</at>, <at>aad-carol</at>: {reminder}"
    assert notice.mentions == [mention("aad-bob", "Bob"), mention("aad-carol", "aad-carol")]
