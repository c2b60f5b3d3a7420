"""The audit log's hash chain: what makes it evidence rather than a log.

Every entry a store writes carries its place in its chain (``seq``, from 1), the hash
of the entry before it (``prev``; the first entry's is ``GENESIS``) and its own
(``hash``: SHA-256 of the entry's canonical JSON without ``hash``). A store extends
the chain in the same atomic write as the save that makes the entry true, so the
chain is never ahead of or behind what happened.

A deployment has one chain, except on a Redis Cluster: one per shard group there (the
deployment's log is kept per group, and one script reaches one group), each entry
naming its chain (``chain``). ``walk`` checks one chain from end to end and reports
the first entry that was changed, removed or inserted.

What a process with the signing key attests is one line of text (``statement``):
``checkpoint`` entries in the chain sign the head just before them, and the anchor a
retention prune leaves signs the last entry it removed, so what remains still
verifies (``AuditAnchor``). The keys and signatures themselves are the caller's
(``Seal``): this module only hashes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .snapshot import AuditEntry

GENESIS = "0" * 64
"""The ``prev`` of a chain's first entry."""

CHECKPOINT = "checkpoint"
"""The event of an entry that signs the chain's head just before it."""

Seal = Callable[[str], str]
"""Signs a ``statement`` with the deployment's key: its signature, as text."""

Attests = Literal["checkpoint", "anchor"]


def statement(kind: Attests, chain: int, seq: int, digest: str) -> str:
    """What a signature attests: that entry ``seq`` of ``chain`` had hash ``digest``,
    as the chain's head when checkpointed, or as the last entry a prune removed."""
    return f"approval-bot audit {kind} chain={chain} seq={seq} hash={digest}"


class Link(BaseModel):
    """A chain's position: its last entry's ``seq`` and ``hash`` (0 and ``GENESIS``
    before the first)."""

    model_config = ConfigDict(frozen=True)

    seq: int = 0
    hash: str = GENESIS


class AuditAnchor(Link):
    """Where a retention prune left a chain: the last entry it removed, and how many in
    all, signed when the deployment has a key (``statement("anchor", ...)``)."""

    removed: int = 0
    signature: str | None = None


