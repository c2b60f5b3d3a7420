"""What a person approves is exactly what runs.

An answer given before approval fills the arguments it names and is validated
with them; the card shows the validated arguments; an approved call runs with
exactly those, and an answer that changes them after approval asks again.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import pytest
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from agents import (
    Agent,
    ArgsInvalidError,
    MemoryStore,
    ResumeDataInvalidError,
    RunSnapshot,
    Tool,
    ToolCall,
    ToolCallApprovalChunk,
    ToolContext,
    ToolErrorChunk,
    ToolResultChunk,
    tool,
)
from agents.snapshot import dump_snapshot, load_snapshot

from .helpers import call_then_answer


def exact_version(value: str) -> str:
    if re.fullmatch(r"\d+\.\d+\.\d+", value.strip()) is None:
        raise ValueError(f"{value!r} is not a version such as 1.4.2")
    return value.strip()


Version = Annotated[str, AfterValidator(exact_version)]


class VersionReply(BaseModel):
    version: Version


def one_tool_agent(
    only: Tool, args: dict[str, Any], *, call_id: str, agent_id: str = "ops"
) -> Agent:
    """An agent whose model calls ``only`` once with ``args``, then answers."""
    model = call_then_answer(ToolCall(only.name, args, id=call_id))
    return Agent(id=agent_id, model=model, tools=[only])


class Seen:
    """What the tool body was called with, call by call."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], Any, bool]] = []

    def __call__(self, args: dict[str, Any], ctx: ToolContext) -> None:
        self.calls.append((args, ctx.resume_data, ctx.approved))


def deploy_agent(seen: Seen, *, store: MemoryStore | None = None) -> Agent:
    def production(args: Any) -> bool:
        return bool(args.environment == "production" and args.version)

    @tool(require_approval=production, resume_schema=VersionReply)
    def deploy(
        ctx: ToolContext,
        environment: Annotated[str, BeforeValidator(lambda v: {"prod": "production"}.get(v, v))],
        version: Version | None = None,
    ) -> str:
        """Deploy; asks for the version when none is given."""
        seen({"environment": environment, "version": version}, ctx)
        if version is None:
            ctx.suspend({"message": "Which version?"})
        return f"deployed {version} to {environment}"

    return Agent(
        id="deployer",
        model=call_then_answer(ToolCall("deploy", {"environment": "prod"}, id="d-1")),
        tools=[deploy],
        store=store or MemoryStore(),
    )


async def test_an_answer_fills_the_argument_it_names_and_the_card_shows_it() -> None:
    seen = Seen()
    agent = deploy_agent(seen)
    first = await agent.generate("deploy to production")
    assert first.suspend_payload is not None
    assert first.suspend_payload.kind == "suspension"

    answered = await agent.resume_generate({"version": "1.4.2"}, run_id=first.run_id)
    assert answered.suspend_payload is not None
    assert answered.suspend_payload.kind == "approval"
    # Validated: the model's "prod" is shown as the "production" that will run.
    assert answered.suspend_payload.args == {"environment": "production", "version": "1.4.2"}
    assert len(seen.calls) == 1  # asked, not run

    final = await agent.approve_tool_call_generate(run_id=first.run_id, tool_call_id="d-1")
    assert "deployed 1.4.2 to production" in final.text
    # The answer the card showed goes along, validated, exactly as shown.
    answer = VersionReply(version="1.4.2")
    assert seen.calls[-1] == ({"environment": "production", "version": "1.4.2"}, answer, True)


async def test_an_answer_that_is_not_a_valid_argument_is_refused_and_the_question_stays() -> None:
    seen = Seen()
    agent = deploy_agent(seen)
    first = await agent.generate("deploy to production")
    with pytest.raises(ResumeDataInvalidError) as info:
        await agent.resume_generate({"version": "not 1.4.1 - use 1.5.0"}, run_id=first.run_id)
    assert "is not a version" in "; ".join(info.value.errors)
    assert [p.kind for p in (await agent.get_run(first.run_id)).pending] == ["suspension"]
    answered = await agent.resume_generate({"version": "1.5.0"}, run_id=first.run_id)
    assert answered.suspend_payload is not None
    assert answered.suspend_payload.args["version"] == "1.5.0"


