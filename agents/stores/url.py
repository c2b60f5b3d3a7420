"""Open a store from its URL; the one place that knows the URL schemes."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from .base import Store
from .memory import MemoryStore

StoreKind = Literal["memory", "sqlite", "redis", "postgres"]

_KINDS: dict[str, StoreKind] = {
    "memory": "memory",
    "sqlite": "sqlite",
    "redis": "redis",
    "rediss": "redis",
    "redis+cluster": "redis",
    "rediss+cluster": "redis",
    "unix": "redis",
    "postgresql": "postgres",
    "postgres": "postgres",
}


def store_kind(url: str) -> StoreKind:
    """Which backend a store URL names (others keeping state beside a store use it too).

    Raises:
        ValueError: An unsupported scheme.
    """
    kind = _KINDS.get(urlsplit(url).scheme)
    if kind is None:
        raise ValueError(
            f"{url!r}: use memory://, sqlite:///path.db, redis://host:6379/0,"
            " redis+cluster://host:port[,host:port...]/ or postgresql://user@host:5432/db"
        )
    return kind


def open_store(url: str) -> Store:
    """Build the store a URL names. Connections open lazily, on first use."""
    kind = store_kind(url)
    if kind == "memory":
        return MemoryStore(url)
    if kind == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(url)
    if kind == "postgres":
        from .postgres import PostgresStore

        return PostgresStore(url)
    from .redis import RedisStore

    return RedisStore(url)
