"""Bounded records: ``Store.prune`` removes old finished runs and idle threads' history,
on every store, and never a run that waits or works."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agents.messages import Message
from agents.snapshot import AuditEntry, RunSnapshot, utcnow
from agents.stores import PRUNE_BATCH, Pruned, Store
from agents.stores.redis import RedisStore

from ._snapshots import paused_run, unlinked
from .conftest import REDIS_KINDS, opened
from .test_conformance import OTHER_THREAD, THREAD, finished

LATER = timedelta(seconds=1)


async def prune_now(store: Store, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
    """One batch found and removed at once (housekeeping forgets its records between)."""
    return await store.prune(await store.prunable(before, limit=limit))


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

    pruned = await prune_now(store, utcnow() + LATER)

    assert sorted(pruned.run_ids) == sorted([root, child])
    assert pruned.thread_ids == (THREAD,)
    assert await store.load_run(root) is None
    assert await store.load_run(child) is None
    assert await store.load_history(THREAD) == []
    assert unlinked(await store.list_audit(run_id=root)) == [entry]  # evidence is kept


async def test_a_finished_run_within_retention_is_kept(store: Store) -> None:
    root, child = await finished_tree(store)

    pruned = await prune_now(store, utcnow() - timedelta(days=30))

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

    pruned = await prune_now(store, utcnow() + timedelta(days=3650))

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

    pruned = await prune_now(store, recent.updated_at)

    assert old in pruned.run_ids
    assert recent.run_id not in pruned.run_ids
    assert pruned.thread_ids == ()
    assert len(await store.load_history(THREAD)) == 1
    assert await store.load_run(recent.run_id) is not None


async def test_a_thread_with_a_waiting_run_keeps_its_history(store: Store) -> None:
    old, _ = await finished_tree(store)
    await store.save_run(paused_run())
    await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)

    pruned = await prune_now(store, utcnow() + LATER)

    assert old in pruned.run_ids
    assert pruned.thread_ids == ()
    assert len(await store.load_history(THREAD)) == 1


async def test_prune_works_in_batches_oldest_first_and_twice_is_harmless(store: Store) -> None:
    first, _ = await finished_tree(store, thread_id=None)
    second, _ = await finished_tree(store, thread_id=None)
    before = utcnow() + LATER

    one = await prune_now(store, before, limit=1)
    two = await prune_now(store, before, limit=1)

    assert first in one.run_ids
    assert second in two.run_ids
    assert await prune_now(store, before) == Pruned(before=before)


def past(moment: datetime) -> datetime:
    """A cut-off just after ``moment``: what was last changed then is due, and a run
    created from now on is not."""
    cutoff = utcnow()
    while cutoff <= moment:
        cutoff = utcnow()
    return cutoff


async def test_prunable_changes_nothing_and_a_batch_never_removed_is_found_again(
    store: Store,
) -> None:
    root, child = await finished_tree(store)
    await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)
    before = utcnow() + LATER

    due = await store.prunable(before)
    # A crash here: the chat layer forgot the batch, the store removed nothing.

    assert sorted(due.run_ids) == sorted([root, child])
    assert due.root_ids == (root,)
    assert due.thread_ids == (THREAD,)
    assert await store.load_run(root) is not None
    assert await store.load_run(child) is not None
    assert len(await store.load_history(THREAD)) == 1
    again = await store.prunable(before)
    assert (again.root_ids, sorted(again.run_ids), again.thread_ids) == (
        (root,),
        sorted([root, child]),
        (THREAD,),
    )
    removed = await store.prune(again)
    assert sorted(removed.run_ids) == sorted([root, child])
    assert removed.thread_ids == (THREAD,)
    assert await store.load_run(child) is None
    assert await store.load_history(THREAD) == []


async def test_a_thread_that_starts_a_run_after_prunable_keeps_its_history(
    store: Store,
) -> None:
    old, _ = await finished_tree(store)
    await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)
    saved = await store.load_run(old)
    assert saved is not None
    due = await store.prunable(past(saved.updated_at))
    assert due.thread_ids == (THREAD,)

    new = await store.save_run(paused_run())
    removed = await store.prune(due)

    assert removed.thread_ids == ()
    assert len(await store.load_history(THREAD)) == 1
    assert await store.load_run(new.run_id) is not None
    # The old run goes in this batch or the next, the history stays with the new run.
    later = await prune_now(store, due.before)
    assert old in (*removed.run_ids, *later.run_ids)
    assert later.thread_ids == ()
    assert await store.load_run(old) is None
    assert len(await store.load_history(THREAD)) == 1


async def test_a_thread_whose_new_run_finished_before_the_removal_keeps_its_history(
    store: Store,
) -> None:
    old, _ = await finished_tree(store)
    await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)
    saved = await store.load_run(old)
    assert saved is not None
    due = await store.prunable(past(saved.updated_at))

    new = await store.save_run(paused_run())
    await store.save_run(finished(new))
    removed = await store.prune(due)

    assert removed.thread_ids == ()
    assert len(await store.load_history(THREAD)) == 1
    assert await store.load_run(new.run_id) is not None


async def test_a_run_saved_again_after_prunable_is_kept_with_its_children(
    store: Store,
) -> None:
    root, child = await finished_tree(store)
    await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)
    due = await store.prunable(utcnow() + LATER)

    again = await store.load_run(root)
    assert again is not None
    await store.save_run(again.model_copy(update={"status": "running"}))
    removed = await store.prune(due)

    assert removed.run_ids == ()
    assert removed.thread_ids == ()
    assert await store.load_run(root) is not None
    assert await store.load_run(child) is not None
    assert len(await store.load_history(THREAD)) == 1


async def test_a_batch_pruned_twice_or_by_two_processes_at_once_is_removed_once(
    store: Store,
) -> None:
    root, child = await finished_tree(store)
    due = await store.prunable(utcnow() + LATER)

    first, second = await asyncio.gather(store.prune(due), store.prune(due))

    assert sorted((*first.run_ids, *second.run_ids)) == sorted([root, child])
    assert (await store.prune(due)).run_ids == ()


@pytest.mark.redis
async def test_on_a_cluster_a_run_saved_after_the_threads_runs_were_read_keeps_its_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cluster reads the thread's runs in every group before the script that deletes
    # its history: a run saved in between must keep it (the history hold).
    async with opened("cluster", tmp_path) as store:
        assert isinstance(store, RedisStore)
        old, _ = await finished_tree(store)
        await store.append_history(THREAD, [Message.user("refund A-1001")], window=10)
        saved = await store.load_run(old)
        assert saved is not None
        due = await store.prunable(past(saved.updated_at))
        read_runs = store._retention._alone_but
        started: list[RunSnapshot] = []

        async def then_a_run_starts(thread_id: str, batch: list[str]) -> bool:
            alone = await read_runs(thread_id, batch)
            started.append(await store.save_run(paused_run()))
            return alone

        monkeypatch.setattr(store._retention, "_alone_but", then_a_run_starts)
        removed = await store.prune(due)

        assert started
        assert removed.thread_ids == ()
        assert len(await store.load_history(THREAD)) == 1


@pytest.mark.parametrize("kind", REDIS_KINDS)
async def test_two_replicas_pruning_one_root_report_each_run_once_between_them(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Replica A removes the child and stalls before removing the root; replica B finds
    # no child left and removes the root. The child is still reported, by A.
    async with opened(kind, tmp_path) as first:
        assert isinstance(first, RedisStore)
        root, child = await finished_tree(first)
        due = await first.prunable(utcnow() + LATER)
        second = RedisStore(first.url)
        try:
            remove_root = first._retention._prune_root
            by_second: list[Pruned] = []

            async def after_the_other_replica(keys: list[str], args: list[str]) -> object:
                by_second.append(await second.prune(due))
                return await remove_root(keys=keys, args=args)

            monkeypatch.setattr(first._retention, "_prune_root", after_the_other_replica)
            by_first = await first.prune(due)

            assert by_second[0].run_ids == (root,)
            assert by_first.run_ids == (child,)
            assert await first.load_run(child) is None
        finally:
            await second.close()
