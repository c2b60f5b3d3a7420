"""Questions in the thread: answered by a reply or a form, declined or cancelled by a
button, each settled once and shown settled, by whom."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import BaseModel

from agents import Agent, MemoryStore, ToolCall, ToolContext, tool
from bot import ChatBot, Click, Notice, Prompt, PromptField, Reply
from bot.views import form_answer, prompt_fields
from tests.agents.helpers import Counter, call_then_answer

from .helpers import THREAD, RecordingMessenger, booking_agent, message, weather_agent


def wired(bot: ChatBot) -> RecordingMessenger:
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    return messenger


def on(question: Prompt, action: str, *, user: str = "U1", **values: object) -> Click:
    assert action in ("answer", "decline", "cancel")
    return Click(
        thread=THREAD,
        user_id=user,
        run_id=question.run_id,
        tool_call_id=question.tool_call_id,
        action="answer" if action == "answer" else "decline" if action == "decline" else "cancel",
        values=dict(values) if action == "answer" else None,
    )


async def asked(bot: ChatBot, messenger: RecordingMessenger, text: str) -> Prompt:
    await bot.on_message(message(text))
    await bot.drain()
    (question,) = messenger.views(Prompt)
    return question


async def test_a_form_answer_is_typed_validated_and_runs_the_tool_once() -> None:
    booked = Counter()
    bot = ChatBot(booking_agent([], booked))
    messenger = wired(bot)
    question = await asked(bot, messenger, "book a table")
    assert question.form
    assert [(f.name, f.kind, f.required) for f in question.fields] == [
        ("date", "text", True),
        ("seats", "integer", True),
    ]

    refused = await bot.on_click(on(question, "answer", date="friday", seats="lots"))
    assert not refused.accepted
    assert refused.message is not None
    assert "seats" in refused.message
    assert booked.calls == []  # still waiting

    result = await bot.on_click(on(question, "answer", date="friday", seats=" 4 "))
    assert result.accepted
    assert isinstance(result.card, Prompt)
    assert result.card.status == "answered"
    assert result.card.decided_by is not None
    assert result.card.decided_by.id == "U1"
    await bot.drain()
    assert booked.calls == [{"date": "friday", "seats": 4}]
    assert messenger.views(Reply)[-1].text.endswith("booked 4 seats on friday")
    # The question's message now says who answered it; a second click changes nothing.
    (_, ref, shown) = messenger.updates[-1]
    assert ref == messenger.ref_of(question)
    assert isinstance(shown, Prompt)
    assert shown.status == "answered"
    again = await bot.on_click(on(question, "answer", date="friday", seats="4"))
    assert not again.accepted
    assert again.message is not None
    assert "already answered" in again.message
    assert len(booked.calls) == 1


async def test_decline_and_cancel_end_the_question_and_the_model_hears_which() -> None:
    for action, told in (("decline", "declined to answer"), ("cancel", "cancelled the question")):
        bot = ChatBot(weather_agent())
        messenger = wired(bot)
        question = await asked(bot, messenger, "what's the weather?")
        result = await bot.on_click(on(question, action))
        assert result.accepted
        assert isinstance(result.card, Prompt)
        assert result.card.status == ("declined" if action == "decline" else "cancelled")
        await bot.drain()
        run = await bot.agent.get_run(question.run_id)
        assert run.status == "finished"
        assert told in run.text
        # A reply now starts nothing: the question is gone.
        assert await bot.agent.list_suspended_runs(thread_id=THREAD.id) == []


async def test_an_approve_click_on_a_question_and_an_answer_on_a_card_are_refused() -> None:
    bot = ChatBot(weather_agent())
    messenger = wired(bot)
    question = await asked(bot, messenger, "what's the weather?")
    approve = Click(
        thread=THREAD,
        user_id="U1",
        run_id=question.run_id,
        tool_call_id=question.tool_call_id,
        action="approve",
    )
    result = await bot.on_click(approve)
    assert not result.accepted
    assert result.message == "This request waits for an answer in the thread, not a button."


async def test_a_reply_that_answers_marks_the_question_answered() -> None:
    bot = ChatBot(weather_agent())
    messenger = wired(bot)
    question = await asked(bot, messenger, "what's the weather?")
    await bot.on_message(message("Paris", user="U3"))
    await bot.drain()
    (_, ref, shown) = messenger.updates[-1]
    assert ref == messenger.ref_of(question)
    assert isinstance(shown, Prompt)
    assert shown.status == "answered"
    assert shown.decided_by is not None
    assert shown.decided_by.id == "U3"
    # Counted as an answer given in the question's form is.
    assert bot.metrics.value("approval_bot_decisions_total", outcome="answered") == 1


async def test_a_reply_that_cancels_a_question_is_counted_as_cancelled() -> None:
    bot = ChatBot(weather_agent())
    messenger = wired(bot)
    await asked(bot, messenger, "what's the weather?")
    await bot.on_message(message("cancel", user="U3"))
    await bot.drain()
    assert bot.metrics.value("approval_bot_decisions_total", outcome="cancelled") == 1
    assert bot.metrics.value("approval_bot_decisions_total", outcome="answered") == 0


def test_form_fields_come_from_the_answer_schema_and_values_are_typed() -> None:
    schema = {
        "type": "object",
        "properties": {
            "day": {"type": "string", "enum": ["sat", "sun"], "title": "Day"},
            "hour": {"type": "integer", "description": "UTC"},
            "ratio": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "notify": {"type": "boolean"},
            "team": {"oneOf": [{"const": "ops", "title": "Ops"}, {"const": "dev"}]},
        },
        "required": ["day", "hour"],
    }
    fields = prompt_fields(schema)
    assert fields == (
        PromptField(name="day", label="Day", kind="choice", choices=("sat", "sun"), required=True),
        PromptField(name="hour", label="hour", kind="integer", required=True, description="UTC"),
        PromptField(name="ratio", label="ratio", kind="number"),
        PromptField(name="notify", label="notify", kind="boolean"),
        PromptField(name="team", label="team", kind="choice", choices=("ops", "dev")),
    )
    values = {"day": "sun", "hour": "7", "ratio": "0.5", "notify": "true", "team": ""}
    assert form_answer(fields, values) == {"day": "sun", "hour": 7, "ratio": 0.5, "notify": True}
    # What does not convert stays, so validation names the field.
    assert form_answer(fields, {"hour": "seven"}) == {"hour": "seven"}
    # A choice that is not text comes back as the schema's own value.
    (level, flag) = prompt_fields(
        {"properties": {"level": {"enum": [1, 2]}, "flag": {"enum": [True, False]}}}
    )
    assert (level.choices, flag.choices) == (("1", "2"), ("true", "false"))
    assert form_answer((level, flag), {"level": "2", "flag": "false"}) == {
        "level": 2,
        "flag": False,
    }


async def test_cancel_as_a_reply_leaves_the_question_and_the_tool_hears_it() -> None:
    bot = ChatBot(weather_agent())
    messenger = wired(bot)
    question = await asked(bot, messenger, "what's the weather?")
    await bot.on_message(message("Never mind."))
    await bot.drain()
    run = await bot.agent.get_run(question.run_id)
    assert run.status == "finished"
    assert "cancelled the question" in run.text
    (_, ref, shown) = messenger.updates[-1]
    assert ref == messenger.ref_of(question)
    assert isinstance(shown, Prompt)
    assert shown.status == "cancelled"


def control_agent() -> Agent:
    """Asks whether to start or stop (a choice question)."""

    class Action(BaseModel):
        action: Literal["start", "stop"]

    @tool(resume_schema=Action)
    def control(ctx: ToolContext) -> str:
        """Start or stop the service."""
        if ctx.resume_data is None:
            ctx.suspend({"message": "Start or stop?"})
        return f"service: {ctx.resume_data.action}"

    return Agent(
        id="ops",
        model=call_then_answer(ToolCall("control", {})),
        tools=[control],
        store=MemoryStore(),
    )


async def test_stop_is_an_answer_when_the_question_offers_it() -> None:
    bot = ChatBot(control_agent())
    messenger = wired(bot)
    question = await asked(bot, messenger, "control the service")
    await bot.on_message(message("stop"))
    await bot.drain()
    run = await bot.agent.get_run(question.run_id)
    assert "service: stop" in run.text


async def test_a_mention_while_a_question_waits_is_a_new_turn_and_the_question_stays() -> None:
    bot = ChatBot(weather_agent())
    messenger = wired(bot)
    question = await asked(bot, messenger, "what's the weather?")
    await bot.on_message(replace(message("deploy web"), mentioned=True))
    await bot.drain()
    assert messenger.views(Notice) == []
    turn = bot.agent.model.requests[-1].messages[-1].text  # type: ignore[attr-defined]
    assert turn.endswith("\n\ndeploy web")
    assert "`weather` asked U1 a question" in turn
    # The new turn asked a question of its own (this agent always does); the first one
    # still waits, and a plain reply answers the newest.
    first, newest = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    assert first.tool_call_id == question.tool_call_id
    await bot.on_message(message("Oslo"))
    await bot.drain()
    assert messenger.views(Reply)[-1].text.endswith("Oslo: sunny")
    (waiting,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    assert waiting.tool_call_id == question.tool_call_id != newest.tool_call_id


async def test_a_sentence_that_is_none_of_a_choice_questions_answers_is_a_new_request() -> None:
    bot = ChatBot(control_agent())
    messenger = wired(bot)
    question = await asked(bot, messenger, "control the service")
    await bot.on_message(message("please deploy the web app to staging"))
    await bot.drain()
    (notice,) = messenger.views(Notice)
    assert notice.text.startswith("`control` is still waiting for one of its answers (start, stop)")
    (waiting,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    assert waiting.tool_call_id == question.tool_call_id
    assert len(messenger.views(Prompt)) == 1  # not asked again as a wrong answer
    # A short slip is asked again as usual; a choice answers.
    await bot.on_message(message("strat"))
    await bot.drain()
    assert messenger.views(Prompt)[-1].error is not None
    await bot.on_message(message("start"))
    await bot.drain()
    run = await bot.agent.get_run(question.run_id)
    assert "service: start" in run.text
