"""Replicas opening one fresh SQLite file at the same moment: every one opens.

Switching a new file to WAL takes a lock that SQLite may refuse at once, without
waiting out ``busy_timeout``, when another connection is switching it too; a replica
starting beside another must not fail its first store call for that.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agents.stores.sqlite import SQLiteStore


async def test_replicas_opening_one_new_file_at_once_all_open(tmp_path: Path) -> None:
    for round_ in range(15):
        path = tmp_path / f"bot-{round_}.db"
        stores = [SQLiteStore(f"sqlite:///{path}") for _ in range(6)]
        try:
            assert await asyncio.gather(*(store.ping() for store in stores)) == [True] * 6
        finally:
            for store in stores:
                await store.close()
