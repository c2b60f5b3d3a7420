"""kill -9 at the worst moments: after restarting, nothing is lost and nothing runs twice.

A real ``python -m bot`` process on a durable store (an SQLite file, the real
Redis) with a one-second lease is killed right after acks, after the card,
after a click's ack, and while the approved tool runs; the same store is then
served by a new process, and the test checks what people see in Slack and what
the tools really did.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from adapters.slack.wire import APPROVE_ACTION
from agents.texts import INTERRUPTED_RUN
from bot.texts import APPROVAL_PENDING, RUN_FAILED
from tests.stores.conftest import DURABLE_KINDS, store_url

from .crash_agent import FAIL, FAILED
from .fake_slack import ApiCall, FakeSlack, Posted
from .harness import CHANNEL, mention_event
from .process import BotProcess, running
from .test_approvals import card_text, has_buttons

# Generous: a restart, one lease for the dead process's leases to lapse, and a sweep.
RECOVERY_WITHIN = 20.0


@pytest.fixture(params=DURABLE_KINDS)
async def bot(
    request: pytest.FixtureRequest, slack: FakeSlack, tmp_path: Path
) -> AsyncIterator[BotProcess]:
    async with store_url(request.param, tmp_path) as url, running(slack, url, tmp_path) as bot:
        yield bot


def replies(slack: FakeSlack, root: str) -> list[str]:
    """The texts the bot posted in a thread, oldest first."""
    return [m.text for m in slack.in_thread(CHANNEL, root)]


def newest_card(slack: FakeSlack, root: str) -> Posted:
    """The newest card with buttons in a thread."""
    return [m for m in slack.in_thread(CHANNEL, root) if has_buttons(m)][-1]


async def card_for(bot: BotProcess, slack: FakeSlack, service: str) -> Posted:
    """Ask for a deploy and wait for its card."""
    root = mention_event(f"deploy {service}")
    assert await bot.send_event(root) == 200

    def card() -> Posted | None:
        return next((m for m in slack.in_thread(CHANNEL, root["ts"]) if has_buttons(m)), None)

    await slack.wait_for(lambda: card() is not None, what="the card")
    posted = card()
    assert posted is not None
    return posted


async def settled_card_for(bot: BotProcess, slack: FakeSlack, service: str) -> Posted:
    """A card whose message is fully worked off (so the next kill is after it)."""
    card = await card_for(bot, slack, service)
    await slack.wait_for(
        lambda: slack.of("assistant.threads.setStatus")[-1].args.get("status") == "",
        what="the thinking status cleared",
    )
    await asyncio.sleep(0.3)  # and the message marked done in the inbox
    return card


async def test_every_message_acked_before_a_kill_is_answered_once(
    bot: BotProcess, slack: FakeSlack
) -> None:
    await bot.stop()
    bot.extra_env["BOT_WORKERS"] = "1"  # one message at a time: the rest wait in the inbox
    await bot.start()
    held = mention_event("hold")
    waiting = [mention_event(f"hello {n}") for n in range(9)]
    for event in [held, *waiting]:
        assert await bot.send_event(event) == 200
    await slack.wait_for(lambda: bool(bot.recorded("hold")), what="the first message worked on")
    await bot.kill()  # one run in flight, nine messages acked and only in the inbox
    del bot.extra_env["BOT_WORKERS"]
    await bot.start()

    def answered() -> bool:
        return all(replies(slack, e["ts"]) for e in [held, *waiting])

    await slack.wait_for(answered, within=RECOVERY_WITHIN, what="every message answered")
    await bot.stop()  # anything still to come has come
    for n, event in enumerate(waiting):
        assert replies(slack, event["ts"]) == [f"You said: hello {n}"], bot.log_text()
    # The run cut off in its model turn is driven on: the turn is asked again.
    assert replies(slack, held["ts"]) == ["You said: hold"], bot.log_text()
    assert len(bot.recorded("hold")) == 1


async def killed_in_a_turn_after_a_deploy(
    bot: BotProcess, slack: FakeSlack, service: str, turn: str
) -> None:
    """Approve a deploy of ``service``, kill the bot while the model turn that the crash
    agent records as ``turn`` thinks, restart it: the answer comes, the deploy ran once,
    and nobody is told it may or may not have happened."""
    card = await settled_card_for(bot, slack, service)
    assert await bot.press(card, APPROVE_ACTION) == 200
    await slack.wait_for(lambda: bool(bot.recorded(turn)), what="the model turn")
    await bot.kill()
    await bot.start()
    root = card.thread_ts or ""
    await slack.wait_for(
        lambda: any("Done." in t for t in replies(slack, root)),
        within=RECOVERY_WITHIN,
        what="the answer after the restart",
    )
    await bot.stop()
    assert len(bot.recorded("deploy-end")) == 1  # never run twice
    said = replies(slack, root)
    assert not any(INTERRUPTED_RUN in t or "may or may not" in t for t in said), said
    assert not has_buttons(card)


async def test_a_kill_in_the_model_turn_after_a_deploy_answers_without_deploying_again(
    bot: BotProcess, slack: FakeSlack
) -> None:
    await killed_in_a_turn_after_a_deploy(bot, slack, "hold-api", "hold-after-tool")


@pytest.mark.parametrize("kind", DURABLE_KINDS)
async def test_a_kill_in_the_supervisors_turn_after_its_sub_agent_deployed_answers_once(
    slack: FakeSlack, tmp_path: Path, kind: str
) -> None:
    # The sub-agent's end is written with the supervisor's step (one write): the
    # restart finds the deploy's result there and asks the supervisor's turn again.
    agent = "tests.slack.crash_agent:build_supervised"
    async with store_url(kind, tmp_path) as url, running(slack, url, tmp_path, agent=agent) as bot:
        await killed_in_a_turn_after_a_deploy(bot, slack, "lead-api", "hold-supervisor")


async def test_a_card_shown_before_a_kill_is_decided_after_the_restart(
    bot: BotProcess, slack: FakeSlack
) -> None:
    card = await card_for(bot, slack, "api")
    await bot.kill()
    await bot.start()
    # Killed perhaps between posting the card and recording where it is: once the
    # dead process's lease lapsed, the card is found again (never posted twice).
    await asyncio.sleep(2.5)
    assert newest_card(slack, card.thread_ts or "") is card
    assert await bot.press(card, APPROVE_ACTION) == 200
    await slack.wait_for(
        lambda: any("Done." in text for text in replies(slack, card.thread_ts or "")),
        within=RECOVERY_WITHIN,
        what="the answer",
    )
    assert len(bot.recorded("deploy-end")) == 1
    assert "Approved by" in card_text(card)


async def test_a_click_acked_before_a_kill_is_decided_once(
    bot: BotProcess, slack: FakeSlack
) -> None:
    card = await settled_card_for(bot, slack, "api")
    assert await bot.press(card, APPROVE_ACTION) == 200
    await bot.kill()
    await bot.start()
    root = card.thread_ts or ""

    def settled() -> bool:
        return not has_buttons(card) and len(replies(slack, root)) >= 2

    await slack.wait_for(settled, within=RECOVERY_WITHIN, what="the click carried out")
    await bot.stop()
    # Killed before the tool: it ran once, after the restart. Killed in it: the
    # thread was told it may or may not have run, and it was not run again.
    assert len(bot.recorded("deploy-start")) <= 1
    outcome = replies(slack, root)[-1]
    if bot.recorded("deploy-end"):
        assert "Done." in outcome
    else:
        assert "The bot stopped while deploy was running" in outcome


async def test_a_kill_while_the_tool_runs_is_reported_once_the_lease_lapses(
    bot: BotProcess, slack: FakeSlack
) -> None:
    card = await settled_card_for(bot, slack, "slow-api")
    assert await bot.press(card, APPROVE_ACTION) == 200
    await slack.wait_for(lambda: bool(bot.recorded("deploy-start")), what="the deploy running")
    await bot.kill()
    await bot.start()
    root = card.thread_ts or ""
    await slack.wait_for(
        lambda: any("The bot stopped while deploy was running" in t for t in replies(slack, root)),
        within=RECOVERY_WITHIN,
        what="the interruption reported",
    )
    await bot.stop()
    assert len(bot.recorded("deploy-start")) == 1  # never run twice
    assert bot.recorded("deploy-end") == []
    assert not has_buttons(card)


def is_card(call: ApiCall) -> bool:
    """Whether a Web API call posts an approval card."""
    return call.method == "chat.postMessage" and any(
        element.get("action_id") == APPROVE_ACTION
        for block in call.args.get("blocks") or []
        for element in block.get("elements", [])
    )


def kill_at(slack: FakeSlack, bot: BotProcess, picked: Callable[[ApiCall], bool]) -> asyncio.Event:
    """Kill the bot once Slack carried out the call ``picked`` chooses, before the bot hears
    back: what it posted is in Slack, and nowhere in its own records. Set when done."""
    killed = asyncio.Event()

    async def after(call: ApiCall) -> None:
        if not killed.is_set() and picked(call):
            slack.after_call = None
            await bot.kill()
            killed.set()

    slack.after_call = after
    return killed


def looked_back_or_posted_again(slack: FakeSlack, posts: Callable[[], int]) -> bool:
    """Whether the bot restarted on the killed message's work: it looked for what it had
    posted (``conversations.replies``), or it posted it again."""
    return bool(slack.of("conversations.replies")) or posts() > 1


async def test_a_kill_between_posting_a_card_and_recording_it_leaves_one_card_that_works(
    bot: BotProcess, slack: FakeSlack
) -> None:
    killed = kill_at(slack, bot, is_card)
    root = mention_event("deploy api")
    assert await bot.send_event(root) == 200
    await slack.wait_for(killed.is_set, what="the card posted and the bot killed")
    await bot.start()

    def cards() -> int:
        return len([c for c in slack.of("chat.postMessage") if is_card(c)])

    await slack.wait_for(
        lambda: looked_back_or_posted_again(slack, cards),
        within=RECOVERY_WITHIN,
        what="the message taken over",
    )
    card = newest_card(slack, root["ts"])
    assert await bot.press(card, APPROVE_ACTION) == 200
    await slack.wait_for(
        lambda: any("Done." in text for text in replies(slack, root["ts"])),
        within=RECOVERY_WITHIN,
        what="the answer",
    )
    await bot.stop()  # anything still to come has come
    assert cards() == 1, replies(slack, root["ts"])
    assert "Approved by" in card_text(card)
    assert len(bot.recorded("deploy-end")) == 1


def is_answer_call(slack: FakeSlack, method: str, root: str) -> Callable[[ApiCall], bool]:
    """Picks the call ``method`` of the streamed answer in the thread ``root``."""

    def picked(call: ApiCall) -> bool:
        if call.method != method:
            return False
        if method == "chat.startStream":
            return call.args.get("thread_ts") == root
        message = slack.messages.get((call.args.get("channel", ""), call.args.get("ts", "")))
        return message is not None and message.thread_ts == root

    return picked


@pytest.mark.parametrize(
    "cut_at",
    [
        pytest.param("chat.startStream", id="while-it-streams"),
        pytest.param("chat.stopStream", id="before-its-end-is-recorded"),
    ],
)
async def test_a_kill_while_an_answer_streams_or_once_it_ended_answers_once(
    bot: BotProcess, slack: FakeSlack, cut_at: str
) -> None:
    root = mention_event("hello there")
    killed = kill_at(slack, bot, is_answer_call(slack, cut_at, root["ts"]))
    assert await bot.send_event(root) == 200
    await slack.wait_for(killed.is_set, what="the answer started and the bot killed")
    await bot.start()
    await slack.wait_for(
        lambda: looked_back_or_posted_again(slack, lambda: len(replies(slack, root["ts"]))),
        within=RECOVERY_WITHIN,
        what="the message taken over",
    )
    await bot.stop()  # anything still to come has come
    # A cut answer is completed in place: one message, the whole answer, marked as the
    # run's answer (a later retake finds it).
    assert replies(slack, root["ts"]) == ["You said: hello there"], bot.log_text()
    (answer,) = slack.in_thread(CHANNEL, root["ts"])
    assert answer.metadata is not None
    assert answer.metadata["event_payload"]["post"] == "answer"


def is_post_saying(words: str) -> Callable[[ApiCall], bool]:
    """Picks the ``chat.postMessage`` whose text holds ``words``."""
    return lambda call: call.method == "chat.postMessage" and words in call.args.get("text", "")


def said(slack: FakeSlack, root: str, words: str) -> int:
    """How many of the bot's messages in a thread hold ``words``."""
    return len([text for text in replies(slack, root) if words in text])


