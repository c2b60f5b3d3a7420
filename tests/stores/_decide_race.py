"""One process of the exactly-once race: many tasks try to decide the same call.

Run as ``python -m tests.stores._decide_race URL RUN_ID TOOL_CALL_ID WINS_FILE TASKS``.
It opens the store, prints ``ready``, waits for a line on stdin so every process
starts together, then each task takes the run's lock, loads the snapshot and
decides the call only if nobody has. A winner appends its name to ``WINS_FILE``.
The last stdout line is a JSON report: ``{"won": [...], "lost": n, "conflicts": n}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from agents.snapshot import Decision
from agents.stores import Store, StoreConflict, open_store


def record_win(path: str, who: str) -> None:
    """Append one line; O_APPEND keeps lines of concurrent processes whole."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{who}\n".encode())
    finally:
        os.close(fd)


async def decide(store: Store, run_id: str, tool_call_id: str, who: str, wins_file: str) -> str:
    """Try once to approve the call as ``who``: ``won``, ``lost`` or ``conflict``."""
    async with store.lock(f"run:{run_id}"):
        snapshot = await store.load_run(run_id)
        assert snapshot is not None, f"run {run_id} is missing"
        call = snapshot.find_pending(tool_call_id)
        assert call is not None, f"call {tool_call_id} is missing"
        if call.decision is not None:
            return "lost"
        # Stands in for the checks the runtime makes before deciding; it widens the
        # window in which a lock that failed to exclude would let two tasks in.
        await asyncio.sleep(0.001)
        claimed = call.model_copy(
            update={"decision": Decision(action="approve", decided_by=who), "state": "executing"}
        )
        pending = [claimed if p.tool_call_id == tool_call_id else p for p in snapshot.pending]
        try:
            await store.save_run(snapshot.model_copy(update={"pending": pending}))
        except StoreConflict:
            # Under the lock this means the lock failed to exclude someone.
            return "conflict"
        await asyncio.to_thread(record_win, wins_file, who)
        return "won"


async def main(url: str, run_id: str, tool_call_id: str, wins_file: str, tasks: int) -> None:
    """Race ``tasks`` deciders in this process once stdin says go."""
    store = open_store(url)
    try:
        # One ping per task opens the connections before the start, so the race is
        # decided by the store's primitives rather than by connection setup.
        if not all(await asyncio.gather(*(store.ping() for _ in range(tasks)))):
            raise SystemExit(f"store {url} does not answer")
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        names = [f"pid{os.getpid()}-task{i}" for i in range(tasks)]
        outcomes = await asyncio.gather(
            *(decide(store, run_id, tool_call_id, who, wins_file) for who in names)
        )
    finally:
        await store.close()
    report = {
        "won": [who for who, outcome in zip(names, outcomes, strict=True) if outcome == "won"],
        "lost": outcomes.count("lost"),
        "conflicts": outcomes.count("conflict"),
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    url, run_id, tool_call_id, wins_file, tasks = sys.argv[1:]
    asyncio.run(main(url, run_id, tool_call_id, wins_file, int(tasks)))
