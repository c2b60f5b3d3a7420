"""The audit log as a person reads it: ``python -m bot audit``.

Every entry the runtime and the core wrote (requests, votes, edits, decisions,
what came of them), oldest first, as an aligned table, CSV or JSON lines. A tool
the policy marks ``sensitive`` shows a hash of its arguments, never them.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, TextIO

from agents import AuditEntry, Store

from .outcome import arg_changes, changes_text, shown_value
from .policy import ApprovalPolicy, parse_duration

AuditFormat = Literal["table", "csv", "jsonl"]

COLUMNS = ("at", "event", "tool", "actor", "requester", "args", "detail", "thread", "run", "call")
"""What each row says, in this order."""
CHANGED = "changed {changes}"
"""The detail of an ``edited`` entry: what the edit changed (``bot.outcome``)."""
TABLE_CELL = 60
"""Characters a table cell shows at most (CSV and JSON lines keep everything)."""


async def audit_rows(
    store: Store,
    policy: ApprovalPolicy,
    *,
    thread_id: str | None = None,
    since: datetime | None = None,
    compact: bool = False,
) -> list[dict[str, str]]:
    """The audit entries (of one thread, or all; from ``since`` on) as report rows
    (``compact``: arguments as short ``name=value`` pairs, for the table)."""
    entries = await store.list_audit(thread_id=thread_id)
    return [row(e, policy, compact=compact) for e in entries if since is None or e.at >= since]


def row(entry: AuditEntry, policy: ApprovalPolicy, *, compact: bool = False) -> dict[str, str]:
    """One entry as text by column; a sensitive tool's arguments as their hash (and of
    an edit, only the names of the arguments it changed)."""
    sensitive = policy.rule(entry.tool_name).sensitive
    detail = [entry.reason or "", entry.result or ""]
    if entry.previous_args is not None:
        changes = arg_changes(entry.previous_args, entry.args)
        changed = ", ".join(c.name for c in changes) if sensitive else changes_text(changes)
        detail.insert(0, CHANGED.format(changes=changed))
    return {
        "at": entry.at.isoformat(timespec="seconds"),
        "event": str(entry.event),
        "tool": entry.tool_name,
        "actor": entry.actor or "",
        "requester": entry.requester or "",
        "args": _args(entry.args, sensitive, compact=compact),
        "detail": "; ".join(d for d in detail if d),
        "thread": entry.thread_id or "",
        "run": entry.run_id,
        "call": entry.tool_call_id,
    }


def write(rows: Iterable[dict[str, str]], out: TextIO, fmt: AuditFormat) -> None:
    """Print ``rows`` as ``fmt``."""
    rows = list(rows)
    if fmt == "jsonl":
        for r in rows:
            out.write(json.dumps(r, ensure_ascii=False) + "\n")
    elif fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        out.write(table(rows))


def table(rows: list[dict[str, str]]) -> str:
    """Aligned columns, each cell on one line and cut to ``TABLE_CELL`` characters."""
    cells = [[_cell(r[c]) for c in COLUMNS] for r in rows]
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(COLUMNS)]
    lines = [COLUMNS, *cells]
    buffer = io.StringIO()
    for line in lines:
        buffer.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
        buffer.write("\n")
    return buffer.getvalue()


def since_of(text: str | None, now: datetime) -> datetime | None:
    """``--since 24h``: the moment that long before ``now`` (``None``: from the start).

    Raises:
        ValueError: ``text`` is not a duration.
    """
    return None if text is None else now - parse_duration(text)


def _args(args: dict[str, Any], sensitive: bool, *, compact: bool = False) -> str:
    text = json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
    if sensitive:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]
    if compact:
        return " ".join(f"{name}={shown_value(value)}" for name, value in args.items())
    return text


def _cell(value: str) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= TABLE_CELL else flat[: TABLE_CELL - 1] + "…"
