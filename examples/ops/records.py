"""The records agent: looks users up and deletes records, with a person's approval.

Shows the two basic tool shapes: a read that any conversation may run, and a
destructive write that waits for someone to press **Approve** and keeps a
tombstone keyed on the tool call id, so a rerun of the same call reports the
first deletion instead of failing. Its ``check`` refuses a record that does not
exist before anyone is asked: a card is only shown for a call that can succeed.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from pydantic import Field

from agents import Agent, Model, Tool, ToolContext, tool

from .database import OpsDatabase, now

DESCRIPTION = (
    "Looks up users (find_user) and deletes records (delete_record, needs approval) "
    "in the ops database. Give it the request as the user wrote it, "
    "e.g. 'find user 12345' or 'delete record abc-123'."
)

INSTRUCTIONS = """\
You manage users and their records in the ops database.
- find_user looks a user up by id. delete_record deletes one record by id.
- Deleting needs a person's approval; the system asks for it. Just call the tool.
- Answer from what the tools return and nothing else. If a tool reports an error
  or that a call was not approved, say so plainly.
"""


def tools() -> list[Tool]:
    """The records tools on the default database (``OPS_DB_PATH``, else ``data/ops.db``):
    what ``examples/bot.toml`` names as ``examples.ops.records:tools``."""
    return records_tools(OpsDatabase.open())


def records_tools(db: OpsDatabase) -> list[Tool]:
    """The records tools, bound to one database."""

    # The docstring is the description the model reads; the signature becomes
    # the input schema it fills in, with ``Field`` adding descriptions and limits.
    @tool
    async def find_user(
        user_id: str = Field(description="The user's id, e.g. 12345."),
    ) -> dict[str, Any]:
        """Look a user up by id: name, email, team, status and the ids of their records."""
        return await db.run(_find_user, user_id)

    async def record_exists(args: Any) -> None:
        """Check: no card for a record that is not there (the approver would approve a failure)."""
        await db.run(_check_record, args.record_id)

    # Deleting cannot be undone, so every call waits for a person. One call
    # deletes at most once (see _delete_record), so after a crash it is safe to rerun.
    @tool(require_approval=True, check=record_exists, idempotent=True)
    async def delete_record(
        ctx: ToolContext,
        record_id: str = Field(description="The record's id, e.g. abc-123."),
    ) -> dict[str, Any]:
        """Delete one record by id and return what was deleted. Needs approval."""
        return await db.run(_delete_record, record_id, ctx.tool_call_id, ctx.resource_id)

    return [find_user, delete_record]


def records_agent(model: Model, db: OpsDatabase) -> Agent:
    """The ``records`` sub-agent."""
    return Agent(
        id="records",
        name="Records",
        description=DESCRIPTION,
        instructions=INSTRUCTIONS,
        model=model,
        tools=records_tools(db),
    )


def _find_user(conn: sqlite3.Connection, user_id: str) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
    if row is None:
        # A raised error reaches the model as "Tool find_user failed: <message>",
        # so the message is written for the person who will read it.
        raise LookupError(f"No user with id {user_id!r} in the ops database.")
    records = conn.execute("SELECT id FROM records WHERE user_id = ? ORDER BY id", (user_id,))
    return {**dict(row), "records": [r["id"] for r in records]}


def _check_record(conn: sqlite3.Connection, record_id: str) -> None:
    if conn.execute("SELECT 1 FROM records WHERE id = ?", (record_id,)).fetchone() is None:
        raise LookupError(f"No record with id {record_id!r}; nothing was deleted.")


def _delete_record(
    conn: sqlite3.Connection, record_id: str, tool_call_id: str, requested_by: str | None
) -> dict[str, Any]:
    # The call id is stable across approvals and restarts: if this call already
    # deleted the record (say the process died right after), report that deletion
    # rather than "no such record".
    done = conn.execute(
        "SELECT id, user_id, kind, summary FROM deleted_records WHERE tool_call_id = ?",
        (tool_call_id,),
    ).fetchone()
    if done is not None:
        return dict(done)
    row = conn.execute(
        "SELECT id, user_id, kind, summary FROM records WHERE id = ?", (record_id,)
    ).fetchone()
    if row is None:
        raise LookupError(f"No record with id {record_id!r}; nothing was deleted.")
    conn.execute(
        "INSERT INTO deleted_records"
        " (tool_call_id, id, user_id, kind, summary, requested_by, deleted_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (tool_call_id, *row, requested_by, now()),
    )
    conn.execute("DELETE FROM records WHERE id = ?", (record_id,))
    return dict(row)
