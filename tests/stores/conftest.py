"""The ``store`` fixture: every test of the store contract runs on each store.

Redis is the real server at ``REDIS_URL`` and the real three-primary cluster at
``REDIS_CLUSTER_URL``; when one does not answer the fixture fails (run
``scripts/ensure-redis`` and ``scripts/ensure-redis-cluster``), it never skips.
Each Redis test gets its own key prefix and deletes its keys afterwards.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from redis.exceptions import RedisError

from agents.stores import Store, open_store, redis_client, split_prefix

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_CLUSTER_URL = os.environ.get(
    "REDIS_CLUSTER_URL", "redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003/"
)
REDIS_KINDS = [
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("cluster", marks=pytest.mark.redis),
]
POSTGRES_URL = os.environ.get("POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
POSTGRES_KINDS = [pytest.param("postgres", marks=pytest.mark.postgres)]
STORE_KINDS = ["memory", "sqlite", *REDIS_KINDS, *POSTGRES_KINDS]
DURABLE_KINDS = ["sqlite", *REDIS_KINDS, *POSTGRES_KINDS]
RUNTIME_KINDS = STORE_KINDS
"""The runtime's stores: every store (the chat state is on each of them too)."""
RUNTIME_DURABLE_KINDS = DURABLE_KINDS
_scratch: list[str] = []
"""This run's scratch database on the server at ``POSTGRES_URL``, once made."""


def postgres_database() -> str:
    """The URL of this run's scratch database (made at first use, dropped at exit).

    Fails the test, never skips it, when no server answers (``scripts/ensure-postgres``).
    """
    if _scratch:
        return _scratch[0]
    name = f"approval_bot_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        pytest.fail(
            f"no PostgreSQL answers at {POSTGRES_URL} ({exc}); start one with"
            " scripts/ensure-postgres. The PostgreSQL store tests never skip.",
            pytrace=False,
        )
    parts = urlsplit(POSTGRES_URL)
    _scratch.append(urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, "")))
    atexit.register(_drop_scratch, name)
    return _scratch[0]


def _drop_scratch(name: str) -> None:
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(POSTGRES_URL, autocommit=True) as admin,
    ):
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@asynccontextmanager
async def postgres_schema() -> AsyncIterator[str]:
    """The URL of a fresh schema of this run's scratch database, as a test's own
    database (``search_path``), dropped on exit."""
    database = postgres_database()
    name = f"t_{uuid.uuid4().hex[:12]}"
    schema = sql.Identifier(name)
    # A connection for each statement: none held open for a test to cut (``cut_postgres``).
    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
    try:
        yield f"{database}?options=-csearch_path%3D{name}"
    finally:
        async with await psycopg.AsyncConnection.connect(database, autocommit=True) as admin:
            await admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(schema))


async def cut_postgres(url: str) -> int:
    """Every other connection to the database at ``url`` terminated, as a restarting
    server or a network cut does (``pg_terminate_backend``); how many there were.

    Each run has a scratch database of its own, so these are its tests' connections.
    """
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
        cursor = await admin.execute(
            """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid()"""
        )
        return len(await cursor.fetchall())


@asynccontextmanager
async def redis_prefix(url: str = REDIS_URL) -> AsyncIterator[str]:
    """A fresh key prefix on the real Redis (or cluster) whose keys are deleted on exit."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    client = redis_client(split_prefix(url)[0])
    script = "scripts/ensure-redis-cluster" if "cluster" in url else "scripts/ensure-redis"
    try:
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            pytest.fail(
                f"no Redis answers at {url} ({exc}); start one with {script}."
                " The Redis store tests never skip.",
                pytrace=False,
            )
        yield prefix
        # A cluster client scans every primary; a key at a time, as keys differ in slot.
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
    finally:
        await client.aclose()


def with_prefix(url: str, prefix: str) -> str:
    """``url`` with ``?prefix=`` added."""
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}"


@asynccontextmanager
async def store_url(kind: str, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of an empty store of this kind, cleaned up on exit."""
    if kind == "memory":
        yield "memory://"
    elif kind == "sqlite":
        # A nested directory also proves the store creates missing parents.
        yield f"sqlite:///{tmp_path / 'state' / 'bot.db'}"
    elif kind == "postgres":
        async with postgres_schema() as url:
            yield url
    elif kind in ("redis", "cluster"):
        url = REDIS_URL if kind == "redis" else REDIS_CLUSTER_URL
        async with redis_prefix(url) as prefix:
            yield with_prefix(url, prefix)
    else:
        raise ValueError(kind)


@asynccontextmanager
async def opened(kind: str, tmp_path: Path) -> AsyncIterator[Store]:
    """An open, empty store of this kind that answers ``ping``."""
    async with store_url(kind, tmp_path) as url:
        store = open_store(url)
        try:
            if not await store.ping():
                pytest.fail(f"the {kind} store at {url} does not answer", pytrace=False)
            yield store
        finally:
            await store.close()


@pytest.fixture(params=RUNTIME_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each store in turn: memory, SQLite (a temporary file), Redis and Redis Cluster
    (a private prefix), PostgreSQL (a schema of its own)."""
    async with opened(request.param, tmp_path) as opened_store:
        yield opened_store


@pytest.fixture(params=RUNTIME_DURABLE_KINDS)
async def durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The stores whose state outlives the process: SQLite, Redis, Redis Cluster,
    PostgreSQL."""
    async with opened(request.param, tmp_path) as opened_store:
        yield opened_store
