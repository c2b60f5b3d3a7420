"""What the audit log's hash chain costs per approval cycle, per store, as ratios.

Run with ``python -m bench.evidence_bench``. The cycle is the approval cycle bench's
(a scripted model asks for a gated tool, the run pauses, a person approves, the tool
runs and the model answers: three audit entries). Each store runs it as shipped, and
again with the chain taken out the way the store wrote entries before it: plain JSON
lines, no hash, no head read (SQLite numbers rows in its INSERT; Redis's script
still compares an empty head, a few microseconds inside the server, no round trip).
The two alternate in rounds in one process, so a noisy machine weighs on both alike;
what is printed is the ratio of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from statistics import median
from typing import Any

import aiosqlite

from agents.chain import Link
from agents.snapshot import AuditEntry
from agents.stores import _redis_save, memory, sqlite

from .approval_cycle_bench import KINDS, measure

_OLD_INSERT = """INSERT INTO audit (seq, run_id, thread_id, entry) VALUES (
    max(coalesce((SELECT max(seq) FROM audit), 0), (SELECT seq FROM audit_horizon)) + 1,
    ?, ?, ?)"""


def _plain(entries: Sequence[AuditEntry]) -> list[str]:
    return [json.dumps(e.model_dump(mode="json", exclude_none=True)) for e in entries]


async def _sqlite_unchained(
    db: aiosqlite.Connection, entries: Sequence[AuditEntry], head: Link | None = None
) -> None:
    rows = [(e.run_id, e.thread_id, line) for e, line in zip(entries, _plain(entries), strict=True)]
    await db.executemany(_OLD_INSERT, rows)


def _memory_unchained(self: memory.MemoryStore, entries: Sequence[AuditEntry]) -> None:
    self._lines += _plain(entries)
    self._audit += list(entries)


def _redis_unchained(
    cls: type[_redis_save.Chained], entries: Sequence[AuditEntry], head: str, chain: int | None
) -> _redis_save.Chained:
    return cls("", "", _plain(entries))


@contextmanager
def unchained() -> Iterator[None]:
    """Every store writes its audit entries as before the chain, until the block ends."""
    saved: list[tuple[Any, str, Any]] = [
        (sqlite, "_append_audit", sqlite._append_audit),
        (memory.MemoryStore, "_append_audit", memory.MemoryStore._append_audit),
        (_redis_save.Chained, "of", _redis_save.Chained.__dict__["of"]),
    ]
    sqlite._append_audit = _sqlite_unchained
    memory.MemoryStore._append_audit = _memory_unchained  # type: ignore[method-assign]
    _redis_save.Chained.of = classmethod(_redis_unchained)  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evidence_bench")
    parser.add_argument("--iterations", type=int, default=100, help="cycles per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    print(
        f"Approval cycle p50 with the audit chain / without it, {args.rounds} rounds"
        f" of {args.iterations} cycles, alternating"
    )
    for kind in KINDS:
        chained: list[float] = []
        plain: list[float] = []
        for _ in range(args.rounds):
            chained.append(float((await measure(kind, args.iterations))[1]))
            with unchained():
                plain.append(float((await measure(kind, args.iterations))[1]))
        with_chain, without = median(chained), median(plain)
        print(
            f"  {kind:<8} {with_chain / without:5.2f}x"
            f"  ({with_chain:.2f} ms with, {without:.2f} ms without)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
