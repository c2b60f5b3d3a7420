"""Turns of a run: model turns, tool batches, gating, pauses and delegation.

``Turns`` takes the frozen agent spec and a snapshot and moves the run on
until it finishes or pauses. All state that must survive a restart is in the
snapshot, saved with a compare-and-set on its revision. Decisions on paused
runs are ``_decide``'s; crash recovery is ``_recover``'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any, Literal

from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel, ValidationError

from . import provenance, texts
from ._calls import (
    CallPredicate,
    Expiry,
    Granted,
    Outcome,
    StandingApproval,
    error_chunk,
    error_outcome,
)
from ._saves import Saves
from .chunks import (
    Chunk,
    ErrorChunk,
    TextDeltaChunk,
    ToolCallChunk,
    ToolResultChunk,
)
from .errors import (
    validation_messages,
)
from .messages import Message, TextPart, ToolCallPart, ToolResultPart
from .models.base import ModelError, ModelFinish, ModelRequest, TextDelta, ToolCallEvent
from .snapshot import (
    AuditEntry,
    AuditEvent,
    Decision,
    FinishReason,
    PendingCall,
    RunSnapshot,
    StopRequest,
)
from .spec import AgentSpec, DelegationInput
from .stores.base import Store, StoreConflict, tree_run_id
from .tools import Tool, ToolContext, ToolSuspended, jsonable, render_result
from .tracing import TRACER

log = logging.getLogger(__name__)


def lock_name(root_run_id: str) -> str:
    """The store lock that serializes a stop, announcing and crash recovery on one run
    tree (decisions take none: they compare-and-set)."""
    return f"run:{root_run_id}"


class Turns(Saves):
    """Drives the runs of one agent tree over one store: model turns and tool batches."""

    def __init__(
        self,
        root: AgentSpec,
        store: Store,
        *,
        expiry: Expiry | None = None,
        standing: StandingApproval | None = None,
    ) -> None:
        self.root = root
        self.store = store
        self._predicates: dict[str, CallPredicate] = {}
        self.expiry = expiry
        """Per-tool expiry that wins over the tools' own (``Agent.expiry``)."""
        self.standing = standing
        """Who already approved calls like a new one (``Agent.standing_approval``)."""
        self.saved: OrderedDict[str, RunSnapshot] = OrderedDict()
        """The last snapshot of each top run this process saved (a session ends with it)."""
        self.unsaved: dict[str, dict[str, RunSnapshot]] = {}
        """Per top run, sub-agent runs whose latest state the next save of a run of its
        tree writes with it (``defer``): a new one, and one that just paused or ended."""
        self.stops: OrderedDict[str, StopRequest] = OrderedDict()
        """Top runs stopped from this process (``Engine.stop``): a drive here ends at once
        instead of at its next save (which is how a drive elsewhere hears of it)."""

    # -- lookups --------------------------------------------------------------

    def register_predicate(self, root_run_id: str, predicate: CallPredicate) -> None:
        """Keep a per-call approval predicate for a run (in this process only)."""
        self._predicates[root_run_id] = predicate

    # -- the model loop -------------------------------------------------------

    async def drive(
        self, snap: RunSnapshot, shown: list[PendingCall] | None = None, *, again: bool = False
    ) -> AsyncIterator[Chunk]:
        """Continue a running run: model turns and tool batches until done or paused.

        A top run that pauses announces the calls it asked in that save and adds
        them to ``shown``: its session yields their approval or question chunks.

        ``again``: the process that drove the run died (crash recovery). A model turn
        it was in is simply asked again: the run was saved before it. A batch it left
        open was saved before its tools ran (``started``): of those without a result,
        an idempotent call runs again and any other gets a result saying it may or
        may not have run; calls that never started are gated again.
        """
        agent = self.agent_at(snap.agent_path)
        path = tuple(snap.agent_path)
        try:
            calls: list[ToolCallPart] = []
            if again:
                await self.load_history(snap)
                calls, cut = self._reopen(agent, snap)
                for call in cut:
                    yield error_chunk(snap, call, snap.results[call.tool_call_id].content)
            if not calls:
                self._close_batch(snap)
            while True:
                if not calls:
                    turn = self._turn(agent, snap)
                    async for chunk in turn:
                        yield chunk
                    if snap.status != "running":
                        break
                    calls = snap.batch
                outcomes: dict[str, Outcome] = {}
                async for chunk in self._run_batch(agent, snap, calls, outcomes):
                    yield chunk
                for call in calls:
                    outcome = outcomes.get(call.tool_call_id)  # none: stopped before it ran
                    if outcome is not None and outcome.result is not None:
                        snap.results[call.tool_call_id] = outcome.result
                    elif outcome is not None:
                        snap.pending.extend(outcome.pending or [])
                calls = []
                if self.stopping(snap):
                    self.end_stopped(snap)  # what the batch asked for is never shown
                    break
                if snap.pending:
                    snap.status = "paused"
                    break
                self._close_batch(snap)
                # A checkpoint per step: progress stays visible to crash recovery,
                # which takes a run that has not changed for a while as crashed, and a
                # crash in the next model turn asks it again (no tool runs twice).
                await self._checkpoint(snap)
        except ModelError as exc:
            log.warning("run %s: model error: %s", snap.run_id, exc)
            snap.status, snap.finish_reason, snap.error = "failed", "error", exc.user_message
            yield ErrorChunk(run_id=snap.run_id, agent_path=path, error=exc.user_message)
        except Exception:
            log.exception("run %s failed", snap.run_id)
            message = texts.RUN_CRASHED
            snap.status, snap.finish_reason, snap.error = "failed", "error", message
            yield ErrorChunk(run_id=snap.run_id, agent_path=path, error=message)
        fresh: list[PendingCall] = []
        if shown is not None and snap.is_root and snap.status == "paused":
            # Asked by this very drive, so announced with the save that pauses the
            # run (its revision check makes that save the only one that does).
            fresh = [p for p in snap.pending if p.state == "pending" and not p.announced]
            for asked in fresh:
                asked.announced = True
        if not snap.is_root:
            self.defer(snap)  # its parent's next write takes it in (``defer``)
            return
        try:
            await self.save(snap, [audit_entry(snap, asked, "requested") for asked in fresh])
        except StoreConflict:
            if not await self._adopt_stop(snap):
                raise
            fresh = []  # stopped meanwhile: what it asked is never shown
            await self.save(snap)
        if shown is not None:
            shown.extend(fresh)
        if snap.is_root and snap.status != "paused":
            self._predicates.pop(snap.run_id, None)

    async def _turn(self, agent: AgentSpec, snap: RunSnapshot) -> AsyncIterator[Chunk]:
        """One model turn: what it says, and the calls it asks for as the run's new
        ``batch``; or the run's end (stopped, out of steps, or answered)."""
        path = tuple(snap.agent_path)
        if self.stopping(snap):
            self.end_stopped(snap)
            return
        if snap.steps >= snap.options.max_steps:
            snap.status, snap.finish_reason = "finished", "max_steps"
            return
        snap.steps += 1
        calls: list[ToolCallPart] = []
        text = ""
        stop = "end_turn"
        request = ModelRequest(
            system=agent.instructions, messages=list(snap.messages), tools=agent.tool_specs()
        )
        events = agent.model.stream(request)
        # Not the current span: the turn yields to its reader in between.
        span = TRACER.start_span(
            f"chat {agent.model.name}",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": agent.model.name,
                "gen_ai.agent.name": "/".join(path),
            },
        )
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    text += event.text
                    yield TextDeltaChunk(run_id=snap.run_id, agent_path=path, text=event.text)
                elif isinstance(event, ToolCallEvent):
                    calls.append(event.call)
                elif isinstance(event, ModelFinish):
                    stop = event.stop_reason
                    snap.usage = snap.usage + event.usage
                    span.set_attributes(
                        {
                            "gen_ai.usage.input_tokens": event.usage.input_tokens,
                            "gen_ai.usage.output_tokens": event.usage.output_tokens,
                            "gen_ai.response.finish_reasons": [stop],
                        }
                    )
                if snap.root_run_id in self.stops:
                    break  # stopped here: the model is cut off mid-answer
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(StatusCode.ERROR, str(exc))
            raise
        finally:
            span.end()
            await _close(events)
        stopped = self.stopping(snap) is not None
        if stopped:
            calls = []  # what the model asked for as it was stopped never runs
        # The history says the answer was cut off, so the next turn knows.
        said = text or (texts.STOPPED_REPLY if stopped else "")
        parts: list[TextPart | ToolCallPart] = [TextPart(text=said)] if said else []
        snap.messages.append(Message(role="assistant", parts=[*parts, *calls]))
        snap.text += text
        if stopped:
            self.end_stopped(snap)
            return
        if not calls:
            snap.status = "finished"
            snap.finish_reason = _finish_reason(stop)
            return
        snap.batch = calls
        snap.tool_calls.extend(calls)
        for call in calls:
            yield ToolCallChunk(
                run_id=snap.run_id,
                agent_path=path,
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                args=call.args,
            )

    def _reopen(
        self, agent: AgentSpec, snap: RunSnapshot
    ) -> tuple[list[ToolCallPart], list[ToolCallPart]]:
        """A batch a crash left open: the calls to run now (never started, or idempotent),
        and those cut off (given a result saying they may or may not have run)."""
        waiting = {p.tool_call_id for p in snap.pending}
        again: list[ToolCallPart] = []
        cut: list[ToolCallPart] = []
        for call in snap.batch:
            if call.tool_call_id in snap.results or call.tool_call_id in waiting:
                continue
            tool = agent.tool(call.tool_name)
            if call.tool_call_id in snap.started and not (tool is not None and tool.idempotent):
                text = texts.INTERRUPTED_CALL.format(tool=call.tool_name)
                snap.results[call.tool_call_id] = ToolResultPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    content=text,
                    is_error=True,
                )
                cut.append(call)
            else:
                again.append(call)
        return again, cut

    async def _checkpoint(self, snap: RunSnapshot) -> None:
        """Save a run being driven; a save lost to a stop takes the stop on (the only
        write others make to a run someone drives) and saves again."""
        try:
            await self.save(snap)
        except StoreConflict:
            if not await self._adopt_stop(snap):
                raise
            await self.save(snap)

    # -- stopping ---------------------------------------------------------------

    def stopping(self, snap: RunSnapshot) -> StopRequest | None:
        """Whether someone stopped ``snap``'s run tree (its snapshot says so, or it was
        stopped from this process)."""
        return snap.stop or self.stops.get(snap.root_run_id)

    def end_stopped(self, snap: RunSnapshot) -> list[PendingCall]:
        """End a run someone stopped: the calls still waiting are dropped (returned) and
        each call of its batch without a result is kept in its history as never run."""
        snap.stop = self.stopping(snap)
        snap.status, snap.finish_reason = "stopped", "stopped"
        dropped = [p for p in snap.pending if p.state == "pending"]
        snap.pending, snap.busy_children = [], []
        for call in snap.batch:
            if call.tool_call_id not in snap.results:
                snap.results[call.tool_call_id] = ToolResultPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    content=texts.STOPPED,
                    is_error=True,
                )
        self._close_batch(snap)
        if snap.is_root:
            self.stops.pop(snap.run_id, None)
            self._predicates.pop(snap.run_id, None)
        return dropped

    async def _adopt_stop(self, snap: RunSnapshot) -> bool:
        """After a save of a driven top run lost to another write: whether that write was
        a stop (the only write others make to a run someone drives). If so, ``snap``
        takes it on (ending now if it was about to pause) and may be saved again."""
        if not snap.is_root:
            return False
        stored = await self.store.load_run(snap.run_id)
        if stored is None or stored.stop is None:
            return False
        snap.stop, snap.revision = stored.stop, stored.revision
        if snap.status == "paused":
            self.end_stopped(snap)
        return True

    def _close_batch(self, snap: RunSnapshot) -> None:
        """Send a fully resolved batch's results to the model, in call order."""
        if not snap.batch:
            return
        results = [snap.results[c.tool_call_id] for c in snap.batch]
        snap.messages.append(Message(role="user", parts=list(results)))
        snap.tool_results.extend(results)
        snap.batch, snap.results, snap.started = [], {}, []

    # -- tool batches ---------------------------------------------------------

    async def _run_batch(
        self,
        agent: AgentSpec,
        snap: RunSnapshot,
        calls: list[ToolCallPart],
        outcomes: dict[str, Outcome],
    ) -> AsyncIterator[Chunk]:
        """Gate every call, then run the ungated ones concurrently, once the batch is
        saved saying they started (``RunSnapshot.started``): a crash while they run
        is then told apart from one in a model turn, which is simply asked again."""
        runs: list[AsyncIterator[Chunk]] = []
        starting: list[str] = []
        for call in calls:
            tool = agent.tool(call.tool_name)
            if tool is None:
                error = texts.UNKNOWN_TOOL.format(tool=call.tool_name)
                outcomes[call.tool_call_id] = error_outcome(call, error)
                yield error_chunk(snap, call, error)
                continue
            try:
                args = tool.validate_args(call.args)
            except ValidationError as exc:
                error = texts.INVALID_ARGUMENTS.format(errors="; ".join(validation_messages(exc)))
                outcomes[call.tool_call_id] = error_outcome(call, error)
                yield error_chunk(snap, call, error)
                continue
            gated = await self.gate(snap, tool, call, args)
            if isinstance(gated, Granted):
                yield await self.granted(snap, tool, call, args, gated)
                runs.append(self.execute(agent, snap, call, tool, args, outcomes, approved=True))
                starting.append(call.tool_call_id)
                continue
            if gated is not None:
                outcomes[call.tool_call_id] = gated
                if gated.result is not None:
                    said = gated.result.content
                    yield error_chunk(snap, call, said, declined_by=gated.declined_by)
                continue
            runs.append(self.execute(agent, snap, call, tool, args, outcomes))
            starting.append(call.tool_call_id)
        if not runs:
            return
        snap.started = [*snap.started, *(i for i in starting if i not in snap.started)]
        await self._checkpoint(snap)
        if self.stopping(snap):
            return  # stopped meanwhile: none of them runs
        async for chunk in _merge(runs):
            yield chunk

    async def execute(
        self,
        agent: AgentSpec,
        snap: RunSnapshot,
        call: ToolCallPart,
        tool: Tool,
        args: BaseModel,
        outcomes: dict[str, Outcome],
        *,
        approved: bool = False,
        resume_data: Any = None,
        suspended: Any = None,
        declined: Literal["decline", "cancel"] | None = None,
        edited_args: dict[str, Any] | None = None,
    ) -> AsyncIterator[Chunk]:
        """Run one tool call (or delegation); record its outcome in ``outcomes``.

        ``resume_data`` answers the suspension whose payload was ``suspended``;
        ``declined`` says the person declined (or cancelled) it instead.
        ``edited_args``: the arguments a person edited before approving (``args``
        validated), carried beside the result so the model hears what ran."""
        if tool.delegate_to is not None:
            async for chunk in self._delegate(agent, snap, call, tool.delegate_to, args, outcomes):
                yield chunk
            return
        ctx = self.context(
            snap,
            call,
            approved=approved,
            resume_data=resume_data,
            suspended=suspended,
            declined=declined,
        )
        try:
            value = await _invoked(tool, call, args, ctx)
        except ToolSuspended as asked:
            waiting = self.pending(
                snap,
                tool,
                call,
                "suspension",
                args,
                asked.payload,
                approved=approved,
                answer_schema=asked.schema,
            )
            outcomes[call.tool_call_id] = Outcome(pending=[waiting])
            return
        except Exception as exc:
            log.info("tool %s failed: %r", call.tool_name, exc)
            error = texts.TOOL_FAILED.format(tool=call.tool_name, error=exc)
            outcomes[call.tool_call_id] = error_outcome(call, error, edited_args=edited_args)
            yield error_chunk(snap, call, error)
            return
        outcomes[call.tool_call_id] = Outcome(
            result=ToolResultPart(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                content=render_result(value),
                edited_args=edited_args,
            )
        )
        yield ToolResultChunk(
            run_id=snap.run_id,
            agent_path=tuple(snap.agent_path),
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            result=jsonable(value),
            edited_args=edited_args,
        )

    async def _delegate(
        self,
        agent: AgentSpec,
        snap: RunSnapshot,
        call: ToolCallPart,
        key: str,
        args: BaseModel,
        outcomes: dict[str, Outcome],
    ) -> AsyncIterator[Chunk]:
        """Hand a task to a sub-agent in a child run, streaming its chunks through."""
        assert isinstance(args, DelegationInput)
        sub = agent.agents[key]
        child = RunSnapshot(
            run_id=tree_run_id(snap.root_run_id),
            agent_path=[*snap.agent_path, key],
            root_run_id=snap.root_run_id,
            parent_run_id=snap.run_id,
            parent_call_id=call.tool_call_id,
            thread_id=snap.thread_id,
            resource_id=snap.resource_id,
            resource_name=snap.resource_name,
            trace=snap.trace,
            options=snap.options.model_copy(update={"max_steps": sub.options.max_steps}),
            messages=[Message.user(args.task)],
        )
        self.defer(child)  # written with the next save of the tree: its own, or ours
        async for chunk in self.drive(child):
            yield chunk
        outcomes[call.tool_call_id] = self.child_outcome(child, call.tool_call_id)
        if outcomes[call.tool_call_id].result is not None:
            yield ToolResultChunk(
                run_id=snap.run_id,
                agent_path=tuple(snap.agent_path),
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                result=child.text,
            )


