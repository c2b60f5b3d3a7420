"""The audit log of a question: an answer is on record with the arguments it made, and
a question called off is ``cancelled``, not ``declined``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agents import Agent, AuditEntry, MemoryStore, ToolCall, ToolContext, tool

from .helpers import call_then_answer


class VersionReply(BaseModel):
    version: str


def deploy_agent(*, environment: str = "staging", breaks: bool = False) -> Agent:
    @tool(
        require_approval=lambda args: args.environment == "production" and bool(args.version),
        resume_schema=VersionReply,
    )
    def deploy(ctx: ToolContext, environment: str, version: str | None = None) -> str:
        """Deploy; asks for the version when none is given."""
        if version is None:
            ctx.suspend({"message": "Which version?"})
        if breaks:
            raise RuntimeError("the deploy broke")
        return f"deployed {version} to {environment}"

    return Agent(
        id="deployer",
        model=call_then_answer(ToolCall("deploy", {"environment": environment}, id="d-1")),
        tools=[deploy],
        store=MemoryStore(),
    )


async def audit_of(agent: Agent, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    entries: list[AuditEntry] = await agent.engine.store.list_audit(run_id=run_id)
    return [(str(e.event), e.args) for e in entries]


ASKED = {"environment": "staging", "version": None}
ANSWERED = {"environment": "staging", "version": "1.4.2"}


async def test_an_answered_question_is_audited_with_the_arguments_the_tool_ran_with() -> None:
    agent = deploy_agent()
    first = await agent.generate("deploy to staging")
    await agent.resume_generate({"version": "1.4.2"}, run_id=first.run_id, decided_by="U1")
    assert await audit_of(agent, first.run_id) == [
        ("requested", ASKED),
        ("resumed", ANSWERED),
        ("executed", ANSWERED),
    ]


async def test_an_answered_question_whose_tool_fails_is_audited_with_the_answer() -> None:
    agent = deploy_agent(breaks=True)
    first = await agent.generate("deploy to staging")
    await agent.resume_generate({"version": "1.4.2"}, run_id=first.run_id)
    assert await audit_of(agent, first.run_id) == [
        ("requested", ASKED),
        ("resumed", ANSWERED),
        ("failed", ANSWERED),
    ]


async def test_an_answer_that_needs_approval_is_audited_as_answered_then_asked() -> None:
    agent = deploy_agent(environment="production")
    first = await agent.generate("deploy to production")
    await agent.resume_generate({"version": "2.0.0"}, run_id=first.run_id)
    await agent.approve_tool_call_generate(run_id=first.run_id, decided_by="U2")
    answered = {"environment": "production", "version": "2.0.0"}
    assert await audit_of(agent, first.run_id) == [
        ("requested", {"environment": "production", "version": None}),
        ("resumed", answered),
        ("requested", answered),
        ("approved", answered),
        ("executed", answered),
    ]


async def test_a_cancelled_question_is_audited_as_cancelled() -> None:
    agent = deploy_agent()
    first = await agent.generate("deploy to staging")
    await agent.decline_tool_call_generate(run_id=first.run_id, decided_by="U1", cancel=True)
    entries = await agent.engine.store.list_audit(run_id=first.run_id)
    assert [(e.event, e.actor) for e in entries] == [("requested", None), ("cancelled", "U1")]


async def test_a_declined_question_is_still_audited_as_declined() -> None:
    agent = deploy_agent()
    first = await agent.generate("deploy to staging")
    await agent.decline_tool_call_generate(run_id=first.run_id, decided_by="U1")
    entries = await agent.engine.store.list_audit(run_id=first.run_id)
    assert [e.event for e in entries] == ["requested", "declined"]
