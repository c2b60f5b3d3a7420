"""The billing agent: refunds orders, with approval above a limit.

Shows a threshold approval rule (a predicate over the validated arguments),
argument constraints in the signature, money kept in integer cents, and a
business rule enforced in the tool, where no model can talk its way past it,
and checked before any card too, so nobody is asked to approve a refund that
could only be refused.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from pydantic import Field

from agents import Agent, Model, Tool, ToolContext, tool

from .database import OpsDatabase, now

REFUND_APPROVAL_LIMIT = 100.0
"""Refunds above this amount wait for a person."""

DESCRIPTION = (
    "Refunds orders with refund; refunds over 100 need approval, and it refuses to refund "
    "more than is left on the order. Give it the request as the user wrote it, "
    "e.g. 'refund order A-1001 50'."
)

INSTRUCTIONS = """\
You handle billing: refunds of orders with the refund tool.
- Pass the order id and the amount the user asked for.
- Refunds over 100 need a person's approval; the system asks for it.
- Answer from what the tool returns and nothing else. If it reports an error or
  that the call was not approved, say so plainly.
"""


def over_limit(args: Any) -> bool:
    """Approval rule: refunds above ``REFUND_APPROVAL_LIMIT`` need a person."""
    return float(args.amount) > REFUND_APPROVAL_LIMIT


def tools() -> list[Tool]:
    """The billing tools on the default database (``OPS_DB_PATH``, else ``data/ops.db``):
    what ``examples/bot.toml`` names as ``examples.ops.billing:tools``."""
    return billing_tools(OpsDatabase.open())


def billing_tools(db: OpsDatabase) -> list[Tool]:
    """The billing tools, bound to one database."""

    async def refund_fits(args: Any) -> None:
        """Check: no card for a refund that could only be refused (no such order, too much)."""
        await db.run(_refundable, args.order_id, _cents(args.amount))

    # One call refunds at most once (see _refund), so after a crash it is safe to rerun.
    @tool(require_approval=over_limit, check=refund_fits, idempotent=True)
    async def refund(
        ctx: ToolContext,
        order_id: str = Field(description="The order's id, e.g. A-1001."),
        # gt=0 is checked before approval is even asked: a bad amount never reaches a card.
        amount: float = Field(gt=0, description="The amount, in the order's currency."),
    ) -> dict[str, Any]:
        """Refund part or all of an order. Over 100 needs approval.

        Refuses to refund more than is left on the order.
        """
        return await db.run(_refund, order_id, _cents(amount), ctx.tool_call_id, ctx.resource_id)

    return [refund]


def billing_agent(model: Model, db: OpsDatabase) -> Agent:
    """The ``billing`` sub-agent."""
    return Agent(
        id="billing",
        name="Billing",
        description=DESCRIPTION,
        instructions=INSTRUCTIONS,
        model=model,
        tools=billing_tools(db),
    )


def _cents(amount: float) -> int:
    return round(amount * 100)


def _order(conn: sqlite3.Connection, order_id: str) -> sqlite3.Row:
    order: sqlite3.Row | None = conn.execute(
        "SELECT * FROM orders WHERE id = ?", (order_id,)
    ).fetchone()
    if order is None:
        raise LookupError(f"No order with id {order_id!r}; nothing was refunded.")
    return order


def _refundable(conn: sqlite3.Connection, order_id: str, cents: int) -> sqlite3.Row:
    """The order, if ``cents`` fits what is left to refund on it; else why not."""
    order = _order(conn, order_id)
    left = order["total_cents"] - _refunded(conn, order_id)
    if cents > left:
        raise ValueError(
            f"Refusing to refund {_money(cents)} {order['currency']} on order {order_id}: "
            f"only {_money(left)} of its {_money(order['total_cents'])} total is left "
            "to refund."
        )
    return order


def _refund(
    conn: sqlite3.Connection,
    order_id: str,
    cents: int,
    tool_call_id: str,
    requested_by: str | None,
) -> dict[str, Any]:
    order = _order(conn, order_id)
    # Same call id, same refund: a retried call must not pay out twice.
    done = conn.execute("SELECT * FROM refunds WHERE tool_call_id = ?", (tool_call_id,)).fetchone()
    if done is None:
        # Checked again here, in the refund's own transaction: other refunds may
        # have been made since the check before the approval.
        _refundable(conn, order_id, cents)
        cursor = conn.execute(
            "INSERT INTO refunds (order_id, amount_cents, tool_call_id, requested_by, refunded_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (order_id, cents, tool_call_id, requested_by, now()),
        )
        done = conn.execute("SELECT * FROM refunds WHERE id = ?", (cursor.lastrowid,)).fetchone()
    refunded = _refunded(conn, order_id)
    return {
        "refund_id": done["id"],
        "order_id": order_id,
        "amount": _money(done["amount_cents"]),
        "currency": order["currency"],
        "order_total": _money(order["total_cents"]),
        "refunded_so_far": _money(refunded),
        "left_to_refund": _money(order["total_cents"] - refunded),
    }


def _refunded(conn: sqlite3.Connection, order_id: str) -> int:
    row = conn.execute(
        "SELECT COALESCE(SUM(amount_cents), 0) AS cents FROM refunds WHERE order_id = ?",
        (order_id,),
    ).fetchone()
    return int(row["cents"])


def _money(cents: int) -> str:
    return f"{cents / 100:.2f}"
