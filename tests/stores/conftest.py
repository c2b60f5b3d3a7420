"""The ``store`` fixture: every test of the store contract runs on each store.

Redis is the real server at ``REDIS_URL`` and the real three-primary cluster at
``REDIS_CLUSTER_URL``; when one does not answer the fixture fails (run
``scripts/ensure-redis`` and ``scripts/ensure-redis-cluster``), it never skips.
Each Redis test gets its own key prefix and deletes its keys afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
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
STORE_KINDS = ["memory", "sqlite", *REDIS_KINDS]
DURABLE_KINDS = ["sqlite", *REDIS_KINDS]


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


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each store in turn: memory, SQLite (a temporary file), Redis and Redis Cluster
    (a private prefix)."""
    async with opened(request.param, tmp_path) as opened_store:
        yield opened_store


@pytest.fixture(params=DURABLE_KINDS)
async def durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The stores whose state outlives the process: SQLite, Redis, Redis Cluster."""
    async with opened(request.param, tmp_path) as opened_store:
        yield opened_store