async def awaiting_approval(seen: Seen) -> tuple[Agent, MemoryStore, RunSnapshot]:
    """A production deploy answered with 1.4.2, its card shown; and the paused run."""
    store = MemoryStore()
    agent = deploy_agent(seen, store=store)
    first = await agent.generate("deploy to production")
    await agent.resume_generate({"version": "1.4.2"}, run_id=first.run_id)
    snap = await store.load_run(first.run_id)
    assert snap is not None
    return agent, store, snap


async def test_an_approved_call_runs_with_its_card_arguments_whatever_the_model_asked() -> None:
    seen = Seen()
    agent, store, snap = await awaiting_approval(seen)
    # Nothing outside the card decides what runs: not the model's own call, even
    # if the record of it changes after the card was shown.
    snap.batch[0].args["version"] = "9.9.9"
    await store.save_run(snap)
    await agent.approve_tool_call_generate(run_id=snap.run_id)
    assert seen.calls[-1][0] == {"environment": "production", "version": "1.4.2"}


async def test_approved_arguments_that_no_longer_validate_do_not_run() -> None:
    seen = Seen()
    agent, store, snap = await awaiting_approval(seen)
    snap.pending[0].args["version"] = "latest"
    await store.save_run(snap)
    stream = await agent.approve_tool_call(run_id=snap.run_id)
    (error,) = [c.error async for c in stream if isinstance(c, ToolErrorChunk)]
    assert "no longer valid" in error
    assert len(seen.calls) == 1  # only the first attempt, which asked


class Region(BaseModel):
    region: str


class Confirmation(BaseModel):
    code: str


def restart_agent(ran: list[tuple[str, Any]]) -> Agent:
    @tool(require_approval=True, resume_schema=Region)
    def restart(ctx: ToolContext, service: str, region: str = "") -> str:
        """Restart a service; asks for the region after approval when none is given."""
        if not region:
            ctx.suspend({"message": "Which region?"})
        ran.append((region, ctx.approved))
        return f"restarted {service} in {region}"

    return one_tool_agent(restart, {"service": "api"}, call_id="r-1")


async def test_an_answer_after_approval_that_changes_the_arguments_asks_for_approval_again() -> (
    None
):
    ran: list[tuple[str, Any]] = []
    agent = restart_agent(ran)
    first = await agent.generate("restart the api")
    assert first.suspend_payload is not None
    assert first.suspend_payload.args == {"service": "api", "region": ""}
    asked = await agent.approve_tool_call_generate(run_id=first.run_id)
    assert asked.suspend_payload is not None
    assert asked.suspend_payload.kind == "suspension"

    stream = await agent.resume_stream({"region": "eu-west"}, run_id=first.run_id)
    cards = [c.payload async for c in stream if isinstance(c, ToolCallApprovalChunk)]
    assert [c.args for c in cards] == [{"service": "api", "region": "eu-west"}]
    assert ran == []  # approved for no region, so "eu-west" waits for its own approval

    final = await agent.approve_tool_call_generate(run_id=first.run_id)
    assert ran == [("eu-west", True)]
    assert "restarted api in eu-west" in final.text


async def test_an_answer_after_approval_that_keeps_the_arguments_runs_as_approved() -> None:
    codes: list[str] = []

    @tool(require_approval=True, resume_schema=Confirmation)
    def wipe(ctx: ToolContext, disk: str) -> str:
        """Wipe a disk; asks for the confirmation code shown on the console."""
        if ctx.resume_data is None:
            ctx.suspend({"message": "Type the code shown on the console."})
        codes.append(ctx.resume_data.code)
        return f"wiped {disk}"

    agent = one_tool_agent(wipe, {"disk": "sdb"}, call_id="w-1")
    first = await agent.generate("wipe sdb")
    await agent.approve_tool_call_generate(run_id=first.run_id)
    final = await agent.resume_generate({"code": "4711"}, run_id=first.run_id)
    assert codes == ["4711"]
    assert "wiped sdb" in final.text


