"""The audit log, out to where security teams look (``AUDIT_SINK``).

Each entry of each audit chain becomes one JSON line (``export_line``: a stable shape
close to OCSF's API Activity) appended to a file (``file:///var/log/approvals.jsonl``,
flushed and fsynced) or POSTed to a webhook (``https://...``) as NDJSON, signed like
client callbacks: ``X-Approval-Signature: sha256=<hex HMAC-SHA256 of the body keyed by
AUDIT_SINK_SECRET>``, and ``X-Approval-Sequence: <chain>:<first>-<last>``.

A pass reads each chain on from its cursor (a chat-state record per target and chain,
``CURSOR``) in batches of ``BATCH``, delivers a batch, then moves the cursor past it.
So delivery is at least once: a process that dies between the two sends that batch
again, with the same ``seq``; receivers drop a ``(chain, seq)`` they have. One replica
delivers at a time (the lease ``LOCK``; the others skip the pass), for at most
``PASS_TIME`` seconds. A target that fails is tried again ``FIRST`` seconds later,
doubling up to ``MOST`` (jittered), logged once per streak; nothing of it ever reaches
a chat turn. Lines written before the chain existed have no ``seq`` and are not sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import aiohttp
from pydantic import ValidationError

from agents import Agent, AuditEntry, LockTimeout

from .audit import _args
from .callbacks import SIGNATURE, signature
from .chat_state import ChatState
from .policy import ApprovalPolicy

log = logging.getLogger(__name__)

CURSOR: Final = "audit-sink:"
"""Starts the key of a cursor record, ``audit-sink:<target>:<chain>`` -> ``{"seq": n}``:
the last entry of the chain the target took. Per target, so a new ``AUDIT_SINK`` gets
the whole log kept, and a restart goes on where the last pass stopped."""
LOCK: Final = ("audit-sink", "deliver")
"""The lease (a chat-state card lock) of the replica delivering now."""
BATCH: Final = 100
"""Entries per delivery (one POST, one append)."""
INTERVAL: Final = 2.0
"""Seconds between two passes of a replica: how late a healthy target sees an entry."""
FIRST: Final = 1.0
MOST: Final = 300.0
"""Seconds before trying a failing target again: ``FIRST``, doubling up to ``MOST``."""
TIMEOUT: Final = 10.0
"""Seconds a webhook has to answer one POST."""
PASS_TIME: Final = 15.0
"""Seconds a pass starts new batches for: with one POST's ``TIMEOUT`` after, it ends
within the lock's 30 s lease, so two replicas never deliver at once."""
FILE_MODE: Final = 0o640
"""A new file's permissions: the log may name what people asked for."""
SEQUENCE: Final = "X-Approval-Sequence"
PRODUCT: Final = "approval-bot"

CLASS_UID: Final = 6003
"""OCSF API Activity."""
CATEGORY_UID: Final = 6
"""OCSF Application Activity."""
ACTIVITY_ID: Final = 99
"""OCSF "Other": the approval event itself is ``activity``."""


class SinkError(ValueError):
    """``AUDIT_SINK`` (or its secret) does not name a place the log can go; one line."""


class Undelivered(Exception):
    """A target did not take a batch; the message says why."""


