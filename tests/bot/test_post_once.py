"""Posted once across a crash: work taken over from a process that died looks for what
that process posted (by the post's mark) before posting it, and records what it finds.

A crash between a post and recording it is played in process: what the dead process
recorded is forgotten (the card's place), and the message's work is done again as a
worker taking it over does (``Replies.catch_up``, or ``stream_for`` with ``retry``).
"""

from __future__ import annotations

from typing import Any

import pytest

from agents import Agent, FunctionModel, MemoryStore, Message, ModelError
from agents.models.base import ModelRequest
from bot import (
    ApprovalCard,
    ApprovalPolicy,
    CardPlace,
    CardPointer,
    ChatBot,
    Destination,
    MessageRef,
    Notice,
    PostMark,
    Prompt,
    Reply,
    ThreadKey,
    View,
    ask_of,
)
from bot.texts import APPROVAL_PENDING
from bot.views import card_mark, error_mark
from tests.agents.helpers import Counter

from .helpers import (
    THREAD,
    RecordingMessenger,
    booking_agent,
    click,
    message,
    refund_agent,
    restart_requested,
    weather_agent,
)
from .test_routing import CHANNEL, DIRECT, ask, wired


async def died_before_recording(bot: ChatBot, run_id: str) -> None:
    """What the process that died left: its post in the chat, no place recorded for it."""
    await bot.chat.forget([run_id], [])


async def caught_up(bot: ChatBot, messenger: RecordingMessenger, run_id: str) -> None:
    """What the worker taking the run's message over does first."""
    await bot.replies.catch_up(THREAD, messenger, run_id)
    await bot.drain()


async def test_a_card_posted_before_a_crash_is_found_and_recorded_not_posted_again() -> None:
    bot, messenger, card = await restart_requested(Counter())
    await died_before_recording(bot, card.run_id)
    await caught_up(bot, messenger, card.run_id)

    assert messenger.views(ApprovalCard) == [card]
    assert messenger.lookups == [card_mark(card)]
    place = await bot.chat.card_of(card.run_id, card.ask)
    assert place == CardPlace(thread=THREAD, ref=messenger.ref_of(card))


async def test_a_card_not_posted_before_a_crash_is_posted() -> None:
    bot, messenger, card = await restart_requested(Counter())
    await died_before_recording(bot, card.run_id)
    messenger.marked.clear()  # died before Slack took it
    await caught_up(bot, messenger, card.run_id)

    first, again = messenger.views(ApprovalCard)
    assert again.tool_call_id == first.tool_call_id
    place = await bot.chat.card_of(card.run_id, card.ask)
    assert place == CardPlace(thread=THREAD, ref=messenger.ref_of(again))


async def test_a_card_that_cannot_be_looked_for_is_posted_again_never_lost() -> None:
    bot, messenger, card = await restart_requested(Counter())
    await died_before_recording(bot, card.run_id)
    messenger.unreachable = 1  # the lookup fails; the post after it goes out
    await caught_up(bot, messenger, card.run_id)
    assert len(messenger.views(ApprovalCard)) == 2


async def test_a_card_sent_to_an_approvers_channel_is_found_there_with_its_pointer() -> None:
    bot, messenger, _ = wired(CHANNEL)
    await ask(bot, "A-1")
    ((to, card, posted),) = messenger.elsewhere
    assert isinstance(card, ApprovalCard)
    (pointer,) = messenger.views(CardPointer, THREAD)
    await died_before_recording(bot, card.run_id)
    await caught_up(bot, messenger, card.run_id)

    assert len(messenger.elsewhere) == 1
    assert messenger.views(CardPointer, THREAD) == [pointer]
    place = await bot.chat.card_of(card.run_id, card.ask)
    assert place is not None
    assert place.ref == messenger.ref_of(pointer)
    assert [(c.to, c.posted) for c in place.copies] == [(to, posted)]


async def test_only_the_direct_messages_missing_after_a_crash_are_sent() -> None:
    bot, messenger, _ = wired(DIRECT)
    await ask(bot, "A-1")
    (to_u2, card, at_u2), _ = messenger.elsewhere
    assert isinstance(card, ApprovalCard)
    await died_before_recording(bot, card.run_id)
    # It died once the card reached U2: before U3's, the pointer and the record.
    messenger.elsewhere = messenger.elsewhere[:1]
    messenger.posts = [p for p in messenger.posts if not isinstance(p[1], CardPointer)]
    messenger.marked = [m for m in messenger.marked if m[2] == to_u2]
    await caught_up(bot, messenger, card.run_id)

    assert [to.user_id for to, _, _ in messenger.elsewhere] == ["U2", "U3"]
    (pointer,) = messenger.views(CardPointer, THREAD)
    place = await bot.chat.card_of(card.run_id, card.ask)
    assert place is not None
    assert place.ref == messenger.ref_of(pointer)
    assert [(c.to, c.posted) for c in place.copies] == [
        (to_u2, at_u2),
        (Destination(user_id="U3"), messenger.elsewhere[1][2]),
    ]


