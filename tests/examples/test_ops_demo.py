"""The demo requests end to end: ops supervisor, demo model, a real SQLite file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents import (
    Agent,
    ErrorChunk,
    MemoryStore,
    ResumeDataInvalidError,
    ToolCallApprovalChunk,
    ToolCallSuspendedChunk,
    ToolErrorChunk,
    ToolResultChunk,
)
from agents.models.demo import DEMO_HELP, DEMO_REQUESTS, DemoModel
from examples.ops import build_agent

from .conftest import rows


def record_ids(db_path: Path) -> set[str]:
    return {r["id"] for r in rows(db_path, "SELECT id FROM records")}


@dataclass(frozen=True, kw_only=True)
class Documented:
    """What a request listed in the demo help must do through the ops supervisor."""

    finish_reason: str
    tool: str | None
    """The example tool that runs (``stop``) or waits (``suspended``)."""
    waits_for: str | None = None
    """``approval`` or ``suspension`` when the run pauses."""
    text: str = ""


DOCUMENTED = {
    "find user 12345": Documented(finish_reason="stop", tool="find_user", text="Ada Lovelace"),
    "delete record abc-123": Documented(
        finish_reason="suspended", tool="delete_record", waits_for="approval"
    ),
    "deploy api 1.4.2 to staging": Documented(
        finish_reason="stop", tool="deploy_service", text="Deployed api to staging"
    ),
    "deploy web to staging": Documented(
        finish_reason="suspended", tool="deploy_service", waits_for="suspension"
    ),
    "refund order A-1001 50": Documented(
        finish_reason="stop", tool="refund", text="Refunded order A-1001"
    ),
    "status of web": Documented(
        finish_reason="stop", tool="service_status", text="Status of web: staging: "
    ),
    "help": Documented(finish_reason="stop", tool=None, text=DEMO_HELP),
    "show ticket T-100": Documented(
        finish_reason="stop", tool="tickets__show_ticket", text="Printer on floor 3"
    ),
    "close ticket T-101": Documented(
        finish_reason="suspended", tool="tickets__close_ticket", waits_for="approval"
    ),
    "reopen ticket T-102": Documented(
        finish_reason="suspended", tool="tickets__reopen_ticket", waits_for="approval"
    ),
}
MCP_REQUESTS = [
    (e, m) for e, m in DEMO_REQUESTS if (DOCUMENTED[e].tool or "").startswith("tickets")
]
"""The requests for the MCP ticket desk, which only ``examples/bot.toml`` has."""


def test_every_documented_request_has_an_end_to_end_check() -> None:
    assert set(DOCUMENTED) == {example for example, _ in DEMO_REQUESTS}


@pytest.mark.parametrize(
    ("example", "meaning"), [r for r in DEMO_REQUESTS if r not in MCP_REQUESTS]
)
async def test_each_documented_request_works_through_the_ops_agents(
    ops: Agent, example: str, meaning: str
) -> None:
    await works_as_documented(ops, example, meaning)


@pytest.mark.parametrize(("example", "meaning"), DEMO_REQUESTS)
async def test_each_documented_request_works_through_the_example_config(
    ops_from_config: Agent, example: str, meaning: str
) -> None:
    await works_as_documented(ops_from_config, example, meaning)


async def works_as_documented(ops: Agent, example: str, meaning: str) -> None:
    expected = DOCUMENTED[example]
    stream = await ops.stream(example, thread_id="t")
    chunks = [c async for c in stream]
    result = await stream.result()

    assert not [c for c in chunks if isinstance(c, ErrorChunk | ToolErrorChunk)]
    assert result.finish_reason == expected.finish_reason
    assert expected.text in result.text
    ran = [c.tool_name for c in chunks if isinstance(c, ToolResultChunk) and len(c.agent_path) > 1]
    if expected.waits_for is None:
        assert ran == ([expected.tool] if expected.tool else [])
        assert ("approval" in meaning) == (expected.tool in ("deploy_service", "refund"))
    else:
        assert ran == []
        assert result.suspend_payload is not None
        assert result.suspend_payload.kind == expected.waits_for
        assert result.suspend_payload.tool_name == expected.tool
        assert result.suspend_payload.agent_path[0] == "ops"
        noted = "asks for approval" if expected.waits_for == "approval" else "which version"
        assert noted in meaning


async def test_find_user_answers_from_the_database(ops: Agent, db_path: Path) -> None:
    result = await ops.generate("find user 12345")
    assert result.finish_reason == "stop"
    assert "Ada Lovelace" in result.text
    assert "abc-123" in result.text

    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("UPDATE users SET name = 'Ada King' WHERE id = '12345'")
    again = await ops.generate("find user 12345")
    assert "Ada King" in again.text
    assert "Ada Lovelace" not in again.text


async def test_find_an_unknown_user_says_so(ops: Agent) -> None:
    result = await ops.generate("Find user with ID 999")
    assert "No user with id '999'" in result.text


async def test_delete_waits_for_approval_then_deletes_the_row(ops: Agent, db_path: Path) -> None:
    stream = await ops.stream("delete record abc-123", thread_id="t")
    approvals = [c async for c in stream if isinstance(c, ToolCallApprovalChunk)]
    assert [(a.payload.tool_name, a.payload.args) for a in approvals] == [
        ("delete_record", {"record_id": "abc-123"})
    ]
    assert approvals[0].payload.agent_path == ("ops", "records")
    assert "abc-123" in record_ids(db_path)

    final = await ops.approve_tool_call_generate(run_id=stream.run_id)
    assert "abc-123" not in record_ids(db_path)
    assert "Deleted record abc-123" in final.text
    assert "Cannot log in" in final.text  # what was deleted, read back from the row


async def test_declined_delete_keeps_the_row_and_says_not_approved(
    ops: Agent, db_path: Path
) -> None:
    first = await ops.generate("delete record abc-123", thread_id="t")
    final = await ops.decline_tool_call_generate(run_id=first.run_id, reason="still needed")
    assert "abc-123" in record_ids(db_path)
    assert "not approved" in final.text
    assert "still needed" in final.text


async def test_deploy_to_staging_with_a_version_runs_straight_through(
    ops: Agent, db_path: Path
) -> None:
    result = await ops.generate("deploy api 1.4.2 to staging")
    assert result.finish_reason == "stop"
    deployed = rows(db_path, "SELECT * FROM deployments WHERE tool_call_id IS NOT NULL")
    assert [(d["service"], d["environment"], d["version"]) for d in deployed] == [
        ("api", "staging", "1.4.2")
    ]
    assert "Deployed api to staging" in result.text
    assert "previous version: 1.4.1" in result.text


async def test_deploy_to_production_asks_for_approval(ops: Agent, db_path: Path) -> None:
    stream = await ops.stream("deploy api 1.4.2 to production")
    approvals = [c async for c in stream if isinstance(c, ToolCallApprovalChunk)]
    assert approvals[0].payload.tool_name == "deploy_service"
    assert approvals[0].payload.args["environment"] == "production"
    assert rows(db_path, "SELECT * FROM deployments WHERE version = '1.4.2'") == []

    await ops.approve_tool_call_generate(run_id=stream.run_id)
    deployed = rows(db_path, "SELECT * FROM deployments WHERE version = '1.4.2'")
    assert [d["environment"] for d in deployed] == ["production"]


async def test_production_without_a_version_asks_first_then_approval_shows_it(
    ops: Agent, db_path: Path
) -> None:
    first = await ops.generate("deploy api to production", thread_id="t")
    assert first.suspend_payload is not None
    assert first.suspend_payload.kind == "suspension"

    answered = await ops.generate("1.5.0", thread_id="t")
    assert answered.run_id == first.run_id
    assert answered.suspend_payload is not None
    assert answered.suspend_payload.kind == "approval"
    assert answered.suspend_payload.args["version"] == "1.5.0"
    assert rows(db_path, "SELECT * FROM deployments WHERE version = '1.5.0'") == []

    await ops.approve_tool_call_generate(run_id=first.run_id)
    deployed = rows(db_path, "SELECT * FROM deployments WHERE version = '1.5.0'")
    assert [(d["service"], d["environment"]) for d in deployed] == [("api", "production")]


async def test_deploy_without_a_version_asks_and_the_reply_resumes(
    ops: Agent, db_path: Path
) -> None:
    stream = await ops.stream("deploy web to staging", thread_id="t")
    asked = [c async for c in stream if isinstance(c, ToolCallSuspendedChunk)]
    assert asked[0].payload.suspend_payload == {
        "message": "Which version of web should I deploy to staging?"
    }

    resumed = await ops.stream("1.4.2", thread_id="t")
    final = await resumed.result()
    assert resumed.run_id == stream.run_id
    assert final.finish_reason == "stop"
    deployed = rows(db_path, "SELECT * FROM deployments WHERE tool_call_id IS NOT NULL")
    assert [(d["service"], d["environment"], d["version"]) for d in deployed] == [
        ("web", "staging", "1.4.2")
    ]
    assert "Deployed web to staging" in final.text
    assert "version: 1.4.2" in final.text


@pytest.mark.parametrize("reply", ["not 1.4.1 - use 1.5.0", "find user 42", "whenever you like"])
async def test_a_reply_that_is_not_a_version_is_asked_again(
    ops: Agent, db_path: Path, reply: str
) -> None:
    first = await ops.generate("deploy web to staging", thread_id="t")
    with pytest.raises(ResumeDataInvalidError) as info:
        await ops.generate(reply, thread_id="t")
    assert info.value.errors == [
        f"version: {reply!r} is not a version; answer with just the version, such as 1.4.2"
    ]
    assert [p.kind for p in await ops.list_suspended_runs(thread_id="t")] == ["suspension"]
    assert rows(db_path, "SELECT * FROM deployments WHERE tool_call_id IS NOT NULL") == []
    final = await ops.generate("v2.4.0", thread_id="t")
    assert final.run_id == first.run_id
    assert final.finish_reason == "stop"
    deployed = rows(db_path, "SELECT * FROM deployments WHERE tool_call_id IS NOT NULL")
    assert [(d["service"], d["version"]) for d in deployed] == [("web", "2.4.0")]


async def test_the_production_card_shows_the_checked_version_and_that_version_runs(
    ops: Agent, db_path: Path
) -> None:
    await ops.generate("deploy worker to production", thread_id="t")
    for reply in ("not 1.4.1 - use 1.5.0", "find user 42"):
        with pytest.raises(ResumeDataInvalidError):
            await ops.generate(reply, thread_id="t")
    card = await ops.generate("1.5.0", thread_id="t")
    assert card.suspend_payload is not None
    assert card.suspend_payload.kind == "approval"
    assert card.suspend_payload.args == {
        "service": "worker",
        "environment": "production",
        "version": "1.5.0",
    }
    final = await ops.approve_tool_call_generate(run_id=card.run_id)
    deployed = rows(db_path, "SELECT * FROM deployments WHERE tool_call_id IS NOT NULL")
    assert [(d["service"], d["environment"], d["version"]) for d in deployed] == [
        ("worker", "production", "1.5.0")
    ]
    assert "version: 1.5.0" in final.text


async def test_deleting_a_record_that_is_not_there_shows_no_card(ops: Agent, db_path: Path) -> None:
    stream = await ops.stream("delete record zzz-999")
    chunks = [c async for c in stream]
    result = await stream.result()
    assert not [c for c in chunks if isinstance(c, ToolCallApprovalChunk)]
    assert result.finish_reason == "stop"
    assert "No record with id 'zzz-999'" in result.text
    assert len(record_ids(db_path)) == 4


async def test_an_unknown_service_is_reported_without_asking_for_a_version(ops: Agent) -> None:
    result = await ops.generate("deploy billing-engine to staging")
    assert result.finish_reason == "stop"
    assert "Unknown service 'billing-engine'" in result.text
    assert "api, web, worker" in result.text


async def test_an_unknown_environment_is_an_argument_error_without_a_card(
    ops: Agent, db_path: Path
) -> None:
    stream = await ops.stream("deploy api 1.4.2 to qa")
    chunks = [c async for c in stream]
    result = await stream.result()
    assert not [c for c in chunks if isinstance(c, ToolCallApprovalChunk)]
    [error] = [c for c in chunks if isinstance(c, ToolErrorChunk)]
    assert error.tool_name == "deploy_service"
    assert "Input should be 'staging' or 'production'" in error.error
    assert result.finish_reason == "stop"
    assert "I could not deploy api to qa" in result.text
    assert rows(db_path, "SELECT * FROM deployments WHERE tool_call_id IS NOT NULL") == []


async def test_an_unknown_service_in_production_is_reported_without_a_card(
    ops: Agent, db_path: Path
) -> None:
    stream = await ops.stream("deploy billing-engine 1.0.0 to production")
    chunks = [c async for c in stream]
    result = await stream.result()
    assert not [c for c in chunks if isinstance(c, ToolCallApprovalChunk)]
    assert result.finish_reason == "stop"
    assert "Unknown service 'billing-engine'" in result.text
    assert rows(db_path, "SELECT * FROM deployments WHERE tool_call_id IS NOT NULL") == []


async def test_refund_up_to_100_runs_straight(ops: Agent, db_path: Path) -> None:
    result = await ops.generate("refund order A-1001 50")
    assert result.finish_reason == "stop"
    assert [r["amount_cents"] for r in rows(db_path, "SELECT * FROM refunds")] == [5000]
    assert "left to refund: 199.00" in result.text


async def test_refund_over_100_needs_approval(ops: Agent, db_path: Path) -> None:
    first = await ops.generate("refund order A-1001 150")
    assert first.finish_reason == "suspended"
    assert first.suspend_payload is not None
    assert first.suspend_payload.tool_name == "refund"
    assert rows(db_path, "SELECT * FROM refunds") == []

    final = await ops.approve_tool_call_generate(run_id=first.run_id)
    assert [r["amount_cents"] for r in rows(db_path, "SELECT * FROM refunds")] == [15000]
    assert "Refunded order A-1001" in final.text


async def test_a_refund_larger_than_the_order_is_refused(ops: Agent, db_path: Path) -> None:
    result = await ops.generate("refund order A-1002 90")
    assert "Refusing to refund 90.00 USD on order A-1002" in result.text
    assert "only 80.00" in result.text
    assert rows(db_path, "SELECT * FROM refunds") == []


async def test_a_refund_above_what_is_left_shows_no_card(ops: Agent, db_path: Path) -> None:
    earlier = await ops.generate("refund order A-1003 700")
    await ops.approve_tool_call_generate(run_id=earlier.run_id)
    stream = await ops.stream("refund order A-1003 600")
    chunks = [c async for c in stream]
    result = await stream.result()
    assert not [c for c in chunks if isinstance(c, ToolCallApprovalChunk)]
    assert result.finish_reason == "stop"
    assert "only 500.00 of its 1200.00 total is left" in result.text
    assert [r["amount_cents"] for r in rows(db_path, "SELECT * FROM refunds")] == [70000]


async def test_an_unknown_request_gets_the_help(ops: Agent) -> None:
    result = await ops.generate("make me a sandwich")
    assert result.finish_reason == "stop"
    assert "don't understand" in result.text
    assert DEMO_HELP in result.text
    assert result.tool_calls == ()


async def test_the_help_comes_once_then_a_short_hint_in_the_same_thread(ops: Agent) -> None:
    first = await ops.generate("make me a sandwich", thread_id="t-hint")
    assert DEMO_HELP in first.text
    second = await ops.generate("and a coffee", thread_id="t-hint")
    assert second.text.startswith('Sorry, I don\'t understand "and a coffee".')
    assert "listed above" in second.text
    assert DEMO_HELP not in second.text
    elsewhere = await ops.generate("and a coffee", thread_id="t-other")
    assert DEMO_HELP in elsewhere.text  # another conversation has not seen the list


async def test_help_lists_the_demo_requests(ops: Agent) -> None:
    result = await ops.generate("help")
    assert result.text == DEMO_HELP


async def test_the_seed_happens_once(db_path: Path, store: MemoryStore) -> None:
    first = build_agent(DemoModel(), store, db_path=db_path)
    pending = await first.generate("delete record abc-123")
    await first.approve_tool_call_generate(run_id=pending.run_id)

    build_agent(DemoModel(), store, db_path=db_path)
    assert "abc-123" not in record_ids(db_path)
    assert len(rows(db_path, "SELECT * FROM users")) == 3


async def test_an_approval_is_decided_by_a_freshly_built_agent(
    db_path: Path, store: MemoryStore
) -> None:
    asked = await build_agent(DemoModel(), store, db_path=db_path).generate("delete record def-456")
    restarted = build_agent(DemoModel(), store, db_path=db_path)
    final = await restarted.approve_tool_call_generate(run_id=asked.run_id)
    assert "def-456" not in record_ids(db_path)
    assert "Deleted record def-456" in final.text


def test_the_database_path_defaults_to_ops_db_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_DB_PATH", str(tmp_path / "nested" / "dir" / "ops.db"))
    build_agent(DemoModel(), MemoryStore())
    assert (tmp_path / "nested" / "dir" / "ops.db").is_file()
