"""The store contract, run unchanged against the memory, SQLite and Redis stores."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from agents.messages import Message
from agents.snapshot import AuditEntry, Decision, RunSnapshot, utcnow
from agents.stores import LockTimeout, Store, StoreConflict, open_store
from agents.stores.base import tree_run_id

from ._snapshots import paused_run, unlinked

THREAD = "slack:T1:C1:1700000000.000100"
OTHER_THREAD = "teams:tenant-1:19:abc@thread.tacv2;messageid=1700000000001"


async def eventually(check: Callable[[], Awaitable[bool]], *, deadline: float = 5.0) -> None:
    """Poll an async predicate until it holds, failing after ``deadline`` seconds."""
    give_up = time.monotonic() + deadline
    while not await check():
        assert time.monotonic() < give_up, "condition not reached before the deadline"
        await asyncio.sleep(0.01)


def decided(snapshot: RunSnapshot, who: str) -> RunSnapshot:
    """The snapshot with its first call claimed by ``who`` (approved, executing)."""
    call = snapshot.pending[0].model_copy(
        update={"decision": Decision(action="approve", decided_by=who), "state": "executing"}
    )
    return snapshot.model_copy(update={"pending": [call, *snapshot.pending[1:]]})


def finished(snapshot: RunSnapshot) -> RunSnapshot:
    """The snapshot with its outcome recorded and nothing left pending."""
    return snapshot.model_copy(
        update={"status": "finished", "pending": [], "finish_reason": "stop", "text": "Done."}
    )


# Snapshots


async def test_saved_run_loads_back_with_the_next_revision(store: Store) -> None:
    snapshot = paused_run()
    before = utcnow()

    saved = await store.save_run(snapshot)

    assert saved.revision == 1
    assert saved.updated_at >= before
    assert snapshot.revision == 0, "the caller's copy is left alone"
    assert await store.load_run(snapshot.run_id) == saved
    assert saved.model_copy(update={"revision": 0, "updated_at": snapshot.updated_at}) == snapshot


async def test_unknown_run_loads_as_none(store: Store) -> None:
    assert await store.load_run("run-that-never-was") is None


async def test_each_save_moves_the_revision_on(store: Store) -> None:
    first = await store.save_run(paused_run())
    second = await store.save_run(decided(first, "U1"))
    third = await store.save_run(finished(second))

    assert [first.revision, second.revision, third.revision] == [1, 2, 3]
    assert await store.load_run(first.run_id) == third


async def test_stale_revision_conflicts_and_changes_nothing(store: Store) -> None:
    first = await store.save_run(paused_run(thread_id=THREAD))
    second = await store.save_run(decided(first, "U1"))

    with pytest.raises(StoreConflict) as caught:
        await store.save_run(finished(first))

    assert caught.value.run_id == first.run_id
    assert await store.load_run(first.run_id) == second
    assert await store.paused_runs(THREAD) == [first.run_id]
    assert await store.runs_in_flight() == [first.run_id]


async def test_a_second_first_save_of_the_same_run_conflicts(store: Store) -> None:
    snapshot = paused_run()
    saved = await store.save_run(snapshot)

    with pytest.raises(StoreConflict):
        await store.save_run(snapshot.model_copy(update={"text": "someone else"}))

    assert await store.load_run(snapshot.run_id) == saved


async def test_saving_a_revision_the_store_never_had_conflicts(store: Store) -> None:
    snapshot = paused_run().model_copy(update={"revision": 3})

    with pytest.raises(StoreConflict):
        await store.save_run(snapshot)

    assert await store.load_run(snapshot.run_id) is None


async def test_concurrent_saves_of_one_revision_let_exactly_one_win(store: Store) -> None:
    saved = await store.save_run(paused_run())
    attempts = [decided(saved, f"U{i}") for i in range(10)]

    outcomes = await asyncio.gather(*(store.save_run(a) for a in attempts), return_exceptions=True)

    winners = [o for o in outcomes if isinstance(o, RunSnapshot)]
    assert len(winners) == 1
    assert all(isinstance(o, StoreConflict) for o in outcomes if o not in winners)
    assert await store.load_run(saved.run_id) == winners[0]


def tree(thread_id: str | None = THREAD) -> tuple[RunSnapshot, RunSnapshot]:
    """A paused root run and its paused sub-agent run, ids drawn as the runtime draws them."""
    root = paused_run(run_id=tree_run_id(), thread_id=thread_id)
    child = paused_run(
        run_id=tree_run_id(root.run_id), parent_run_id=root.run_id, thread_id=thread_id
    )
    return root, child


async def test_runs_of_a_tree_are_saved_together_with_the_tops_audit(store: Store) -> None:
    root, child = tree()
    requested = audit(root.run_id, THREAD, "requested", "U123")

    saved = await store.save_runs([root, child], [requested])

    assert [s.revision for s in saved] == [1, 1]
    assert await store.load_run(root.run_id) == saved[0]
    assert await store.load_run(child.run_id) == saved[1]
    assert unlinked(await store.list_audit(run_id=root.run_id)) == [requested]
    assert await store.paused_runs(THREAD) == [root.run_id]
    again = await store.save_runs([decided(saved[0], "U1"), decided(saved[1], "U1")])
    assert [s.revision for s in again] == [2, 2]


async def test_a_tree_save_with_one_stale_run_writes_none_of_them(store: Store) -> None:
    root, child = await store.save_runs(list(tree()))
    newer = await store.save_run(decided(child, "U1"))

    with pytest.raises(StoreConflict) as caught:
        await store.save_runs(
            [finished(root), finished(child)], [audit(root.run_id, THREAD, "approved", "U2")]
        )

    assert caught.value.run_id == child.run_id
    assert await store.load_run(root.run_id) == root
    assert await store.load_run(child.run_id) == newer
    assert unlinked(await store.list_audit(run_id=root.run_id)) == []
    assert await store.paused_runs(THREAD) == [root.run_id]


async def test_concurrent_tree_saves_of_one_revision_let_exactly_one_win(store: Store) -> None:
    root, child = await store.save_runs(list(tree()))
    attempts = [[decided(root, f"U{i}"), decided(child, f"U{i}")] for i in range(10)]

    outcomes = await asyncio.gather(*(store.save_runs(a) for a in attempts), return_exceptions=True)

    winners = [o for o in outcomes if isinstance(o, list)]
    assert len(winners) == 1
    assert all(isinstance(o, StoreConflict) for o in outcomes if o not in winners)
    assert await store.load_run(child.run_id) == winners[0][1]


async def test_unicode_and_big_args_survive_a_round_trip(store: Store) -> None:
    args = {
        "note": 'Rückerstattung ✅ — 退款 🙂 עברית "quoted" \\ back\nslash \u2028 \u0000 end',
        "blob": "x" * 1_000_000,
        "items": [{"sku": f"sku-{i}", "qty": i, "price": i * 1.25} for i in range(5_000)],
        "nested": {"ключ": ["значение", None, True, 1.5e300, -0.0]},
    }
    snapshot = paused_run(thread_id=OTHER_THREAD, args=args)

    saved = await store.save_run(snapshot)
    loaded = await store.load_run(snapshot.run_id)

    assert loaded == saved
    assert loaded is not None
    assert loaded.pending[0].args == args
    assert loaded.messages[1].tool_calls[0].args == args


# Indexes


async def test_paused_runs_lists_root_paused_runs_of_the_thread_oldest_first(
    store: Store,
) -> None:
    start = utcnow() - timedelta(hours=1)
    newer = await store.save_run(paused_run(created_at=start + timedelta(minutes=5)))
    older = await store.save_run(paused_run(created_at=start))
    await store.save_run(paused_run(parent_run_id=older.run_id, created_at=start))
    await store.save_run(paused_run(created_at=start).model_copy(update={"status": "running"}))
    await store.save_run(paused_run(thread_id=OTHER_THREAD, created_at=start))
    await store.save_run(paused_run(thread_id=None, created_at=start))

    assert await store.paused_runs(THREAD) == [older.run_id, newer.run_id]
    assert await store.paused_runs("slack:T1:C1:never") == []


async def test_a_finished_run_leaves_the_paused_index(store: Store) -> None:
    saved = await store.save_run(paused_run())
    assert await store.paused_runs(THREAD) == [saved.run_id]

    await store.save_run(finished(saved))

    assert await store.paused_runs(THREAD) == []


async def test_a_run_paused_again_returns_to_the_paused_index(store: Store) -> None:
    saved = await store.save_run(paused_run())
    running = await store.save_run(saved.model_copy(update={"status": "running"}))
    assert await store.paused_runs(THREAD) == []

    await store.save_run(running.model_copy(update={"status": "paused"}))

    assert await store.paused_runs(THREAD) == [saved.run_id]


async def test_a_run_moved_to_another_thread_leaves_the_old_threads_index(store: Store) -> None:
    saved = await store.save_run(paused_run(thread_id=THREAD))

    await store.save_run(saved.model_copy(update={"thread_id": OTHER_THREAD}))

    assert await store.paused_runs(THREAD) == []
    assert await store.paused_runs(OTHER_THREAD) == [saved.run_id]


async def test_runs_expiring_lists_root_paused_runs_with_a_call_due(store: Store) -> None:
    now = utcnow()
    soon = await store.save_run(paused_run(expires_at=now + timedelta(minutes=5)))
    later = await store.save_run(paused_run(expires_at=now + timedelta(hours=2)))
    parent = paused_run(expires_at=now + timedelta(minutes=5))
    await store.save_run(paused_run(parent_run_id=parent.run_id, expires_at=now))
    await store.save_run(paused_run(expires_at=now, state="executing"))
    await store.save_run(paused_run(expires_at=now).model_copy(update={"status": "finished"}))

    assert await store.runs_expiring(now + timedelta(minutes=10)) == [soon.run_id]
    assert sorted(await store.runs_expiring(now + timedelta(hours=3))) == sorted(
        [soon.run_id, later.run_id]
    )
    assert await store.runs_expiring(now) == []


async def test_a_decided_run_stops_expiring(store: Store) -> None:
    now = utcnow()
    saved = await store.save_run(paused_run(expires_at=now + timedelta(minutes=5)))

    await store.save_run(decided(saved, "U1"))

    assert await store.runs_expiring(now + timedelta(hours=1)) == []


async def test_runs_in_flight_lists_root_runs_with_work_under_way(store: Store) -> None:
    start = utcnow() - timedelta(hours=1)
    older = await store.save_run(paused_run(created_at=start, state="executing"))
    newer = await store.save_run(
        paused_run(created_at=start + timedelta(minutes=1), state="executing")
    )
    await store.save_run(paused_run(parent_run_id=older.run_id, state="executing"))
    await store.save_run(paused_run())
    running = paused_run(created_at=start + timedelta(minutes=2))
    running.status, running.pending = "running", []
    running = await store.save_run(running)

    assert await store.runs_in_flight() == [older.run_id, newer.run_id, running.run_id]

    await store.save_run(finished(older))
    await store.save_run(finished(running))

    assert await store.runs_in_flight() == [newer.run_id]


async def test_thread_runs_lists_the_threads_root_runs_that_wait_or_work_oldest_first(
    store: Store,
) -> None:
    start = utcnow() - timedelta(hours=1)
    running = paused_run(created_at=start + timedelta(minutes=2))
    running.status, running.pending = "running", []
    running = await store.save_run(running)
    waiting = await store.save_run(paused_run(created_at=start + timedelta(minutes=1)))
    claimed = await store.save_run(paused_run(created_at=start, state="executing"))
    await store.save_run(paused_run(parent_run_id=claimed.run_id, created_at=start))
    await store.save_run(finished(paused_run(created_at=start)))
    await store.save_run(paused_run(thread_id=OTHER_THREAD, created_at=start))
    await store.save_run(paused_run(thread_id=None, created_at=start))

    assert await store.thread_runs(THREAD) == [claimed.run_id, waiting.run_id, running.run_id]
    assert await store.thread_runs("slack:T1:C1:never") == []


async def test_a_run_leaves_its_threads_runs_once_it_is_over(store: Store) -> None:
    saved = await store.save_run(paused_run())
    running = await store.save_run(saved.model_copy(update={"status": "running"}))
    assert await store.thread_runs(THREAD) == [saved.run_id]

    await store.save_run(finished(running))

    assert await store.thread_runs(THREAD) == []


async def test_a_run_moved_to_another_thread_leaves_the_old_threads_runs(store: Store) -> None:
    saved = await store.save_run(paused_run(thread_id=THREAD))
    running = saved.model_copy(update={"thread_id": OTHER_THREAD, "status": "running"})

    await store.save_run(running)

    assert await store.thread_runs(THREAD) == []
    assert await store.thread_runs(OTHER_THREAD) == [saved.run_id]


async def test_a_save_that_conflicts_leaves_the_threads_runs_as_they_were(store: Store) -> None:
    saved = await store.save_run(paused_run())
    await store.save_run(saved)
    with pytest.raises(StoreConflict):
        await store.save_run(finished(saved))
    assert await store.thread_runs(THREAD) == [saved.run_id]


# Thread memory


async def test_history_appends_in_order(store: Store) -> None:
    first = [Message.user("one"), Message.user("two")]
    second = [Message.user("three")]

    await store.append_history(THREAD, first, window=10)
    await store.append_history(THREAD, second, window=10)

    assert await store.load_history(THREAD) == [*first, *second]
    assert await store.load_history(OTHER_THREAD) == []


async def test_history_keeps_only_the_newest_window(store: Store) -> None:
    messages = [Message.user(f"message {i} ✅") for i in range(7)]

    await store.append_history(THREAD, messages[:4], window=5)
    await store.append_history(THREAD, messages[4:], window=5)
    assert await store.load_history(THREAD) == messages[2:]

    await store.append_history(THREAD, [], window=2)
    assert await store.load_history(THREAD) == messages[5:]


async def test_history_with_a_zero_window_forgets_everything(store: Store) -> None:
    await store.append_history(THREAD, [Message.user("hi")], window=5)

    await store.append_history(THREAD, [Message.user("bye")], window=0)

    assert await store.load_history(THREAD) == []


# Audit


def audit(run_id: str, thread_id: str | None, event: str, actor: str) -> AuditEntry:
    return AuditEntry.model_validate(
        {
            "event": event,
            "run_id": run_id,
            "thread_id": thread_id,
            "tool_call_id": f"call-{run_id}",
            "tool_name": "refund",
            "args": {"amount": 250, "note": "größer als 100 ✅"},
            "kind": "approval",
            "requester": "U123",
            "actor": actor,
        }
    )


async def test_audit_lists_entries_per_run_and_per_thread_oldest_first(store: Store) -> None:
    a_requested = audit("run-a", THREAD, "requested", "U123")
    b_requested = audit("run-b", THREAD, "requested", "U123")
    a_approved = audit("run-a", THREAD, "approved", "U777")
    c_declined = audit("run-c", OTHER_THREAD, "declined", "U888")
    for entry in (a_requested, b_requested, a_approved, c_declined):
        await store.append_audit(entry)

    assert unlinked(await store.list_audit(run_id="run-a")) == [a_requested, a_approved]
    assert unlinked(await store.list_audit(thread_id=THREAD)) == [
        a_requested,
        b_requested,
        a_approved,
    ]
    assert unlinked(await store.list_audit(thread_id=OTHER_THREAD)) == [c_declined]
    assert unlinked(await store.list_audit(run_id="run-a", thread_id=OTHER_THREAD)) == []
    assert unlinked(await store.list_audit(run_id="run-z")) == []


async def test_a_save_puts_its_audit_entries_on_record_with_it(store: Store) -> None:
    snapshot = paused_run()
    requested = audit(snapshot.run_id, THREAD, "requested", "U123")
    saved = await store.save_run(snapshot, [requested])
    approved = audit(snapshot.run_id, THREAD, "approved", "U777")
    await store.save_run(decided(saved, "U777"), [approved])

    assert unlinked(await store.list_audit(run_id=snapshot.run_id)) == [requested, approved]
    assert unlinked(await store.list_audit(thread_id=THREAD)) == [requested, approved]
    assert unlinked(await store.list_audit()) == [requested, approved]


async def test_a_save_that_conflicts_writes_none_of_its_audit_entries(store: Store) -> None:
    snapshot = paused_run()
    saved = await store.save_run(snapshot)
    await store.save_run(decided(saved, "U1"))

    with pytest.raises(StoreConflict):
        await store.save_run(
            decided(saved, "U2"), [audit(snapshot.run_id, THREAD, "approved", "U2")]
        )
    assert unlinked(await store.list_audit(run_id=snapshot.run_id)) == []


async def test_a_save_refuses_audit_entries_of_another_run(store: Store) -> None:
    snapshot = paused_run()
    with pytest.raises(ValueError, match="cannot be saved with run"):
        await store.save_run(snapshot, [audit("run-other", THREAD, "requested", "U1")])
    assert await store.load_run(snapshot.run_id) is None


async def test_audit_without_a_filter_lists_everything(store: Store) -> None:
    entries = [audit("run-a", THREAD, "requested", "U1"), audit("run-b", None, "expired", "U2")]
    for entry in entries:
        await store.append_audit(entry)

    assert unlinked(await store.list_audit()) == entries


# Heartbeats


async def test_a_heartbeat_reads_back_and_a_newer_one_replaces_it(store: Store) -> None:
    saved = await store.save_run(paused_run(run_id="run-a", thread_id=THREAD))
    assert await store.alive_until("run-a") is None
    soon, later = utcnow() + timedelta(seconds=30), utcnow() + timedelta(seconds=60)
    await store.beat("run-a", soon)
    assert await store.alive_until("run-a") == soon
    await store.beat("run-a", later)
    assert await store.alive_until("run-a") == later
    # A beat is not a save: the revision stays and the next save still fits.
    assert (await store.load_run("run-a")).revision == saved.revision  # type: ignore[union-attr]
    await store.save_run(decided(saved, "U1"))


async def test_a_heartbeat_in_the_past_keeps_nothing_alive(store: Store) -> None:
    await store.save_run(paused_run(run_id="run-a", thread_id=THREAD))
    await store.beat("run-a", utcnow() - timedelta(seconds=1))
    until = await store.alive_until("run-a")
    assert until is None or until <= utcnow()


# Locks


async def test_lock_makes_a_second_holder_wait_for_the_first(store: Store) -> None:
    order: list[str] = []
    first_inside = asyncio.Event()
    first_may_leave = asyncio.Event()

    async def first() -> None:
        async with store.lock("run:r1"):
            order.append("first in")
            first_inside.set()
            await first_may_leave.wait()
            order.append("first out")

    async def second() -> None:
        await first_inside.wait()
        async with store.lock("run:r1"):
            order.append("second in")

    first_task = asyncio.create_task(first())
    second_task = asyncio.create_task(second())
    await first_inside.wait()
    # A bounded wait is the only way to show that something does not happen.
    done, _ = await asyncio.wait({second_task}, timeout=0.2)
    assert not done
    first_may_leave.set()
    await asyncio.gather(first_task, second_task)

    assert order == ["first in", "first out", "second in"]


async def test_lock_times_out_while_someone_holds_it_too_long(store: Store) -> None:
    async with store.lock("run:r1"):
        started = time.monotonic()
        with pytest.raises(LockTimeout):
            async with store.lock("run:r1", ttl=0.1):
                pytest.fail("entered a lock that was held")
        assert time.monotonic() - started >= 0.09

    async with store.lock("run:r1", ttl=1):
        pass


async def test_a_short_wait_gives_up_without_shortening_the_lease(
    durable_store: Store,
) -> None:
    crashed = durable_store.lock("run:r1", ttl=0.3, wait=5)
    await crashed.__aenter__()  # never exited, like a process that died
    started = time.monotonic()
    with pytest.raises(LockTimeout):
        async with durable_store.lock("run:r1", ttl=30, wait=0.05):
            pytest.fail("entered a lock that was held")
    assert time.monotonic() - started < 0.3  # gave up after its wait, not the lease
    async with durable_store.lock("run:r1", ttl=30, wait=5):  # the lease ran out
        pass
    # Ended while the store is open: left suspended, the lock's generator would run its
    # release when collected, on a closed client in a later test (one that reconnects).
    await crashed.__aexit__(None, None, None)


async def test_locks_with_different_names_do_not_exclude_each_other(store: Store) -> None:
    async with store.lock("run:r1"), store.lock("run:r2", ttl=1):
        pass


async def test_lock_is_released_when_the_block_raises(store: Store) -> None:
    with pytest.raises(RuntimeError):
        async with store.lock("run:r1"):
            raise RuntimeError("boom")

    async with store.lock("run:r1", ttl=1):
        pass


async def test_lock_is_released_when_the_holder_is_cancelled(store: Store) -> None:
    inside = asyncio.Event()

    async def holder() -> None:
        async with store.lock("run:r1"):
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(holder())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async with store.lock("run:r1", ttl=1):
        pass


async def test_lock_of_a_crashed_holder_frees_itself_after_its_ttl(durable_store: Store) -> None:
    crashed = durable_store.lock("run:r1", ttl=0.2)
    await crashed.__aenter__()  # never exited, like a process that died

    async with durable_store.lock("run:r1", ttl=5):
        # The late holder's release must not free the lock it no longer owns.
        await crashed.__aexit__(None, None, None)
        with pytest.raises(LockTimeout):
            async with durable_store.lock("run:r1", ttl=0.1):
                pytest.fail("entered a lock that was held")


# Health and durability


async def test_ping_answers(store: Store) -> None:
    assert await store.ping() is True


async def test_state_survives_reopening_the_store(durable_store: Store) -> None:
    saved = await durable_store.save_run(paused_run())
    entry = audit(saved.run_id, THREAD, "requested", "U123")
    await durable_store.append_audit(entry)
    await durable_store.append_history(THREAD, [Message.user("remember me")], window=5)
    await durable_store.close()

    reopened = open_store(durable_store.url)
    try:
        assert await reopened.load_run(saved.run_id) == saved
        assert await reopened.paused_runs(THREAD) == [saved.run_id]
        assert unlinked(await reopened.list_audit(run_id=saved.run_id)) == [entry]
        assert await reopened.load_history(THREAD) == [Message.user("remember me")]
    finally:
        await reopened.close()
