"""👍 / 👎 on a finished answer: Teams' own feedback buttons (``channelData``
``feedbackLoopEnabled``) on the final streamed message of a 1:1 chat and on the whole
reply elsewhere; a press arrives as a ``message/submitAction`` invoke naming the message,
and is kept for the run that message answered (audit log, metrics)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from agents import AuditEntry, MemoryStore

from . import activities as act
from .conftest import Answer, MakeBot
from .fake_connector import ConnectorCall, FakeConnector
from .signed import SignedBot, in_thread, signed_settings, token_for


@dataclass
class Desk(SignedBot):
    """The scripted bot behind real Bot Framework auth, and the store it keeps audit in."""

    store: MemoryStore

    async def say_in_chat(self, text: str) -> ConnectorCall:
        """Ask in Alice's 1:1 chat; the final message of the answer streamed there."""
        chat = act.chat_conversation("personal")
        await self.post(act.message(self.connector.url, text, conversation=chat))
        await self.teams.bot.drain()
        final = self.connector.streams[-1].final
        assert final is not None
        return final

    async def say_in_channel(self, text: str) -> tuple[str, ConnectorCall]:
        """Start a channel thread; its root and the bot's one reply there."""
        root = act.next_id()
        await self.post(act.channel_post(self.connector.url, text, activity_id=root, mention=True))
        await self.teams.bot.drain()
        (reply,) = self.connector.messages(in_thread(root))
        return root, reply

    async def rate(self, activity: dict[str, Any]) -> Answer:
        """Post a feedback invoke, signed as Teams does, whatever it answers."""
        headers = {"Authorization": f"Bearer {self.token}"}
        answer = await self.teams.post(activity, headers=headers)
        await self.teams.bot.drain()
        return answer

    async def feedback(self) -> list[AuditEntry]:
        return [e for e in await self.store.list_audit() if e.event == "feedback"]


@pytest.fixture
async def desk(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Desk]:
    async with token_for(connector, monkeypatch) as token:
        store = MemoryStore()
        teams = await make_bot(store=store, settings=signed_settings())
        yield Desk(teams=teams, connector=connector, token=token, store=store)


async def test_a_finished_1_1_answer_ends_with_a_final_message_offering_feedback(
    desk: Desk,
) -> None:
    final = await desk.say_in_chat("hello")

    assert final.text == "You said: hello"
    assert final.offers_feedback
    (stream,) = desk.connector.streams
    assert [r.offers_feedback for r in stream.requests] == [False] * (len(stream.requests) - 1) + [
        True
    ]  # the buttons come with the whole answer only
    assert desk.connector.refused == []


async def test_an_answer_waiting_for_approval_offers_no_feedback_until_the_run_is_done(
    desk: Desk,
) -> None:
    waiting = await desk.say_in_chat("deploy api")

    assert waiting.text == "- ⏳ deploy: Waiting for approval"
    assert not waiting.offers_feedback
    (card,) = desk.connector.cards(act.PERSONAL_CHAT)
    assert not card.offers_feedback
    assert card.card is not None
    chat = act.chat_conversation("personal")
    click = act.execute(
        desk.connector.url, card.card, "approve", conversation=chat, card_id=card.response_id
    )
    await desk.post(click)
    await desk.teams.bot.drain()

    done = desk.connector.streams[-1].final
    assert done is not None
    assert done.text == "Done. deploy ok: deployed api\n\n- ✅ deploy"
    assert done.offers_feedback


async def test_a_finished_answer_in_a_channel_thread_offers_feedback_on_its_reply(
    desk: Desk,
) -> None:
    _, reply = await desk.say_in_channel("hello there")

    assert reply.text == "You said: hello there"
    assert reply.offers_feedback
    assert desk.connector.streams == []


