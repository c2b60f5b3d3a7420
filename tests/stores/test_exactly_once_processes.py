"""Exactly one decision wins when two OS processes race 25 tasks each on one call."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agents.stores import Store, open_store

from ._snapshots import paused_run

PROCESSES = 2
TASKS_PER_PROCESS = 25
REPO_ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0


async def start_racer(*args: str) -> asyncio.subprocess.Process:
    """Start one racing process and wait until its store answers."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.stores._decide_race",
        *args,
        cwd=REPO_ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), DEADLINE)
    if line.strip() != b"ready":
        _, stderr = await process.communicate()
        raise AssertionError(f"racer did not start: {line!r}\n{stderr.decode()}")
    return process


async def finish_racer(process: asyncio.subprocess.Process) -> dict[str, Any]:
    """Say go, then read the racer's JSON report."""
    stdout, stderr = await asyncio.wait_for(process.communicate(b"go\n"), DEADLINE)
    assert process.returncode == 0, stderr.decode()
    report: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    return report


async def test_one_decision_wins_across_processes(durable_store: Store, tmp_path: Path) -> None:
    saved = await durable_store.save_run(paused_run())
    call_id = saved.pending[0].tool_call_id
    wins_file = tmp_path / "wins.log"
    args = (durable_store.url, saved.run_id, call_id, str(wins_file), str(TASKS_PER_PROCESS))

    racers = [await start_racer(*args) for _ in range(PROCESSES)]
    reports = await asyncio.gather(*(finish_racer(r) for r in racers))

    winners = [who for report in reports for who in report["won"]]
    assert len(winners) == 1, reports
    assert sum(report["lost"] for report in reports) == PROCESSES * TASKS_PER_PROCESS - 1
    assert sum(report["conflicts"] for report in reports) == 0
    assert wins_file.read_text().splitlines() == winners

    reopened = open_store(durable_store.url)
    try:
        final = await reopened.load_run(saved.run_id)
    finally:
        await reopened.close()
    assert final is not None
    assert final.revision == saved.revision + 1
    decision = final.pending[0].decision
    assert decision is not None
    assert decision.decided_by == winners[0]
    assert final.pending[0].state == "executing"
