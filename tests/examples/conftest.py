"""Fixtures for the example agents: a fresh ops database per test, the demo model."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agents import Agent, MemoryStore
from agents.models.demo import DemoModel
from bot.config import load_config
from examples.ops import build_agent

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "bot.toml"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where this test's ops database lives (created by ``build_agent``)."""
    return tmp_path / "data" / "ops.db"


@pytest.fixture
def store() -> MemoryStore:
    """The store of this test's runs."""
    return MemoryStore()


@pytest.fixture
def ops(db_path: Path, store: MemoryStore) -> Agent:
    """The ops supervisor driven by the demo model."""
    return build_agent(DemoModel(), store, db_path=db_path)


@pytest.fixture
async def ops_from_config(
    db_path: Path, store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Agent]:
    """The same tree from ``examples/bot.toml``, with its MCP ticket desk (a real server)."""
    monkeypatch.setenv("OPS_DB_PATH", str(db_path))
    monkeypatch.setenv("TICKETS_DB", str(tmp_path / "tickets.json"))
    loaded = await load_config(EXAMPLE_CONFIG, DemoModel(), store)
    try:
        yield loaded.agent
    finally:
        await loaded.aclose()


def rows(db_path: Path, sql: str, *params: Any) -> list[dict[str, Any]]:
    """Query the ops database directly, as a person checking the agents' work would."""
    with closing(sqlite3.connect(db_path)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(sql, params)]


def deployed(db_path: Path) -> list[tuple[str, str, str]]:
    """``(service, environment, version)`` of every deployment the agents made."""
    found = rows(db_path, "SELECT * FROM deployments WHERE tool_call_id IS NOT NULL")
    return [(d["service"], d["environment"], d["version"]) for d in found]
