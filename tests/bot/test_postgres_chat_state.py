"""The chat state on PostgreSQL, beyond the contract every backend passes
(``test_chat_state``): its schema beside the store's, word of new intake entries
(``LISTEN``/``NOTIFY``), and connections cut mid-run."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest

from agents import open_store
from agents.stores.postgres import MIGRATIONS, PostgresStore
from agents.stores.postgres_db import SchemaTooNew
from bot import IncomingMessage, ThreadKey, open_chat_state
from bot.chat_state import IntakeEntry, IntakeState
from bot.chat_state.postgres import CHAT_MIGRATIONS, PostgresChatState
from bot.intake import BUFFERED, DELIVERY, Attempt, Delivery, Intake
from bot.tasks import TaskTracker
from tests.stores.conftest import cut_postgres, store_url
from tests.stores.test_conformance import eventually

pytestmark = pytest.mark.postgres

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
WORD_WITHIN = 5.0
"""Seconds word of an entry may take (it comes in milliseconds)."""


@asynccontextmanager
async def replicas(tmp_path: Path, count: int = 2) -> AsyncIterator[list[PostgresChatState]]:
    """Chat states of ``count`` replicas on one empty database, each on a store (and so
    a pool) of its own."""
    async with store_url("postgres", tmp_path) as url:
        stores = [open_store(url) for _ in range(count)]
        chats = [open_chat_state(store) for store in stores]
        try:
            assert all(isinstance(chat, PostgresChatState) for chat in chats)
            yield [chat for chat in chats if isinstance(chat, PostgresChatState)]
        finally:
            for chat in chats:
                await chat.close()
            for store in stores:
                await store.close()


async def listening(chat: PostgresChatState) -> None:
    """Once ``chat`` listens: its first word says its connection is up."""
    async with asyncio.timeout(WORD_WITHIN):
        await chat.wait_for_entries()


def woken(chat: PostgresChatState) -> asyncio.Task[None]:
    return asyncio.create_task(chat.wait_for_entries())


async def test_the_chat_tables_share_the_stores_pool_under_a_schema_version_of_their_own(
    tmp_path: Path,
) -> None:
    async with store_url("postgres", tmp_path) as url:
        store = open_store(url)
        chat = open_chat_state(store)
        try:
            assert isinstance(store, PostgresStore)
            assert isinstance(chat, PostgresChatState)
            assert chat.db is store.db
            await chat.follow("slack:T1:C1:1")
            assert await store.db.versions() == {"chat": len(CHAT_MIGRATIONS)}
            assert await store.ping()
            assert await store.db.versions() == {
                "chat": len(CHAT_MIGRATIONS),
                "runtime": len(MIGRATIONS),
            }
        finally:
            await chat.close()
            await store.close()


async def test_a_chat_schema_a_newer_bot_migrated_stops_this_one(tmp_path: Path) -> None:
    async with replicas(tmp_path, 1) as (chat,):
        await chat.follow("slack:T1:C1:1")
        async with chat.db.connection() as connection:
            await connection.execute(
                "UPDATE schema_versions SET version = 99 WHERE component = 'chat'"
            )
        newer = PostgresChatState(chat.db.url, open_store("memory://"))
        try:
            with pytest.raises(SchemaTooNew, match="chat schema is version 99"):
                await newer.follows("slack:T1:C1:1")
        finally:
            await newer.close()


async def test_a_write_on_another_replica_wakes_a_waiting_reader_at_once(
    tmp_path: Path,
) -> None:
    async with replicas(tmp_path) as (reader, writer):
        await listening(reader)
        waiting = woken(reader)
        assert await writer.enqueue("for anyone", keys=["e1"], ttl=60) is not None
        async with asyncio.timeout(WORD_WITHIN):
            await waiting
        (entry,) = await reader.take("reader", count=5, lease=30)
        assert entry.body == "for anyone"


async def test_an_entry_handed_back_wakes_the_other_replicas(tmp_path: Path) -> None:
    async with replicas(tmp_path) as (staying, leaving):
        await leaving.enqueue("unfinished", keys=[], ttl=60)
        (held,) = await leaving.take("leaving", count=1, lease=60)
        await listening(staying)
        waiting = woken(staying)
        await leaving.release("leaving", [held.id])
        async with asyncio.timeout(WORD_WITHIN):
            await waiting
        assert [e.id for e in await staying.take("staying", count=1, lease=60)] == [held.id]


async def test_a_replica_is_not_woken_by_its_own_writes(tmp_path: Path) -> None:
    """The intake that wrote an entry looks for it already (``Intake.want``)."""
    async with replicas(tmp_path) as (chat, other):
        await listening(chat)
        waiting = woken(chat)
        await chat.enqueue("mine", keys=[], ttl=60)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await asyncio.shield(waiting)
        await other.enqueue("theirs", keys=[], ttl=60)
        async with asyncio.timeout(WORD_WITHIN):
            await waiting


async def test_word_comes_again_once_the_listening_connection_is_cut(tmp_path: Path) -> None:
    async with replicas(tmp_path) as (reader, writer):
        await listening(reader)
        assert await cut_postgres(reader.db.url) >= 1
        await listening(reader)  # connected again: woken for what it may have missed
        waiting = woken(reader)
        await written(lambda: writer.enqueue("after the cut", keys=[], ttl=60))
        async with asyncio.timeout(WORD_WITHIN):
            await waiting


async def written(write: Callable[[], Awaitable[T]]) -> T:
    """``write`` tried until it goes in: a pool's connection cut fails its next use once."""
    for _ in range(10):
        try:
            return await write()
        except psycopg.OperationalError:
            continue
    raise AssertionError("the write never went in")