async def test_a_kill_between_saying_a_run_failed_and_recording_it_says_it_once(
    bot: BotProcess, slack: FakeSlack
) -> None:
    killed = kill_at(slack, bot, is_post_saying(FAILED))
    root = mention_event(FAIL)
    assert await bot.send_event(root) == 200
    await slack.wait_for(killed.is_set, what="the error said and the bot killed")
    await bot.start()
    await slack.wait_for(
        lambda: looked_back_or_posted_again(slack, lambda: said(slack, root["ts"], FAILED)),
        within=RECOVERY_WITHIN,
        what="the message taken over",
    )
    await bot.stop()  # anything still to come has come
    assert replies(slack, root["ts"]) == [RUN_FAILED.format(error=FAILED)], bot.log_text()


async def test_a_kill_between_saying_an_approval_waits_and_recording_it_says_it_once(
    bot: BotProcess, slack: FakeSlack
) -> None:
    card = await settled_card_for(bot, slack, "api")
    root = card.thread_ts or ""
    waits = APPROVAL_PENDING.format(tool="deploy")
    killed = kill_at(slack, bot, is_post_saying(waits))
    assert await bot.send_event(mention_event("approve", thread_ts=root)) == 200
    await slack.wait_for(killed.is_set, what="the notice said and the bot killed")
    await bot.start()
    await slack.wait_for(
        lambda: looked_back_or_posted_again(slack, lambda: said(slack, root, waits)),
        within=RECOVERY_WITHIN,
        what="the message taken over",
    )
    await bot.stop()  # anything still to come has come
    assert said(slack, root, waits) == 1, bot.log_text()
    assert newest_card(slack, root) is card
