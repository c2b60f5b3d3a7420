"""What only the PostgreSQL store has: its schema kept by versioned migrations (applied
once when replicas start at once; a database a newer bot migrated stops this one), its
URL's own parameters, and the faults a real server has: every connection of the pool
ended by the server (``pg_terminate_backend``) loses nothing, and a row another
transaction holds makes a statement time out instead of hanging."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from agents.snapshot import AuditEntry
from agents.stores import open_store
from agents.stores.postgres import MIGRATIONS, PostgresStore
from agents.stores.postgres_db import SchemaTooNew, split_url

from ._snapshots import paused_run
from .conftest import cut_postgres, postgres_schema

pytestmark = pytest.mark.postgres


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with postgres_schema() as scratch:
        yield scratch


def test_the_urls_own_parameters_stay_with_the_bot() -> None:
    libpq, pool, timeout = split_url(
        "postgres://bot:pw@db.example.com:5433/approvals?sslmode=verify-full"
        "&pool_size=4&statement_timeout=2500&options=-csearch_path%3Dbot"
    )
    assert (pool, timeout) == (4, 2500)
    assert libpq == (
        "postgresql://bot:pw@db.example.com:5433/approvals?sslmode=verify-full"
        "&options=-csearch_path%3Dbot%20-c%20statement_timeout%3D2500"
        "%20-c%20idle_in_transaction_session_timeout%3D60000"
    )
    with pytest.raises(ValueError, match="pool_size"):
        split_url("postgresql://h/db?pool_size=many")


async def test_replicas_starting_at_once_migrate_once(url: str) -> None:
    stores = [PostgresStore(url) for _ in range(4)]
    try:
        await asyncio.gather(*(s.ping() for s in stores))
        assert await stores[0].db.versions() == {"runtime": len(MIGRATIONS)}
        saved = await stores[1].save_run(paused_run())
        assert await stores[2].load_run(saved.run_id) == saved
    finally:
        for store in stores:
            await store.close()


async def test_a_database_a_newer_bot_migrated_stops_this_one(url: str) -> None:
    store = PostgresStore(url)
    try:
        await store.ping()
        async with store.db.connection() as connection:
            await connection.execute(
                "UPDATE schema_versions SET version = 99 WHERE component = 'runtime'"
            )
    finally:
        await store.close()
    newer = PostgresStore(url)
    try:
        with pytest.raises(SchemaTooNew, match="runtime schema is version 99; this bot knows"):
            await newer.ping()
    finally:
        await newer.close()


async def test_connections_the_server_ended_are_replaced_and_nothing_is_lost(url: str) -> None:
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    try:
        runs = [await store.save_run(paused_run()) for _ in range(3)]
        assert await cut_postgres(url) >= 1  # the pool's connections
        for run in runs:
            assert await store.load_run(run.run_id) == run
        entry = AuditEntry(event="approved", run_id=runs[0].run_id, tool_call_id="c", tool_name="t")
        await store.append_audit(entry)
        assert [e.event for e in await store.list_audit(run_id=runs[0].run_id)] == ["approved"]
    finally:
        await store.close()


async def test_a_row_held_elsewhere_times_out_instead_of_hanging(url: str) -> None:
    store = open_store(f"{url}&statement_timeout=300")
    try:
        saved = await store.save_run(paused_run())
        async with await psycopg.AsyncConnection.connect(url) as other, other.transaction():
            await other.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (saved.run_id,))
            with pytest.raises(psycopg.errors.QueryCanceled):
                await store.save_run(saved)
        # Released: the same save goes through, once.
        again = await store.save_run(saved)
        assert again.revision == saved.revision + 1
    finally:
        await store.close()
