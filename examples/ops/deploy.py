"""The deploy agent: deploys services, asking for approval and for missing input.

Shows conditional approval (a predicate over the arguments: only production
needs a person), arguments checked before anyone is asked (an unknown
environment fails validation, an unknown service is reported without a card),
``suspend()`` to ask for a missing version, and the tool call id as an
idempotency key so one call never deploys twice.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from agents import Agent, Model, Tool, ToolContext, tool

from .database import OpsDatabase, now

DESCRIPTION = (
    "Deploys services (api, web, worker) to staging or production with deploy_service; "
    "production deployments need approval, and it asks for the version when none is given. "
    "Give it the request as the user wrote it, e.g. 'deploy api 1.4.2 to staging'."
)

INSTRUCTIONS = """\
You deploy services with deploy_service.
- Pass the service, the environment and the version if the user gave one. When
  the version is missing, call the tool without it: it asks the user itself.
- Production deployments need a person's approval; the system asks for it.
- Answer from what the tool returns and nothing else. If it reports an error or
  that the call was not approved, say so plainly.
"""

ENVIRONMENTS = {
    "staging": "staging",
    "stage": "staging",
    "production": "production",
    "prod": "production",
}
"""Accepted spellings of each environment."""


def _spelling(value: Any) -> Any:
    """An accepted spelling as its canonical name; anything else as it is, to be refused."""
    return ENVIRONMENTS.get(value.strip().lower(), value) if isinstance(value, str) else value


VERSION = re.compile(r"\bv?\d+(?:\.\d+){0,3}(?:[-+][\w.]+)?\b")


class VersionQuestion(BaseModel):
    """What ``deploy_service`` shows the user when it needs a version."""

    message: str


class VersionReply(BaseModel):
    """The user's answer. One text field, so auto-resume passes the reply straight in."""

    version: str


def outside_staging(args: Any) -> bool:
    """Whether a deployment may leave staging.

    Written as "not staging" rather than "is production" so that an unexpected
    value fails closed and asks a person, even if the argument's schema changes.
    """
    return ENVIRONMENTS.get(str(args.environment).strip().lower()) != "staging"


def has_version(args: Any, ctx: ToolContext) -> bool:
    """Whether the call (or the user's answer to its question) names a version."""
    version = ctx.resume_data.version if ctx.resume_data is not None else args.version
    return bool(version) and VERSION.search(version) is not None


def deploy_tools(db: OpsDatabase) -> list[Tool]:
    """The deploy tools, bound to one database."""

    async def needs_approval(args: Any, ctx: ToolContext) -> bool:
        """Approval rule: a deployment outside staging needs a person, once it can run.

        Asking for a missing version has no side effect, so it comes first; the
        runtime checks this rule again with the answer, and the approver then sees
        the exact version that will run. An answer that is not a version is asked
        again, and an unknown service is reported, before anyone is bothered:
        the tool then runs at once and fails without changing anything. (Unknown
        environments never get here: they fail argument validation.)
        """
        if not outside_staging(args) or not has_version(args, ctx):
            return False
        return await db.run(_service_exists, args.service)

    @tool(
        require_approval=needs_approval,
        suspend_schema=VersionQuestion,
        resume_schema=VersionReply,
        # One call deploys at most once (see _deploy), so after a crash it is safe to rerun.
        idempotent=True,
    )
    async def deploy_service(
        ctx: ToolContext,
        service: str = Field(description="The service: api, web or worker."),
        # Checked with the other arguments, before any approval card: a known
        # spelling becomes its canonical name, anything else is an argument error.
        environment: Annotated[
            Literal["staging", "production"], BeforeValidator(_spelling)
        ] = Field(description="staging or production (stage and prod are accepted too)."),
        version: str | None = Field(
            default=None, description="The version to deploy; leave out to ask the user."
        ),
    ) -> dict[str, Any]:
        """Deploy a version of a service to staging or production.

        Production needs approval. Without a version, asks the user which one.
        """
        # Check what we can before asking: no point asking for a version of a
        # service that does not exist.
        await db.run(_check_service, service)
        if ctx.resume_data is not None:  # the user's reply to our question
            version = ctx.resume_data.version
        if not version:
            ctx.suspend(
                {"message": f"Which version of {service} should I deploy to {environment}?"}
            )
        found = VERSION.search(version)
        if found is None:
            ctx.suspend(
                {
                    "message": f"{version!r} does not look like a version. Which version of "
                    f"{service} should I deploy to {environment}? (for example 1.4.2)"
                }
            )
        if environment != "staging" and not ctx.approved:
            # The approval rule let this call through because the service was
            # unknown, and it has appeared since: never leave staging unapproved.
            raise PermissionError(
                f"{service} did not exist when approval was checked; nothing was deployed. "
                "Please ask again."
            )
        return await db.run(
            _deploy, service, environment, found.group(), ctx.tool_call_id, ctx.resource_id
        )

    return [deploy_service]


def deploy_agent(model: Model, db: OpsDatabase) -> Agent:
    """The ``deploy`` sub-agent."""
    return Agent(
        id="deploy",
        name="Deploy",
        description=DESCRIPTION,
        instructions=INSTRUCTIONS,
        model=model,
        tools=deploy_tools(db),
    )


def _service_exists(conn: sqlite3.Connection, service: str) -> bool:
    return conn.execute("SELECT 1 FROM services WHERE name = ?", (service,)).fetchone() is not None


def _check_service(conn: sqlite3.Connection, service: str) -> None:
    if not _service_exists(conn, service):
        known = ", ".join(r["name"] for r in conn.execute("SELECT name FROM services ORDER BY 1"))
        raise LookupError(f"Unknown service {service!r}. Known services: {known}.")


def _deploy(
    conn: sqlite3.Connection,
    service: str,
    environment: str,
    version: str,
    tool_call_id: str,
    requested_by: str | None,
) -> dict[str, Any]:
    # The call id is stable across approvals, resumes and restarts: if this call
    # already deployed (say the process died right after), report that deployment.
    done = conn.execute(
        "SELECT * FROM deployments WHERE tool_call_id = ?", (tool_call_id,)
    ).fetchone()
    if done is not None:
        return _deployment(conn, done)
    cursor = conn.execute(
        "INSERT INTO deployments"
        " (service, environment, version, tool_call_id, requested_by, deployed_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (service, environment, version, tool_call_id, requested_by, now()),
    )
    row = conn.execute("SELECT * FROM deployments WHERE id = ?", (cursor.lastrowid,)).fetchone()
    return _deployment(conn, row)


def _deployment(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    before = conn.execute(
        "SELECT version FROM deployments WHERE service = ? AND environment = ? AND id < ?"
        " ORDER BY id DESC LIMIT 1",
        (row["service"], row["environment"], row["id"]),
    ).fetchone()
    return {
        "deployment_id": row["id"],
        "service": row["service"],
        "environment": row["environment"],
        "version": row["version"],
        "previous_version": before["version"] if before else None,
        "deployed_at": row["deployed_at"],
    }
