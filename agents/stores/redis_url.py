"""A Redis URL as the stores read it: the server, and the deployment's key prefix."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .redis_keys import DEFAULT_PREFIX

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
