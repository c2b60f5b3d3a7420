"""Stopping a thread's work: who may, what it ends, and what people see."""

from __future__ import annotations

import asyncio

from agents import Agent, MemoryStore, ToolCall, ToolContext, tool
from bot import ApprovalCard, ApprovalPolicy, ChatBot, Click, Notice, Reply
from tests.agents.helpers import Counter, call_then_answer

from .helpers import OTHER_THREAD, THREAD, RecordingMessenger, message, restart_requested

waiting = restart_requested


async def test_stop_from_the_requester_ends_the_run_and_closes_its_card() -> None:
    ran = Counter()
    bot, messenger, card = await waiting(ran)

    assert await bot.on_stop(THREAD, "U1") == ()
    await bot.drain()

    _, ref, shown = messenger.updates[-1]
    assert ref == messenger.ref_of(card)
    assert isinstance(shown, ApprovalCard)
    assert shown.status == "stopped"
    assert [p.id for p in shown.decided_by] == ["U1"]
    notice = messenger.views(Notice)[-1]
    assert notice.to is not None
    assert notice.to.id == "U1"
    assert notice.text.startswith("stopped as you asked")
    run = await bot.agent.get_run(card.run_id)
    assert run.status == "stopped"
    assert await bot.agent.list_suspended_runs(thread_id=THREAD.id) == []
    events = [(e.event, e.actor) for e in await bot.store.list_audit(run_id=card.run_id)]
    assert ("stopped", "U1") in events

    # A click on the card afterwards is told plainly, and nothing runs.
    result = await bot.on_click(
        Click(
            thread=THREAD,
            user_id="U2",
            run_id=card.run_id,
            tool_call_id=card.tool_call_id,
            action="approve",
        )
    )
    assert not result.accepted
    assert result.said == ("This request was stopped, so there is nothing to decide.",)
    assert ran.count == 0


async def test_a_message_that_says_stop_stops_the_thread_and_never_reaches_the_model() -> None:
    ran = Counter()
    bot, messenger, card = await waiting(ran)
    model_requests = len(bot.agent.model.requests)  # type: ignore[attr-defined]

    await bot.on_message(message("Stop!"))
    await bot.drain()

    assert (await bot.agent.get_run(card.run_id)).status == "stopped"
    assert len(bot.agent.model.requests) == model_requests  # type: ignore[attr-defined]
    assert messenger.views(Notice)[-1].text.startswith("stopped as you asked")
    # Nothing left: another "stop" is told so, privately, and starts nothing.
    await bot.on_message(message("stop"))
    await bot.drain()
    assert messenger.tells[-1][1:] == (
        "U1",
        "Nothing is running or waiting here, so there is nothing to stop.",
    )
    assert len(bot.agent.model.requests) == model_requests  # type: ignore[attr-defined]


async def test_only_the_requester_or_an_approver_may_stop() -> None:
    policy = ApprovalPolicy.from_toml('[tools.restart_service]\napprovers = ["U9"]')
    bot, _messenger, card = await waiting(Counter(), policy)

    said = await bot.on_stop(THREAD, "U5")
    assert said == (
        "Only whoever asked, or someone who may decide what it waits for, can stop this.",
    )
    assert (await bot.agent.get_run(card.run_id)).status == "paused"

    assert await bot.on_stop(THREAD, "U9", card.run_id) == ()  # the approver
    assert (await bot.agent.get_run(card.run_id)).status == "stopped"


async def test_stop_while_the_answer_is_written_cuts_it_off_without_feedback() -> None:
    release = asyncio.Event()
    started = asyncio.Event()
    runs: list[str] = []

    @tool
    async def look(q: str, ctx: ToolContext) -> str:
        """Look something up."""
        runs.append(ctx.run_id)
        started.set()
        await release.wait()
        return "found"

    agent = Agent(
        id="ops",
        model=call_then_answer(ToolCall("look", {"q": "x"}), before="Looking. "),
        tools=[look],
        store=MemoryStore(),
    )
    bot = ChatBot(agent)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("look it up"))
    await started.wait()

    # The message waits behind nothing: the thread's running work does not hold it up.
    await bot.on_message(message("stop", user="U1"))
    for _ in range(200):
        if messenger.views(Notice):
            break
        await asyncio.sleep(0.01)
    (notice,) = messenger.views(Notice)
    assert notice.text.startswith("stopping as you asked")
    release.set()
    await bot.drain()

    run = await bot.agent.get_run(runs[0])
    assert run.status == "stopped"
    assert "Done." not in run.text  # the model never heard the result
    assert all(reply.feedback is None for reply in messenger.views(Reply))


async def test_the_text_before_a_card_offers_stop_for_its_run() -> None:
    ran = Counter()
    bot, messenger, card = await waiting(ran)
    before = next(reply for reply in messenger.views(Reply) if reply.stop is not None)
    assert before.stop == card.run_id
    assert before.feedback is None

    live = RecordingMessenger(live=True)
    bot.register("test", live)
    await bot.on_message(message("restart the api", thread=OTHER_THREAD))
    await bot.drain()
    (first, *_) = live.lives
    assert first.stop is not None
    assert first.feedback is None