def canonical(data: dict[str, Any]) -> bytes:
    """The bytes an entry's hash covers: its JSON, keys sorted, no spaces, without ``hash``."""
    body = {key: value for key, value in data.items() if key != "hash"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(data: dict[str, Any]) -> str:
    """An entry's hash (SHA-256 hex of ``canonical``)."""
    return hashlib.sha256(canonical(data)).hexdigest()


def link(
    entries: Iterable[AuditEntry], head: Link, chain: int | None = None
) -> tuple[list[str], Link]:
    """``entries`` placed after ``head`` (numbered, linked, hashed): the JSON lines a
    store writes, and the chain's new head. ``chain``: its number, on a store with more
    than one (a Redis Cluster's groups)."""
    lines: list[str] = []
    for entry in entries:
        data = entry.model_dump(mode="json", exclude_none=True, exclude={"seq", "prev", "hash"})
        if chain is not None:
            data["chain"] = chain
        data["seq"] = head.seq + 1
        data["prev"] = head.hash
        head = Link(seq=head.seq + 1, hash=digest(data))
        data["hash"] = head.hash
        lines.append(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return lines, head


def head_of(line: str) -> Link:
    """The head a chain has after a stored ``line``. A line from before the chain (no
    hash) leaves its ``seq`` to be counted on from, after ``GENESIS``."""
    data = json.loads(line)
    if "hash" not in data:
        return Link(seq=int(data.get("seq", 0)), hash=GENESIS)
    return Link(seq=int(data["seq"]), hash=str(data["hash"]))


def checkpoint(head: Link, chain: int, seal: Seal) -> AuditEntry:
    """The entry that signs ``head`` as the head of ``chain`` (appended right after it)."""
    signed = seal(statement("checkpoint", chain, head.seq, head.hash))
    return AuditEntry(event=CHECKPOINT, run_id="", tool_call_id="", tool_name="", signature=signed)


def anchor(
    at: Link, before: AuditAnchor | None, removed: int, chain: int, seal: Seal | None
) -> AuditAnchor:
    """The anchor a prune leaves when the last entry it removes is ``at`` (``removed``
    entries, after those of the anchor ``before``), signed when there is a ``seal``."""
    signature = seal(statement("anchor", chain, at.seq, at.hash)) if seal else None
    total = removed + (before.removed if before is not None else 0)
    return AuditAnchor(seq=at.seq, hash=at.hash, removed=total, signature=signature)


def anchor_of(row: Sequence[Any]) -> AuditAnchor | None:
    """The anchor a store keeps as a row (seq, hash, removed, signature); ``None``
    while its hash is (never pruned)."""
    seq, digest, removed, signature = row
    if digest is None:
        return None
    return AuditAnchor(seq=seq, hash=digest, removed=removed, signature=signature)


@dataclass(frozen=True)
class AuditChain:
    """One chain as a store keeps it: its lines, oldest first, the anchor the last
    prune left (``None``: never pruned), and its head where the store keeps that apart
    from the lines (Redis: what each append compares; ``None`` elsewhere, or before
    the chain's first entry)."""

    chain: int
    lines: list[str]
    anchor: AuditAnchor | None = None
    head: Link | None = None


Fault = Literal["changed", "removed", "inserted"]


@dataclass(frozen=True)
class Finding:
    """The first place a chain does not hold: what happened to the entry at ``seq``
    (``changed``: its content no longer matches its hash, or the entry after it no
    longer links to it; ``removed``: entries from ``seq`` on are missing; ``inserted``:
    an entry that was never linked in)."""

    fault: Fault
    seq: int
    detail: str


@dataclass(frozen=True)
class Checkpoint:
    """A signed ``checkpoint`` entry: the statement it attests and its signature."""

    seq: int
    statement: str
    signature: str


@dataclass
class ChainReport:
    """What walking one chain found."""

    chain: int
    entries: int = 0
    """Entries checked (those of the chain, not the unchained ones before it)."""
    unchained: int = 0
    """Entries written before the chain existed (an upgrade), which nothing protects."""
    head: Link = field(default_factory=Link)
    first: int = 0
    """The ``seq`` of its first entry (0: none)."""
    anchor: AuditAnchor | None = None
    checkpoints: list[Checkpoint] = field(default_factory=list)
    finding: Finding | None = None

    @property
    def holds(self) -> bool:
        """Whether every entry is in place (signatures are checked by the caller)."""
        return self.finding is None


def walk(lines: Sequence[str], anchor: AuditAnchor | None = None, chain: int = 0) -> ChainReport:
    """Check a chain's lines as stored, oldest first, after the prune that left
    ``anchor`` (if any): each entry's hash, number and link to the one before."""
    report = ChainReport(chain=chain, anchor=anchor)
    expected: Link | None = anchor
    for n, line in enumerate(lines):
        at = expected.seq + 1 if expected is not None else 1
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested past any entry
            data = None
        if not isinstance(data, dict):
            report.finding = Finding("changed", at, f"line {n + 1} is not an entry")
            return report
        if "hash" not in data:
            if report.entries or (expected is not None and expected.hash != GENESIS):
                report.finding = Finding("inserted", at, f"line {n + 1} has no place in it")
                return report
            report.unchained += 1
            continue
        try:
            if expected is None or (expected.hash == GENESIS and report.unchained):
                finding = _start(data, report.unchained)
            else:
                finding = _check(data, expected)
        except (TypeError, ValueError, RecursionError):  # a field of the wrong kind
            finding = Finding("changed", at, f"line {n + 1} is not an entry")
        if finding is not None:
            report.finding = finding
            return report
        expected = Link(seq=data["seq"], hash=data["hash"])
        report.first = report.first or data["seq"]
        report.entries += 1
        if data.get("event") == CHECKPOINT:
            prev = Link(seq=data["seq"] - 1, hash=data["prev"])
            report.checkpoints.append(
                Checkpoint(
                    seq=data["seq"],
                    statement=statement("checkpoint", chain, prev.seq, prev.hash),
                    signature=str(data.get("signature", "")),
                )
            )
    report.head = expected or Link()
    return report


def _start(data: dict[str, Any], unchained: int) -> Finding | None:
    """Whether an entry can start a chain no prune shortened: the first (or, after
    entries from before the chain, one counted on from them), linked to ``GENESIS``."""
    seq = data.get("seq")
    if not isinstance(seq, int):
        return Finding("changed", 1, "its number is missing")
    if digest(data) != data["hash"]:
        return Finding("changed", seq, "its content does not match its hash")
    if data.get("prev") != GENESIS or (seq != 1 and not unchained):
        return Finding("removed", 1, f"the chain starts at entry {seq}, after no prune")
    return None


def _check(data: dict[str, Any], expected: Link) -> Finding | None:
    """Whether an entry is the one that follows ``expected``, unchanged."""
    seq = data.get("seq")
    if not isinstance(seq, int):
        return Finding("changed", expected.seq + 1, "its number is missing")
    if digest(data) != data["hash"]:
        return Finding("changed", seq, "its content does not match its hash")
    if seq > expected.seq + 1:
        last = f" to {seq - 1}" if seq - 1 > expected.seq + 1 else ""
        missing = f"entry {expected.seq + 1}{last}"
        return Finding("removed", expected.seq + 1, f"{missing} missing before entry {seq}")
    if seq <= expected.seq:
        return Finding("inserted", seq, f"a second entry {seq} after entry {expected.seq}")
    if data.get("prev") != expected.hash:
        if expected.seq == 0 or expected.hash == GENESIS:
            return Finding("inserted", seq, "it does not link to the start of the chain")
        return Finding("changed", expected.seq, f"entry {seq} no longer links to it")
    return None
