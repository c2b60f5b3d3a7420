"""The ops supervisor: one agent people talk to, delegating to three specialists."""

from __future__ import annotations

from pathlib import Path

from agents import Agent, AgentOptions, Model, Store

from .billing import billing_agent
from .database import OpsDatabase
from .deploy import deploy_agent
from .records import records_agent

INSTRUCTIONS = """\
You are the ops assistant in a team chat. You do not act yourself: you hand each
request to the agent that owns it, with the user's request as the task, word for
word with every detail (ids, amounts, versions, environments).
- records: users and their records (look up, delete).
- deploy: deployments of services to staging or production.
- billing: refunds of orders.
Then tell the user, briefly, what the agent reported: results, errors and
declined approvals alike. Never add facts the agents did not report. If no agent
fits, say what you can help with.
"""


def build_agent(model: Model, store: Store, *, db_path: str | Path | None = None) -> Agent:
    """The example ``ops`` supervisor with its ``records``, ``deploy`` and ``billing`` agents.

    Args:
        model: The model every agent uses (``BOT_MODEL``).
        store: Where runs and thread memory live (``STORE_URL``).
        db_path: The SQLite file the tools act on; default ``OPS_DB_PATH``, else
            ``data/ops.db``. Created and seeded on first use, kept afterwards.
    """
    db = OpsDatabase.open(db_path)
    return Agent(
        id="ops",
        name="Ops",
        description="The team's ops assistant: records, deployments and billing.",
        instructions=INSTRUCTIONS,
        model=model,
        # Each key becomes an `agent-<key>` tool for the supervisor's model; an
        # approval or question inside a sub-agent surfaces here, at the top.
        agents={
            "records": records_agent(model, db),
            "deploy": deploy_agent(model, db),
            "billing": billing_agent(model, db),
        },
        store=store,
        # A reply in the thread answers a tool's question (a missing version).
        default_options=AgentOptions(auto_resume_suspended_tools=True),
    )
