"""The audit log as a person reads it: ``python -m bot audit``, and decisions read back.

Every entry the runtime and the core wrote (requests, votes, edits, decisions,
what came of them), oldest first, as an aligned table, CSV or JSON lines. A tool
the policy marks ``sensitive`` shows a hash of its arguments, never them.
``Record`` reads a call's fate back for the chat (a card redrawn, a late click).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal, TextIO

from agents import Agent, AuditEntry, Decision, RunNotFoundError

from . import texts
from .outcome import SETTLED, arg_changes, changes_text, shown_value
from .policy import ApprovalPolicy, parse_duration
from .types import ApprovalCard, CardStatus, Click, Person, Text, ThreadKey, naming
from .votes import VOTED

AuditFormat = Literal["table", "csv", "jsonl"]

COLUMNS = (
    "at",
    "event",
    "tool",
    "actor",
    "requester",
    "via",
    "args",
    "detail",
    "thread",
    "run",
    "call",
)
"""What each row says, in this order."""
TABLE_CELL = 60
"""Characters a table cell shows at most (CSV and JSON lines keep everything)."""


def audit_rows(
    entries: Iterable[AuditEntry],
    policy: ApprovalPolicy,
    *,
    since: datetime | None = None,
    compact: bool = False,
) -> list[dict[str, str]]:
    """Audit entries (from ``since`` on) as report rows (``compact``: arguments as short
    ``name=value`` pairs, for the table)."""
    return [row(e, policy, compact=compact) for e in entries if since is None or e.at >= since]


def row(entry: AuditEntry, policy: ApprovalPolicy, *, compact: bool = False) -> dict[str, str]:
    """One entry as text by column; a sensitive tool's arguments as their hash (and of
    an edit, only the names of the arguments it changed)."""
    sensitive = bool(entry.tool_name) and policy.rule(entry.tool_name).sensitive
    detail = [entry.reason or "", entry.result or "", entry.where or "", entry.digest or ""]
    if entry.previous_args is not None:
        changes = arg_changes(entry.previous_args, entry.args)
        changed = ", ".join(c.name for c in changes) if sensitive else changes_text(changes)
        detail.insert(0, texts.AUDIT_CHANGED.format(changes=changed))
    return {
        "at": entry.at.isoformat(timespec="seconds"),
        "event": str(entry.event),
        "tool": entry.tool_name,
        "actor": _named(entry.actor, entry.actor_name),
        "requester": _named(entry.requester, entry.requester_name),
        "via": entry.via or "",
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


def _named(ids: str | None, name: str | None) -> str:
    """Who, by name and id as the entry has them: ``Grace Hopper (U1)``."""
    if not ids:
        return ""
    return f"{name} ({ids})" if name and name != ids else ids


def _cell(value: str) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= TABLE_CELL else flat[: TABLE_CELL - 1] + "…"


Who = Callable[[ThreadKey, str], Person]
"""How a thread names a person by id (``People.who``)."""


class Record:
    """Decisions read back from the audit log: how a call's card ended once the call left
    its run, and who decided it, for a click that comes too late.

    Args:
        agent: The root agent, whose audit log it reads.
        who: How a thread names a person by id.
    """

    def __init__(self, agent: Agent, who: Who) -> None:
        self._agent = agent
        self._who = who

    async def card(self, click: Click) -> ApprovalCard | None:
        """A decided (or expired) call's card, from the audit log (it left the run)."""
        entries = await self.entries(click.run_id, click.tool_call_id)
        asked = next((e for e in reversed(entries) if e.event == "requested"), None)
        if asked is None or asked.kind != "approval":
            return None
        after = entries[entries.index(asked) + 1 :]
        ended = next((e for e in reversed(after) if _card_ending(e.event)), None)
        if ended is None:
            return None  # decided a moment ago, not on record yet: nothing to redraw
        status = _card_ending(ended.event)
        assert status is not None
        edited = next((e for e in after if e.event == "edited"), None)
        deciders = (ended.actor or "").split(",") if status != "expired" and ended.actor else []
        return ApprovalCard(
            run_id=click.run_id,
            tool_call_id=click.tool_call_id,
            tool_name=asked.tool_name,
            args=edited.args if edited is not None else asked.args,
            agent_path=(),
            requester=self._who(click.thread, asked.requester) if asked.requester else None,
            expires_at=ended.at,
            status=status,
            decided_by=tuple(self._who(click.thread, user) for user in deciders),
            reason=ended.reason,
            previous_args=edited.previous_args if edited is not None else None,
            edited_by=self._who(click.thread, edited.actor)
            if edited is not None and edited.actor
            else None,
        )

    async def why_not_pending(self, click: Click) -> Text:
        """Explain a click on a call that no longer waits, naming who decided when known."""
        try:
            snap = await self._agent.get_run(click.run_id)
        except RunNotFoundError:
            return (texts.CLICK_UNKNOWN,)
        if snap.thread_id != click.thread.id:
            return (texts.CLICK_OTHER_THREAD,)
        call = snap.find_pending(click.tool_call_id)
        if call is not None and call.decision is not None:
            return await self.already(click.thread, click.run_id, click.tool_call_id, call.decision)
        # Once its outcome is recorded a call leaves the snapshot; the audit log remembers.
        entries = await self.entries(click.run_id, click.tool_call_id)
        # Decisions that did not take effect: each "superseded" cancels the latest
        # earlier decision by the same person.
        lost: Counter[str | None] = Counter()
        for i in range(len(entries) - 1, -1, -1):
            entry = entries[i]
            if entry.event == "superseded":
                lost[entry.actor] += 1
            elif entry.event == "expired":
                return (texts.CLICK_EXPIRED,)
            elif entry.event == "interrupted":
                return (texts.CLICK_INTERRUPTED,)
            elif entry.event == "stopped":
                return (texts.CLICK_STOPPED,)
            elif _by_person(entry.event) and lost[entry.actor]:
                lost[entry.actor] -= 1
            elif _by_person(entry.event):
                return self._decided_by(click.thread, entry.event, entry.actor, entries[:i])
        return (texts.CLICK_UNKNOWN,)

    async def already(
        self, thread: ThreadKey, run_id: str, tool_call_id: str, decision: Decision
    ) -> Text:
        """ "Already approved by ..." for a click on a call decided just now."""
        entries = await self.entries(run_id, tool_call_id)
        return self._decided_by(thread, decision.event, decision.decided_by, entries)

    async def entries(self, run_id: str, tool_call_id: str) -> list[AuditEntry]:
        """What the audit log says of one call, oldest first."""
        entries = await self._agent.audit(run_id=run_id)
        return [e for e in entries if e.tool_call_id == tool_call_id]

    def _decided_by(
        self, thread: ThreadKey, event: str, decided_by: str | None, before: list[AuditEntry]
    ) -> Text:
        """Who decided (``event``: how), named: a quorum's voters are the votes logged
        since the call was (last) asked; anyone else decided alone."""
        if event == "expired":
            return (texts.CLICK_EXPIRED,)
        if decided_by is None:
            return (texts.CLICK_ALREADY_DECIDED_UNKNOWN,)
        voters: list[str] = []
        for entry in reversed(before):
            if entry.event == "requested":
                break
            if entry.event == VOTED and entry.actor and entry.actor not in voters:
                voters.insert(0, entry.actor)
        ids = voters if event == "approved" and voters else [decided_by]
        people = tuple(self._who(thread, user) for user in ids)
        settled = SETTLED.get(event)
        past = settled.past if settled is not None else texts.DECIDED
        return naming(texts.CLICK_ALREADY_DECIDED, people, action=past)


def _card_ending(event: str) -> CardStatus | None:
    """How a call's card reads once ``event`` settled it (``None``: it did not)."""
    settled = SETTLED.get(event)
    return settled.card if settled is not None else None


def _by_person(event: str) -> bool:
    """Whether ``event`` is a person's decision (named when someone clicks later)."""
    settled = SETTLED.get(event)
    return settled is not None and settled.by_person