async def test_a_check_refuses_a_call_that_can_only_fail_before_any_card() -> None:
    ran: list[str] = []
    known = {"abc-123"}

    def record_exists(args: Any) -> None:
        if args.record_id not in known:
            raise LookupError(f"No record with id {args.record_id!r}.")

    @tool(require_approval=True, check=record_exists)
    def delete_record(record_id: str) -> str:
        """Delete a record."""
        ran.append(record_id)
        return "deleted"

    agent = one_tool_agent(
        delete_record, {"record_id": "nope-1"}, call_id="x-1", agent_id="records"
    )
    stream = await agent.stream("delete record nope-1")
    chunks = [c async for c in stream]
    assert not [c for c in chunks if isinstance(c, ToolCallApprovalChunk)]
    (error,) = [c for c in chunks if isinstance(c, ToolErrorChunk)]
    assert error.error == "Tool delete_record was not run: No record with id 'nope-1'."
    result = await stream.result()
    assert result.finish_reason == "stop"
    assert "No record with id 'nope-1'" in result.text
    assert ran == []


async def test_a_check_that_passes_leaves_the_call_to_its_approval_rule() -> None:
    @tool(require_approval=True, check=lambda args, ctx: None)
    def delete_record(record_id: str) -> str:
        """Delete a record."""
        return "deleted"

    agent = one_tool_agent(
        delete_record, {"record_id": "abc-123"}, call_id="x-1", agent_id="records"
    )
    first = await agent.generate("delete record abc-123")
    assert first.suspend_payload is not None
    assert first.suspend_payload.kind == "approval"


class Reason(BaseModel):
    reason: str


async def test_an_answer_that_names_no_argument_is_shown_with_them_and_runs_as_approved() -> None:
    ran: list[tuple[str, str]] = []

    def justified(args: Any, ctx: ToolContext) -> bool:
        return ctx.resume_data is not None

    @tool(require_approval=justified, resume_schema=Reason)
    def purge(ctx: ToolContext, cache: str) -> str:
        """Purge a cache; asks why first."""
        if ctx.resume_data is None:
            ctx.suspend({"message": "Why purge it?"})
        ran.append((cache, ctx.resume_data.reason))
        return f"purged {cache}"

    agent = one_tool_agent(purge, {"cache": "cdn"}, call_id="p-1")
    first = await agent.generate("purge the cdn")
    card = await agent.resume_generate({"reason": "stale assets"}, run_id=first.run_id)
    assert card.suspend_payload is not None
    assert card.suspend_payload.kind == "approval"
    assert (card.suspend_payload.args, card.suspend_payload.answer) == (
        {"cache": "cdn"},
        {"reason": "stale assets"},
    )
    assert ran == []
    await agent.approve_tool_call_generate(run_id=first.run_id)
    assert ran == [("cdn", "stale assets")]  # once, with the answer the approver saw


async def test_set_arguments_run_as_approved_whatever_order_they_come_back_in() -> None:
    ran: list[set[str]] = []

    @tool(require_approval=True)
    def tag(labels: set[str]) -> str:
        """Tag with labels."""
        ran.append(labels)
        return "tagged"

    store = MemoryStore()
    agent = Agent(
        id="ops",
        model=call_then_answer(ToolCall("tag", {"labels": ["b", "a", "c"]}, id="t-1")),
        tools=[tag],
        store=store,
    )
    paused = await agent.generate("tag it")
    snap = await store.load_run(paused.run_id)
    assert snap is not None
    snap.pending[0].args["labels"].reverse()  # as another process may have dumped them
    await store.save_run(snap)
    await agent.approve_tool_call_generate(run_id=paused.run_id)
    assert ran == [{"a", "b", "c"}]


