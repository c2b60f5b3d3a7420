"""Messages: new runs, questions and their answers, redeliveries, failures."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agents import (
    Agent,
    FunctionModel,
    MemoryStore,
    Message,
    ModelError,
    ModelResponse,
    ToolCall,
)
from agents.models.base import ModelRequest, StopReason
from bot import ApprovalCard, CardPlace, ChatBot, MessageRef, Notice, Prompt, Reply, ask_of
from tests.agents.helpers import Counter, call_then_answer, last_results

from .helpers import (
    OTHER_THREAD,
    THREAD,
    RecordingMessenger,
    booking_agent,
    click,
    message,
    restart_agent,
    weather_agent,
)


def wired(agent: Agent) -> tuple[ChatBot, RecordingMessenger]:
    bot = ChatBot(agent)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    return bot, messenger


def echo_agent(reply: str = "Hello there.") -> Agent:
    return Agent(id="ops", model=FunctionModel(lambda m, r: reply), store=MemoryStore())


async def test_a_message_gets_the_agents_answer() -> None:
    bot, messenger = wired(echo_agent())
    await bot.on_message(message("hi"))
    await bot.drain()
    assert [v.text for _, v, _ in messenger.posts if isinstance(v, Reply)] == ["Hello there."]
    assert len(messenger.posts) == 1


async def test_on_message_returns_before_the_agent_works() -> None:
    gate = asyncio.Event()

    async def slow(messages: list[Message], request: ModelRequest) -> str:
        await gate.wait()
        return "finally"

    bot, messenger = wired(Agent(id="ops", model=FunctionModel(slow), store=MemoryStore()))
    await bot.on_message(message("hi"))
    assert messenger.posts == []
    assert bot.busy  # in the inbox, worked on behind the ack
    gate.set()
    await bot.drain()
    assert [r.text for r in messenger.views(Reply)] == ["finally"]


async def test_the_thread_remembers_the_conversation() -> None:
    def handler(messages: list[Message], request: ModelRequest) -> str:
        return f"I have seen {sum(m.role == 'user' for m in messages)} message(s)."

    bot, messenger = wired(Agent(id="ops", model=FunctionModel(handler), store=MemoryStore()))
    for text in ("one", "two"):
        await bot.on_message(message(text))
    await bot.on_message(message("elsewhere", thread=OTHER_THREAD))
    await bot.drain()
    assert [r.text for r in messenger.views(Reply, THREAD)] == [
        "I have seen 1 message(s).",
        "I have seen 2 message(s).",
    ]
    assert [r.text for r in messenger.views(Reply, OTHER_THREAD)] == ["I have seen 1 message(s)."]


async def test_a_question_is_posted_and_the_next_reply_resumes_the_tool() -> None:
    bot, messenger = wired(weather_agent())
    await bot.on_message(message("what's the weather?"))
    await bot.drain()
    (prompt,) = messenger.views(Prompt)
    assert (prompt.question, prompt.error) == ("Which city?", None)
    assert [(f.name, f.kind, f.required) for f in prompt.fields] == [("city", "text", True)]
    (pending,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    place = await bot.chat.card_of(pending.run_id, ask_of(pending))
    assert place == CardPlace(thread=THREAD, ref=messenger.ref_of(prompt))
    await bot.on_message(message("Berlin"))
    await bot.drain()
    assert [r.text for r in messenger.views(Reply)] == ["The weather in Berlin: sunny"]
    assert await bot.agent.list_suspended_runs(thread_id=THREAD.id) == []


async def test_a_reply_that_does_not_fit_is_asked_again_then_a_good_one_works() -> None:
    booked = Counter()
    extracted: list[dict[str, Any]] = [{"date": "soon"}, {"date": "2026-12-24", "seats": 2}]
    bot, messenger = wired(booking_agent(extracted, booked))
    await bot.on_message(message("book a table"))
    await bot.drain()
    await bot.on_message(message("whenever"))
    await bot.drain()
    first, again = messenger.views(Prompt)
    assert first.error is None
    assert again.question == first.question
    assert again.tool_call_id == first.tool_call_id
    assert again.error == "seats: Field required"
    assert booked.count == 0
    await bot.on_message(message("24 December, two of us"))
    await bot.drain()
    assert booked.calls == [{"date": "2026-12-24", "seats": 2}]
    assert "booked 2 seats on 2026-12-24" in messenger.views(Reply)[-1].text


async def test_a_redelivered_message_runs_once() -> None:
    ran = Counter()
    bot, messenger = wired(restart_agent(ran))
    await bot.on_message(message("restart", keys=("event:Ev1", "msg:C1:1.0")))
    await bot.on_message(message("restart", keys=("event:Ev1", "msg:C1:1.0")))
    # Slack's app_mention and message events: different event ids, same message.
    await bot.on_message(message("restart", keys=("event:Ev2", "msg:C1:1.0")))
    await bot.drain()
    assert len(messenger.views(ApprovalCard)) == 1
    assert messenger.views(Notice) == []
    assert bot.metrics.value("approval_bot_messages_duplicate_total") == 2


async def test_a_copy_never_takes_the_key_of_the_message_that_is_answered() -> None:
    bot, messenger = wired(echo_agent())
    await bot.on_message(message("one", keys=("event:Ev1",)))
    # A redelivery of Ev1 that also names a message key nobody has claimed yet ...
    await bot.on_message(message("one", keys=("event:Ev1", "msg:C1:2.0")))
    # ... must not keep the message of that key from being answered.
    await bot.on_message(message("two", keys=("event:Ev9", "msg:C1:2.0")))
    await bot.drain()
    assert len(messenger.views(Reply)) == 2


async def test_the_same_key_on_another_platform_is_not_a_duplicate() -> None:
    bot, messenger = wired(echo_agent())
    other = RecordingMessenger()
    bot.register("other", other)
    await bot.on_message(message("hi", keys=("1",)))
    await bot.on_message(message("hi", keys=("1",), thread=replace(THREAD, platform="other")))
    await bot.drain()
    assert len(messenger.views(Reply)) == 1
    assert len(other.views(Reply)) == 1


async def test_a_model_failure_is_a_short_notice_not_a_trace() -> None:
    def broken(messages: list[Message], request: ModelRequest) -> str:
        raise ModelError("HTTP 529 overloaded", user_message="The model is busy; try again.")

    bot, messenger = wired(Agent(id="ops", model=FunctionModel(broken), store=MemoryStore()))
    await bot.on_message(message("hi"))
    await bot.drain()
    assert [v for _, v, _ in messenger.posts] == [
        Notice(text="I couldn't finish this: The model is busy; try again.")
    ]
    assert bot.metrics.value("approval_bot_runs_failed_total") == 1


async def test_a_store_failure_delays_the_answer_and_says_so_once() -> None:
    bot, messenger = wired(echo_agent())
    working = bot.store.paused_runs
    failures = 3

    async def flaky(thread_id: str) -> list[str]:
        nonlocal failures
        if failures:
            failures -= 1
            raise ConnectionError("store down")
        return await working(thread_id)

    bot.store.paused_runs = flaky  # type: ignore[method-assign]
    await bot.on_message(message("hi"))
    await bot.drain()
    assert [type(v).__name__ for _, v, _ in messenger.posts] == ["Notice", "Reply"]
    (notice,) = messenger.views(Notice)
    assert "queued" in notice.text
    assert "store down" not in notice.text
    assert [r.text for r in messenger.views(Reply)] == ["Hello there."]


async def test_a_store_failure_on_the_last_try_is_a_short_notice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bot, messenger = wired(echo_agent())
    bot.intake.retry_for = 0  # the first try is the last

    async def down(thread_id: str) -> list[str]:
        raise ConnectionError("store down")

    bot.store.paused_runs = down  # type: ignore[method-assign]
    await bot.on_message(message("hi"))
    await bot.drain()
    (notice,) = messenger.views(Notice)
    assert "went wrong on my side" in notice.text
    assert "store down" not in notice.text
    assert "could not start work" in caplog.text


async def test_a_platform_hiccup_does_not_stop_the_run() -> None:
    ran = Counter()
    bot, messenger = wired(restart_agent(ran))
    messenger.failing_posts = 1  # the text before the card is lost
    await bot.on_message(message("restart"))
    await bot.drain()
    assert len(messenger.views(ApprovalCard)) == 1
    assert [s for _, s in messenger.statuses] == ["is thinking…", None]


async def test_a_card_whose_post_failed_is_posted_again_while_its_call_waits() -> None:
    ran = Counter()
    bot, messenger = wired(restart_agent(ran))
    messenger.failing_posts = 3  # the text before the card, the card, its first repost
    await bot.on_message(message("restart"))
    await bot.drain()
    assert messenger.views(ApprovalCard) == []
    now = datetime.now(UTC)
    assert await bot.send_reminders(now + timedelta(seconds=10)) == 0  # not yet due
    assert await bot.send_reminders(now + timedelta(seconds=31)) == 1  # fails again
    assert messenger.views(ApprovalCard) == []
    assert await bot.send_reminders(now + timedelta(seconds=50)) == 0  # backs off: 1 min
    assert await bot.send_reminders(now + timedelta(seconds=62)) == 1
    (card,) = messenger.views(ApprovalCard)
    assert card.status == "pending"
    assert await bot.send_reminders(now + timedelta(hours=1)) == 0  # posted: nothing more


async def test_an_answer_the_platform_could_not_take_is_posted_later() -> None:
    bot, messenger = wired(echo_agent("Deployed."))
    messenger.unreachable = 2  # the answer, then its first retry
    await bot.on_message(message("deploy"))
    await bot.drain()
    assert messenger.views(Reply) == []
    now = datetime.now(UTC)
    assert await bot.send_reminders(now + timedelta(seconds=31)) == 0  # still down
    assert messenger.views(Reply) == []
    assert await bot.send_reminders(now + timedelta(seconds=62)) == 1
    (answer,) = messenger.views(Reply)
    assert answer.text == "Deployed."
    assert await bot.send_reminders(now + timedelta(hours=1)) == 0  # made once


async def test_an_update_the_platform_could_not_take_is_made_later_with_the_latest_view() -> None:
    ran = Counter()
    bot, messenger = wired(restart_agent(ran))
    await bot.on_message(message("restart"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    messenger.unreachable = 1  # the card's update after the click
    assert (await bot.on_click(click(card))).accepted
    await bot.drain()
    assert ran.count == 1
    assert not any(isinstance(view, ApprovalCard) for _, _, view in messenger.updates)
    assert await bot.send_reminders(datetime.now(UTC) + timedelta(seconds=31)) == 1
    (updated,) = [view for _, _, view in messenger.updates if isinstance(view, ApprovalCard)]
    assert updated.status == "approved"


async def test_a_kept_update_never_brings_back_an_older_view() -> None:
    bot, messenger = wired(echo_agent())
    ref: MessageRef = {"channel": "C1", "ts": "m1"}
    messenger.unreachable = 1
    await bot.presenter.update(messenger, THREAD, ref, Reply(text="1 of 2 approvals"))
    await bot.presenter.update(messenger, THREAD, ref, Reply(text="approved"))
    assert await bot.send_reminders(datetime.now(UTC) + timedelta(minutes=5)) == 1
    shown = [view.text for _, _, view in messenger.updates if isinstance(view, Reply)]
    assert shown == ["approved", "approved"]  # the latest, made again: never the older one


async def test_a_message_for_an_unregistered_platform_is_a_wiring_error() -> None:
    bot = ChatBot(echo_agent())
    with pytest.raises(LookupError, match="no messenger registered for platform 'test'"):
        await bot.on_message(message("hi"))


async def test_replies_in_one_thread_keep_the_order_of_the_messages() -> None:
    gates = {"first": asyncio.Event(), "second": asyncio.Event()}

    async def handler(messages: list[Message], request: ModelRequest) -> ModelResponse:
        text = messages[-1].text
        await gates[text].wait()
        return ModelResponse(text=f"answer to {text}")

    bot, messenger = wired(Agent(id="ops", model=FunctionModel(handler), store=MemoryStore()))
    await bot.on_message(message("first"))
    await bot.on_message(message("second"))
    gates["second"].set()
    await asyncio.sleep(0)
    gates["first"].set()
    await bot.drain()
    assert [r.text for r in messenger.views(Reply)] == ["answer to first", "answer to second"]


async def test_a_sub_agents_failure_is_left_to_its_supervisor() -> None:
    def broken(messages: list[Message], request: ModelRequest) -> str:
        raise ModelError("HTTP 500", user_message="The records model is down.")

    records = Agent(id="records", description="Records.", model=FunctionModel(broken))
    ops = Agent(
        id="ops",
        model=call_then_answer(
            ToolCall("agent-records", {"task": "find 1"}),
            answer=lambda m: "Sorry: " + last_results(m)[0].content,
        ),
        agents={"records": records},
        store=MemoryStore(),
    )
    bot, messenger = wired(ops)
    await bot.on_message(message("find user 1"))
    await bot.drain()
    assert messenger.views(Notice) == []
    (reply,) = messenger.views(Reply)
    assert reply.text == "Sorry: The records agent failed: The records model is down."
    assert bot.metrics.value("approval_bot_runs_failed_total") == 0
    assert bot.metrics.value("approval_bot_runs_finished_total") == 1


async def test_an_overheard_message_never_starts_a_run_but_answers_a_question() -> None:
    bot = ChatBot(weather_agent())
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(replace(message("chit chat"), addressed=False))
    await bot.drain()
    assert messenger.posts == []

    await bot.on_message(message("weather?"))
    await bot.drain()
    await bot.on_message(replace(message("Oslo"), addressed=False))
    await bot.drain()
    assert "Oslo" in messenger.views(Reply)[-1].text


@pytest.mark.parametrize(
    ("stop", "note"),
    [
        ("refusal", "The model declined to help with this request."),
        ("max_tokens", "The answer was cut off: it reached the model's length limit."),
    ],
)
async def test_an_answer_that_stopped_early_says_so(stop: StopReason, note: str) -> None:
    from agents import FunctionModel, ModelResponse

    def handler(messages: list[Any], request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="" if stop == "refusal" else "Part one of", stop_reason=stop)

    bot, messenger = wired(Agent(id="a", model=FunctionModel(handler)))
    await bot.on_message(message("tell me"))
    await bot.drain()
    assert messenger.views(Notice)[-1].text == note