class FileTarget:
    """Lines appended to a file, each batch flushed and fsynced (in a thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = self.place = f"file://{path}"
        """The target, for logs; and where it is, for its cursors."""
        # A write cancelled mid-way goes on in its thread; the next waits for it.
        self._writing = threading.Lock()

    async def send(self, body: bytes, chain: int, first: int, last: int) -> None:
        """Append ``body`` (whole lines of ``chain``, ``first`` to ``last``)."""
        try:
            await asyncio.to_thread(self._append, body)
        except OSError as exc:
            raise Undelivered(exc.strerror or str(exc)) from exc

    async def reach(self) -> None:
        """Whether a batch could be appended, without writing one: the file (or, before
        the first batch, its directory) is writable by this process."""
        path = self.path
        writable = path if path.exists() else path.parent
        mode = os.W_OK if writable == path else os.W_OK | os.X_OK
        if not await asyncio.to_thread(os.access, writable, mode):
            raise Undelivered(f"{writable} is not writable by this process")

    def _append(self, body: bytes) -> None:
        with self._writing:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, FILE_MODE)
            try:
                size = os.fstat(fd).st_size
                # A line a crash cut short stays on a line of its own.
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    body = b"\n" + body
                written = memoryview(body)
                while written:
                    written = written[os.write(fd, written) :]
                os.fsync(fd)
            finally:
                os.close(fd)

    async def aclose(self) -> None:
        """Nothing to release: the file is opened for each batch."""


class WebhookTarget:
    """Batches POSTed as NDJSON, signed with the secret; a 2xx takes one."""

    def __init__(self, url: str, secret: str, *, timeout: float = TIMEOUT) -> None:
        self.url = url
        self._secret = secret
        self.timeout = timeout
        parts = urlsplit(url)
        self.name = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        """The target for logs: a path or query may hold a credential."""
        self.place = self.name + parts.path
        """Where it is, for its cursors (a new query keeps them)."""
        self._session: aiohttp.ClientSession | None = None

    async def send(self, body: bytes, chain: int, first: int, last: int) -> None:
        """POST ``body`` (the NDJSON of ``chain``'s entries ``first`` to ``last``)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        headers = {
            "Content-Type": "application/x-ndjson",
            SIGNATURE: signature(self._secret, body),
            SEQUENCE: f"{chain}:{first}-{last}",
        }
        try:
            async with self._session.post(
                self.url, data=body, headers=headers, allow_redirects=False
            ) as response:
                if not 200 <= response.status < 300:
                    raise Undelivered(f"answered {response.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Undelivered(str(exc) or type(exc).__name__) from exc

    async def reach(self) -> None:
        """Whether the webhook answers, without delivering anything: a ``HEAD`` of its
        URL, where any answer but a redirect (a delivery does not follow one), "no
        such place" (404) or a server error will do (a receiver that takes only
        ``POST`` says 405, or 501)."""
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as s,
                s.head(self.url, allow_redirects=False) as response,
            ):
                status = response.status
                if 300 <= status < 400 or status == 404 or (status >= 500 and status != 501):
                    raise Undelivered(f"answered {status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Undelivered(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        """Release the connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None


Target = FileTarget | WebhookTarget


def sink_target(url: str, secret: str | None = None) -> Target:
    """Where ``AUDIT_SINK`` sends the log: an absolute ``file://`` path in a directory
    that exists, an ``https://`` webhook, or an ``http://`` one on this host (tests, a
    local shipper); a webhook needs ``secret``, and a file takes none.

    Raises:
        SinkError: Anything else, in one line.
    """
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = Path(unquote(parts.path))
        if parts.netloc not in ("", "localhost") or not path.is_absolute():
            raise SinkError(
                "AUDIT_SINK: a file needs an absolute path (file:///var/log/approvals.jsonl)"
            )
        if parts.query or parts.fragment:
            raise SinkError("AUDIT_SINK: a file path without ?query or #fragment")
        if secret is not None:
            raise SinkError("AUDIT_SINK_SECRET signs webhooks only, not a file")
        _check_file(path)
        return FileTarget(path)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise SinkError(
            "AUDIT_SINK: not file:///absolute/path, https://host/... or http://localhost/..."
        )
    if not _port_ok(url):
        raise SinkError("AUDIT_SINK: its port is not a number from 1 to 65535")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise SinkError("AUDIT_SINK: http:// only on this host (127.0.0.1), else https://")
    if not secret:
        raise SinkError("AUDIT_SINK: a webhook needs AUDIT_SINK_SECRET (its HMAC key)")
    return WebhookTarget(url, secret)


def _check_file(path: Path) -> None:
    """Fail at start, not on the first pass: a directory is never created for it."""
    if not path.parent.is_dir():
        raise SinkError(f"AUDIT_SINK: the directory {path.parent} does not exist")
    if path.is_dir():
        raise SinkError(f"AUDIT_SINK: {path} is a directory")
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        raise SinkError(f"AUDIT_SINK: {path} cannot be written")


def _port_ok(url: str) -> bool:
    try:
        port = urlsplit(url).port  # read only when asked for, and checked then
    except ValueError:
        return False
    return port is None or port > 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def export_line(data: dict[str, Any], chain: int, policy: ApprovalPolicy) -> dict[str, Any]:
    """One stored entry (its JSON) as the line a sink gets: every key always there
    (``null`` where it does not apply); a ``sensitive`` tool's arguments as their hash.

    Raises:
        ValidationError: ``data`` is not an audit entry.
    """
    entry = AuditEntry.model_validate(data)
    sensitive = policy.rule(entry.tool_name).sensitive
    previous = entry.previous_args
    resources = [
        {"type": kind, "uid": uid}
        for kind, uid in (
            ("run", entry.run_id),
            ("tool_call", entry.tool_call_id),
            ("thread", entry.thread_id),
        )
        if uid
    ]
    return {
        "seq": entry.seq,
        "chain": entry.chain if entry.chain is not None else chain,
        "time": entry.at.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "class_uid": CLASS_UID,
        "category_uid": CATEGORY_UID,
        "activity_id": ACTIVITY_ID,
        "type_uid": CLASS_UID * 100 + ACTIVITY_ID,
        "activity": str(entry.event),
        "kind": entry.kind,
        "actor": {"user": {"uid": entry.actor, "name": data.get("actor_name")}},
        "requester": {"uid": entry.requester, "name": data.get("requester_name")},
        "api": {
            "operation": entry.tool_name or None,
            "request": {
                "args": None if sensitive else entry.args,
                "args_hash": _args(entry.args, True) if sensitive else None,
            },
        },
        "resources": resources,
        "status_detail": entry.reason,
        "result": entry.result,
        "previous_args": None if sensitive or previous is None else previous,
        "previous_args_hash": _args(previous, True) if sensitive and previous else None,
        "src": data.get("via"),
        "signature": entry.signature,
        "prev": entry.prev,
        "hash": entry.hash,
        "metadata": {"product": {"name": PRODUCT}},
    }


@dataclass(frozen=True)
class _Line:
    """A stored line as read: its ``seq`` (``None`` for one without), and its data when
    it is in the chain (has a hash)."""

    seq: int | None
    data: dict[str, Any] | None


def _read(line: str) -> _Line:
    try:
        data = json.loads(line)
    except ValueError:
        return _Line(None, None)
    if not isinstance(data, dict):
        return _Line(None, None)
    seq = data.get("seq")
    seq = seq if isinstance(seq, int) else None
    return _Line(seq, data if seq is not None and "hash" in data else None)


class AuditSink:
    """Delivers the audit log to ``AUDIT_SINK`` (see the module's docstring).

    Args:
        url: ``AUDIT_SINK``.
        secret: ``AUDIT_SINK_SECRET``, a webhook's HMAC key.
        batch: Entries per delivery.
        interval: Seconds between two passes (``ChatBot.start_sweeper``).
        first: Seconds before trying a failing target again (then doubling).
        most: The longest wait before trying again.
        timeout: Seconds a webhook has to answer.

    Raises:
        SinkError: ``url`` names no place the log can go (``sink_target``).
    """

    def __init__(
        self,
        url: str,
        *,
        secret: str | None = None,
        batch: int = BATCH,
        interval: float = INTERVAL,
        first: float = FIRST,
        most: float = MOST,
        timeout: float = TIMEOUT,
    ) -> None:
        target = sink_target(url, secret)
        if isinstance(target, WebhookTarget):
            target = WebhookTarget(target.url, secret or "", timeout=timeout)
        self.target: Target = target
        self.batch = batch
        self.interval = interval
        self.first = first
        self.most = most
        digest = hashlib.sha256(target.place.encode()).hexdigest()[:12]
        self._cursor_key = f"{CURSOR}{digest}:"
        self._chains: list[int] | None = None
        self._retry_at = 0.0
        self.failures = 0
        """Tries failed since the target last took a batch."""
        self.last_error: str | None = None
        """Why the last failed pass failed (kept once one succeeds again)."""
        self.delivered = 0
        """Entries this process delivered (copies sent again included)."""

    @property
    def name(self) -> str:
        """The target, for logs (a webhook's scheme, host and port)."""
        return self.target.name

    async def check(self) -> list[str]:
        """``check --live``: one line when the target could not take a batch now (a file
        that is not writable, a webhook that does not answer); nothing is delivered."""
        try:
            await self.target.reach()
        except Undelivered as exc:
            return [f"audit sink {self.name}: {exc}"]
        return []

    async def run_once(self, agent: Agent, chat: ChatState, policy: ApprovalPolicy) -> int:
        """One pass: what each chain has past its cursor, delivered in batches. Never
        raises; does nothing while a failing target waits to be tried again, or while
        another replica delivers.

        Returns:
            How many entries were delivered.
        """
        if time.monotonic() < self._retry_at:
            return 0
        before = self.delivered
        try:
            due = [c for c in await self._chains_of(agent) if await self._more(agent, chat, c)]
            if not due:
                return 0
            async with chat.card_lock(*LOCK, wait=0):
                deadline = time.monotonic() + PASS_TIME
                for chain in due:
                    await self._deliver(agent, chat, policy, chain, deadline)
        except LockTimeout:
            pass  # another replica is delivering
        except Undelivered as exc:
            self._failed(str(exc))
        except Exception as exc:  # the store's trouble: the sink must not add to it
            self._failed(f"the store: {exc or type(exc).__name__}")
        return self.delivered - before

    async def _chains_of(self, agent: Agent) -> list[int]:
        """The chains' numbers, read once: they are the store's, fixed while it runs."""
        if self._chains is None:
            self._chains = [found.chain for found in await agent.audit_chains()]
        return self._chains

    async def _cursor(self, chat: ChatState, chain: int) -> int:
        kept = await chat.record(f"{self._cursor_key}{chain}")
        return int(json.loads(kept)["seq"]) if kept is not None else 0

    async def _more(self, agent: Agent, chat: ChatState, chain: int) -> bool:
        """Whether ``chain`` has lines past its cursor (looked at without the lock: most
        passes find none, and take no lock for it)."""
        return bool(await agent.read_audit(chain, await self._cursor(chat, chain), limit=1))

    async def _deliver(
        self,
        agent: Agent,
        chat: ChatState,
        policy: ApprovalPolicy,
        chain: int,
        deadline: float,
    ) -> None:
        """Batches of ``chain`` from its cursor, each delivered before the cursor moves
        past it, until none is left or ``deadline``."""
        cursor = await self._cursor(chat, chain)
        while time.monotonic() < deadline:
            lines = [
                _read(line) for line in await agent.read_audit(chain, cursor, limit=self.batch)
            ]
            numbered = [line.seq for line in lines if line.seq is not None and line.seq > cursor]
            if numbered:
                out = self._export(lines, chain, policy, cursor)
                if out:
                    body = b"".join(text for _, text in out)
                    await self.target.send(body, chain, out[0][0], out[-1][0])
                    self._took(len(out))
                cursor = max(numbered)
            elif not lines or (start := await self._chain_start(agent, chain, cursor)) is None:
                break
            else:
                cursor = start  # past lines from before the chain: none has a seq to send
            await chat.put_record(f"{self._cursor_key}{chain}", json.dumps({"seq": cursor}))
            if len(lines) < self.batch:
                break

    def _export(
        self, lines: list[_Line], chain: int, policy: ApprovalPolicy, cursor: int
    ) -> list[tuple[int, bytes]]:
        """The chained lines past ``cursor`` as export lines, with their ``seq``."""
        out: list[tuple[int, bytes]] = []
        for line in lines:
            if line.data is None or line.seq is None or line.seq <= cursor:
                continue
            try:
                shown = export_line(line.data, chain, policy)
            except ValidationError:
                log.error("audit entry %d of chain %d is not an entry; not sent", line.seq, chain)
                continue
            text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"), default=str)
            out.append((line.seq, text.encode() + b"\n"))
        return out

    async def _chain_start(self, agent: Agent, chain: int, cursor: int) -> int | None:
        """The ``seq`` before the first numbered line of ``chain`` past ``cursor``, when a
        whole batch held only lines from before the chain (``None``: none is numbered
        yet). Reads the whole chain: once per deployment that kept such lines."""
        for found in await agent.audit_chains():
            if found.chain == chain:
                for line in found.lines:
                    seq = _read(line).seq
                    if seq is not None and seq > cursor:
                        return seq - 1
        return None

    def _took(self, entries: int) -> None:
        self.delivered += entries
        if self.failures:
            log.info("the audit sink %s takes entries again", self.name)
            self.failures = 0

    def _failed(self, why: str) -> None:
        """Try again later (jittered, so replicas do not retry in step); say so once."""
        wait = min(self.most, self.first * 2.0**self.failures) * random.uniform(0.5, 1.0)
        self._retry_at = time.monotonic() + wait
        self.last_error = why
        if not self.failures:
            log.warning("the audit sink %s failed: %s (trying again later)", self.name, why)
        self.failures += 1

    async def aclose(self) -> None:
        """Release the webhook's connections."""
        await self.target.aclose()
