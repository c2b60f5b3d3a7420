"""The deploy agent: deploys services, asking for approval and for missing input.

Shows conditional approval (a predicate over the arguments: only production
needs a person), a ``check`` that refuses what can only fail before anyone is
asked (an unknown service), ``suspend()`` to ask for a missing version, whose
answer fills the ``version`` argument and is validated with it *before* the
approval card (so the card shows the exact version that will run), and the
tool call id as an idempotency key so one call never deploys twice.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field

from agents import Agent, Model, Tool, ToolContext, tool

from .database import OpsDatabase, now

DESCRIPTION = (
    "Deploys services (api, web, worker) to staging or production with deploy_service; "
    "production deployments need approval, and it asks for the version when none is given. "
    "Tells the status of a service (what runs where) with service_status. "
    "Give it the request as the user wrote it, e.g. 'deploy api 1.4.2 to staging'."
)

INSTRUCTIONS = """\
You deploy services with deploy_service, and tell what runs where with service_status.
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


VERSION = re.compile(r"v?(\d+(?:\.\d+){1,3}(?:[-+][0-9A-Za-z.-]*[0-9A-Za-z])?)")
"""A version such as 1.4.2, v2.0 or 1.5.0-rc.1: at least major.minor; a leading v is dropped."""


def parse_version(text: str) -> str:
    """``text`` as a bare version, when it is one and nothing else (``"v1.5.0"`` -> ``"1.5.0"``).

    Raises:
        ValueError: Anything else, such as ``"not 1.4.1 - use 1.5.0"`` or
            ``"find user 42"``: picking a version out of a sentence could deploy
            one the person did not mean, so they are asked again instead.
    """
    found = VERSION.fullmatch(text.strip())
    if found is None:
        raise ValueError(
            f"{text.strip()!r} is not a version; answer with just the version, such as 1.4.2"
        )
    return found.group(1)


Version = Annotated[str, AfterValidator(parse_version)]
"""A version argument: validated, and stored as the bare version that will be deployed."""


class VersionQuestion(BaseModel):
    """What ``deploy_service`` shows the user when it needs a version."""

    message: str


class VersionReply(BaseModel):
    """The user's answer. Its field names the ``version`` argument, so the answer fills it.

    One text field, so auto-resume passes the reply straight in; a reply that is
    not exactly one version fails here and is asked again in the thread.
    """

    version: Version


def outside_staging(args: Any) -> bool:
    """Whether a deployment may leave staging.

    Written as "not staging" rather than "is production" so that an unexpected
    value fails closed and asks a person, even if the argument's schema changes.
    """
    return ENVIRONMENTS.get(str(args.environment).strip().lower()) != "staging"


def needs_approval(args: Any) -> bool:
    """Approval rule: a deployment outside staging needs a person, once it names a version.

    Asking for a missing version has no side effect, so it comes first; the
    answer becomes the ``version`` argument, this rule is checked again with
    it, and the approver then sees the exact version that will run.
    """
    return outside_staging(args) and args.version is not None


def tools() -> list[Tool]:
    """The deploy tools on the default database (``OPS_DB_PATH``, else ``data/ops.db``):
    what ``examples/bot.toml`` names as ``examples.ops.deploy:tools``."""
    return deploy_tools(OpsDatabase.open())


def deploy_tools(db: OpsDatabase) -> list[Tool]:
    """The deploy tools, bound to one database."""

    async def known_service(args: Any) -> None:
        """Check: no question and no card for a service that does not exist."""
        await db.run(_check_service, args.service)

    @tool(
        require_approval=needs_approval,
        check=known_service,
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
        version: Annotated[
            Version | None, Field(description="The version to deploy; leave out to ask the user.")
        ] = None,
    ) -> dict[str, Any]:
        """Deploy a version of a service to staging or production.

        Production needs approval. Without a version, asks the user which one.
        """
        if version is None:
            ctx.suspend(
                {"message": f"Which version of {service} should I deploy to {environment}?"}
            )
        if environment != "staging" and not ctx.approved:
            # Defence in depth: if the approval rule above is ever loosened by
            # mistake, production still never changes without a person.
            raise PermissionError(
                f"Deploying to {environment} needs approval; nothing was deployed."
            )
        return await db.run(
            _deploy, service, environment, version, ctx.tool_call_id, ctx.resource_id
        )

    @tool
    async def service_status(
        service: str = Field(description="The service: api, web or worker."),
    ) -> dict[str, Any]:
        """What version of a service runs in each environment, and since when."""
        return await db.run(_status, service)

    return [deploy_service, service_status]


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


def _status(conn: sqlite3.Connection, service: str) -> dict[str, Any]:
    _check_service(conn, service)
    status: dict[str, Any] = {"service": service}
    for environment in ("staging", "production"):
        row = conn.execute(
            "SELECT version, deployed_at FROM deployments"
            " WHERE service = ? AND environment = ? ORDER BY id DESC LIMIT 1",
            (service, environment),
        ).fetchone()
        status[environment] = (
            f"{row['version']} (deployed {row['deployed_at']})" if row else "not deployed"
        )
    return status


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
