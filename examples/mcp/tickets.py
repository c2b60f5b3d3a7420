"""An IT ticket desk as an MCP server (stdio), written with the official ``mcp`` SDK.

``examples/bot.toml`` starts it as the ``tickets`` server, so the bot offers its
tools as ``tickets__list_tickets``, ``tickets__show_ticket`` and
``tickets__close_ticket`` and ``tickets__reopen_ticket``. Its annotations decide
the approval rule: listing and showing are read-only (no card), closing and
reopening change data (a card). Reopening also asks the person why, with an
MCP elicitation: the bot shows it as a question in the thread, and the reply
answers it.

Tickets live in ``TICKETS_DB`` (default ``data/tickets.json``), seeded on
first use, so a closed ticket stays closed across restarts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Elicit, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

SEED = {
    "T-100": {"title": "Printer on floor 3 is on fire", "status": "open"},
    "T-101": {"title": "VPN drops every hour", "status": "open"},
    "T-102": {"title": "New laptop for Ada", "status": "closed"},
}

server = MCPServer("tickets", version="1.0", log_level="WARNING")


def _path() -> Path:
    return Path(os.environ.get("TICKETS_DB", "data/tickets.json"))


def _load() -> dict[str, dict[str, str]]:
    path = _path()
    if not path.exists():
        _save(SEED)
    tickets: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))
    return tickets


def _save(tickets: dict[str, dict[str, str]]) -> None:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps(tickets, indent=1), encoding="utf-8")
    scratch.replace(path)  # all or nothing


def _ticket(tickets: dict[str, dict[str, str]], ticket_id: str) -> dict[str, str]:
    found = tickets.get(ticket_id.upper())
    if found is None:
        raise ToolError(f"there is no ticket {ticket_id} (known: {', '.join(sorted(tickets))})")
    return found


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_tickets() -> str:
    """List every ticket with its status."""
    return "\n".join(f"{key} [{t['status']}] {t['title']}" for key, t in sorted(_load().items()))


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def show_ticket(ticket_id: str) -> str:
    """Show one ticket, e.g. T-100."""
    ticket = _ticket(_load(), ticket_id)
    return f"{ticket_id.upper()} [{ticket['status']}] {ticket['title']}"


@server.tool(
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
)
def close_ticket(ticket_id: str) -> str:
    """Close a ticket, e.g. T-100 (closing a closed ticket changes nothing)."""
    tickets = _load()
    ticket = _ticket(tickets, ticket_id)
    if ticket["status"] == "closed":
        return f"{ticket_id.upper()} was already closed"
    ticket["status"] = "closed"
    _save(tickets)
    return f"Closed {ticket_id.upper()}: {ticket['title']}"


class ReopenReason(BaseModel):
    reason: str


async def ask_why() -> Elicit[ReopenReason]:
    """The question ``reopen_ticket`` asks the person (an MCP elicitation)."""
    return Elicit("Why should the ticket be reopened?", ReopenReason)


@server.tool(
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
)
def reopen_ticket(ticket_id: str, why: Annotated[ReopenReason, Resolve(ask_why)]) -> str:
    """Reopen a closed ticket, e.g. T-102; asks the person why."""
    tickets = _load()
    ticket = _ticket(tickets, ticket_id)
    ticket["status"] = "open"
    ticket["reopened_because"] = why.reason
    _save(tickets)
    return f"Reopened {ticket_id.upper()} ({why.reason}): {ticket['title']}"


if __name__ == "__main__":
    _load()  # seeded before the first request: a bad TICKETS_DB fails at start
    server.run("stdio")
