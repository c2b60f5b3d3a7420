"""Posted once across a crash, as far as Teams allows: each marked post's activity id is
noted once Teams took it, and work taken over after a crash finds it there.

The Bot Framework connector cannot read a Teams conversation back, so a process that
died between Teams taking a post and noting its id leaves nothing to find: the post is
made again (twice, never lost). These tests play the taking-over in process: the card's
place is forgotten, as if never recorded, and the message's catch-up runs again.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.teams import feedback
from adapters.teams.messenger import MARK_NOTE_PREFIX
from bot import IncomingMessage, ThreadKey
from bot.texts import APPROVAL_PENDING, RUN_FAILED
from bot.views import thread_of

from . import activities as act
from .conftest import MakeBot, TeamsBot
from .fake_connector import FakeConnector
from .scripted import MODEL_DOWN
from .test_flows import THREAD_1, ask_for_deploy, in_thread, text_of_card


async def thread_of_run(teams: TeamsBot, run_id: str) -> ThreadKey:
    """The thread a run was asked in."""
    thread = thread_of((await teams.bot.agent.get_run(run_id)).metadata)
    assert thread is not None
    return thread


async def caught_up(teams: TeamsBot, run_id: str) -> None:
    """What a worker taking over the run's message after a crash does, then its work done."""
    thread = await thread_of_run(teams, run_id)
    await teams.bot.replies.catch_up(thread, teams.adapter.messenger, run_id)
    await teams.bot.drain()


async def answered_in_channel(teams: TeamsBot, connector: FakeConnector, text: str) -> str:
    """Ask in a new channel thread; the run its one answer there ends."""
    post = act.channel_post(connector.url, text, activity_id=THREAD_1, mention=True)
    assert (await teams.post(post)).status == 200
    await teams.bot.drain()
    (answer,) = connector.messages(in_thread(THREAD_1))
    run_id = await teams.bot.chat.note(feedback.note_key(in_thread(THREAD_1), answer.response_id))
    assert run_id is not None
    return run_id


async def test_a_card_teams_took_before_a_crash_is_found_and_stays_the_card(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    posted = await ask_for_deploy(teams, connector)
    assert posted.card is not None
    data = act.action_data(posted.card, "approve")
    run_id, ask = data["run_id"], data["ask"]
    await teams.bot.chat.forget([run_id], [])  # died before recording where the card is
    await caught_up(teams, run_id)

    assert len(connector.cards(in_thread(THREAD_1))) == 1, connector.calls
    place = await teams.bot.chat.card_of(run_id, ask)
    assert place is not None
    assert place.ref["activity_id"] == posted.response_id
    click = act.execute(
        connector.url,
        posted.card,
        "approve",
        conversation=act.channel_conversation(THREAD_1),
        card_id=posted.response_id,
    )
    assert (await teams.post(click)).status == 200
    await teams.bot.drain()
    (update,) = connector.updates()
    assert update.activity_id == posted.response_id
    assert "Approved by" in text_of_card(update.body["attachments"][0]["content"])
    assert teams.deployed == ["api"]


async def test_an_answer_teams_took_before_a_crash_is_not_posted_again(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    run_id = await answered_in_channel(teams, connector, "hello there")
    await caught_up(teams, run_id)
    assert connector.texts(in_thread(THREAD_1)) == ["You said: hello there"]


async def test_a_streamed_answer_teams_took_before_a_crash_is_not_posted_again(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    chat = act.chat_conversation("personal")
    answer = await teams.post(act.message(connector.url, "hello there", conversation=chat))
    assert answer.status == 200
    await teams.bot.drain()
    stream = connector.streams[-1]
    assert stream.final is not None
    assert stream.final.text == "You said: hello there"
    run_id = await teams.bot.chat.note(feedback.note_key(chat["id"], stream.stream_id))
    assert run_id is not None
    sent = len(connector.messages(chat["id"]))

    await caught_up(teams, run_id)
    assert len(connector.messages(chat["id"])) == sent


async def worked_on(
    teams: TeamsBot, thread: ThreadKey, text: str, run_id: str, *, retry: bool
) -> None:
    """A message's work as an intake worker does it (``run_id`` names the message's
    entry), the first time or taken over after a crash (``retry``)."""
    messenger = teams.adapter.messenger
    said = IncomingMessage(thread=thread, user_id="someone", text=text)
    stream = await teams.bot.replies.stream_for(said, messenger, run_id, retry=retry)
    if stream is not None:
        await teams.bot.presenter.consume(thread, messenger, stream)
    await teams.bot.drain()


async def test_a_runs_error_teams_took_before_a_crash_is_not_said_again(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    thread = await thread_of_run(teams, await answered_in_channel(teams, connector, "hi"))
    await worked_on(teams, thread, "fail", "run_inbox_9", retry=False)
    failed = RUN_FAILED.format(error=MODEL_DOWN)
    assert connector.texts(in_thread(THREAD_1)) == ["You said: hi", failed]

    await caught_up(teams, "run_inbox_9")
    assert connector.texts(in_thread(THREAD_1)) == ["You said: hi", failed]


async def test_a_notice_teams_took_before_a_crash_is_not_said_again_to_that_message(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    posted = await ask_for_deploy(teams, connector)
    assert posted.card is not None
    thread = await thread_of_run(teams, act.action_data(posted.card, "approve")["run_id"])
    waits = APPROVAL_PENDING.format(tool="deploy")
    await worked_on(teams, thread, "approve", "run_inbox_9", retry=False)
    await worked_on(teams, thread, "approve", "run_inbox_9", retry=True)
    assert connector.texts(in_thread(THREAD_1)) == [waits]

    await worked_on(teams, thread, "approved", "run_inbox_10", retry=True)
    assert connector.texts(in_thread(THREAD_1)) == [waits, waits]


async def test_a_post_whose_id_was_not_noted_in_time_is_posted_again(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit of what Teams allows: died between Teams taking the answer and noting its
    id, the answer is posted again (twice, never lost)."""
    teams = await make_bot()
    set_note = teams.bot.chat.set_note

    async def dying_before_the_mark(key: str, value: str, *, ttl: float) -> Any:
        if not key.startswith(MARK_NOTE_PREFIX):
            await set_note(key, value, ttl=ttl)

    monkeypatch.setattr(teams.bot.chat, "set_note", dying_before_the_mark)
    run_id = await answered_in_channel(teams, connector, "hello there")
    await caught_up(teams, run_id)
    assert connector.texts(in_thread(THREAD_1)) == ["You said: hello there"] * 2
