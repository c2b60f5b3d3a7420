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

The question rides MCP 2026-07-28's ``request_state``, which the server seals;
the bot keeps it with the paused call and sends it back with the answer. So
that an answer given after this process restarted (the bot starts it) still
opens it, the key is kept in ``<TICKETS_DB>.key`` (made on first use) and a
sealed state lasts as long as the bot's question does (a day), not the SDK's
default ten minutes.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import AcceptedElicitation, Elicit, ElicitationResult, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import RequestStateSecurity
from mcp.types import ToolAnnotations
from pydantic import BaseModel

SEED = {
    "T-100": {"title": "Printer on floor 3 is on fire", "status": "open"},
    "T-101": {"title": "VPN drops every hour", "status": "open"},
    "T-102": {"title": "New laptop for Ada", "status": "closed"},
}

STATE_TTL = 24 * 3600.0
"""Seconds a sealed question stays answerable: the bot's default question expiry."""


def _path() -> Path:
    return Path(os.environ.get("TICKETS_DB", "data/tickets.json"))


def _state_key() -> bytes:
    """The key that seals ``request_state``: kept beside the tickets, made once."""
    path = _path().with_name(_path().name + ".key")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another process made it first
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(secrets.token_bytes(32))
    return path.read_bytes()


server = MCPServer(
    "tickets",
    version="1.0",
    log_level="WARNING",
    request_state_security=RequestStateSecurity(keys=[_state_key()], ttl=STATE_TTL),
)


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
def reopen_ticket(
    ticket_id: str, why: Annotated[ElicitationResult[ReopenReason], Resolve(ask_why)]
) -> str:
    """Reopen a closed ticket, e.g. T-102; asks the person why."""
    if not isinstance(why, AcceptedElicitation):
        return f"{ticket_id.upper()} stays as it is: the reason was not given ({why.action})"
    tickets = _load()
    ticket = _ticket(tickets, ticket_id)
    ticket["status"] = "open"
    ticket["reopened_because"] = why.data.reason
    _save(tickets)
    return f"Reopened {ticket_id.upper()} ({why.data.reason}): {ticket['title']}"


if __name__ == "__main__":
    _load()  # seeded before the first request: a bad TICKETS_DB fails at start
    server.run("stdio")
