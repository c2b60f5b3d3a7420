"""The chat layer's one door into the runtime: a waiting call, a thread's live runs, a
named question answered, the audit log and the store's health, all through ``Agent``."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from agents import (
    Agent,
    AlreadyDecidedError,
    AuditEntry,
    MemoryStore,
    RunNotFoundError,
    ToolCall,
    ToolCallNotPendingError,
    ToolContext,
    tool,
)

from .helpers import call_then_answer

THREAD = "slack:T1:C1:1700000000.000100"


@tool(require_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


class VersionReply(BaseModel):
    version: str


@tool(resume_schema=VersionReply)
def release(ctx: ToolContext, service: str) -> str:
    """Release a service; asks which version."""
    if ctx.resume_data is None:
        ctx.suspend({"message": f"Which version of {service}?"})
    return f"released {service} {ctx.resume_data.version}"


def deploy_agent(store: MemoryStore | None = None) -> Agent:
    model = call_then_answer(ToolCall("deploy", {"service": "api"}, id="call-1"))
    return Agent(id="ops", model=model, tools=[deploy], store=store or MemoryStore())


def release_agent(service: str, *, store: MemoryStore) -> Agent:
    model = call_then_answer(ToolCall("release", {"service": service}, id=f"ask-{service}"))
    return Agent(id="ops", model=model, tools=[release, deploy], store=store)


# -- waiting_call ------------------------------------------------------------------


async def test_a_waiting_call_is_found_by_its_run_and_id() -> None:
    agent = deploy_agent()
    paused = await agent.generate("deploy api", thread_id=THREAD)

    found = await agent.waiting_call(paused.run_id, "call-1")

    assert found is not None
    assert (found.run_id, found.tool_name, found.args) == (
        paused.run_id,
        "deploy",
        {"service": "api"},
    )


async def test_a_decided_call_no_longer_waits() -> None:
    agent = deploy_agent()
    paused = await agent.generate("deploy api", thread_id=THREAD)
    stream = await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-1")

    # Claimed the moment the approval returns, before anyone reads its stream.
    assert await agent.waiting_call(paused.run_id, "call-1") is None
    await stream.result()
    assert await agent.waiting_call(paused.run_id, "call-1") is None


async def test_no_call_waits_on_an_unknown_run_an_unknown_id_or_a_stopped_run() -> None:
    agent = deploy_agent()
    paused = await agent.generate("deploy api", thread_id=THREAD)

    assert await agent.waiting_call("run-never", "call-1") is None
    assert await agent.waiting_call(paused.run_id, "call-never") is None
    await agent.stop_run(paused.run_id, stopped_by="U1")
    assert await agent.waiting_call(paused.run_id, "call-1") is None


# -- thread_runs -------------------------------------------------------------------


class NoScanStore(MemoryStore):
    """A store whose deployment-wide in-flight index must not be read."""

    async def runs_in_flight(self) -> list[str]:
        raise AssertionError("a thread's runs are read from the thread's index")


async def test_a_threads_runs_are_those_that_wait_or_work_oldest_first() -> None:
    store = NoScanStore()
    agent = deploy_agent(store)
    paused = await agent.generate("deploy api", thread_id=THREAD)
    working = await agent.stream("deploy api", thread_id=THREAD)  # saved, not yet read
    await agent.generate("deploy api", thread_id="slack:T1:C1:other")

    runs = await agent.thread_runs(THREAD)

    assert [(r.run_id, r.status) for r in runs] == [
        (paused.run_id, "paused"),
        (working.run_id, "running"),
    ]
    await working.result()


async def test_a_finished_or_stopped_run_is_not_among_the_threads_runs() -> None:
    agent = deploy_agent(NoScanStore())
    done = await agent.generate("deploy api", thread_id=THREAD)
    await agent.approve_tool_call_generate(run_id=done.run_id)
    stopped = await agent.generate("deploy api", thread_id=THREAD)
    await agent.stop_run(stopped.run_id, stopped_by="U1")
    waiting = await agent.generate("deploy api", thread_id=THREAD)

    assert [r.run_id for r in await agent.thread_runs(THREAD)] == [waiting.run_id]
    assert await agent.thread_runs("slack:T1:C1:never") == []


# -- answer_question for a named question -------------------------------------------


async def test_a_named_question_is_answered_even_when_a_newer_one_waits() -> None:
    store = MemoryStore()
    older = await release_agent("api", store=store).generate("release api", thread_id=THREAD)
    agent = release_agent("web", store=store)
    newer = await agent.generate("release web", thread_id=THREAD)

    stream = await agent.answer_question(
        "1.4.2", thread_id=THREAD, run_id=older.run_id, tool_call_id="ask-api"
    )

    assert stream is not None
    final = await stream.result()
    assert final.run_id == older.run_id
    assert [r.content for r in final.tool_results] == ["released api 1.4.2"]
    assert await agent.waiting_call(newer.run_id, "ask-web") is not None


async def test_a_named_question_that_does_not_wait_raises_why() -> None:
    store = MemoryStore()
    agent = release_agent("api", store=store)
    asked = await agent.generate("release api", thread_id=THREAD)
    answered = await agent.answer_question(
        "1.4.2", thread_id=THREAD, run_id=asked.run_id, tool_call_id="ask-api"
    )
    assert answered is not None
    await answered.result()
    approval = await deploy_agent(store).generate("deploy api", thread_id=THREAD)

    with pytest.raises(AlreadyDecidedError):
        await agent.answer_question(
            "1.5.0", thread_id=THREAD, run_id=asked.run_id, tool_call_id="ask-api"
        )
    with pytest.raises(ToolCallNotPendingError, match="waits for approval"):
        await agent.answer_question(
            "1.5.0", thread_id=THREAD, run_id=approval.run_id, tool_call_id="call-1"
        )
    with pytest.raises(RunNotFoundError):
        await agent.answer_question(
            "1.5.0", thread_id=THREAD, run_id="run-never", tool_call_id="ask-api"
        )
    with pytest.raises(ValueError, match="run_id and tool_call_id"):
        await agent.answer_question("1.5.0", thread_id=THREAD, run_id=asked.run_id)
    assert await agent.waiting_call(approval.run_id, "call-1") is not None


async def test_a_call_or_question_of_another_thread_is_not_this_threads() -> None:
    store = MemoryStore()
    approval = await deploy_agent(store).generate("deploy api", thread_id=THREAD)
    agent = release_agent("api", store=store)
    asked = await agent.generate("release api", thread_id=THREAD)

    assert await agent.waiting_call(approval.run_id, "call-1", thread_id=THREAD) is not None
    assert await agent.waiting_call(approval.run_id, "call-1", thread_id="elsewhere") is None
    with pytest.raises(ToolCallNotPendingError, match="not of this thread"):
        await agent.answer_question(
            "1.4.2", thread_id="elsewhere", run_id=asked.run_id, tool_call_id="ask-api"
        )
    assert await agent.waiting_call(asked.run_id, "ask-api") is not None


async def test_an_approval_called_off_is_declined_in_the_audit_and_to_a_late_click() -> None:
    agent = deploy_agent()
    paused = await agent.generate("deploy api", thread_id=THREAD)
    await agent.decline_tool_call_generate(run_id=paused.run_id, decided_by="U2", cancel=True)

    events = [e.event for e in await agent.audit(run_id=paused.run_id)]
    assert events == ["requested", "declined"]
    with pytest.raises(AlreadyDecidedError, match="already declined by U2"):
        await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-1")


# -- the audit log and the store -------------------------------------------------------


async def test_the_audit_log_is_read_and_written_through_the_agent() -> None:
    agent = deploy_agent()
    paused = await agent.generate("deploy api", thread_id=THREAD)
    vote = AuditEntry(
        event="voted",
        run_id=paused.run_id,
        thread_id=THREAD,
        tool_call_id="call-1",
        tool_name="deploy",
        actor="U2",
    )

    await agent.record(vote)

    assert [e.event for e in await agent.audit(run_id=paused.run_id)] == ["requested", "voted"]
    assert [e.actor for e in await agent.audit(thread_id=THREAD)] == [None, "U2"]
    assert await agent.audit(thread_id="slack:T1:C1:never") == []


async def test_the_agent_says_whether_its_store_answers() -> None:
    class DownStore(MemoryStore):
        async def ping(self) -> bool:
            return False

    assert await deploy_agent().ping() is True
    assert await deploy_agent(DownStore()).ping() is False