async def test_a_question_posted_before_a_crash_is_found_not_asked_again() -> None:
    bot = ChatBot(weather_agent())
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("weather?"))
    await bot.drain()
    (question,) = messenger.views(Prompt)
    await died_before_recording(bot, question.run_id)
    await caught_up(bot, messenger, question.run_id)

    assert messenger.views(Prompt) == [question]
    (pending,) = await bot.replies.pending(THREAD.id)
    place = await bot.chat.card_of(pending.run_id, ask_of(pending))
    assert place == CardPlace(thread=THREAD, ref=messenger.ref_of(question))


async def test_a_question_asked_again_before_a_crash_is_not_asked_a_third_time() -> None:
    extracted: list[dict[str, Any]] = [{"date": "soon"}, {"date": "soon"}, {"date": "soon"}]
    bot = ChatBot(booking_agent(extracted, Counter()))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("book a table"))
    await bot.drain()
    (question,) = messenger.views(Prompt)
    (pending,) = await bot.replies.pending(THREAD.id)
    asked = await bot.chat.card_of(pending.run_id, ask_of(pending))
    assert asked is not None

    reply = message("whenever")
    await bot.replies.stream_for(reply, messenger, "run_inbox_7", retry=False)
    (again,) = messenger.views(Prompt)[1:]
    assert again.error is not None
    # Died before recording that the question is asked again below the reply.
    await bot.chat.set_card(pending.run_id, ask_of(pending), asked)
    await bot.replies.stream_for(reply, messenger, "run_inbox_7", retry=True)

    assert messenger.views(Prompt) == [question, again]
    place = await bot.chat.card_of(pending.run_id, ask_of(pending))
    assert place == CardPlace(thread=THREAD, ref=messenger.ref_of(again))
    # Another reply that does not fit is asked again, as ever.
    await bot.replies.stream_for(message("later"), messenger, "run_inbox_8", retry=True)
    assert len(messenger.views(Prompt)) == 3


