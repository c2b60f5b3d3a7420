"""Live answers: where the platform has live messages the answer is written as the
model writes it, with each tool call as a step; a call that waits ends the live
message with its step saying for whom, and the card comes below it."""

from __future__ import annotations

from agents import Agent, MemoryStore, ToolCall, tool
from bot import ApprovalCard, ApprovalPolicy, ChatBot, Person, Reply
from tests.agents.helpers import Counter, call_then_answer

from .helpers import OTHER_THREAD, THREAD, RecordingMessenger, click, message, restart_agent


def status_agent() -> Agent:
    @tool
    def service_status(service: str) -> str:
        """How a service is doing."""
        return f"{service} is up"

    @tool
    def broken(service: str) -> str:
        """Always fails."""
        raise RuntimeError("the status page is down")

    model = call_then_answer(
        ToolCall("service_status", {"service": "api"}),
        ToolCall("broken", {"service": "api"}),
        before="Let me check.",
        answer=lambda _: "api is up.",
    )
    return Agent(id="ops", model=model, tools=[service_status, broken], store=MemoryStore())


def wired(
    agent: Agent, policy: str = "", **messenger: object
) -> tuple[ChatBot, RecordingMessenger]:
    bot = ChatBot(agent, policy=ApprovalPolicy.from_toml(policy))
    recording = RecordingMessenger(**{"live": True, **messenger})  # type: ignore[arg-type]
    bot.register("test", recording)
    return bot, recording


async def test_the_answer_and_its_tool_steps_are_written_live() -> None:
    bot, messenger = wired(status_agent())
    await bot.on_message(message("how is the api?", user="U1"))
    await bot.drain()

    (live,) = messenger.lives
    assert live.to == Person(id="U1")
    assert live.text == "Let me check.\n\napi is up."
    assert live.shown() == [("service_status", "complete"), ("broken", "error")]
    assert [s.status for s in live.steps if s.title == "service_status"] == [
        "in_progress",
        "complete",
    ]
    (failed,) = [s for s in live.steps if s.status == "error"]
    assert "the status page is down" in "".join(str(part) for part in failed.detail)
    assert live.finished
    assert messenger.views(Reply) == []  # nothing posted twice


async def test_a_call_that_waits_ends_the_live_message_and_its_card_comes_below() -> None:
    ran = Counter()
    policy = '[tools.restart_service]\napprovers = ["U2", "U3"]\n'
    bot, messenger = wired(restart_agent(ran), policy)
    await bot.on_message(message("restart the api", user="U1"))
    await bot.drain()

    (first,) = messenger.lives
    assert first.text == "I'll restart api."
    (waiting,) = [s for s in first.steps if s.status == "pending"]
    assert waiting.title == "restart_service"
    assert waiting.detail == (
        "Waiting for approval from ",
        Person(id="U2"),
        ", ",
        Person(id="U3"),
        "",
    )
    assert first.finished
    (card,) = messenger.views(ApprovalCard)

    assert (await bot.on_click(click(card, user="U2"))).accepted
    await bot.drain()
    assert ran.count == 1
    _, second = messenger.lives
    assert second.to == Person(id="U1")  # still addressed to who asked
    assert second.shown() == [("restart_service", "complete")]
    assert second.text.startswith("Done.")
    assert second.finished


async def test_a_live_message_the_platform_refuses_is_posted_whole() -> None:
    bot, messenger = wired(status_agent(), failing_lives=True)
    await bot.on_message(message("how is the api?"))
    await bot.drain()
    assert [reply.text for reply in messenger.views(Reply)] == ["Let me check.\n\napi is up."]


async def test_without_live_messages_each_part_is_posted_whole() -> None:
    bot, messenger = wired(status_agent(), live=False)
    await bot.on_message(message("how is the api?"))
    await bot.drain()
    assert [reply.text for reply in messenger.views(Reply)] == ["Let me check.\n\napi is up."]


async def test_a_finished_answer_takes_feedback_once_per_person_and_rating() -> None:
    bot, messenger = wired(status_agent(), live=False)
    await bot.on_message(message("how is the api?"))
    await bot.drain()
    (reply,) = messenger.views(Reply)
    assert reply.feedback is not None
    said = await bot.on_feedback(THREAD, "U2", reply.feedback, helpful=True)
    assert said == ("Thanks: your rating of this answer is noted.",)
    await bot.on_feedback(THREAD, "U2", reply.feedback, helpful=True)  # again: once
    await bot.on_feedback(THREAD, "U3", reply.feedback, helpful=False)
    ratings = [
        (e.actor, e.result)
        for e in await bot.store.list_audit(run_id=reply.feedback)
        if e.event == "feedback"
    ]
    assert ratings == [("U2", "helpful"), ("U3", "unhelpful")]
    assert bot.metrics.value("approval_bot_feedback_total", rating="helpful") == 1
    elsewhere = await bot.on_feedback(OTHER_THREAD, "U2", reply.feedback, helpful=True)
    assert elsewhere == ("That answer is not known here any more.",)


async def test_a_paused_run_offers_no_feedback_yet() -> None:
    bot, messenger = wired(restart_agent(Counter()), live=False)
    await bot.on_message(message("restart the api"))
    await bot.drain()
    assert [reply.feedback for reply in messenger.views(Reply)] == [None]
