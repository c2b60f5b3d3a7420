"""``AUDIT_SINK``: every audit entry out to a file or a signed webhook, at least once, in
order, across failures, replicas and restarts (``bot.sink``), with real stores and a
real local receiver."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import socket
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from agents import open_store
from bot import ApprovalCard, ApprovalPolicy, ChatBot, ThreadKey
from bot.settings import SettingsError, load_settings
from bot.sink import AuditSink, SinkError
from tests.agents.helpers import Counter
from tests.bot.test_console import ROOT, console_demo

from .helpers import OTHER_THREAD, THREAD, RecordingMessenger, click, message, restart_agent

SECRET = "a-shared-secret"

FIELDS = {
    "seq",
    "chain",
    "time",
    "class_uid",
    "category_uid",
    "activity_id",
    "type_uid",
    "activity",
    "kind",
    "actor",
    "requester",
    "api",
    "resources",
    "status_detail",
    "result",
    "previous_args",
    "previous_args_hash",
    "src",
    "signature",
    "prev",
    "hash",
    "metadata",
}
"""Every line has each of these, and nothing else (README: "The audit sink")."""


# -- helpers ----------------------------------------------------------------------------


async def approve_a_restart(
    bot: ChatBot, messenger: RecordingMessenger, thread: ThreadKey = THREAD
) -> ApprovalCard:
    """U1 asks for a restart in ``thread``, U2 approves it, and it runs: real entries
    (requested, approved, executed) in the audit log."""
    await bot.on_message(message("restart the api", thread=thread))
    await bot.drain()
    card = messenger.views(ApprovalCard, thread)[-1]
    assert (await bot.on_click(click(card, thread=thread))).accepted
    await bot.drain()
    return card


def bot_on(
    url: str, sink: AuditSink | None, ran: Counter | None = None, **kw: Any
) -> tuple[ChatBot, RecordingMessenger]:
    """A bot on the store at ``url`` (its own connection, as a replica or a restart has)."""
    bot = ChatBot(restart_agent(ran or Counter(), open_store(url)), sink=sink, **kw)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    return bot, messenger


async def close(bot: ChatBot) -> None:
    await bot.aclose()
    await bot.store.close()


async def stored(bot: ChatBot) -> list[dict[str, Any]]:
    """Every chained entry as stored, by chain then seq, each with its chain."""
    out: list[dict[str, Any]] = []
    for found in await bot.agent.audit_chains():
        for line in found.lines:
            data = json.loads(line)
            if "hash" in data:
                out.append({**data, "chain": found.chain})
    return out


def keys(entries: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(entry["chain"], entry["seq"]) for entry in entries]


def in_order(lines: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Each line's ``(chain, seq)``, sorted, once each chain's lines are in ``seq`` order
    (chains may interleave)."""
    for chain in {line["chain"] for line in lines}:
        seqs = [line["seq"] for line in lines if line["chain"] == chain]
        assert seqs == sorted(seqs), f"chain {chain} out of order: {seqs}"
    return sorted(keys(lines))


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'bot.db'}"


async def until(done: Callable[[], bool], what: str) -> None:
    """Poll ``done`` with a deadline (background work is not awaited by the test)."""
    deadline = asyncio.get_running_loop().time() + 10
    while not done():
        assert asyncio.get_running_loop().time() < deadline, f"never: {what}"
        await asyncio.sleep(0.01)