async def approved(messenger: RecordingMessenger) -> tuple[ChatBot, ApprovalCard]:
    """A bot on ``messenger`` whose refund was approved and answered; its card."""
    bot = ChatBot(refund_agent([]), policy=ApprovalPolicy())
    bot.register("test", messenger)
    await bot.on_message(message("A-1"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    await bot.decisions.on_click(click(card, user="U2"))
    await bot.drain()
    return bot, card


async def test_an_answer_posted_before_a_crash_is_not_posted_again() -> None:
    messenger = RecordingMessenger()
    bot, card = await approved(messenger)
    (answer,) = messenger.views(Reply)
    assert answer.feedback == card.run_id
    await caught_up(bot, messenger, card.run_id)
    assert messenger.views(Reply) == [answer]


async def test_an_answer_lost_in_a_crash_is_posted_rated_and_marked() -> None:
    messenger = RecordingMessenger()
    bot, card = await approved(messenger)
    messenger.marked.clear()  # died before the platform took it
    await caught_up(bot, messenger, card.run_id)

    first, again = messenger.views(Reply)
    assert (again.text, again.feedback) == (first.text, card.run_id)
    await caught_up(bot, messenger, card.run_id)  # and found the next time
    assert len(messenger.views(Reply)) == 2


async def answered_live() -> tuple[ChatBot, RecordingMessenger, str]:
    """A bot whose approved run wrote its answer live; that run's id."""
    messenger = RecordingMessenger(live=True)
    bot, card = await approved(messenger)
    assert messenger.lives[-1].feedback == card.run_id
    return bot, messenger, card.run_id


def cut(messenger: RecordingMessenger, shown: str) -> None:
    """The live answer as a process that died while writing it left it."""
    live = messenger.lives[-1]
    live.text, live.finished, live.feedback = shown, False, None
    messenger.marked.clear()


async def test_an_answer_cut_while_written_live_is_completed_in_place_not_posted_again() -> None:
    bot, messenger, run_id = await answered_live()
    whole = messenger.lives[-1].text
    cut(messenger, whole[:5])
    await caught_up(bot, messenger, run_id)

    assert messenger.views(Reply) == []
    ((_, ref, view),) = messenger.updates[-1:]
    assert ref["ts"] == f"live{len(messenger.lives)}"
    assert view == Reply(text=whole, feedback=run_id)
    # Marked as a posted answer is: the next retake finds it, and says nothing again.
    updates = len(messenger.updates)
    await caught_up(bot, messenger, run_id)
    assert (len(messenger.updates), messenger.views(Reply)) == (updates, [])


async def test_a_cut_live_message_that_cannot_be_completed_leaves_the_answer_posted() -> None:
    bot, messenger, run_id = await answered_live()
    whole = messenger.lives[-1].text
    cut(messenger, whole[:5])
    messenger.refused_updates = 1  # deleted between the lookup and the update, say
    await caught_up(bot, messenger, run_id)

    (answer,) = messenger.views(Reply)
    assert (answer.text, answer.feedback) == (whole, run_id)


async def test_a_cut_live_message_that_is_not_the_answer_is_left_and_the_answer_posted() -> None:
    bot, messenger, run_id = await answered_live()
    whole = messenger.lives[-1].text
    cut(messenger, "Something else")
    updates = len(messenger.updates)
    await caught_up(bot, messenger, run_id)

    (answer,) = messenger.views(Reply)
    assert (answer.text, answer.feedback) == (whole, run_id)
    assert len(messenger.updates) == updates


def failing_agent() -> Agent:
    """Every run fails: the model is down."""

    def broken(messages: list[Message], request: ModelRequest) -> str:
        raise ModelError("HTTP 529 overloaded", user_message="The model is busy.")

    return Agent(id="ops", model=FunctionModel(broken), store=MemoryStore())


async def failed_run() -> tuple[ChatBot, RecordingMessenger, str]:
    """A bot that told its thread a run failed; that run's id."""
    bot = ChatBot(failing_agent())
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("hi"))
    await bot.drain()
    ((mark, _, _, _),) = messenger.marked
    assert mark.post == "error"
    return bot, messenger, mark.run_id


async def test_a_runs_error_said_before_a_crash_is_not_said_again() -> None:
    bot, messenger, run_id = await failed_run()
    (error,) = messenger.views(Notice)
    await caught_up(bot, messenger, run_id)

    assert messenger.views(Notice) == [error]
    assert messenger.lookups == [error_mark(run_id)]


async def test_a_runs_error_lost_in_a_crash_is_said_and_marked() -> None:
    bot, messenger, run_id = await failed_run()
    messenger.marked.clear()  # died before the platform took it
    await caught_up(bot, messenger, run_id)

    first, again = messenger.views(Notice)
    assert again == first
    await caught_up(bot, messenger, run_id)  # and found the next time
    assert len(messenger.views(Notice)) == 2


async def test_a_runs_error_is_said_once_its_failure_is_on_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Said before, a crash would leave the run in flight, and crash recovery asking the
    model again would say it again: nothing looks for it there."""
    bot = ChatBot(failing_agent())
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    post = messenger.post
    on_record: list[str] = []

    async def noting(thread: ThreadKey, view: View, *, mark: PostMark | None = None) -> MessageRef:
        if mark is not None and mark.post == "error":
            on_record.append((await bot.agent.get_run(mark.run_id)).status)
        return await post(thread, view, mark=mark)

    monkeypatch.setattr(messenger, "post", noting)
    await bot.on_message(message("hi"))
    await bot.drain()
    assert on_record == ["failed"]


async def test_a_notice_said_before_a_crash_is_not_said_again_to_that_message() -> None:
    """A message that only says "approve" while a card waits is told to use the card."""
    bot, messenger, card = await restart_requested(Counter())
    waits = Notice(text=APPROVAL_PENDING.format(tool=card.tool_name))
    await bot.replies.stream_for(message("approve"), messenger, "run_inbox_7", retry=False)
    await bot.replies.stream_for(message("approve"), messenger, "run_inbox_7", retry=True)
    assert messenger.views(Notice) == [waits]

    # Another message is told again, and so is this one, were its notice lost.
    await bot.replies.stream_for(message("lgtm"), messenger, "run_inbox_8", retry=True)
    messenger.marked.clear()
    await bot.replies.stream_for(message("approve"), messenger, "run_inbox_7", retry=True)
    assert messenger.views(Notice) == [waits] * 3