# The intake on PostgreSQL


THREAD = ThreadKey(platform="test", workspace="w", channel="c", root="r")


def said(text: str) -> Delivery:
    return Delivery(message=IncomingMessage(thread=THREAD, user_id="U1", text=text))


def writing(chat: IntakeState, text: str) -> Callable[[], Awaitable[str | None]]:
    """A delivery's write, with a dedupe key of its own: written again after a failure
    whose outcome is unknown, it is a copy, never a second entry."""

    async def write() -> str | None:
        body = DELIVERY.dump_json(said(text)).decode()
        return await chat.enqueue(body, keys=[f"message:{text}"], ttl=600)

    return write


async def test_an_intake_takes_another_replicas_entry_at_once_not_at_its_next_look(
    tmp_path: Path,
) -> None:
    worked = asyncio.Event()

    async def work(delivery: Delivery, entry: IntakeEntry, attempt: Attempt) -> None:
        worked.set()

    async with replicas(tmp_path) as (chat, other):
        tasks = TaskTracker()
        box = Intake(chat, work, tasks=tasks, lease=30.0)
        box.start(poll=3600.0)
        try:
            await listening(chat)
            await writing(other, "on the other replica")()
            async with asyncio.timeout(WORD_WITHIN):
                await worked.wait()
        finally:
            await box.aclose()
            await tasks.aclose()


async def test_connections_cut_mid_run_lose_nothing_and_work_nothing_twice(
    tmp_path: Path,
) -> None:
    worked: list[str] = []

    async def work(delivery: Delivery, entry: IntakeEntry, attempt: Attempt) -> None:
        assert delivery.message is not None
        worked.append(delivery.message.text)

    async with replicas(tmp_path) as (chat, other):
        tasks = TaskTracker()
        boxes = [Intake(each, work, tasks=tasks, lease=5.0) for each in (chat, other)]
        for box in boxes:
            box.start(poll=0.2)
        sent = [f"message {n}" for n in range(60)]
        outcomes: list[str | None] = []
        cut = 0
        try:
            for n, text in enumerate(sent):
                box = boxes[n % 2]
                outcomes.append(await box.submit(writing(box.chat, text), said(text)))
                if n % 20 == 10:  # while earlier ones are taken, worked off and done
                    cut += await cut_postgres(chat.db.url)
            assert cut > 0
            assert BUFFERED in outcomes  # writes the cut failed: kept, and written after

            async def all_worked() -> bool:
                return len(worked) >= len(sent) and not any(box.busy for box in boxes)

            await eventually(all_worked, deadline=30.0)
        finally:
            for box in boxes:
                await box.aclose()
            await tasks.aclose()
        assert sorted(worked) == sorted(sent)
        assert await written(lambda: chat.take("after", count=100, lease=30)) == []


# At start


async def check(tmp_path: Path, url: str) -> tuple[int, str, str]:
    """``python -m bot check`` on the store at ``url``: its exit code, out and err."""
    keep = ("PATH", "HOME", "LANG", "SYSTEMROOT")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env |= {
        "STORE_URL": url,
        "BOT_MODEL": "demo",
        "OPS_DB_PATH": str(tmp_path / "ops.db"),
        "PYTHONPATH": str(ROOT),  # this checkout's bot, whichever one the venv installed
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "check",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_chat_schema_is_migrated_at_start_and_one_too_new_stops_the_bot(
    tmp_path: Path,
) -> None:
    async with store_url("postgres", tmp_path) as url:
        code, out, err = await check(tmp_path, url)
        assert (code, err) == (0, "")
        assert f"(schema chat v{len(CHAT_MIGRATIONS)}, runtime v{len(MIGRATIONS)})" in out
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            await connection.execute(
                "UPDATE schema_versions SET version = 99 WHERE component = 'chat'"
            )
        code, out, err = await check(tmp_path, url)
        assert code == 2
        assert "the database's chat schema is version 99" in err


async def test_a_replica_stalled_mid_write_holds_up_only_its_own_delivery(
    tmp_path: Path,
) -> None:
    async with replicas(tmp_path, 1) as (chat,):
        assert await writing(chat, "first")() is not None
        # Another replica stalled inside its write of a copy: the key's row stays locked.
        stalled = await psycopg.AsyncConnection.connect(chat.db.conninfo)
        async with stalled, stalled.transaction():
            await stalled.execute("SELECT 1 FROM seen WHERE key = 'message:first' FOR UPDATE")
            held, unrelated = await asyncio.gather(
                writing(chat, "first")(), writing(chat, "second")(), return_exceptions=True
            )
        assert isinstance(held, psycopg.errors.LockNotAvailable)  # told, not hung
        assert isinstance(unrelated, str)  # written beside it, not held up with it
        assert await writing(chat, "first")() is None  # once released: a copy
