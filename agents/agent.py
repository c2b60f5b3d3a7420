"""Agents: a model, instructions, tools and sub-agents, with human approval built in."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from . import provenance
from ._calls import CallPredicate, Expiry, StandingApproval
from ._decide import select_pending
from ._engine import DEFAULT_LEASE, Engine
from .chain import AuditChain, Seal
from .chunks import AgentResult, PendingInfo
from .errors import AgentError, ResumeDataInvalidError, ToolCallNotPendingError
from .messages import Message
from .models.base import Model, ModelError, StructuredRequest, ToolSpec
from .runs import ExpiredCall, RecoveredRun, StoppedRun
from .snapshot import AuditEntry, Decision, RunOptions, RunSnapshot, utcnow
from .spec import AgentOptions, AgentSpec, tools_by_name
from .stores.base import (
    AUDIT_PRUNE_BATCH,
    AUDIT_READ_BATCH,
    PRUNE_BATCH,
    Pruned,
    Store,
    tree_run_id,
)
from .stores.memory import MemoryStore
from .stream import AgentStream
from .tools import LiveTools, Tool, ToolSource
from .tracing import carried

Input = str | Message | Sequence[str | Message]


@dataclass(kw_only=True, eq=False)
class Agent:
    """An agent: a model with instructions, tools and optionally sub-agents.

    Sub-agents (``agents={"data": data_agent}``) are offered to the model as tools
    named ``agent-<key>``; their approvals and suspensions surface in this
    agent's stream and are decided here with this agent's run id.

    A decision (``approve_tool_call``, ``decline_tool_call``, ``resume_stream``,
    ``answer_question``) is claimed when the call returns, but its work is done by
    whoever reads (consumes) the stream it returns: that reader carries out the
    tool and the rest of the run. A stream nobody reads runs nothing (crash
    recovery finds the claimed call later).

    A chat layer needs no more than this class: runs are read, the audit log read
    and written and the store checked through it (``get_run``, ``thread_runs``,
    ``waiting_call``, ``audit``, ``record``, ``ping``), never through the store.
    """

    id: str
    model: Model
    name: str = ""
    description: str = ""
    instructions: str = ""
    tools: Sequence[Tool] | Mapping[str, Tool] = ()
    tool_sources: Sequence[ToolSource] = ()
    """Where more tools come from while the agent runs (MCP servers: ``McpTools``)."""
    agents: Mapping[str, Agent] = field(default_factory=dict)
    peers: Mapping[str, Agent] = field(default_factory=dict)
    """Agents whose top runs this agent's engine runs too (``stream(peer=...)``), by id:
    over the same store, decided, expired, stopped and recovered through this agent like
    its own, never offered to its model. A chat layer's callers (another service's agent
    asking for approval of its own tool) are peers."""
    store: Store | None = None
    """Where runs, pauses and the audit log are kept (a memory store if none is given)."""
    default_options: AgentOptions = field(default_factory=AgentOptions)
    lease: timedelta = DEFAULT_LEASE
    """How long a run outlives the last heartbeat of the process driving it. Every
    process driving a run renews its heartbeat three times a lease;
    ``recover_interrupted`` takes a run only once it lapsed. Shorter means faster
    recovery after a crash; every replica must use the same lease."""
    expiry: Expiry | None = None
    """How long new pending calls stay decidable, per call: ``expiry(ask)`` (its tool,
    arguments, requester, agent and thread) wins over the tool's ``expires_in`` and the
    agents' ``approval_ttl``; ``None`` from it (or no function) keeps those. A chat
    layer sets it from its approval policy."""
    standing_approval: StandingApproval | None = None
    """Lets calls that need approval run at once when it names who already approved
    calls like them (a grant for a thread). Each such call is audited as ``granted``
    (the actor: who granted) and announced with a ``ToolCallGrantedChunk``; a lookup
    that raises asks instead (fails closed)."""

    def __post_init__(self) -> None:
        descriptions = {key: sub.description for key, sub in self.agents.items()}
        self._tools = LiveTools(tools_by_name(self.id, self.tools, descriptions), self.tool_sources)
        self.name = self.name or self.id
        for key, peer in self.peers.items():
            if key != peer.id or key == self.id:
                raise ValueError(f"agent {self.id!r}: peer {key!r} must be keyed by its own id")
        if self.lease <= timedelta(0):
            raise ValueError("the lease must be positive")
        self._engine: Engine | None = None

    def configured(
        self,
        *,
        lease: timedelta | None = None,
        expiry: Expiry | None = None,
        standing_approval: StandingApproval | None = None,
        peers: Mapping[str, Agent] | None = None,
    ) -> Agent:
        """This agent (its model, tools, sub-agents and store) with a chat layer's
        settings: a new ``Agent``, with its own engine, over the same store (a memory
        store from now on, if it had none). Settings not given keep this agent's;
        ``peers`` are added to its own."""
        if self.store is None:
            self.store = MemoryStore()
        return replace(
            self,
            lease=self.lease if lease is None else lease,
            expiry=expiry if expiry is not None else self.expiry,
            standing_approval=(
                standing_approval if standing_approval is not None else self.standing_approval
            ),
            peers={**self.peers, **(peers or {})},
        )

    # -- introspection --------------------------------------------------------

    def tool(self, name: str) -> Tool | None:
        """The tool (or delegation tool) the model knows by ``name``."""
        return self._tools.get(name)

    def input_schema(self, call: PendingInfo) -> dict[str, Any] | None:
        """The input schema of a pending call's tool (wherever in the tree), as the model
        is offered it; ``None`` when the tool is gone or is a delegation."""
        try:
            tool = self.engine.agent_at(call.agent_path).tool(call.tool_name)
        except KeyError:  # the agent is gone (a redeploy)
            return None
        if tool is None or tool.delegate_to is not None:
            return None
        return tool.spec().input_schema

    def tool_specs(self) -> list[ToolSpec]:
        """The tools as offered to the model."""
        return [t.spec() for t in self._tools.values()]

    @property
    def engine(self) -> Engine:
        """The run loop over this agent's store (a memory store if none was given)."""
        if self._engine is None:
            if self.store is None:
                self.store = MemoryStore()
            self._engine = Engine(
                self.spec(),
                self.store,
                lease=self.lease,
                expiry=self.expiry,
                standing=self.standing_approval,
            )
        return self._engine

    def spec(self) -> AgentSpec:
        """This agent and its sub-agents, frozen as the runtime runs them."""
        return AgentSpec(
            id=self.id,
            instructions=self.instructions,
            model=self.model,
            tools=self._tools,
            agents={key: sub.spec() for key, sub in self.agents.items()},
            options=self.default_options,
            peers={key: peer.spec() for key, peer in self.peers.items()},
        )

    # -- starting runs --------------------------------------------------------

    async def stream(
        self,
        messages: Input,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        require_tool_approval: bool | CallPredicate | None = None,
        auto_resume_suspended_tools: bool | None = None,
        max_steps: int | None = None,
        metadata: dict[str, Any] | None = None,
        run_id: str | None = None,
        peer: str | None = None,
        expires_in: timedelta | None = None,
    ) -> AgentStream:
        """Start a run (or, with auto-resume, continue a suspended one) as a stream.

        With ``auto_resume_suspended_tools`` and a ``thread_id`` whose newest
        pending call is a suspension, the message resumes that tool instead of
        starting a turn (raising ``ResumeDataInvalidError`` if it does not fit
        the tool's ``resume_schema``). Approvals are never resolved by text.
        ``metadata`` is kept with the run as it is (JSON), for the caller.
        ``run_id`` names a new run (a fresh id by default): a caller that may
        start the same work twice gives both the same id, and the second start
        raises ``StoreConflict``. The run is saved before this returns. ``peer`` runs
        one of ``peers`` instead (its options; raises ``KeyError`` for no such peer).
        ``expires_in``: the longest any call of the run waits for a person (when shorter
        than its tool's expiry).
        """
        agent = self if peer is None else self.peers[peer]
        opts = agent.default_options
        auto = (
            opts.auto_resume_suspended_tools
            if auto_resume_suspended_tools is None
            else auto_resume_suspended_tools
        )
        new_messages = _as_messages(messages)
        if auto and thread_id:
            resumed = await self.answer_question(
                new_messages, thread_id=thread_id, resource_id=resource_id
            )
            if resumed is not None:
                return resumed
        rule = (
            opts.require_tool_approval if require_tool_approval is None else require_tool_approval
        )
        run_id = run_id or tree_run_id(thread_id=thread_id)
        snap = RunSnapshot(
            run_id=run_id,
            agent_path=[agent.id],
            root_run_id=run_id,
            thread_id=thread_id,
            resource_id=resource_id,
            resource_name=provenance.current().name(resource_id),
            trace=carried(),
            metadata=dict(metadata or {}),
            options=RunOptions(
                require_tool_approval="predicate" if callable(rule) else bool(rule),
                max_steps=max_steps or opts.max_steps,
                expires_in=expires_in,
            ),
            # The thread's history goes first: read with the run's first save.
            messages=list(new_messages),
        )
        if callable(rule):
            self.engine.register_predicate(run_id, rule)
        return self._stream(run_id, await self.engine.start(snap))

    async def generate(self, messages: Input, **options: Any) -> AgentResult:
        """Like ``stream`` but returns the result; ``finish_reason == "suspended"`` on a pause."""
        return await (await self.stream(messages, **options)).result()

    # -- decisions ------------------------------------------------------------

    async def approve_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        decided_by: str | None = None,
        args: dict[str, Any] | None = None,
    ) -> AgentStream:
        """Approve a pending call (the most recent when no id is given) and continue.

        ``args``: the arguments as the approver edited them, which run instead (all of
        them, validated against the tool's input schema and its check; an invalid edit
        raises ``ArgsInvalidError`` and changes nothing). Audited as ``edited`` then
        ``approved``; the model is told the call ran with edited arguments.
        """
        decision = Decision(action="approve", decided_by=decided_by, args=args)
        return self._stream(run_id, await self.engine.decide(run_id, tool_call_id, decision))

    async def respond_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        response: str,
        decided_by: str | None = None,
    ) -> AgentStream:
        """Answer for a pending approval instead of running its tool ("already restarted
        it by hand"): the tool never runs; the model gets ``response`` as the call's
        result, marked as given by ``decided_by`` (``ToolResultPart.given_by``). Audited
        as ``responded``, with the response as its reason. A question is answered with
        ``resume_stream`` instead (this raises ``ToolCallNotPendingError`` for one).
        """
        decision = Decision(action="respond", decided_by=decided_by, response=response)
        return self._stream(run_id, await self.engine.decide(run_id, tool_call_id, decision))

    async def ask_again(
        self,
        *,
        run_id: str,
        tool_call_id: str,
        args: dict[str, Any],
        edited_by: str | None = None,
        expires_in: timedelta | None = None,
    ) -> PendingInfo:
        """Ask a waiting approval anew with ``args`` (edited by ``edited_by``), undecided:
        a new asking of the same call, for ``expires_in`` (else as long as before), audited
        ``edited``; the run keeps waiting. For an edit that needs other deciders than the
        one who made it (another tier of a policy).

        Raises:
            ArgsInvalidError: The arguments do not fit (nothing changes).
            ToolCallNotPendingError, CallExpiredError, AlreadyDecidedError: as for a
                decision.
        """
        asked = await self.engine.decider.ask_again(
            run_id, tool_call_id, args, edited_by=edited_by, expires_in=expires_in
        )
        return PendingInfo.of(run_id, asked)

    async def decline_tool_call(
        self,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        reason: str | None = None,
        decided_by: str | None = None,
        cancel: bool = False,
    ) -> AgentStream:
        """Decline a pending call: the tool never runs and the model is told why.

        On a question, ``cancel`` says the person called it off rather than refused
        to answer; a tool that ``hears_declines`` is run again to hear which.
        """
        decision = Decision(
            action="decline", decided_by=decided_by, reason=reason, cancelled=cancel
        )
        return self._stream(run_id, await self.engine.decide(run_id, tool_call_id, decision))

    async def stop_run(self, run_id: str, *, stopped_by: str | None = None) -> StoppedRun | None:
        """Stop a top run for good: the model hears nothing more, no call it asked for
        runs afterwards, and every call waiting on it is dropped (audited ``stopped``).

        A tool already running finishes; its result is kept, not given to the model.
        The thread's history keeps what was said, with each call that never ran
        marked so. ``None`` when the run is over already (raises
        ``RunNotFoundError`` for an unknown run).
        """
        stopped = await self.engine.stop(run_id, stopped_by)
        if stopped is None:
            return None
        run, dropped = stopped
        return StoppedRun(
            run_id=run_id,
            thread_id=run.thread_id,
            requester=run.resource_id,
            metadata=run.metadata,
            stopped_by=run.stop.by if run.stop else stopped_by,
            dropped=tuple(PendingInfo.of(run_id, p) for p in dropped),
            ended=run.status == "stopped",
        )

    async def resume_stream(
        self,
        resume_data: Any,
        *,
        run_id: str,
        tool_call_id: str | None = None,
        decided_by: str | None = None,
    ) -> AgentStream:
        """Resume a suspended tool with data matching its ``resume_schema``."""
        decision = Decision(action="resume", decided_by=decided_by)
        chunks = await self.engine.decide(run_id, tool_call_id, decision, resume_data)
        return self._stream(run_id, chunks)

    async def approve_tool_call_generate(self, **kwargs: Any) -> AgentResult:
        """``approve_tool_call`` and wait for the result."""
        return await (await self.approve_tool_call(**kwargs)).result()

    async def decline_tool_call_generate(self, **kwargs: Any) -> AgentResult:
        """``decline_tool_call`` and wait for the result."""
        return await (await self.decline_tool_call(**kwargs)).result()

    async def answer_question(
        self,
        messages: Input,
        *,
        thread_id: str,
        resource_id: str | None = None,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> AgentStream | None:
        """Resume a waiting question with a person's words: the thread's newest, or
        exactly the one ``run_id`` and ``tool_call_id`` name.

        What ``stream`` does with ``auto_resume_suspended_tools``, without ever
        starting a new run: ``None`` when no question of the thread waits. A named
        question that does not wait raises the typed error saying why
        (``RunNotFoundError``, ``AlreadyDecidedError``, ``RunNotPausedError``,
        ``ToolCallNotPendingError``, ``CallExpiredError``). Raises
        ``ResumeDataInvalidError`` when the words do not fit the tool's schema.
        """
        said = _as_messages(messages)
        if (run_id is None) != (tool_call_id is None):
            raise ValueError("answer_question names a question by run_id and tool_call_id both")
        if run_id is not None and tool_call_id is not None:
            target = await self._question(run_id, tool_call_id, thread_id)
        else:
            now = utcnow()
            waiting = [
                p
                for p in await self.list_suspended_runs(thread_id=thread_id)
                if p.kind == "suspension" and p.expires_at > now
            ]
            if not waiting:
                return None
            target = waiting[-1]
        text = "\n".join(m.text for m in said if m.role == "user").strip()
        data = await self._extract_resume_data(target, text)
        return await self.resume_stream(
            data, run_id=target.run_id, tool_call_id=target.tool_call_id, decided_by=resource_id
        )

    async def resume_generate(self, resume_data: Any, **kwargs: Any) -> AgentResult:
        """``resume_stream`` and wait for the result."""
        return await (await self.resume_stream(resume_data, **kwargs)).result()

    # -- pending calls --------------------------------------------------------

    async def list_suspended_runs(self, *, thread_id: str) -> list[PendingInfo]:
        """Every call waiting for a person on this thread, oldest first."""
        store = self.engine.store
        out: list[PendingInfo] = []
        for run_id in await store.paused_runs(thread_id):
            snap = await store.load_run(run_id)
            if snap is not None:
                out.extend(PendingInfo.of(run_id, p) for p in snap.pending if p.state == "pending")
        return sorted(out, key=lambda p: p.created_at)

    async def waiting_call(
        self, run_id: str, tool_call_id: str, *, thread_id: str | None = None
    ) -> PendingInfo | None:
        """The call ``tool_call_id`` of the top run ``run_id`` while it still waits for a
        person; ``None`` once it is decided or dropped, when the run was stopped, and for
        an unknown run or a sub-agent's (or, given ``thread_id``, a run of another
        thread). Reads that one run."""
        snap = await self.engine.store.load_run(run_id)
        if snap is None or not snap.is_root or snap.stop is not None:
            return None
        if thread_id is not None and snap.thread_id != thread_id:
            return None
        call = snap.find_pending(tool_call_id)
        if call is None or call.state != "pending":
            return None
        return PendingInfo.of(run_id, call)

    async def thread_runs(self, thread_id: str) -> list[RunSnapshot]:
        """The thread's top runs that work or wait for a person and that nobody stopped,
        oldest first; read through the store's index of the thread's runs."""
        store = self.engine.store
        loaded = await asyncio.gather(*map(store.load_run, await store.thread_runs(thread_id)))
        runs = [
            snap
            for snap in loaded
            if snap is not None
            and snap.thread_id == thread_id
            and snap.status in ("running", "paused")
            and snap.stop is None
        ]
        return sorted(runs, key=lambda snap: snap.created_at)

    async def get_run(self, run_id: str) -> RunSnapshot:
        """A run's snapshot (raises ``RunNotFoundError``)."""
        return await self.engine.load(run_id)

    # -- the audit log and the store ---------------------------------------------

    async def audit(
        self, *, run_id: str | None = None, thread_id: str | None = None
    ) -> list[AuditEntry]:
        """The audit log of a run and/or a thread (everything when neither), oldest first."""
        return await self.engine.store.list_audit(run_id=run_id, thread_id=thread_id)

    async def record(self, entry: AuditEntry) -> None:
        """Append ``entry`` to the audit log (a caller's own events, such as votes), with
        where the request being handled came from (``agents.provenance``)."""
        await self.engine.store.append_audit(provenance.current().stamp(entry))

    async def ping(self) -> bool:
        """Whether the store answers."""
        return await self.engine.store.ping()

    async def prunable(self, before: datetime, *, limit: int = PRUNE_BATCH) -> Pruned:
        """The next prune batch, changing nothing: up to ``limit`` finished runs last
        changed before ``before``, with their sub-agent runs, and the threads it would
        leave with no run (see ``Store.prunable``). Forget your own records of them, then
        ``prune`` the batch: a crash in between leaves it to be found again.

        Runs that wait for a person or work are never due, however old.
        """
        return await self.engine.store.prunable(before, limit=limit)

    async def prune(self, due: Pruned) -> Pruned:
        """Remove a batch ``prunable`` found, as far as it is still due: a run saved since,
        or a thread with a run started since, is kept (see ``Store.prune``). The audit
        log is kept (``prune_audit``). Returns what was removed.
        """
        return await self.engine.store.prune(due)

    async def prune_audit(
        self, before: datetime, *, limit: int = AUDIT_PRUNE_BATCH, seal: Seal | None = None
    ) -> int:
        """Remove up to ``limit`` audit entries older than ``before`` from the start of the
        log, oldest first, leaving an anchor (signed by ``seal``) so what remains still
        verifies (see ``Store.prune_audit``); how many were removed."""
        return await self.engine.store.prune_audit(before, limit=limit, seal=seal)

    async def audit_chains(self) -> list[AuditChain]:
        """The audit log's hash chains as stored, to check with ``agents.chain.walk``."""
        return await self.engine.store.audit_chains()

    async def read_audit(
        self, chain: int, after: int, *, limit: int = AUDIT_READ_BATCH
    ) -> list[str]:
        """Up to ``limit`` lines of one chain as stored, from the first numbered above
        ``after`` (see ``Store.read_audit``): an export reads the log on with it."""
        return await self.engine.store.read_audit(chain, after, limit=limit)

    async def seal_audit(self, seal: Seal) -> int:
        """Sign each chain's head with a ``checkpoint`` entry (unless it ends in one);
        how many were appended."""
        return await self.engine.store.seal_audit(seal)

    async def expire_due(self, now: datetime | None = None) -> list[ExpiredCall]:
        """Resolve every pending call past its expiry, each exactly once across processes.

        The model of each affected run is told the request expired; consume each
        returned stream (in order) to let the run finish.
        """
        now = now or utcnow()
        expired: list[ExpiredCall] = []
        for run_id in await self.engine.store.runs_expiring(now):
            snap = await self.engine.store.load_run(run_id)
            for call in snap.pending if snap else []:
                if call.state != "pending" or call.expires_at > now:
                    continue
                try:
                    chunks = await self.engine.decide(
                        run_id, call.tool_call_id, Decision(action="expire")
                    )
                except AgentError:  # decided, or expired by another process, meanwhile
                    continue
                expired.append(
                    ExpiredCall(
                        pending=PendingInfo.of(run_id, call), stream=self._stream(run_id, chunks)
                    )
                )
        return expired

    async def recover_interrupted(
        self, *, now: datetime | None = None, quiet: timedelta | None = None
    ) -> list[RecoveredRun]:
        """Find runs a crash left in flight and settle each exactly once.

        A run counts as crashed when no process has renewed its heartbeat for a
        lease (``Agent.lease``) and it has not changed for ``quiet`` (the lease by
        default), or at once when its process handed it back (``closing``). A slow
        tool keeps its run alive for as long as it runs. A run cut off in a model
        turn or a tool batch is driven on, and a repeatable decision is carried out
        again (consume the returned stream); anything else marks the run
        ``interrupted``, so a non-idempotent side effect never happens twice.
        """
        now = now or utcnow()
        quiet = self.engine.lease if quiet is None else quiet
        found: list[RecoveredRun] = []
        for run_id in await self.engine.store.runs_in_flight():
            recovered = await self.recover_run(run_id, now=now, quiet=quiet)
            if recovered is not None:
                found.append(recovered)
        return found

    async def recover_run(
        self, run_id: str, *, now: datetime | None = None, quiet: timedelta | None = None
    ) -> RecoveredRun | None:
        """Settle one run as ``recover_interrupted`` does, if a crash left it in flight or
        the process driving it handed it back (``closing``); ``None`` otherwise."""
        now = now or utcnow()
        quiet = self.engine.lease if quiet is None else quiet
        recovery = await self.engine.recover(run_id, now, quiet)
        if recovery is None:
            return None
        run, call = recovery.run, recovery.call
        return RecoveredRun(
            run_id=run_id,
            thread_id=run.thread_id,
            requester=run.resource_id,
            metadata=run.metadata,
            pending=PendingInfo.of(run_id, call) if call else None,
            stream=self._stream(run_id, recovery.retry) if recovery.retry else None,
            error=run.error if recovery.retry is None else None,
            created_at=run.created_at,
            trace=run.trace,
            dropped=tuple(PendingInfo.of(run_id, p) for p in recovery.dropped),
        )

    def closing(self) -> None:
        """This process is shutting down (a rolling restart): from now on, work on a run
        that gets cancelled hands the run back as last saved, for another process's
        recovery to go on with at once instead of after its lease. Call before
        cancelling what still runs."""
        self.engine.closing = True

    # -- internals ------------------------------------------------------------

    def _stream(self, run_id: str, chunks: Any) -> AgentStream:
        async def result() -> AgentResult:
            return _result(await self.engine.ended(run_id), run_id)

        return AgentStream(run_id, chunks, result, (self.id,))

    async def _question(self, run_id: str, tool_call_id: str, thread_id: str) -> PendingInfo:
        """The question ``tool_call_id`` of ``run_id`` if it waits for an answer in
        ``thread_id``, else the typed error a resume of it would raise."""
        snap = await self.engine.store.load_run(run_id)
        if snap is not None and snap.thread_id != thread_id:
            raise ToolCallNotPendingError(run_id, tool_call_id, "is not of this thread")
        _, call = select_pending(run_id, snap, tool_call_id, Decision(action="resume"))
        return PendingInfo.of(run_id, call)

    async def _extract_resume_data(self, call: PendingInfo, text: str) -> Any:
        schema = call.resume_schema
        if schema is None:
            return text
        properties: dict[str, Any] = schema.get("properties", {})
        if len(properties) == 1:
            ((name, prop),) = properties.items()
            if prop.get("type") == "string":
                return {name: text}
        model = self.engine.agent_at(call.agent_path).model
        question = json.dumps(call.suspend_payload, ensure_ascii=False)
        try:
            return await model.structured(
                StructuredRequest(
                    system=(
                        "A tool paused to ask the user for input. Extract the data the tool "
                        "needs from the user's reply. Leave out what the reply does not say."
                    ),
                    messages=[
                        Message.user(f"The tool asked: {question}\nThe user replied: {text}")
                    ],
                    schema=schema,
                    name="resume_data",
                )
            )
        except ModelError as exc:
            raise ResumeDataInvalidError(
                call.run_id, call.tool_call_id, [exc.user_message]
            ) from exc


def _as_messages(messages: Input) -> list[Message]:
    if isinstance(messages, str | Message):
        messages = [messages]
    return [Message.user(m) if isinstance(m, str) else m for m in messages]


def _result(snap: RunSnapshot, run_id: str) -> AgentResult:
    pending = tuple(
        sorted(
            (PendingInfo.of(run_id, p) for p in snap.pending if p.state == "pending"),
            key=lambda p: p.created_at,
        )
    )
    paused = snap.status == "paused"
    return AgentResult(
        run_id=run_id,
        text=snap.text,
        finish_reason="suspended" if paused else snap.finish_reason or "stop",
        suspend_payload=pending[-1] if paused and pending else None,
        pending=pending if paused else (),
        tool_calls=tuple(snap.tool_calls),
        tool_results=tuple(snap.tool_results),
        steps=snap.steps,
        usage=snap.usage,
        error=snap.error,
    )
