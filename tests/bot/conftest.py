"""Fixtures of the core's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.stores.conftest import DURABLE_KINDS, store_url


@pytest.fixture(params=DURABLE_KINDS)
async def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """An empty durable store (SQLite, Redis, Redis Cluster), which replicas share."""
    async with store_url(request.param, tmp_path) as url:
        yield url
