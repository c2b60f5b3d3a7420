"""Slack out of reach, as the core understands it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp

from bot import Undeliverable


@asynccontextmanager
async def reaching() -> AsyncIterator[None]:
    """Slack unreachable (no connection, no answer in time) -> ``Undeliverable``."""
    try:
        yield
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise Undeliverable(f"Slack could not be reached: {exc}") from None