async def test_a_call_whose_tool_went_away_can_still_be_declined_or_approved() -> None:
    store = MemoryStore()

    @tool(require_approval=True)
    def wipe(disk: str) -> str:
        """Wipe a disk."""
        return "wiped"

    def build(tools: list[Any]) -> Agent:
        model = call_then_answer(ToolCall("wipe", {"disk": "sdb"}, id="w-1"))
        return Agent(id="ops", model=model, tools=tools, store=store)

    declined = await build([wipe]).generate("wipe sdb")
    approved = await build([wipe]).generate("wipe sdb")
    redeployed = build([])  # the tool is gone
    final = await redeployed.decline_tool_call_generate(run_id=declined.run_id, reason="no")
    assert final.finish_reason == "stop"
    assert "not approved" in final.text
    final = await redeployed.approve_tool_call_generate(run_id=approved.run_id)
    assert "Unknown tool 'wipe'" in final.text


async def test_a_default_the_tool_gained_after_the_card_is_refused_not_run() -> None:
    store = MemoryStore()
    ran: list[tuple[str, bool]] = []

    @tool(require_approval=True)
    def wipe(disk: str) -> str:
        """Wipe a disk."""
        return "wiped"

    @tool(require_approval=True, name="wipe")
    def wipe_more(disk: str, all_disks: bool = True) -> str:
        """Wipe a disk (or all of them)."""
        ran.append((disk, all_disks))
        return "wiped"

    def build(tools: list[Any]) -> Agent:
        model = call_then_answer(ToolCall("wipe", {"disk": "sdb"}, id="w-1"))
        return Agent(id="ops", model=model, tools=tools, store=store)

    paused = await build([wipe]).generate("wipe sdb")
    redeployed = build([wipe_more])  # the card showed {"disk": "sdb"} only
    final = await redeployed.approve_tool_call_generate(run_id=paused.run_id)
    assert ran == []
    assert "would not run with exactly the arguments that were approved" in final.text


async def test_an_answer_with_aliased_fields_runs_once_approved() -> None:
    ran: list[str] = []

    class Ticket(BaseModel):
        model_config = ConfigDict(populate_by_name=True)
        ticket_id: str = Field(alias="ticketId")

    def ticketed(args: Any, ctx: ToolContext) -> bool:
        return ctx.resume_data is not None

    @tool(require_approval=ticketed, resume_schema=Ticket)
    def change(ctx: ToolContext, what: str) -> str:
        """Make a change; asks for the change ticket first."""
        if ctx.resume_data is None:
            ctx.suspend({"message": "Which ticket?"})
        ran.append(ctx.resume_data.ticket_id)
        return "changed"

    agent = one_tool_agent(change, {"what": "dns"}, call_id="c-1")
    first = await agent.generate("change dns")
    card = await agent.resume_generate({"ticketId": "CHG-7"}, run_id=first.run_id)
    assert card.suspend_payload is not None
    assert card.suspend_payload.answer == {"ticketId": "CHG-7"}
    await agent.approve_tool_call_generate(run_id=first.run_id)
    assert ran == ["CHG-7"]


# -- approving edited arguments ---------------------------------------------------


def refund_agent(ran: list[dict[str, object]]) -> Agent:
    def at_most_500(args: Any) -> None:
        if args.amount > 500:
            raise ValueError("refunds above 500 go through finance")

    @tool(require_approval=True, check=at_most_500)
    def refund(order: str, amount: int, currency: Literal["EUR", "USD"] = "EUR") -> str:
        """Refund an order."""
        ran.append({"order": order, "amount": amount, "currency": currency})
        return f"refunded {amount} {currency} on {order}"

    return Agent(
        id="billing",
        model=call_then_answer(ToolCall("refund", {"order": "A-1", "amount": 150})),
        tools=[refund],
        store=MemoryStore(),
    )


