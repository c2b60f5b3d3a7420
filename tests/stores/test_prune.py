"""Bounded records: ``Store.prune`` removes old finished runs and idle threads' history,
on every store, and never a run that waits or works."""

from __future__ import annotations

from datetime import timedelta

from agents.messages import Message
from agents.snapshot import AuditEntry, RunSnapshot, utcnow
from agents.stores import Pruned, Store

from ._snapshots import paused_run
from .test_conformance import OTHER_THREAD, THREAD, finished

LATER = timedelta(seconds=1)


def child_of(root: RunSnapshot) -> RunSnapshot:
    """A finished sub-agent run of ``root``."""
    child = paused_run(parent_run_id=root.run_id, thread_id=root.thread_id)
    return finished(child)


async def finished_tree(store: Store, thread_id: str | None = THREAD) -> tuple[str, str]:
    """A finished root run with a finished child on ``thread_id``: (root id, child id)."""
    root = await store.save_run(paused_run(thread_id=thread_id))
    child = await store.save_run(child_of(root))
    await store.save_run(finished(root))
    return root.run_id, child.run_id


async def test_a_finished_run_past_retention_goes_with_its_children_and_history(
    store: Store,
) -> None:
    root, child = await finished_tree(store)
    await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)
    entry = AuditEntry(
        event="approved", run_id=root, thread_id=THREAD, tool_call_id="c", tool_name="refund"
    )
    await store.append_audit(entry)

    pruned = await store.prune(utcnow() + LATER)

    assert sorted(pruned.run_ids) == sorted([root, child])
    assert pruned.thread_ids == (THREAD,)
    assert await store.load_run(root) is None
    assert await store.load_run(child) is None
    assert await store.load_history(THREAD) == []
    assert await store.list_audit(run_id=root) == [entry]  # evidence is kept


async def test_a_finished_run_within_retention_is_kept(store: Store) -> None:
    root, child = await finished_tree(store)

    pruned = await store.prune(utcnow() - timedelta(days=30))

    assert pruned.run_ids == ()
    assert pruned.thread_ids == ()
    assert await store.load_run(root) is not None
    assert await store.load_run(child) is not None


async def test_paused_and_in_flight_runs_are_kept_however_old(store: Store) -> None:
    waiting = await store.save_run(paused_run())
    working = await store.save_run(
        paused_run(thread_id=OTHER_THREAD).model_copy(update={"status": "running"})
    )
    await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)

    pruned = await store.prune(utcnow() + timedelta(days=3650))

    assert pruned.run_ids == ()
    assert pruned.thread_ids == ()
    assert await store.load_run(waiting.run_id) is not None
    assert await store.load_run(working.run_id) is not None
    assert await store.thread_runs(THREAD) == [waiting.run_id]
    assert len(await store.load_history(THREAD)) == 1


async def test_a_thread_with_a_recent_run_keeps_its_history(store: Store) -> None:
    old, _ = await finished_tree(store)
    await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)
    recent = await store.save_run(finished(paused_run()))

    pruned = await store.prune(recent.updated_at)

    assert old in pruned.run_ids
    assert recent.run_id not in pruned.run_ids
    assert pruned.thread_ids == ()
    assert len(await store.load_history(THREAD)) == 1
    assert await store.load_run(recent.run_id) is not None


async def test_a_thread_with_a_waiting_run_keeps_its_history(store: Store) -> None:
    old, _ = await finished_tree(store)
    await store.save_run(paused_run())
    await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)

    pruned = await store.prune(utcnow() + LATER)

    assert old in pruned.run_ids
    assert pruned.thread_ids == ()
    assert len(await store.load_history(THREAD)) == 1


async def test_prune_works_in_batches_oldest_first_and_twice_is_harmless(store: Store) -> None:
    first, _ = await finished_tree(store, thread_id=None)
    second, _ = await finished_tree(store, thread_id=None)
    before = utcnow() + LATER

    one = await store.prune(before, limit=1)
    two = await store.prune(before, limit=1)

    assert first in one.run_ids
    assert second in two.run_ids
    assert await store.prune(before) == Pruned()
