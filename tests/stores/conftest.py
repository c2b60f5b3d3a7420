"""The ``store`` fixture: every test of the store contract runs on each store.

Redis is the real server at ``REDIS_URL``; when it does not answer the fixture
fails (run ``scripts/ensure-redis``), it never skips. Each Redis test gets its own
key prefix and deletes its keys afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from agents.stores import Store, open_store

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
STORE_KINDS = ["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)]
DURABLE_KINDS = ["sqlite", pytest.param("redis", marks=pytest.mark.redis)]


@asynccontextmanager
async def redis_prefix() -> AsyncIterator[str]:
    """A fresh key prefix on the real Redis whose keys are deleted on exit."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    client = Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            pytest.fail(
                f"no Redis answers at {REDIS_URL} ({exc}); start one with scripts/ensure-redis."
                " The Redis store tests never skip.",
                pytrace=False,
            )
        yield prefix
        stale = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if stale:
            await client.delete(*stale)
    finally:
        await client.aclose()


@asynccontextmanager
async def store_url(kind: str, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of an empty store of this kind, cleaned up on exit."""
    if kind == "memory":
        yield "memory://"
    elif kind == "sqlite":
        # A nested directory also proves the store creates missing parents.
        yield f"sqlite:///{tmp_path / 'state' / 'bot.db'}"
    elif kind == "redis":
        async with redis_prefix() as prefix:
            separator = "&" if "?" in REDIS_URL else "?"
            yield f"{REDIS_URL}{separator}prefix={prefix}"
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


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each store in turn: memory, SQLite (a temporary file), Redis (a private prefix)."""
    async with opened(request.param, tmp_path) as opened_store:
        yield opened_store


@pytest.fixture(params=DURABLE_KINDS)
async def durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The stores whose state outlives the process: SQLite and Redis."""
    async with opened(request.param, tmp_path) as opened_store:
        yield opened_store
