"""One OS process of the cross-process approval race (run by test_exactly_once_runtime).

Usage: python -m tests.agents._race_worker STORE_URL RUN_ID SIDE_EFFECT_FILE ATTEMPTS
Prints one JSON line: how many approvals won and how many were refused as already decided.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from agents import AlreadyDecidedError, open_store

from .race_agent import build_race_agent


async def main(url: str, run_id: str, effect_file: str, attempts: int) -> None:
    store = open_store(url)
    agent = build_race_agent(store, Path(effect_file))
    outcome = {"won": 0, "already_decided": 0, "other": 0}

    async def approve(n: int) -> None:
        try:
            stream = await agent.approve_tool_call(
                run_id=run_id, tool_call_id="charge-1", decided_by=f"worker-{n}"
            )
        except AlreadyDecidedError:
            outcome["already_decided"] += 1
            return
        except Exception as exc:
            outcome["other"] += 1
            print(repr(exc), file=sys.stderr)
            return
        await stream.result()
        outcome["won"] += 1

    await asyncio.gather(*(approve(n) for n in range(attempts)))
    await store.close()
    print(json.dumps(outcome))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
