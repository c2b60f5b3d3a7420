"""Bounded records: the chat state forgets pruned runs and threads, the housekeeping
pass prunes finished conversations (``Agent.prunable``, then ``ChatState.forget``, then
``Agent.prune``) and, with ``AUDIT_RETENTION``, the start of the audit log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from agents import Agent, FunctionModel, ModelResponse, open_store
from agents.snapshot import AuditEntry, utcnow
from bot import (
    ApprovalCard,
    CardPlace,
    ChatBot,
    ChatState,
    Person,
    ThreadKey,
    ask_of,
)
from bot.housekeeping import DEFAULT_RUN_RETENTION
from bot.settings import SettingsError, load_settings
from tests.agents.helpers import Counter
from tests.stores.conftest import STORE_KINDS, store_url

from .helpers import OTHER_THREAD, THREAD, RecordingMessenger, click, message, restart_agent
from .test_chat_state import chat

__all__ = ["chat"]  # the chat state beside each store, for every test here

PLACE = CardPlace(thread=THREAD, ref={"channel": "C1", "ts": "m1"})
ASK = "call-1@2024-01-01T00:00:00+00:00"


async def remember_run(chat: ChatState, run_id: str, thread: ThreadKey) -> None:
    """A card, a vote and waiting-index entries of ``run_id``, and its thread's marks."""
    await chat.set_card(run_id, ASK, PLACE)
    await chat.add_vote(run_id, ASK, Person(id="U2"))
    await chat.index_waiting("test:W1", ["U2", "*"], run_id)
    await chat.follow(thread.id)
    await chat.set_conversation_ref(thread.id, {"id": thread.id})
    await chat.set_grant(thread.id, "U1|restart_service", 9e12, "U2")


async def test_forget_removes_a_runs_cards_votes_and_waiting_entries(chat: ChatState) -> None:
    await remember_run(chat, "run-old", THREAD)
    await remember_run(chat, "run-new", OTHER_THREAD)

    await chat.forget(["run-old"], [THREAD.id])

    assert await chat.card_of("run-old", ASK) is None
    assert await chat.votes("run-old", ASK) == []
    assert await chat.waiting_for("test:W1", ["U2", "*"]) == {"run-new"}
    assert await chat.card_of("run-new", ASK) == PLACE
    assert await chat.votes("run-new", ASK) == [Person(id="U2")]


async def test_forget_removes_a_threads_follow_reference_and_grants(chat: ChatState) -> None:
    await remember_run(chat, "run-old", THREAD)
    await remember_run(chat, "run-new", OTHER_THREAD)

    await chat.forget(["run-old"], [THREAD.id])

    assert not await chat.follows(THREAD.id)
    assert await chat.conversation_ref(THREAD.id) is None
    assert await chat.grant(THREAD.id, "U1|restart_service", 0) is None
    assert await chat.follows(OTHER_THREAD.id)
    assert await chat.conversation_ref(OTHER_THREAD.id) == {"id": OTHER_THREAD.id}


async def test_forgetting_twice_or_nothing_is_harmless(chat: ChatState) -> None:
    await remember_run(chat, "run-old", THREAD)
    await chat.forget(["run-old"], [THREAD.id])
    await chat.forget(["run-old"], [THREAD.id])
    await chat.forget([], [])
    assert await chat.card_of("run-old", ASK) is None


