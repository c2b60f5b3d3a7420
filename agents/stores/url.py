"""Choose a store from a URL: ``memory://``, ``sqlite:///path.db``, ``redis://host:6379/0``."""

from __future__ import annotations

from urllib.parse import urlsplit

from .base import Store
from .memory import MemoryStore


def open_store(url: str) -> Store:
    """Build the store a URL names. Connections open lazily, on first use."""
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        return MemoryStore(url)
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(url)
    if scheme in ("redis", "rediss", "unix"):
        from .redis import RedisStore

        return RedisStore(url)
    raise ValueError(
        f"unsupported STORE_URL {url!r}: use memory://, sqlite:///path.db or redis://host:6379/0"
    )
