"""A real MCP server for the tests, written with the ``mcp`` SDK: a small ticket desk.

Run as ``python -m tests.mcp.tickets_server stdio`` or ``... http HOST PORT``
(streamable HTTP at ``/mcp``). Every call that reaches a tool is appended to
the JSON-lines file ``MCP_TEST_CALLS`` names, so a test can count what ran.
``MCP_TEST_TOKEN``, when set, is the bearer token HTTP requests must carry;
``MCP_TEST_STATE_KEY`` the key that seals ``request_state`` (else one per process).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import RequestStateSecurity
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

_KEY = os.environ.get("MCP_TEST_STATE_KEY")
server = MCPServer(
    "tickets",
    version="1.0",
    log_level="WARNING",
    # A fixed key: a question's request_state still opens after this process restarts.
    request_state_security=RequestStateSecurity(keys=[_KEY], ttl=3600) if _KEY else None,
)
TICKETS = {"T-1": "printer on fire", "T-2": "VPN down"}


def record(tool: str, **args: Any) -> None:
    """Note a call that reached a tool."""
    path = os.environ.get("MCP_TEST_CALLS")
    if path:
        with Path(path).open("a", encoding="utf-8") as calls:
            calls.write(json.dumps({"tool": tool, "args": args}) + "\n")


def bearer(ctx: Context) -> None:
    """Refuse an HTTP request without the expected token (stdio has no headers)."""
    token = os.environ.get("MCP_TEST_TOKEN")
    headers = ctx.headers
    if token and headers is not None and headers.get("authorization") != f"Bearer {token}":
        raise ToolError("unauthorized")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def lookup(ticket: str, ctx: Context) -> str:
    """Show a ticket."""
    bearer(ctx)
    record("lookup", ticket=ticket)
    if ticket not in TICKETS:
        raise ToolError(f"no ticket {ticket}")
    return f"{ticket}: {TICKETS[ticket]}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_ticket(ticket: str, reason: str = "") -> str:
    """Delete a ticket for good."""
    record("delete_ticket", ticket=ticket, reason=reason)
    return f"deleted {ticket}"


@server.tool()
def close_ticket(ticket: str) -> str:
    """Close a ticket (no annotations: the bot must ask)."""
    record("close_ticket", ticket=ticket)
    return f"closed {ticket}"


@server.tool(
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
)
def assign(ticket: str, person: str) -> str:
    """Assign a ticket to a person (the same assignment twice changes nothing)."""
    record("assign", ticket=ticket, person=person)
    return f"{ticket} assigned to {person}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def broken(ticket: str) -> str:
    """Always fails."""
    record("broken", ticket=ticket)
    raise ToolError(f"the ticket database is unreachable (asked for {ticket})")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(ticket: str) -> str:
    """Never answers."""
    record("slow", ticket=ticket)
    await anyio.sleep_forever()
    return "unreachable"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def add_export_tool(ctx: Context) -> str:
    """Offer one more tool, ``export``, and tell the client the list changed."""

    def export(ticket: str) -> str:
        """Export a ticket as text."""
        record("export", ticket=ticket)
        return f"{ticket}.txt"

    server.add_tool(export, name="export", annotations=ToolAnnotations(read_only_hint=True))
    await ctx.notify_tools_changed()  # clients on the 2026-07-28 revision, listening
    await ctx.session.send_tool_list_changed()  # clients on 2025-11-25
    return "export added"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def environment(name: str) -> str:
    """The value of one of the server's environment variables, or "unset"."""
    return os.environ.get(name, "unset")


class Reason(BaseModel):
    reason: str


async def ask_reason() -> Elicit[Reason]:
    return Elicit("Why should the ticket be escalated?", Reason)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def escalate(
    ticket: str, why: Annotated[ElicitationResult[Reason], Resolve(ask_reason)]
) -> str:
    """Escalate a ticket; asks the person why (MCP elicitation)."""
    record("escalate", ticket=ticket)
    if isinstance(why, AcceptedElicitation):
        return f"{ticket} escalated: {why.data.reason}"
    return f"not escalated ({why.action})"


class Window(BaseModel):
    """A maintenance window: several fields, so chats ask with a form."""

    day: Literal["saturday", "sunday"] = Field(title="Day")
    hour: int = Field(title="Hour (UTC)", ge=0, le=23)
    notify: bool = Field(default=False, title="Tell the customer")


async def ask_window() -> Elicit[Window]:
    return Elicit("When should the maintenance run?", Window)


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
async def schedule(
    ticket: str, window: Annotated[ElicitationResult[Window], Resolve(ask_window)]
) -> str:
    """Schedule maintenance for a ticket; asks the person when (a form of three fields)."""
    record("schedule", ticket=ticket)
    if isinstance(window, AcceptedElicitation):
        chosen = window.data
        told = ", customer told" if chosen.notify else ""
        return f"{ticket} scheduled: {chosen.day} {chosen.hour:02d}:00 UTC{told}"
    return f"not scheduled ({window.action})"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=sys.argv[2], port=int(sys.argv[3]))