@pytest.fixture(params=STORE_KINDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """An empty store of each kind."""
    async with store_url(request.param, tmp_path) as opened:
        yield opened


async def test_the_housekeeping_pass_prunes_finished_conversations_past_retention(
    url: str,
) -> None:
    store = open_store(url)
    bot = ChatBot(restart_agent(Counter(), store), run_retention=timedelta(days=1))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    try:
        await bot.on_message(message("restart the api"))
        await bot.drain()
        (card,) = messenger.views(ApprovalCard)
        (pending,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
        assert await bot.chat.card_of(card.run_id, ask_of(pending)) is not None
        assert (await bot.on_click(click(card))).accepted
        await bot.drain()
        await bot.on_message(message("restart the api", thread=OTHER_THREAD))
        await bot.drain()
        (waiting,) = await bot.agent.list_suspended_runs(thread_id=OTHER_THREAD.id)
        audit = await bot.agent.audit(run_id=card.run_id)

        assert await bot.housekeeping.prune_finished() == 0  # within retention
        later = utcnow() + timedelta(days=1, seconds=1)
        assert await bot.housekeeping.prune_finished(now=later) == 1

        assert await bot.agent.thread_runs(THREAD.id) == []
        assert await store.load_run(card.run_id) is None
        assert await store.load_history(THREAD.id) == []
        assert await bot.chat.card_of(card.run_id, ask_of(pending)) is None
        assert not await bot.chat.follows(THREAD.id)
        assert await bot.agent.audit(run_id=card.run_id) == audit  # evidence is kept
        assert await store.load_run(waiting.run_id) is not None  # waits, however old
        assert await bot.chat.follows(OTHER_THREAD.id)
        assert await bot.housekeeping.prune_finished(now=later) == 0
    finally:
        await bot.aclose()
        await store.close()


def test_run_retention_reads_a_duration_and_defaults_to_30_days(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RUN_RETENTION", raising=False)
    assert load_settings().run_retention == DEFAULT_RUN_RETENTION == timedelta(days=30)
    monkeypatch.setenv("RUN_RETENTION", "7d")
    assert load_settings().run_retention == timedelta(days=7)


async def test_a_crash_between_forgetting_and_removing_leaves_nothing_the_next_pass_misses(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(url)
    bot = ChatBot(restart_agent(Counter(), store), run_retention=timedelta(days=1))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    try:
        await bot.on_message(message("restart the api"))
        await bot.drain()
        (card,) = messenger.views(ApprovalCard)
        (pending,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
        assert (await bot.on_click(click(card))).accepted
        await bot.drain()
        later = utcnow() + timedelta(days=1, seconds=1)

        async def the_process_dies(*_: object) -> None:
            raise ConnectionError("the process died")

        with monkeypatch.context() as crashing:
            crashing.setattr(bot.agent.engine.store, "prune", the_process_dies)
            with pytest.raises(ConnectionError):
                await bot.housekeeping.prune_finished(now=later)
        assert await store.load_run(card.run_id) is not None
        assert not await bot.chat.follows(THREAD.id)  # forgotten before the crash

        assert await bot.housekeeping.prune_finished(now=later) == 1

        assert await store.load_run(card.run_id) is None
        assert await store.load_history(THREAD.id) == []
        assert await bot.chat.card_of(card.run_id, ask_of(pending)) is None
        assert await bot.chat.conversation_ref(THREAD.id) is None
        assert await bot.housekeeping.prune_finished(now=later) == 0
    finally:
        await bot.aclose()
        await store.close()


async def test_the_housekeeping_pass_prunes_the_audit_log_past_audit_retention(
    url: str,
) -> None:
    store = open_store(url)
    bot = ChatBot(restart_agent(Counter(), store))
    bot.housekeeping.audit_retention = timedelta(days=365)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    try:
        old = AuditEntry(
            at=utcnow() - timedelta(days=366),
            event="voted",
            run_id="run-old",
            thread_id=THREAD.id,
            tool_call_id="c",
            tool_name="restart_service",
        )
        await bot.agent.record(old)
        await bot.on_message(message("restart the api"))
        await bot.drain()
        (card,) = messenger.views(ApprovalCard)
        kept = await bot.agent.audit(run_id=card.run_id)
        assert kept

        await bot.housekeeping.run_once()  # the first pass prunes, then hourly

        assert await bot.agent.audit(run_id="run-old") == []
        assert await bot.agent.audit(thread_id=THREAD.id) == kept
        later = utcnow() + timedelta(days=366)
        assert await bot.housekeeping.prune_audit(now=later) == len(kept)
        assert await bot.agent.audit() == []
    finally:
        await bot.aclose()
        await store.close()


async def test_without_audit_retention_the_audit_log_is_kept_for_ever() -> None:
    bot = ChatBot(restart_agent(Counter()))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    try:
        await bot.on_message(message("restart the api"))
        await bot.drain()
        audit = await bot.agent.audit()
        assert audit

        assert bot.housekeeping.audit_retention is None
        assert await bot.housekeeping.prune_audit(now=utcnow() + timedelta(days=36500)) == 0
        assert await bot.agent.audit() == audit
    finally:
        await bot.aclose()


def test_audit_retention_reads_a_duration_and_is_unset_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AUDIT_RETENTION", raising=False)
    assert load_settings().audit_retention is None
    monkeypatch.setenv("AUDIT_RETENTION", "400d")
    assert load_settings().audit_retention == timedelta(days=400)
    monkeypatch.setenv("AUDIT_RETENTION", "a year")
    with pytest.raises(SettingsError, match="AUDIT_RETENTION"):
        load_settings()


def test_the_chat_bot_hands_its_audit_retention_to_the_housekeeping() -> None:
    agent = Agent(id="a", model=FunctionModel(lambda m, r: ModelResponse(text="hi")))
    bot = ChatBot(agent, audit_retention=timedelta(days=400))
    assert bot.housekeeping.audit_retention == timedelta(days=400)
    assert ChatBot(agent).housekeeping.audit_retention is None