class Receiver:
    """A SIEM's webhook: checks each batch's signature, answers ``answers`` first (then
    200), keeps the lines of each batch it took by ``(chain, seq)``; with ``hold`` set,
    a POST (taken already) waits for it before answering."""

    def __init__(self, answers: list[int] | None = None) -> None:
        self.url = ""
        self.answers = list(answers or [])
        self.posts: list[tuple[int, str, list[dict[str, Any]]]] = []
        """Each POST: what it was answered, its ``X-Approval-Sequence``, its lines."""
        self.taken: dict[tuple[int, int], list[dict[str, Any]]] = {}
        self.forged = 0
        self.hold: asyncio.Event | None = None
        self.arrived = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        mac = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(
            request.headers.get("X-Approval-Signature", ""), f"sha256={mac}"
        ):
            self.forged += 1
            return web.Response(status=401)
        assert request.headers["Content-Type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in body.decode().splitlines()]
        status = self.answers.pop(0) if self.answers else 200
        self.posts.append((status, request.headers["X-Approval-Sequence"], lines))
        if status == 200:
            for line in lines:
                self.taken.setdefault((line["chain"], line["seq"]), []).append(line)
        self.arrived.set()
        if self.hold is not None:
            await self.hold.wait()
        return web.Response(status=status)

    def sink(self, **kw: Any) -> AuditSink:
        return AuditSink(self.url, secret=SECRET, first=0.0, **kw)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    app = web.Application()
    app.router.add_post("/audit", found.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    found.url = f"http://127.0.0.1:{runner.addresses[0][1]}/audit"
    yield found
    if found.hold is not None:
        found.hold.set()
    await runner.cleanup()


# -- a file ----------------------------------------------------------------------------


async def test_a_file_gets_every_entry_once_in_order_and_a_restart_goes_on(
    durable_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "approvals.jsonl"
    bot, messenger = bot_on(durable_url, AuditSink(path.as_uri()))
    try:
        card = await approve_a_restart(bot, messenger)
        first = await stored(bot)
        assert await bot.export_audit() == len(first) >= 3
        assert await bot.export_audit() == 0
    finally:
        await close(bot)

    # A restart: a new process, its own sink, the same store and file.
    bot, messenger = bot_on(durable_url, AuditSink(path.as_uri()))
    try:
        assert await bot.export_audit() == 0  # nothing it took is sent again
        await approve_a_restart(bot, messenger, OTHER_THREAD)
        everything = await stored(bot)
        assert await bot.export_audit() == len(everything) - len(first)
    finally:
        await close(bot)

    lines = read_lines(path)
    assert in_order(lines) == keys(everything)  # each once
    by_key = {(entry["chain"], entry["seq"]): entry for entry in everything}
    for line in lines:
        entry = by_key[line["chain"], line["seq"]]
        assert set(line) == FIELDS
        assert (line["hash"], line["prev"], line["activity"]) == (
            entry["hash"],
            entry["prev"],
            entry["event"],
        )
        assert line["time"].endswith("Z")
        assert datetime.fromisoformat(line["time"]) == datetime.fromisoformat(entry["at"])
    run = {"type": "run", "uid": card.run_id}
    of_the_card = [line for line in lines if run in line["resources"]]
    requested, approved, executed = (
        next(line for line in of_the_card if line["activity"] == activity)
        for activity in ("requested", "approved", "executed")
    )
    assert (requested["class_uid"], requested["category_uid"], requested["type_uid"]) == (
        6003,
        6,
        600399,
    )
    assert requested["kind"] == "approval"
    assert requested["requester"] == {"uid": "U1", "name": None}
    assert approved["actor"] == {"user": {"uid": "U2", "name": None}}
    assert requested["api"] == {
        "operation": "restart_service",
        "request": {"args": {"service": "api"}, "args_hash": None},
    }
    assert requested["resources"] == [
        {"type": "run", "uid": card.run_id},
        {"type": "tool_call", "uid": card.tool_call_id},
        {"type": "thread", "uid": THREAD.id},
    ]
    assert requested["metadata"] == {"product": {"name": "approval-bot"}}
    assert executed["result"] == "restarted api"


async def test_a_sensitive_tools_arguments_leave_as_their_hash(tmp_path: Path) -> None:
    path = tmp_path / "approvals.jsonl"
    policy = ApprovalPolicy.from_toml("[tools.restart_service]\nsensitive = true\n")
    bot, messenger = bot_on(sqlite_url(tmp_path), AuditSink(path.as_uri()), policy=policy)
    try:
        await approve_a_restart(bot, messenger)
        await bot.export_audit()
    finally:
        await close(bot)
    lines = read_lines(path)
    assert {line["api"]["request"]["args"] is None for line in lines} == {True}
    assert {line["api"]["request"]["args_hash"][:7] for line in lines} == {"sha256:"}
    assert '"service":' not in path.read_text()


async def test_two_replicas_deliver_each_entry_once(durable_url: str, tmp_path: Path) -> None:
    path = tmp_path / "approvals.jsonl"
    one, messenger = bot_on(durable_url, AuditSink(path.as_uri()))
    other, _ = bot_on(durable_url, AuditSink(path.as_uri()))
    try:
        await approve_a_restart(one, messenger)
        entries = await stored(one)
        sent = await asyncio.gather(one.export_audit(), other.export_audit())
        assert sorted(sent) == [0, len(entries)]
    finally:
        await close(one)
        await close(other)
    assert in_order(read_lines(path)) == keys(entries)


async def test_a_checkpoint_made_on_closing_is_delivered_on_closing(tmp_path: Path) -> None:
    path = tmp_path / "approvals.jsonl"
    bot, messenger = bot_on(
        sqlite_url(tmp_path), AuditSink(path.as_uri()), seal=lambda text: f"signed({text})"
    )
    try:
        await approve_a_restart(bot, messenger)
        await bot.export_audit()
    finally:
        await close(bot)
    *_, head, checkpoint = read_lines(path)
    assert checkpoint["activity"] == "checkpoint"
    assert checkpoint["prev"] == head["hash"]
    statement = f"approval-bot audit checkpoint chain=0 seq={head['seq']} hash={head['hash']}"
    assert checkpoint["signature"] == f"signed({statement})"
    assert checkpoint["resources"] == []
    assert checkpoint["api"]["operation"] is None


def add_unchained(db: Path, count: int) -> None:
    """Entries as a version before the chain wrote them: no ``seq``, ``prev``, ``hash``."""
    entry = {"at": "2024-01-01T00:00:00Z", "event": "voted", "run_id": "old", "tool_call_id": "c"}
    with sqlite3.connect(db) as connection:
        connection.executemany(
            "INSERT INTO audit (seq, run_id, thread_id, entry) VALUES (?, 'old', NULL, ?)",
            [
                (n, json.dumps({**entry, "tool_name": "restart_service"}))
                for n in range(1, count + 1)
            ],
        )
    connection.close()


async def test_entries_from_before_the_chain_are_not_sent_and_do_not_hold_the_rest_up(
    tmp_path: Path,
) -> None:
    url = sqlite_url(tmp_path)
    store = open_store(url)
    assert await store.ping()  # the file and its tables
    await store.close()
    await asyncio.to_thread(add_unchained, tmp_path / "bot.db", 5)
    path = tmp_path / "approvals.jsonl"
    bot, messenger = bot_on(url, AuditSink(path.as_uri(), batch=2))  # batches of old ones
    try:
        await approve_a_restart(bot, messenger)
        entries = await stored(bot)
        assert entries[0]["seq"] == 6
        assert await bot.export_audit() == len(entries)
    finally:
        await close(bot)
    assert in_order(read_lines(path)) == keys(entries)


async def test_a_line_cut_short_by_a_crash_stays_on_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "approvals.jsonl"
    path.write_text('{"seq":1,"cut sh')
    bot, messenger = bot_on(sqlite_url(tmp_path), AuditSink(path.as_uri()))
    try:
        await approve_a_restart(bot, messenger)
        await bot.export_audit()
    finally:
        await close(bot)
    cut, *lines = path.read_text().splitlines()
    assert cut == '{"seq":1,"cut sh'
    assert [json.loads(line)["seq"] for line in lines][:3] == [1, 2, 3]


# -- a webhook -------------------------------------------------------------------------


async def test_a_webhook_gets_every_entry_signed_through_failures_copies_keeping_their_seq(
    receiver: Receiver, tmp_path: Path
) -> None:
    receiver.answers = [500, 500]
    sink = receiver.sink(interval=0.01)
    bot, messenger = bot_on(sqlite_url(tmp_path), sink)
    try:
        await approve_a_restart(bot, messenger)
        entries = await stored(bot)
        bot.start_sweeper(60.0)
        await until(lambda: sink.delivered == len(entries), "every entry delivered")
        assert len(receiver.taken) == len(entries)
        assert sink.failures == 0
        assert sink.last_error == "answered 500"
    finally:
        await close(bot)
    assert receiver.forged == 0
    assert sorted(receiver.taken) == keys(entries)
    assert [status for status, _, _ in receiver.posts][:3] == [500, 500, 200]
    # Each copy sent again is the same line, under the same seq.
    copies = [
        (line["chain"], line["seq"], line) for _, _, lines in receiver.posts for line in lines
    ]
    for chain, seq, line in copies:
        assert line == receiver.taken[chain, seq][0]
    assert all(len(taken) == 1 for taken in receiver.taken.values())
    for _, sequence, lines in receiver.posts:
        assert sequence == f"0:{lines[0]['seq']}-{lines[-1]['seq']}"


async def test_a_restart_between_delivery_and_cursor_sends_again_with_the_same_seq(
    receiver: Receiver, tmp_path: Path
) -> None:
    url = sqlite_url(tmp_path)
    bot, messenger = bot_on(url, None)
    sink = receiver.sink()
    receiver.hold = asyncio.Event()
    try:
        await approve_a_restart(bot, messenger)
        before = await stored(bot)
        # The receiver takes the batch; the process dies before it hears so.
        delivering = asyncio.create_task(sink.run_once(bot.agent, bot.chat, bot.policy))
        await asyncio.wait_for(receiver.arrived.wait(), 10)
        delivering.cancel()
        await asyncio.gather(delivering, return_exceptions=True)
        await sink.aclose()
    finally:
        await close(bot)
    receiver.hold.set()
    receiver.hold = None
    assert sorted(receiver.taken) == keys(before)

    bot, messenger = bot_on(url, receiver.sink())
    try:
        assert await bot.export_audit() == len(before)  # sent again: it was never sure
        await approve_a_restart(bot, messenger, OTHER_THREAD)
        everything = await stored(bot)
        assert await bot.export_audit() == len(everything) - len(before)
    finally:
        await close(bot)
    assert sorted(receiver.taken) == keys(everything)  # nothing lost
    for key, copies in receiver.taken.items():
        assert len(copies) == (2 if key in keys(before) else 1)
        assert all(copy == copies[0] for copy in copies)  # a copy is the same line


# -- failing targets never reach a chat turn -------------------------------------------


async def test_a_webhook_that_hangs_never_holds_a_chat_turn_up(
    receiver: Receiver, tmp_path: Path
) -> None:
    receiver.hold = asyncio.Event()
    receiver.answers = [503]
    ran = Counter()
    sink = receiver.sink(interval=0.01, timeout=60.0)
    bot, messenger = bot_on(sqlite_url(tmp_path), sink, ran)
    try:
        bot.start_sweeper(60.0)
        await bot.on_message(message("restart the api"))
        await bot.drain()
        await asyncio.wait_for(receiver.arrived.wait(), 10)  # a delivery hangs from now on
        (card,) = messenger.views(ApprovalCard)
        assert (await bot.on_click(click(card))).accepted
        await bot.drain()
        assert ran.count == 1
        assert "restarted api" in str(messenger.posts[-1][1])
        assert receiver.posts[0][0] == 503
        assert sink.failures == 0  # still waiting for its answer
        receiver.hold.set()
        entries = await stored(bot)
        await until(lambda: sink.delivered == len(entries), "every entry, on a retry")
        assert sink.last_error == "answered 503"
        assert sorted(receiver.taken) == keys(entries)
    finally:
        await close(bot)


async def test_a_webhook_that_hangs_at_shutdown_holds_it_up_no_longer_than_its_grace(
    receiver: Receiver, tmp_path: Path
) -> None:
    receiver.hold = asyncio.Event()
    sink = receiver.sink(interval=60.0, timeout=600.0)
    bot, _ = bot_on(sqlite_url(tmp_path), sink, seal=lambda text: f"signed({text})")
    try:
        await bot.on_message(message("restart the api"))
        await bot.drain()
        # The last delivery hangs: the process still ends, within its grace (and some).
        await asyncio.wait_for(bot.aclose(timeout=0.2), 30)
        assert receiver.posts, "the last delivery was attempted"
    finally:
        receiver.hold.set()
        await bot.store.close()


def closed_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port: int = free.getsockname()[1]
    return port


async def test_an_unreachable_webhook_is_reported_once_per_streak_and_the_turns_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = AuditSink(f"http://127.0.0.1:{closed_port()}/audit", secret=SECRET, first=0.0)
    ran = Counter()
    bot, messenger = bot_on(sqlite_url(tmp_path), sink, ran)
    try:
        with caplog.at_level(logging.WARNING, logger="bot.sink"):
            await approve_a_restart(bot, messenger)
            assert ran.count == 1
            for _ in range(3):
                assert await bot.export_audit() == 0
        assert sink.failures == 3
        assert sink.last_error is not None
        (warning,) = [r for r in caplog.records if r.name == "bot.sink"]
        assert warning.getMessage().startswith(f"the audit sink {sink.name} failed: ")
        assert "/audit" not in warning.getMessage()  # a path may hold a credential
    finally:
        await close(bot)


# -- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sink", "secret", "said"),
    [
        ("ftp://siem.example.com/in", None, "not file:///absolute/path"),
        ("http://example.com/in", SECRET, "http:// only on this host"),
        ("https://siem.example.com/in", None, "needs AUDIT_SINK_SECRET"),
        ("https://siem.example.com:99999/in", SECRET, "port is not a number"),
        ("file://var/log/approvals.jsonl", None, "absolute path"),
        ("file:approvals.jsonl", None, "absolute path"),
        ("file:///nowhere/at/all/approvals.jsonl", None, "/nowhere/at/all does not exist"),
        ("file:///tmp/approvals.jsonl", SECRET, "AUDIT_SINK_SECRET signs webhooks only"),
    ],
)
def test_a_bad_audit_sink_is_one_clear_line(sink: str, secret: str | None, said: str) -> None:
    with pytest.raises(SinkError, match=said):
        AuditSink(sink, secret=secret)
    with pytest.raises(SettingsError) as raised:
        load_settings(audit_sink=sink, audit_sink_secret=secret)
    (line,) = raised.value.lines
    assert "AUDIT_SINK" in line
    assert said in line


def test_a_secret_without_a_sink_is_refused_and_never_shown() -> None:
    with pytest.raises(SettingsError, match="AUDIT_SINK_SECRET is read only with AUDIT_SINK"):
        load_settings(audit_sink_secret=SECRET)
    settings = load_settings(audit_sink="https://siem.example.com/in", audit_sink_secret=SECRET)
    assert SECRET not in repr(settings)


async def test_python_m_bot_stops_at_start_on_a_bad_audit_sink(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "MICROSOFT_"))}
    env |= {
        "PYTHONPATH": str(ROOT),
        "STORE_URL": sqlite_url(tmp_path),
        "BOT_MODEL": "demo",
        "AUDIT_SINK": f"file://{tmp_path}/missing/approvals.jsonl",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "check",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert err.decode().splitlines() == [
        "approval-bot: invalid configuration: "
        f"AUDIT_SINK: the directory {tmp_path / 'missing'} does not exist"
    ]


async def test_python_m_bot_console_delivers_to_the_audit_sink(tmp_path: Path) -> None:
    path = tmp_path / "approvals.jsonl"
    await console_demo(tmp_path, "delete record abc-123", "d keep it", AUDIT_SINK=path.as_uri())
    lines = read_lines(path)
    assert [(line["seq"], line["activity"]) for line in lines] == [
        (1, "requested"),
        (2, "shown"),
        (3, "declined"),
    ]
    assert lines[2]["actor"]["user"]["uid"] == "grace"
    assert lines[2]["status_detail"] == "keep it"
