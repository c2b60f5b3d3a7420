"""The chat state contract, run unchanged on memory, SQLite (the store's file) and Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from agents import LockTimeout, open_store
from bot import CardPlace, ChatState, Destination, Person, ThreadKey, ThreadNote, open_chat_state
from bot.chat_state import CardCopy
from bot.chat_state.redis import RedisChatState
from bot.chat_state.sqlite import SQLiteChatState
from tests.stores.conftest import STORE_KINDS, store_url
from tests.stores.test_conformance import eventually

THREAD = "slack:T1:C1:1700000000.000100"
OTHER_THREAD = "teams:tenant-1:19:abc@thread.tacv2;messageid=1700000000001"


@asynccontextmanager
async def chat_state_of(kind: str, tmp_path: Path) -> AsyncIterator[ChatState]:
    """The chat state beside an empty store of ``kind``, closed with it on exit."""
    async with store_url(kind, tmp_path) as url:
        store = open_store(url)
        state = open_chat_state(store)
        try:
            yield state
        finally:
            await state.close()
            await store.close()


@pytest.fixture(params=STORE_KINDS)
async def chat(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ChatState]:
    """The chat state beside each store: memory, SQLite (a temporary file), Redis."""
    async with chat_state_of(request.param, tmp_path) as state:
        yield state


# Dedupe


async def is_new(chat: ChatState, keys: list[str], *, ttl: float) -> bool:
    """Whether a delivery with these dedupe keys is written to the inbox (not a copy)."""
    return await chat.enqueue("a delivery", keys=keys, ttl=ttl) is not None


async def test_a_first_delivery_is_new_and_every_copy_after_it_is_not(chat: ChatState) -> None:
    assert await is_new(chat, ["slack:event:Ev1"], ttl=60) is True
    assert await is_new(chat, ["slack:event:Ev1"], ttl=60) is False
    assert await is_new(chat, ["slack:event:Ev2"], ttl=60) is True


async def test_a_delivery_without_keys_is_always_new(chat: ChatState) -> None:
    assert await is_new(chat, [], ttl=60) is True
    assert await is_new(chat, [], ttl=60) is True


async def test_a_copy_sharing_any_key_is_not_new(chat: ChatState) -> None:
    assert await is_new(chat, ["event:E1", "message:M"], ttl=60) is True
    assert await is_new(chat, ["event:E2", "message:M"], ttl=60) is False  # other copy
    assert await is_new(chat, ["event:E1", "message:M"], ttl=60) is False  # a retry


async def test_a_copy_that_is_not_new_claims_none_of_its_keys(chat: ChatState) -> None:
    """A redelivery must not take a key from the delivery that will be handled."""
    assert await is_new(chat, ["event:E1"], ttl=60) is True
    assert await is_new(chat, ["event:E1", "message:M"], ttl=60) is False
    assert await is_new(chat, ["event:E9", "message:M"], ttl=60) is True


async def test_a_delivery_is_forgotten_after_its_ttl(chat: ChatState) -> None:
    assert await is_new(chat, ["slack:event:short"], ttl=0.05) is True

    async def forgotten() -> bool:
        return await is_new(chat, ["slack:event:short"], ttl=60)

    await eventually(forgotten)
    assert await is_new(chat, ["slack:event:short"], ttl=60) is False


async def test_concurrent_copies_are_new_exactly_once(chat: ChatState) -> None:
    answers = await asyncio.gather(
        *(is_new(chat, [f"teams:activity:{i % 3}", "message:42"], ttl=60) for i in range(20))
    )

    assert sorted(answers) == [False] * 19 + [True]


# The inbox


async def test_an_enqueued_delivery_is_taken_once_in_order_and_gone_when_done(
    chat: ChatState,
) -> None:
    first = await chat.enqueue('{"n": 1}', keys=["a"], ttl=60)
    second = await chat.enqueue('{"n": 2}', keys=["b"], ttl=60)
    assert first is not None
    assert second is not None
    taken = await chat.take("w1", count=10, lease=30)
    assert [(e.id, e.body, e.attempts) for e in taken] == [
        (first, '{"n": 1}', 1),
        (second, '{"n": 2}', 1),
    ]
    assert await chat.take("w2", count=10, lease=30) == []  # leased to w1
    await chat.done(first)
    await chat.done(second)
    assert await chat.take("w2", count=10, lease=0.001) == []


async def test_a_copy_is_not_enqueued_and_claims_no_key(chat: ChatState) -> None:
    assert await chat.enqueue("one", keys=["event:1", "message:1"], ttl=60) is not None
    assert await chat.enqueue("copy", keys=["event:2", "message:1"], ttl=60) is None
    assert [e.body for e in await chat.take("w", count=10, lease=30)] == ["one"]
    assert await is_new(chat, ["event:2"], ttl=60) is True  # the copy claimed nothing


async def test_a_message_for_a_followed_thread_only_is_recorded_only_there(
    chat: ChatState,
) -> None:
    reply = ThreadNote(thread_id=THREAD, only_if_followed=True)
    assert await chat.enqueue("overheard", keys=["m1"], ttl=60, note=reply) is None
    mention = ThreadNote(thread_id=THREAD, follow=True, reference={"channel": "C1"})
    assert await chat.enqueue("mention", keys=["m2"], ttl=60, note=mention) is not None
    assert await chat.follows(THREAD) is True
    assert await chat.conversation_ref(THREAD) == {"channel": "C1"}
    assert await chat.enqueue("reply", keys=["m3"], ttl=60, note=reply) is not None
    assert [e.body for e in await chat.take("w", count=5, lease=30)] == ["mention", "reply"]
    assert await is_new(chat, ["m1"], ttl=60) is True  # the overheard one claimed nothing


async def test_a_copy_changes_nothing_of_its_thread(chat: ChatState) -> None:
    overheard = ThreadNote(thread_id=OTHER_THREAD)
    assert await chat.enqueue("one", keys=["k"], ttl=60, note=overheard) is not None
    note = ThreadNote(thread_id=OTHER_THREAD, follow=True, reference={"x": 1})
    assert await chat.enqueue("copy", keys=["k"], ttl=60, note=note) is None
    assert await chat.follows(OTHER_THREAD) is False
    assert await chat.conversation_ref(OTHER_THREAD) is None


async def test_copies_enqueued_at_once_are_written_once(chat: ChatState) -> None:
    ids = await asyncio.gather(
        *(chat.enqueue(f"copy {n}", keys=["event:1", f"message:{n}"], ttl=60) for n in range(10)),
        *(chat.enqueue(f"other {n}", keys=[f"event:other-{n}"], ttl=60) for n in range(10)),
    )
    assert len([i for i in ids[:10] if i is not None]) == 1
    assert all(i is not None for i in ids[10:])
    assert len(await chat.take("w", count=50, lease=30)) == 11


async def test_take_leases_at_most_count_entries(chat: ChatState) -> None:
    for n in range(5):
        await chat.enqueue(str(n), keys=[], ttl=60)
    assert [e.body for e in await chat.take("w1", count=2, lease=30)] == ["0", "1"]
    assert [e.body for e in await chat.take("w2", count=10, lease=30)] == ["2", "3", "4"]


async def test_a_dead_workers_entry_is_taken_over_once_its_lease_lapses(chat: ChatState) -> None:
    await chat.enqueue("work", keys=[], ttl=60)
    # Every worker of a deployment uses the same lease (Redis applies it on taking).
    (held,) = await chat.take("dead", count=1, lease=0.2)
    assert await chat.take("alive", count=1, lease=0.2) == []
    await asyncio.sleep(0.3)
    (taken,) = await chat.take("alive", count=1, lease=0.2)
    assert (taken.id, taken.body, taken.attempts) == (held.id, "work", 2)
    await chat.renew("dead", [held.id], lease=0.2)  # too late: it is not theirs any more
    assert await chat.take("third", count=1, lease=0.2) == []


async def test_a_lapsed_entry_behind_many_live_ones_is_still_taken_over(
    chat: ChatState,
) -> None:
    for n in range(40):
        await chat.enqueue(f"live {n}", keys=[], ttl=60)
    live = await chat.take("live", count=40, lease=0.3)
    for n in range(5):
        await chat.enqueue(f"dead {n}", keys=[], ttl=60)
    await chat.take("dead", count=5, lease=0.3)
    await asyncio.sleep(0.35)
    await chat.renew("live", [e.id for e in live], lease=0.3)
    (taken,) = await chat.take("heir", count=1, lease=0.3)
    assert taken.body.startswith("dead")


async def test_without_take_over_only_new_entries_are_taken(chat: ChatState) -> None:
    await chat.enqueue("left by the dead", keys=[], ttl=60)
    await chat.take("dead", count=1, lease=0.1)
    await asyncio.sleep(0.15)
    await chat.enqueue("new", keys=[], ttl=60)
    taken = await chat.take("w", count=5, lease=0.1, take_over=False)
    assert [e.body for e in taken] == ["new"]
    assert [e.body for e in await chat.take("w", count=5, lease=0.1)] == ["left by the dead"]


async def test_renewing_a_lease_keeps_the_entry_from_being_taken_over(chat: ChatState) -> None:
    await chat.enqueue("slow work", keys=[], ttl=60)
    (held,) = await chat.take("w1", count=1, lease=0.3)
    for _ in range(3):
        await asyncio.sleep(0.15)
        await chat.renew("w1", [held.id], lease=0.3)
        assert await chat.take("w2", count=1, lease=0.3) == []


async def test_an_entry_handed_back_is_taken_at_once_not_a_lease_later(chat: ChatState) -> None:
    for body in ("unfinished", "held elsewhere"):
        await chat.enqueue(body, keys=[], ttl=60)
    first, second = await chat.take("leaving", count=2, lease=60)
    await chat.release("someone else", [second.id])  # not theirs to hand back
    await chat.release("leaving", [first.id])
    (taken,) = await chat.take("staying", count=5, lease=60)
    assert (taken.id, taken.body) == (first.id, "unfinished")
    assert taken.attempts == 2  # its work may have been started: the taker catches up
    assert await chat.take("third", count=5, lease=60) == []


async def test_concurrent_workers_never_take_the_same_entry(chat: ChatState) -> None:
    for n in range(20):
        await chat.enqueue(str(n), keys=[], ttl=60)
    batches = await asyncio.gather(*(chat.take(f"w{i}", count=3, lease=30) for i in range(10)))
    bodies = [e.body for batch in batches for e in batch]
    assert sorted(bodies, key=int) == [str(n) for n in range(20)]


@pytest.mark.redis
async def test_redis_forgets_the_workers_of_processes_long_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with store_url("redis", tmp_path) as url:
        store = open_store(url)
        chat = open_chat_state(store)
        assert isinstance(chat, RedisChatState)
        try:
            await forgets_gone_workers(chat, monkeypatch)
        finally:
            await chat.close()
            await store.close()


async def forgets_gone_workers(chat: RedisChatState, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bot.chat_state.redis_keys.GONE_AFTER_MS", -1)
    await chat.enqueue("done by the old process", keys=[], ttl=60)
    await chat.enqueue("still held by the dead one", keys=[], ttl=60)
    (finished,) = await chat.take("old", count=1, lease=30)
    await chat.done(finished.id)
    await chat.take("dead", count=1, lease=30)
    chat._next_prune = 0.0
    await chat.take("new", count=1, lease=30)
    consumers = await chat._redis.xinfo_consumers(chat.keys.inbox(), "workers")
    names = {c["name"] for c in consumers}
    assert "old" not in names
    assert "dead" in names  # it holds an entry: forgetting it would lose the entry


# Conversation references and followed threads


async def test_conversation_references_round_trip_per_thread(chat: ChatState) -> None:
    reference = {
        "conversation": {"id": "19:abc@thread.tacv2;messageid=1", "name": "Équipe ✅"},
        "serviceUrl": "https://smba.trafficmanager.net/emea/",
        "ids": [1, 2, 3],
    }

    await chat.set_conversation_ref(OTHER_THREAD, reference)
    await chat.set_conversation_ref(THREAD, {"channel": "C1"})
    await chat.set_conversation_ref(THREAD, {"channel": "C1", "ts": "1700000000.000100"})

    assert await chat.conversation_ref(OTHER_THREAD) == reference
    assert await chat.conversation_ref(THREAD) == {"channel": "C1", "ts": "1700000000.000100"}
    assert await chat.conversation_ref("slack:T1:C9:none") is None


async def test_a_followed_thread_stays_followed_and_others_are_not(chat: ChatState) -> None:
    assert await chat.follows(THREAD) is False
    await chat.follow(THREAD)
    await chat.follow(THREAD)
    assert await chat.follows(THREAD) is True
    assert await chat.follows(OTHER_THREAD) is False
    # Following is not a conversation reference, and the reverse.
    assert await chat.conversation_ref(THREAD) is None
    await chat.set_conversation_ref(OTHER_THREAD, {"id": 1})
    assert await chat.follows(OTHER_THREAD) is False


# Cards


def place(ts: str) -> CardPlace:
    return CardPlace(
        thread=ThreadKey(platform="slack", workspace="T1", channel="C1", root="1700000000.000100"),
        ref={"channel": "C1", "ts": ts},
    )


async def test_a_card_place_is_kept_per_call(chat: ChatState) -> None:
    await chat.set_card("run-1", "call-1", place("1.1"))
    await chat.set_card("run-1", "call-2", place("1.2"))
    await chat.set_card("run-1", "call-1", place("1.3"))  # posted again (a re-ask)

    assert await chat.card_of("run-1", "call-1") == place("1.3")
    assert await chat.card_of("run-1", "call-2") == place("1.2")
    assert await chat.card_of("run-1", "call-9") is None
    assert await chat.card_of("run-2", "call-1") is None


# Votes


async def test_votes_keep_their_order_their_names_and_each_person_once(chat: ChatState) -> None:
    assert await chat.votes("run-1", "call-1") == []
    grace = Person(id="U2", name="Grace")
    assert await chat.add_vote("run-1", "call-1", grace) == [grace]
    assert await chat.add_vote("run-1", "call-1", Person(id="U3")) == [grace, Person(id="U3")]
    again = await chat.add_vote("run-1", "call-1", Person(id="U2", name="G."))
    assert again == [grace, Person(id="U3")]
    assert await chat.votes("run-1", "call-1") == again
    assert await chat.votes("run-1", "call-2") == []


async def test_simultaneous_votes_all_count_once(chat: ChatState) -> None:
    voters = [Person(id=f"U{i}") for i in range(10)]
    await asyncio.gather(*(chat.add_vote("run-1", "call-1", person) for person in voters * 2))
    stored = await chat.votes("run-1", "call-1")
    assert sorted(p.id for p in stored) == sorted(p.id for p in voters)


# Card locks


async def test_a_card_lock_excludes_a_second_holder_of_the_same_card(chat: ChatState) -> None:
    async with chat.card_lock("run-1", "call-1"):
        async with chat.card_lock("run-1", "call-2"):  # another card: not blocked
            pass
        with pytest.raises(LockTimeout):
            async with chat.card_lock("run-1", "call-1", wait=0.1):
                pass
    async with chat.card_lock("run-1", "call-1", wait=0.1):  # free again
        pass


# Durability


async def test_a_card_lock_holds_across_replicas_and_apart_from_the_runtimes_locks(
    durable_url: str,
) -> None:
    store, other_store = open_store(durable_url), open_store(durable_url)
    one, other = open_chat_state(store), open_chat_state(other_store)
    try:
        async with one.card_lock("run-1", "ask-1"):
            with pytest.raises(LockTimeout):
                async with other.card_lock("run-1", "ask-1", wait=0.1):
                    pass
            # The chat state's locks are its own: the runtime's names stay free.
            async with store.lock("card:run-1:ask-1", wait=0.1), store.lock("run:run-1", wait=0.1):
                pass
        async with other.card_lock("run-1", "ask-1", wait=0.1):
            pass
    finally:
        for chat in (one, other):
            await chat.close()
        for each in (store, other_store):
            await each.close()


async def test_chat_state_survives_reopening(durable_url: str) -> None:
    store = open_store(durable_url)
    chat = open_chat_state(store)
    await chat.follow(THREAD)
    await chat.set_conversation_ref(THREAD, {"channel": "C1"})
    await chat.set_card("run-1", "call-1", place("1.1"))
    await chat.add_vote("run-1", "call-1", Person(id="U2", name="Grace"))
    assert await chat.enqueue("unfinished", keys=["k"], ttl=60) is not None
    await chat.close()
    await store.close()

    store = open_store(durable_url)
    reopened = open_chat_state(store)
    try:
        assert await reopened.follows(THREAD) is True
        assert await reopened.conversation_ref(THREAD) == {"channel": "C1"}
        assert await reopened.card_of("run-1", "call-1") == place("1.1")
        assert await reopened.votes("run-1", "call-1") == [Person(id="U2", name="Grace")]
        assert [e.body for e in await reopened.take("w", count=5, lease=30)] == ["unfinished"]
        assert await is_new(reopened, ["k"], ttl=60) is False
    finally:
        await reopened.close()
        await store.close()


# SQLite specifics


async def test_the_shared_sqlite_connection_keeps_the_chat_tables_across_a_reopen() -> None:
    store = open_store("sqlite:///:memory:")  # every reopen is an empty database
    chat = open_chat_state(store)
    try:
        await chat.follow(THREAD)
        await store.close()
        await chat.follow(OTHER_THREAD)  # reopened, and the chat's tables made again
        assert await chat.follows(OTHER_THREAD) is True
    finally:
        await chat.close()
        await store.close()


async def test_a_stopped_inbox_writer_fails_its_callers_instead_of_leaving_them_waiting(
    tmp_path: Path,
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'bot.db'}")
    chat = open_chat_state(store)
    assert isinstance(chat, SQLiteChatState)
    try:
        writes = [asyncio.ensure_future(chat.enqueue(str(n), keys=(), ttl=60)) for n in range(5)]
        await asyncio.sleep(0)  # the writer has started
        writer = chat._file._commits._writer
        assert writer is not None
        writer.cancel()
        outcomes = await asyncio.wait_for(asyncio.gather(*writes, return_exceptions=True), 5)
        assert all(isinstance(o, str | RuntimeError) for o in outcomes), outcomes
        assert await chat.enqueue("after", keys=(), ttl=60) is not None  # a new writer
    finally:
        await chat.close()
        await store.close()


async def test_a_timer_is_handed_out_once_when_due_and_replaced_by_its_key(
    chat: ChatState,
) -> None:
    await chat.set_timer("remind:a", 100.0, "first")
    await chat.set_timer("remind:b", 50.0, "b")
    await chat.set_timer("remind:a", 80.0, "again")  # the same key: replaced
    assert await chat.take_due(10.0) == []
    assert await chat.take_due(90.0) == [("remind:b", "b"), ("remind:a", "again")]
    assert await chat.take_due(1000.0) == []


async def test_concurrent_sweeps_take_each_timer_exactly_once(chat: ChatState) -> None:
    for i in range(30):
        await chat.set_timer(f"t{i}", float(i), str(i))
    taken = await asyncio.gather(*(chat.take_due(100.0, limit=7) for _ in range(8)))
    keys = [key for batch in taken for key, _ in batch]
    assert sorted(keys) == sorted(f"t{i}" for i in range(30))


async def test_a_grant_holds_until_its_time_in_its_thread_and_revoking_ends_it(
    chat: ChatState,
) -> None:
    await chat.set_grant(THREAD, "U1|refund", 100.0, "U2")
    assert await chat.grant(THREAD, "U1|refund", 50.0) == "U2"
    assert await chat.grant(THREAD, "U1|refund", 100.0) is None  # lapsed
    assert await chat.grant(OTHER_THREAD, "U1|refund", 50.0) is None
    assert await chat.grant(THREAD, "U3|refund", 50.0) is None
    await chat.set_grant(THREAD, "U1|refund", 200.0, "U4")  # granted again: replaced
    assert await chat.grant(THREAD, "U1|refund", 150.0) == "U4"
    await chat.set_grant(THREAD, "U1|deploy", 200.0, "U4")
    assert await chat.revoke_grants(THREAD) == 2
    assert await chat.grant(THREAD, "U1|refund", 150.0) is None
    assert await chat.revoke_grants(THREAD) == 0


async def test_grants_given_are_found_by_granter_and_workspace_and_end_one_by_one(
    chat: ChatState,
) -> None:
    third = "slack:T1:C2:1700000000.000300"
    await chat.set_grant(THREAD, "U1|refund", 100.0, "U2")
    await chat.set_grant(THREAD, "U1|deploy", 20.0, "U2")  # lapses first
    await chat.set_grant(third, "U5|refund", 100.0, "U2")
    await chat.set_grant(OTHER_THREAD, "U1|refund", 100.0, "U2")  # another workspace
    await chat.set_grant(third, "U6|refund", 100.0, "U9")  # someone else's
    given = await chat.grants_given("U2", "slack:T1:", 50.0)
    assert sorted(given) == sorted([(THREAD, "U1|refund"), (third, "U5|refund")])
    assert await chat.revoke_grant(THREAD, "U1|refund")
    assert not await chat.revoke_grant(THREAD, "U1|refund")
    assert await chat.grant(THREAD, "U1|refund", 50.0) is None
    assert await chat.grant(third, "U6|refund", 50.0) == "U9"  # untouched
    assert await chat.grants_given("U2", "slack:T1:", 50.0) == [(third, "U5|refund")]
    assert await chat.grants_given("U2", "slack:T1%", 50.0) == []  # a scope is no pattern


async def test_a_card_sent_elsewhere_keeps_its_copies(chat: ChatState) -> None:
    thread = ThreadKey(platform="slack", workspace="T1", channel="C1", root="1.1")
    there = ThreadKey(platform="slack", workspace="T1", channel="C0APPROVERS", root="2.2")
    copy = CardCopy(
        to=Destination(channel="C0APPROVERS"), thread=there, ref={"channel": "C0", "ts": "2.2"}
    )
    place = CardPlace(thread=thread, ref={"channel": "C1", "ts": "3.3"}, copies=(copy,))
    await chat.set_card("run-1", "call@1", place)
    kept = await chat.card_of("run-1", "call@1")
    assert kept == place
    assert kept is not None
    assert kept.holds({"channel": "C0", "ts": "2.2"})
    assert not kept.holds({"channel": "C0", "ts": "9.9"})


async def test_the_waiting_index_finds_runs_by_name_in_one_workspace(chat: ChatState) -> None:
    await chat.index_waiting("slack:T1:", ["U2", "S0LEADS", "asked:U1"], "run-1")
    await chat.index_waiting("slack:T1:", ["*", "asked:U3"], "run-2")
    await chat.index_waiting("slack:T2:", ["U2"], "run-3")  # another workspace
    assert await chat.waiting_for("slack:T1:", ["U2"]) == {"run-1"}
    assert await chat.waiting_for("slack:T1:", ["U9", "*"]) == {"run-2"}
    assert await chat.waiting_for("slack:T1:", ["S0LEADS", "asked:U3"]) == {"run-1", "run-2"}
    assert await chat.waiting_for("slack:T1:", []) == set()
    await chat.unindex_waiting("slack:T1:", ["U2", "S0LEADS"], "run-1")
    assert await chat.waiting_for("slack:T1:", ["U2", "S0LEADS"]) == set()
    assert await chat.waiting_for("slack:T1:", ["asked:U1"]) == {"run-1"}  # not unindexed
    assert await chat.waiting_for("slack:T2:", ["U2"]) == {"run-3"}


# Notes


async def test_a_note_is_found_until_it_lapses_and_a_new_one_replaces_it(
    chat: ChatState,
) -> None:
    assert await chat.note("answer:1") is None
    await chat.set_note("answer:1", "run-1", ttl=60)
    await chat.set_note("answer:2", "run-2", ttl=0.05)
    assert await chat.note("answer:1") == "run-1"
    assert await chat.note("answer:2") == "run-2"
    await chat.set_note("answer:1", "run-3", ttl=60)
    assert await chat.note("answer:1") == "run-3"
    await asyncio.sleep(0.1)
    assert await chat.note("answer:2") is None  # lapsed
    await chat.set_note("answer:2", "run-4", ttl=60)  # a lapsed note is replaced
    assert await chat.note("answer:2") == "run-4"


async def test_a_note_taken_is_gone_and_only_one_taker_gets_it(chat: ChatState) -> None:
    await chat.set_note("oauth-state:s1", "issued", ttl=60)
    takers = await asyncio.gather(*(chat.take_note("oauth-state:s1") for _ in range(5)))
    assert takers.count("issued") == 1
    assert takers.count(None) == 4
    assert await chat.note("oauth-state:s1") is None
    await chat.set_note("oauth-state:s2", "issued", ttl=0.05)
    await asyncio.sleep(0.1)
    assert await chat.take_note("oauth-state:s2") is None  # lapsed before it was taken


# Records


async def test_a_record_is_kept_until_dropped_and_a_new_one_replaces_it(chat: ChatState) -> None:
    assert await chat.record("slack:bot:T1") is None
    await chat.put_record("slack:bot:T1", '{"token": "a"}')
    await chat.put_record("slack:bot:T2", '{"token": "b"}')
    await chat.put_record("slack:bot:T1", '{"token": "c"}')
    assert await chat.record("slack:bot:T1") == '{"token": "c"}'
    assert await chat.drop_records(["slack:bot:T1", "slack:bot:T3"]) == 1
    assert await chat.record("slack:bot:T1") is None
    assert await chat.record("slack:bot:T2") == '{"token": "b"}'
    assert await chat.drop_records([]) == 0


async def test_records_are_listed_by_the_start_of_their_key_in_key_order(
    chat: ChatState,
) -> None:
    for key in ("slack:bot:T2", "slack:bot:enterprise:E1", "slack:bot:T1", "slack:bot;"):
        await chat.put_record(key, f'{{"at": "{key}"}}')
    await chat.put_record("slack:installation:T1", "{}")
    await chat.put_record("slack:bot:T3", "{}")
    await chat.drop_records(["slack:bot:T3"])
    listed = await chat.records("slack:bot:")
    assert listed == [
        ("slack:bot:T1", '{"at": "slack:bot:T1"}'),
        ("slack:bot:T2", '{"at": "slack:bot:T2"}'),
        ("slack:bot:enterprise:E1", '{"at": "slack:bot:enterprise:E1"}'),
    ]
    assert await chat.record(listed[0][0]) == listed[0][1]  # keys are whole
    assert await chat.records("teams:") == []
    assert [key for key, _ in await chat.records("")] == [
        "slack:bot:T1",
        "slack:bot:T2",
        "slack:bot:enterprise:E1",
        "slack:bot;",
        "slack:installation:T1",
    ]


async def test_a_listed_prefix_is_text_not_a_pattern(chat: ChatState) -> None:
    keys = ["a%_*?[x]\\1", "a%_*?[x]\\2", "ab_c", "a*b", "aXb", "ax", "a?b", "a%b", "a\\b"]
    for key in keys:
        await chat.put_record(key, key)
    assert [key for key, _ in await chat.records("a%_*?[x]\\")] == keys[:2]
    assert [key for key, _ in await chat.records("a*")] == ["a*b"]
    assert [key for key, _ in await chat.records("a?")] == ["a?b"]
    assert [key for key, _ in await chat.records("a%")] == ["a%_*?[x]\\1", "a%_*?[x]\\2", "a%b"]
    assert [key for key, _ in await chat.records("a_")] == []
    assert [key for key, _ in await chat.records("a[x]")] == []
    assert [key for key, _ in await chat.records("a\\")] == ["a\\b"]


async def test_records_beyond_ascii_are_listed_by_code_point(chat: ChatState) -> None:
    top = chr(0x10FFFF)
    keys = ["é1", "éz", "ê", f"z{top}a", f"z{top}", "{", "\ud7ffx", "\ue000"]
    for key in keys:
        await chat.put_record(key, "{}")
    assert [key for key, _ in await chat.records("é")] == ["é1", "éz"]
    assert [key for key, _ in await chat.records(f"z{top}")] == [f"z{top}", f"z{top}a"]
    assert [key for key, _ in await chat.records("\ud7ff")] == ["\ud7ffx"]


async def test_a_recent_list_keeps_its_newest_items_newest_first(chat: ChatState) -> None:
    assert await chat.recent("decided:U1") == []
    for i in range(5):
        await chat.push_recent("decided:U1", f"d{i}", keep=3)
    await chat.push_recent("decided:U2", "other", keep=3)
    assert await chat.recent("decided:U1") == ["d4", "d3", "d2"]
    assert await chat.recent("decided:U2") == ["other"]
