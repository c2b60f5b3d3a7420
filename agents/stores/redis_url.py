"""A Redis URL as the stores read it: the server, and the deployment's key prefix."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .redis_keys import DEFAULT_PREFIX

if TYPE_CHECKING:
    from redis.asyncio import Redis

CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a TCP connection when the URL does not say: a dead server
fails a health check quickly instead of hanging it."""


def split_prefix(url: str) -> tuple[str, str]:
    """Split ``?prefix=...`` off a Redis URL: ``(url for redis-py, key prefix)``."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefix = next((v for name, v in query if name == "prefix"), DEFAULT_PREFIX)
    if not prefix:
        raise ValueError(f"empty key prefix in {url!r}")
    rest = urlencode([(name, v) for name, v in query if name != "prefix"])
    return urlunsplit(parts._replace(query=rest)), prefix


POOL_SIZE = 64
"""Connections one client opens at most. Beyond that a command waits for a free
one, so a burst of requests queues instead of failing with "too many connections"."""
POOL_WAIT = 20.0
"""Seconds a command waits for a free connection before it fails."""


def redis_client(server_url: str, *, pool_size: int = POOL_SIZE) -> Redis:
    """A client on a bounded, blocking connection pool (it connects on first use)."""
    from redis.asyncio import BlockingConnectionPool
    from redis.asyncio import Redis as Client

    pool = BlockingConnectionPool.from_url(
        server_url,
        max_connections=pool_size,
        timeout=POOL_WAIT,
        decode_responses=True,
        socket_connect_timeout=CONNECT_TIMEOUT,
    )
    return Client.from_pool(pool)  # the client owns the pool: closing one closes both