async def _close(events: AsyncIterator[Any]) -> None:
    """Close a model's event stream that was left early (its connection goes now)."""
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


def _finish_reason(stop: str) -> FinishReason:
    return {"max_tokens": "length", "refusal": "refusal"}.get(stop, "stop")  # type: ignore[return-value]


async def _merge(sources: list[AsyncIterator[Chunk]]) -> AsyncIterator[Chunk]:
    """Interleave several chunk sources running concurrently, in arrival order."""
    if len(sources) == 1:
        async for chunk in sources[0]:
            yield chunk
        return
    if not sources:
        return
    queue: asyncio.Queue[Chunk | None] = asyncio.Queue()

    async def pump(source: AsyncIterator[Chunk]) -> None:
        try:
            async for chunk in source:
                await queue.put(chunk)
        finally:
            await queue.put(None)

    tasks = [asyncio.create_task(pump(s)) for s in sources]
    remaining = len(tasks)
    try:
        while remaining:
            item = await queue.get()
            if item is None:
                remaining -= 1
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            raise result


async def _invoked(tool: Tool, call: ToolCallPart, args: BaseModel, ctx: ToolContext) -> Any:
    """``tool.invoke``, as a span of what is current (a question it asks is no error)."""
    with TRACER.start_as_current_span(
        f"execute_tool {call.tool_name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool_name,
            "gen_ai.tool.call.id": call.tool_call_id,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            return await tool.invoke(args, ctx)
        except ToolSuspended:
            span.set_attribute("gen_ai.tool.suspended", True)
            raise
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(StatusCode.ERROR, str(exc))
            raise


def audit_entry(
    top: RunSnapshot,
    call: PendingCall,
    event: AuditEvent,
    decision: Decision | None = None,
    *,
    actor: str | None = None,
) -> AuditEntry:
    """The audit log's record of ``event`` on a call of the top run ``top``, with where
    the request being handled came from (``agents.provenance``)."""
    entry = AuditEntry(
        event=event,
        run_id=top.run_id,
        thread_id=top.thread_id,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        args=call.args,
        kind=call.kind,
        requester=call.requester,
        requester_name=call.requester_name,
        actor=decision.decided_by if decision else actor,
        # What a person answered for the tool is on record as why it did not run.
        reason=(decision.reason or decision.response) if decision else None,
    )
    return provenance.current().stamp(entry)
