"""Pre-execution approval: tool-level, per-call, predicates, and the typed errors."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from agents import (
    Agent,
    AlreadyDecidedError,
    AuditEntry,
    MemoryStore,
    RunChangedError,
    RunNotFoundError,
    RunNotPausedError,
    RunSnapshot,
    StandingAsk,
    StoreConflict,
    TextDeltaChunk,
    ToolCall,
    ToolCallApprovalChunk,
    ToolCallGrantedChunk,
    ToolCallNotPendingError,
    ToolResultChunk,
    tool,
)
from agents._decide import CLAIM_TRIES
from agents.stores import Remember

from .helpers import Counter, call_then_answer


def make_delete_agent(
    ran: Counter, *, store: MemoryStore | None = None, require: bool = True
) -> Agent:
    @tool(require_approval=require)
    async def delete_record(id: str) -> dict[str, bool]:
        """Delete a record by ID."""
        ran(id=id)
        return {"deleted": True}

    return Agent(
        id="my-agent",
        model=call_then_answer(
            ToolCall("delete_record", {"id": "abc-123"}, id="call-1"), before="Deleting it. "
        ),
        tools=[delete_record],
        store=store or MemoryStore(),
    )


async def test_tool_level_approval_pauses_then_approve_runs_the_tool() -> None:
    ran = Counter()
    agent = make_delete_agent(ran)
    stream = await agent.stream("Delete record abc-123")
    chunks = [c async for c in stream]
    approvals = [c for c in chunks if isinstance(c, ToolCallApprovalChunk)]
    assert len(approvals) == 1
    assert approvals[0].payload.tool_name == "delete_record"
    assert approvals[0].payload.args == {"id": "abc-123"}
    assert ran.count == 0

    approved = await agent.approve_tool_call(run_id=stream.run_id)
    text = "".join([t async for t in approved.text_stream])
    assert ran.calls == [{"id": "abc-123"}]
    assert 'delete_record ok: {"deleted": true}' in text
    assert (await approved.result()).finish_reason == "stop"


async def test_decline_never_runs_the_tool_and_the_model_sees_why() -> None:
    ran = Counter()
    agent = make_delete_agent(ran)
    stream = await agent.stream("Delete record abc-123")
    await stream.result()
    declined = await agent.decline_tool_call(run_id=stream.run_id)
    result = await declined.result()
    assert ran.count == 0
    assert "Tool call was not approved by the user" in result.text
    assert result.tool_results[-1].is_error


async def test_a_response_instead_of_the_tool_is_its_result_and_nothing_runs() -> None:
    ran = Counter()
    agent = make_delete_agent(ran)
    stream = await agent.stream("Delete record abc-123")
    await stream.result()
    responded = await agent.respond_tool_call(
        run_id=stream.run_id, response="Already deleted it by hand.", decided_by="U2"
    )
    result = await responded.result()
    assert ran.count == 0
    (given,) = result.tool_results
    assert (given.content, given.given_by, given.is_error) == (
        "Already deleted it by hand.",
        "U2",
        False,
    )
    run = await agent.get_run(stream.run_id)
    assert run.decisions["call-1"].action == "respond"
    entries = await agent.audit(run_id=stream.run_id)
    assert [e.event for e in entries] == ["requested", "responded"]
    assert (entries[-1].actor, entries[-1].reason) == ("U2", "Already deleted it by hand.")
    # A decided call is decided once: the response stands.
    with pytest.raises(AlreadyDecidedError):
        await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")


async def test_per_call_require_tool_approval_pauses_every_tool() -> None:
    ran = Counter()
    agent = make_delete_agent(ran, require=False)
    result = await agent.generate("Delete record abc-123", require_tool_approval=True)
    assert result.finish_reason == "suspended"
    assert ran.count == 0

    plain = await agent.generate("Delete record abc-123")
    assert plain.finish_reason == "stop"
    assert ran.count == 1


@pytest.mark.parametrize(
    ("tool_flag", "call_flag", "pauses"),
    [(False, False, False), (True, False, True), (False, True, True), (True, True, True)],
)
async def test_approval_is_the_or_of_tool_and_call_flags(
    tool_flag: bool, call_flag: bool, pauses: bool
) -> None:
    agent = make_delete_agent(Counter(), require=tool_flag)
    result = await agent.generate("Delete record abc-123", require_tool_approval=call_flag)
    assert (result.finish_reason == "suspended") is pauses


async def test_generate_suspended_then_approve_generate_gives_the_final_text() -> None:
    ran = Counter()
    agent = make_delete_agent(ran)
    output = await agent.generate("Delete record abc-123")
    assert output.finish_reason == "suspended"
    assert output.suspend_payload is not None
    assert output.suspend_payload.tool_name == "delete_record"
    assert output.suspend_payload.tool_call_id == "call-1"
    assert output.suspend_payload.args == {"id": "abc-123"}

    final = await agent.approve_tool_call_generate(
        run_id=output.run_id, tool_call_id=output.suspend_payload.tool_call_id
    )
    assert final.finish_reason == "stop"
    assert "deleted" in final.text
    assert ran.count == 1


async def test_decline_generate_delivers_a_custom_reason() -> None:
    ran = Counter()
    agent = make_delete_agent(ran)
    output = await agent.generate("Delete record abc-123")
    final = await agent.decline_tool_call_generate(
        run_id=output.run_id, tool_call_id="call-1", reason="that record is audited"
    )
    assert ran.count == 0
    result = final.tool_results[-1]
    assert result.is_error
    assert result.content == (
        "Tool call was not approved by the user. Reason: that record is audited"
    )
    assert "Reason: that record is audited" in final.text


@pytest.mark.parametrize(("amount", "pauses"), [(150.0, True), (50.0, False)])
async def test_predicate_approval_only_pauses_large_refunds(amount: float, pauses: bool) -> None:
    ran = Counter()

    @tool(require_approval=lambda args: args.amount > 100)
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        ran(order_id=order_id, amount=amount)
        return f"refunded {amount}"

    agent = Agent(
        id="billing",
        model=call_then_answer(ToolCall("refund", {"order_id": "o-1", "amount": amount})),
        tools=[refund],
    )
    result = await agent.generate("refund order o-1")
    assert (result.finish_reason == "suspended") is pauses
    assert ran.count == (0 if pauses else 1)


async def test_a_raising_predicate_fails_closed() -> None:
    def broken(args: object) -> bool:
        raise RuntimeError("policy service down")

    @tool(require_approval=broken)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    agent = Agent(
        id="billing",
        model=call_then_answer(ToolCall("refund", {"order_id": "o-1"})),
        tools=[refund],
    )
    assert (await agent.generate("refund o-1")).finish_reason == "suspended"


async def test_async_predicate_with_context_is_awaited() -> None:
    seen: list[str] = []

    async def over_limit(args: object, ctx: object) -> bool:
        seen.append(type(ctx).__name__)
        return True

    @tool(require_approval=over_limit)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    agent = Agent(
        id="billing", model=call_then_answer(ToolCall("refund", {"order_id": "o"})), tools=[refund]
    )
    assert (await agent.generate("refund")).finish_reason == "suspended"
    assert seen == ["ToolContext"]


async def test_unknown_run_id_is_a_typed_error() -> None:
    agent = make_delete_agent(Counter())
    with pytest.raises(RunNotFoundError) as info:
        await agent.approve_tool_call(run_id="run_nope")
    assert info.value.run_id == "run_nope"


@pytest.mark.parametrize("call_id", ["", "call-404"])
async def test_a_call_that_is_not_pending_is_a_typed_error_and_changes_nothing(
    call_id: str,
) -> None:
    ran = Counter()
    agent = make_delete_agent(ran)
    output = await agent.generate("Delete record abc-123")
    with pytest.raises(ToolCallNotPendingError) as info:
        await agent.approve_tool_call(run_id=output.run_id, tool_call_id=call_id)
    assert info.value.run_id == output.run_id
    assert info.value.tool_call_id == call_id
    snap = await agent.get_run(output.run_id)
    assert snap.status == "paused"
    assert snap.pending[0].state == "pending"
    assert ran.count == 0


async def test_approving_twice_is_an_error_and_the_tool_runs_once() -> None:
    ran = Counter()
    agent = make_delete_agent(ran)
    output = await agent.generate("Delete record abc-123")
    first = await agent.approve_tool_call(run_id=output.run_id, decided_by="U1")
    with pytest.raises(AlreadyDecidedError):
        await agent.approve_tool_call(run_id=output.run_id, tool_call_id="call-1")
    await first.result()
    with pytest.raises(AlreadyDecidedError) as info:
        await agent.approve_tool_call(run_id=output.run_id, tool_call_id="call-1")
    assert info.value.decision.decided_by == "U1"
    with pytest.raises(RunNotPausedError):
        await agent.approve_tool_call(run_id=output.run_id)
    assert ran.count == 1


async def test_second_click_while_the_first_is_running_names_the_decider() -> None:
    ran = Counter()
    agent = make_delete_agent(ran)
    output = await agent.generate("Delete record abc-123")
    first = await agent.approve_tool_call(run_id=output.run_id, decided_by="U1")
    with pytest.raises(AlreadyDecidedError) as info:
        await agent.decline_tool_call(run_id=output.run_id, tool_call_id="call-1")
    assert info.value.decision.decided_by == "U1"
    assert info.value.decision.action == "approve"
    assert "approved by U1" in str(info.value)
    await first.result()
    assert ran.count == 1


async def test_text_before_the_pause_plus_text_after_equals_the_final_text() -> None:
    agent = make_delete_agent(Counter())
    stream = await agent.stream("Delete record abc-123")
    before = "".join([c.text async for c in stream if isinstance(c, TextDeltaChunk)])
    approved = await agent.approve_tool_call(run_id=stream.run_id)
    after = "".join([t async for t in approved.text_stream])
    final = await approved.result()
    assert before == "Deleting it. "
    assert before + after == final.text


async def test_cold_resume_from_a_new_agent_instance_over_the_same_store() -> None:
    store = MemoryStore()
    ran = Counter()
    first = make_delete_agent(ran, store=store)
    output = await first.generate("Delete record abc-123")
    assert output.finish_reason == "suspended"

    second = make_delete_agent(ran, store=store)
    final = await second.approve_tool_call_generate(run_id=output.run_id)
    assert final.finish_reason == "stop"
    assert ran.count == 1


async def test_tool_result_chunk_carries_the_output() -> None:
    agent = make_delete_agent(Counter())
    output = await agent.generate("Delete record abc-123")
    stream = await agent.approve_tool_call(run_id=output.run_id)
    results = [c async for c in stream if isinstance(c, ToolResultChunk)]
    assert results[0].result == {"deleted": True}


async def test_a_decision_that_loses_a_write_race_is_a_typed_error_and_changes_nothing() -> None:
    class Raced(MemoryStore):
        conflicts = 0

        async def save_run(
            self,
            snapshot: RunSnapshot,
            audit: Sequence[AuditEntry] = (),
            *,
            remember: Remember | None = None,
        ) -> RunSnapshot:
            if self.conflicts:
                self.conflicts -= 1
                raise StoreConflict(snapshot.run_id, snapshot.revision, None)
            return await super().save_run(snapshot, audit, remember=remember)

    store = Raced()

    @tool(require_approval=True)
    def wipe(disk: str) -> str:
        """Wipe a disk."""
        return "wiped"

    agent = Agent(
        id="ops",
        model=call_then_answer(ToolCall("wipe", {"disk": "sdb"}, id="w-1")),
        tools=[wipe],
        store=store,
    )
    paused = await agent.generate("wipe sdb")
    store.conflicts = CLAIM_TRIES  # the run changes under every try
    with pytest.raises(RunChangedError) as info:
        await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="w-1")
    assert (info.value.run_id, info.value.tool_call_id) == (paused.run_id, "w-1")
    snap = await agent.get_run(paused.run_id)
    assert [(p.tool_call_id, p.state) for p in snap.pending] == [("w-1", "pending")]
    events = [e.event for e in await store.list_audit(run_id=paused.run_id)]
    assert events == ["requested"]  # the lost claim's entry went with its save
    store.conflicts = 1  # a write got there first once: read again and claimed
    final = await agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="w-1")
    assert "wipe ok: wiped" in final.text
    assert [e.event for e in await store.list_audit(run_id=paused.run_id)].count("approved") == 1


async def test_a_sibling_decided_by_another_process_mid_tool_is_kept_when_the_first_finishes() -> (
    None
):
    """Process A runs x while process B decides and runs y: A's outcome lands on B's."""
    ran: list[str] = []
    started, hold = asyncio.Event(), asyncio.Event()

    @tool(require_approval=True)
    async def restart(service: str) -> str:
        """Restart a service."""
        if service == "api":
            started.set()
            await hold.wait()
        ran.append(service)
        return f"{service} restarted"

    store = MemoryStore()

    def process() -> Agent:
        model = call_then_answer(
            ToolCall("restart", {"service": "api"}, id="x"),
            ToolCall("restart", {"service": "web"}, id="y"),
        )
        return Agent(id="ops", model=model, tools=[restart], store=store)

    a, b = process(), process()
    paused = await a.generate("restart both")
    first = asyncio.create_task(
        a.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="x")
    )
    await started.wait()
    second = await b.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="y")
    assert second.finish_reason == "suspended"  # x is still running in A
    hold.set()
    final = await first

    assert final.finish_reason == "stop"
    assert "api restarted" in final.text
    assert "web restarted" in final.text
    assert sorted(ran) == ["api", "web"]
    assert (await a.get_run(paused.run_id)).status == "finished"


async def test_a_standing_approval_runs_a_gated_call_at_once_and_says_who_granted_it() -> None:
    ran: list[str] = []

    @tool(require_approval=True)
    def restart(service: str) -> str:
        """Restart a service."""
        ran.append(service)
        return f"restarted {service}"

    asked: list[StandingAsk] = []

    async def standing(ask: StandingAsk) -> str | None:
        asked.append(ask)
        return "U9" if ask.thread_id == "granted" else None

    agent = Agent(
        id="ops",
        model=call_then_answer(ToolCall("restart", {"service": "api"})),
        tools=[restart],
        store=MemoryStore(),
        standing_approval=standing,
    )
    stream = await agent.stream("restart api", thread_id="granted", resource_id="U1")
    granted = [c async for c in stream if isinstance(c, ToolCallGrantedChunk)]
    assert [(g.tool_name, g.granted_by, g.args) for g in granted] == [
        ("restart", "U9", {"service": "api"})
    ]
    assert (await stream.result()).finish_reason == "stop"
    assert ran == ["api"]
    assert asked[0].requester == "U1"
    audit = await agent.engine.store.list_audit(thread_id="granted")
    assert [(e.event, e.actor) for e in audit] == [("granted", "U9")]

    # Elsewhere nothing stands: a card as usual.
    paused = await agent.generate("restart api", thread_id="other", resource_id="U1")
    assert paused.finish_reason == "suspended"


async def test_a_standing_approval_lookup_that_fails_asks_as_usual() -> None:
    @tool(require_approval=True)
    def restart(service: str) -> str:
        """Restart a service."""
        return "restarted"

    async def broken(ask: StandingAsk) -> str | None:
        raise ConnectionError("the chat state is down")

    agent = Agent(
        id="ops",
        model=call_then_answer(ToolCall("restart", {"service": "api"})),
        tools=[restart],
        store=MemoryStore(),
        standing_approval=broken,
    )
    paused = await agent.generate("restart api", thread_id="t", resource_id="U1")
    assert paused.finish_reason == "suspended"