async def test_like_and_dislike_on_a_channel_answer_are_kept_for_its_run(desk: Desk) -> None:
    root, reply = await desk.say_in_channel("hello there")
    conversation = act.channel_conversation(root)

    liked = await desk.rate(
        act.feedback(desk.connector.url, conversation=conversation, message_id=reply.response_id)
    )
    disliked = await desk.rate(
        act.feedback(
            desk.connector.url,
            conversation=conversation,
            message_id=reply.response_id,
            reaction="dislike",
            user=act.ALICE,
        )
    )

    assert (liked.status, liked.body) == (200, {})  # Teams says thanks itself
    assert (disliked.status, disliked.body) == (200, {})
    given = await desk.feedback()
    assert [(e.actor, e.result) for e in given] == [
        ("aad-bob", "helpful"),
        ("aad-alice", "unhelpful"),
    ]
    (run_id,) = {e.run_id for e in given}
    run = await desk.teams.bot.agent.get_run(run_id)
    assert run.thread_id == given[0].thread_id
    assert desk.connector.texts(in_thread(root)) == [reply.text]  # nothing more said


async def test_a_like_on_a_streamed_answer_is_kept_for_its_run(desk: Desk) -> None:
    final = await desk.say_in_chat("hello")
    (stream,) = desk.connector.streams

    answer = await desk.rate(
        act.feedback(
            desk.connector.url,
            conversation=act.chat_conversation("personal"),
            message_id=stream.stream_id,
            user=act.ALICE,
        )
    )

    assert (answer.status, answer.body) == (200, {})
    assert [(e.actor, e.result) for e in await desk.feedback()] == [("aad-alice", "helpful")]
    assert desk.connector.texts(act.PERSONAL_CHAT) == [final.text]


@pytest.mark.parametrize(
    "value",
    [
        {"actionName": "feedback"},
        {"actionName": "feedback", "actionValue": "like"},
        {"actionName": "feedback", "actionValue": {"reaction": "love", "feedback": "{}"}},
        {"actionName": "feedback", "actionValue": {"reaction": 1, "feedback": "{}"}},
        {"actionName": "feedback", "actionValue": {"feedback": "{}"}},
        {"actionName": "feedback", "actionValue": {"reaction": "like", "feedback": 5}},
        {"actionName": 7, "actionValue": {"reaction": "like", "feedback": "{}"}},
        {"actionValue": {"reaction": "like", "feedback": "{}"}},
        "feedback",
    ],
    ids=[
        "no action value",
        "action value not an object",
        "unknown reaction",
        "reaction not text",
        "no reaction",
        "feedback not text",
        "action name not text",
        "no action name",
        "value not an object",
    ],
)
async def test_a_malformed_feedback_invoke_is_a_bad_request(desk: Desk, value: Any) -> None:
    root, reply = await desk.say_in_channel("hello there")

    answer = await desk.rate(
        act.feedback(
            desk.connector.url,
            conversation=act.channel_conversation(root),
            message_id=reply.response_id,
            value=value,
        )
    )

    assert answer.status == 400
    assert "feedback" in str(answer.body)
    assert await desk.feedback() == []


async def test_feedback_without_the_message_it_rates_is_a_bad_request(desk: Desk) -> None:
    root, _ = await desk.say_in_channel("hello there")

    answer = await desk.rate(
        act.feedback(
            desk.connector.url, conversation=act.channel_conversation(root), message_id=None
        )
    )

    assert answer.status == 400
    assert await desk.feedback() == []


async def test_feedback_on_a_message_the_bot_does_not_know_is_taken_and_ignored(
    desk: Desk, caplog: pytest.LogCaptureFixture
) -> None:
    root, _ = await desk.say_in_channel("hello there")

    answer = await desk.rate(
        act.feedback(
            desk.connector.url,
            conversation=act.channel_conversation(root),
            message_id="a-message-from-long-ago",
        )
    )

    assert (answer.status, answer.body) == (200, {})
    assert await desk.feedback() == []
    assert desk.connector.texts(in_thread(root)) == ["You said: hello there"]
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR") or r.exc_info]