async def test_an_approval_with_edited_arguments_runs_exactly_those_and_says_so() -> None:
    ran: list[dict[str, object]] = []
    agent = refund_agent(ran)
    paused = await agent.generate("refund A-1")
    final = await agent.approve_tool_call_generate(
        run_id=paused.run_id,
        decided_by="U2",
        args={"order": "A-1", "amount": "120", "currency": "USD"},
    )
    assert ran == [{"order": "A-1", "amount": 120, "currency": "USD"}]
    # The result is the tool's own, and the edit travels beside it.
    (result,) = final.tool_results
    assert result.content == "refunded 120 USD on A-1"
    assert result.edited_args == {"order": "A-1", "amount": 120, "currency": "USD"}
    assert final.text == "Done. refund ok: refunded 120 USD on A-1"
    audit = await agent.engine.store.list_audit(run_id=paused.run_id)
    assert [e.event for e in audit] == ["requested", "edited", "approved", "executed"]
    edited = audit[1]
    assert edited.previous_args == {"order": "A-1", "amount": 150, "currency": "EUR"}
    assert edited.args == {"order": "A-1", "amount": 120, "currency": "USD"}
    assert edited.actor == "U2"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"order": "A-1", "amount": "lots"}, "amount"),
        ({"order": "A-1", "amount": 900}, "refunds above 500 go through finance"),
        ({"amount": 100}, "order"),
    ],
)
async def test_an_edit_that_does_not_fit_changes_nothing(
    args: dict[str, object], error: str
) -> None:
    ran: list[dict[str, object]] = []
    agent = refund_agent(ran)
    paused = await agent.generate("refund A-1")
    with pytest.raises(ArgsInvalidError, match=error):
        await agent.approve_tool_call(run_id=paused.run_id, decided_by="U2", args=args)
    run = await agent.get_run(paused.run_id)
    assert run.pending[0].state == "pending"
    assert run.pending[0].args == {"order": "A-1", "amount": 150, "currency": "EUR"}
    assert ran == []
    # Still decidable as asked.
    await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="U2")
    assert ran == [{"order": "A-1", "amount": 150, "currency": "EUR"}]


async def test_the_result_chunk_of_an_edited_call_names_the_arguments_it_ran_with() -> None:
    agent = refund_agent([])
    paused = await agent.generate("refund A-1")
    stream = await agent.approve_tool_call(
        run_id=paused.run_id, decided_by="U2", args={"order": "A-1", "amount": 120}
    )
    results = [c async for c in stream if isinstance(c, ToolResultChunk)]
    assert [(c.result, c.edited_args) for c in results] == [
        ("refunded 120 EUR on A-1", {"order": "A-1", "amount": 120, "currency": "EUR"})
    ]


async def test_a_call_approved_as_asked_carries_no_edited_arguments() -> None:
    agent = refund_agent([])
    paused = await agent.generate("refund A-1")
    stream = await agent.approve_tool_call(run_id=paused.run_id, decided_by="U2")
    results = [c async for c in stream if isinstance(c, ToolResultChunk)]
    assert [c.edited_args for c in results] == [None]
    final = await stream.result()
    assert [r.edited_args for r in final.tool_results] == [None]
    stored = dump_snapshot(await agent.get_run(paused.run_id))
    assert "edited_args" not in stored


async def test_an_edited_call_keeps_its_edit_across_a_reload_of_its_run() -> None:
    agent = refund_agent([])
    paused = await agent.generate("refund A-1")
    await agent.approve_tool_call_generate(
        run_id=paused.run_id, decided_by="U2", args={"order": "A-1", "amount": 99}
    )
    run = load_snapshot(dump_snapshot(await agent.get_run(paused.run_id)))
    assert [r.edited_args for r in run.tool_results] == [
        {"order": "A-1", "amount": 99, "currency": "EUR"}
    ]


async def test_an_edit_that_changes_nothing_is_an_approval_like_any_other() -> None:
    ran: list[dict[str, object]] = []
    agent = refund_agent(ran)
    paused = await agent.generate("refund A-1")
    final = await agent.approve_tool_call_generate(
        run_id=paused.run_id, decided_by="U2", args={"order": "A-1", "amount": "150"}
    )
    assert ran == [{"order": "A-1", "amount": 150, "currency": "EUR"}]
    assert [r.edited_args for r in final.tool_results] == [None]
    audit = await agent.audit(run_id=paused.run_id)
    assert [e.event for e in audit] == ["requested", "approved", "executed"]
    assert (await agent.get_run(paused.run_id)).decisions[
        paused.pending[0].tool_call_id
    ].args is None
