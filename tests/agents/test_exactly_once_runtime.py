"""Exactly-once decisions through the runtime, across OS processes sharing a store."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from agents import open_store
from tests.stores.conftest import RUNTIME_DURABLE_KINDS, store_url

from .race_agent import build_race_agent

ATTEMPTS_PER_PROCESS = 25


@pytest.mark.parametrize("kind", RUNTIME_DURABLE_KINDS)
async def test_fifty_concurrent_approvals_from_two_processes_run_the_tool_once(
    kind: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.txt"
    effects.touch()
    async with store_url(kind, tmp_path) as url:
        store = open_store(url)
        paused = await build_race_agent(store, effects).generate("charge 42")
        assert paused.finish_reason == "suspended"

        workers = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.agents._race_worker",
                url,
                paused.run_id,
                str(effects),
                str(ATTEMPTS_PER_PROCESS),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for _ in range(2)
        ]
        outputs = [await asyncio.wait_for(w.communicate(), timeout=120) for w in workers]
        for worker, (_, err) in zip(workers, outputs, strict=True):
            assert worker.returncode == 0, err.decode()
        totals = {"won": 0, "already_decided": 0, "other": 0}
        for out, _ in outputs:
            for key, value in json.loads(out.decode().strip().splitlines()[-1]).items():
                totals[key] += value

        assert totals == {"won": 1, "already_decided": 49, "other": 0}
        assert effects.read_text() == "charged 42\n"
        final = await store.load_run(paused.run_id)
        assert final is not None
        assert final.status == "finished"
        audit = [e.event for e in await store.list_audit(run_id=paused.run_id)]
        assert audit == ["requested", "approved", "executed"]
        await store.close()
