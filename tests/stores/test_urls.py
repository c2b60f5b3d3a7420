"""How store URLs name SQLite files and Redis key prefixes."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.crc import key_slot

from agents.stores import open_store, split_prefix
from agents.stores.redis import RedisStore
from agents.stores.redis_keys import SHARDS, shard_tags
from agents.stores.sqlite import SQLiteStore, database_path


def test_three_slashes_name_a_relative_sqlite_file() -> None:
    assert database_path("sqlite:///data/bot.db") == "data/bot.db"


def test_four_slashes_name_an_absolute_sqlite_file() -> None:
    assert database_path("sqlite:////var/lib/bot/bot.db") == "/var/lib/bot/bot.db"


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "postgres:///x.db"])
def test_an_sqlite_url_without_a_path_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="SQLite URL"):
        database_path(url)


async def test_sqlite_store_creates_missing_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "bot.db"
    store = open_store(f"sqlite:///{path}")
    try:
        assert isinstance(store, SQLiteStore)
        assert await store.ping()
    finally:
        await store.close()
    assert path.is_file()


def test_redis_prefix_comes_from_the_query_and_is_not_passed_on() -> None:
    assert split_prefix("redis://h:6379/0?prefix=bot-a&socket_timeout=2") == (
        "redis://h:6379/0?socket_timeout=2",
        "bot-a",
    )


def test_redis_prefix_defaults_to_ab() -> None:
    assert split_prefix("redis://h:6379/0") == ("redis://h:6379/0", "ab")


async def test_redis_run_keys_share_the_run_id_as_hash_tag() -> None:
    store = open_store("redis://127.0.0.1:6379/0?prefix=p")
    try:
        assert isinstance(store, RedisStore)
        assert store.keys.run("r1") == "p:run:{r1}"
        assert store.keys.audit_run("r1") == "p:audit:run:{r1}"
    finally:
        await store.close()


async def test_a_cluster_url_opens_the_redis_store_on_shard_groups() -> None:
    store = open_store("redis+cluster://127.0.0.1:7001,127.0.0.1:7002/?prefix=p")
    try:
        assert isinstance(store, RedisStore)
        assert store.keys.shards == SHARDS
        group = store.keys.shard("r1")
        tag = shard_tags(SHARDS)[group]
        assert store.keys.run("r1") == f"p:run:{{{tag}}}:r1"
        assert store.keys.expiring(group) == f"p:expiring:{{{tag}}}"
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("redis+cluster:///", "at least one node"),
        ("redis+cluster://h1:7001,h2/", "not host:port"),
        ("redis+cluster://h1:7001/0", "no database number"),
        ("redis+cluster://h1:7001/?socket_timeout=2", "nothing else"),
    ],
)
def test_a_cluster_url_that_says_too_little_or_too_much_is_refused(
    url: str, complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        open_store(url)


def test_shard_groups_spread_evenly_over_the_slots() -> None:
    slots = sorted(key_slot(tag.encode()) for tag in shard_tags(SHARDS))
    share = 16384 // SHARDS
    assert [slot // share for slot in slots] == list(range(SHARDS))
