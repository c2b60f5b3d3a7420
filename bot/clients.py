"""Clients: the team's other agents (a CI job, a headless Claude Code, a LangGraph
service) asking its people for approval through the bot (``bot.api``, ``bot.mcp_server``).

Each ``[clients.<name>]`` of ``BOT_CONFIG`` is a ``Client``. In the runtime a client is
a peer agent of the bot's own (``Agent.peers``): each request is a top run of it whose
model (``ClientModel``) asks for exactly the call the caller named, as tool
``<client>__<tool>``. So the policy, cards, quorum, edits, expiry, reminders, grants,
the audit and exactly-once decisions are the ones the bot's own calls have. The tool
never does anything (``ClientTools``): the caller runs it, and approved means "the
caller may now run exactly these arguments", which the tool's result records.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from agents import Agent, Message, ModelError, Tool, ToolCallPart, ToolContext
from agents.mcp import SEPARATOR, TOOL_NAME
from agents.models.base import (
    ModelEvent,
    ModelFinish,
    ModelRequest,
    StructuredRequest,
    ToolCallEvent,
)
from agents.tools import schema_model

ANY_ARGUMENTS: dict[str, Any] = {"type": "object"}
"""A client's tool takes whatever arguments its caller names (the caller checks them)."""
QUESTION = "ask"
"""Every client's question tool (``<client>__ask``): it waits for a person's answer."""
REQUEST = "client_request"
"""The key of the request in the run's first message (``request_message``)."""


@dataclass(frozen=True, kw_only=True)
class Client:
    """One caller of the approval service: its bearer token, the tools it may ask about
    (``None``: any), and where its cards go unless a request says."""

    name: str
    token: str
    tools: frozenset[str] | None = None
    channel: str | None = None
    workspace: str | None = None
    """The workspace of ``channel``: its Slack team id or its Teams tenant id."""

    def tool_name(self, tool: str) -> str:
        """The name the policy, cards and audit give ``tool`` of this client."""
        return f"{self.name}{SEPARATOR}{tool}"

    def may_ask(self, tool: str) -> bool:
        """Whether this client may ask about ``tool``."""
        return self.tools is None or tool in self.tools


class Clients:
    """The declared clients, found by token."""

    def __init__(self, clients: Sequence[Client] = (), *, source: str = "BOT_CONFIG") -> None:
        self.source = source
        """The file that declares them (for problems found at start)."""
        self._by_name = {client.name: client for client in clients}
        if len(self._by_name) != len(clients):
            raise ValueError("two clients have one name")
        if len({client.token for client in clients}) != len(clients):
            raise ValueError("two clients have one token")

    def __bool__(self) -> bool:
        return bool(self._by_name)

    def __iter__(self) -> Iterator[Client]:
        return iter(self._by_name.values())

    def get(self, name: str) -> Client | None:
        return self._by_name.get(name)

    def by_token(self, token: str) -> Client | None:
        """The client whose token this is, compared in constant time with every one."""
        found: Client | None = None
        for client in self._by_name.values():
            if hmac.compare_digest(client.token.encode(), token.encode()):
                found = client
        return found

    def peers(self) -> dict[str, Agent]:
        """Each client as a peer agent of the bot's (``Agent.peers``)."""
        return {client.name: client_agent(client) for client in self}

    def policy_names(self, named: frozenset[str]) -> set[str]:
        """The tool names of clients a policy may have sections for: each listed tool,
        and for a client that may ask about any, every name of it the policy gives."""
        names: set[str] = set()
        for client in self:
            if client.tools is None:
                prefix = f"{client.name}{SEPARATOR}"
                names |= {name for name in named if name.startswith(prefix)}
            else:
                names |= {client.tool_name(tool) for tool in client.tools}
            names.add(client.tool_name(QUESTION))
        return names


def client_via(name: str) -> str:
    """How a client's requests are on record (the audit's ``via``, a stop's actor)."""
    return f"client:{name}"


def request_message(tool: str, args: Mapping[str, Any], *, call_id: str) -> str:
    """The first message of a client's run: the call its caller asks about (``call_id``:
    unique in the thread, whose history keeps it)."""
    request = {"tool": tool, "args": dict(args), "call": call_id}
    return json.dumps({REQUEST: request}, ensure_ascii=False)


def requested_call(message: Message) -> ToolCallPart | None:
    """The call ``request_message`` names in ``message`` (with the tool's own name), if
    it is one."""
    try:
        data = json.loads(message.text)
    except ValueError:
        return None
    request = data.get(REQUEST) if isinstance(data, dict) else None
    if not isinstance(request, dict):
        return None
    tool, args, call = request.get("tool"), request.get("args"), request.get("call")
    if not isinstance(tool, str) or not isinstance(args, dict) or not isinstance(call, str):
        return None
    return ToolCallPart(tool_call_id=call, tool_name=tool, args=args)


class ClientModel:
    """The "model" of a client's agent: the caller decided what it wants to run, so this
    asks for exactly that call (the run's last message, when it is a request), once,
    and ends the run once its outcome is in. No language model is involved."""

    def __init__(self, client: Client) -> None:
        self._client = client

    @property
    def name(self) -> str:
        return f"client {self._client.name}"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = request.messages[-1] if request.messages else None
        call = requested_call(last) if last is not None and last.role == "user" else None
        if call is not None:
            name = self._client.tool_name(call.tool_name)
            yield ToolCallEvent(call=call.model_copy(update={"tool_name": name}))
            yield ModelFinish(stop_reason="tool_use")
            return
        yield ModelFinish(stop_reason="end_turn")

    async def structured(self, request: StructuredRequest) -> dict[str, Any]:
        raise ModelError(
            f"client {self._client.name} reads no free answers",
            user_message="Please answer with the form (the Answer button).",
        )


async def _approved(args: BaseModel) -> str:
    """The caller runs the tool: its result is the arguments it may run with."""
    return json.dumps(args.model_dump(mode="json"), ensure_ascii=False)


class ClientTools:
    """A client's tools (``ToolSource``): each it may ask about, needing approval."""

    def __init__(self, client: Client) -> None:
        self.name = client.name
        names = [client.tool_name(tool) for tool in sorted(client.tools or ())]
        self._tools: Mapping[str, Tool] = (
            _AnyTool(client)
            if client.tools is None
            else {name: client_tool(client, name) for name in names}
            | {client.tool_name(QUESTION): question_tool(client)}
        )

    def tools(self) -> Mapping[str, Tool]:
        return self._tools


class _AnyTool(Mapping[str, Tool]):
    """Every tool name of a client that may ask about any: each made when asked for (not
    kept: a caller naming ever new tools must not grow the bot); none to list."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._prefix = f"{client.name}{SEPARATOR}"

    def __getitem__(self, name: str) -> Tool:
        if name == self._client.tool_name(QUESTION):
            return question_tool(self._client)
        if not name.startswith(self._prefix) or name == self._prefix:
            raise KeyError(name)
        if not TOOL_NAME.fullmatch(name):
            raise KeyError(name)
        return client_tool(self._client, name)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def client_tool(client: Client, name: str) -> Tool:
    """Tool ``name`` of ``client``: always approved first; it only records what it may
    run with (the caller runs it)."""
    return Tool(
        name=name,
        description=f"{name} (run by client {client.name})",
        fn=_approved,
        input_model=_ARGUMENTS,
        schema=ANY_ARGUMENTS,
        require_approval=True,
        unpack_args=False,
        source=client.name,
    )


_ARGUMENTS = schema_model(ANY_ARGUMENTS, "client_arguments")


class QuestionInput(BaseModel):
    """What a client's question asks (``bot.asks.QuestionRequest``, checked there)."""

    question: str
    schema_: dict[str, Any] = Field(alias="schema")


async def _asked(args: QuestionInput, ctx: ToolContext) -> str:
    """Wait for a person's answer; then it is the result (as JSON)."""
    if ctx.resume_data is None:
        ctx.suspend({"message": args.question}, answer_schema=args.schema_)
    return json.dumps(ctx.resume_data, ensure_ascii=False)


def question_tool(client: Client) -> Tool:
    """``<client>__ask``: a question to the team, no approval needed (who may answer is
    the policy's, as for any tool's question)."""
    return Tool(
        name=client.tool_name(QUESTION),
        description=f"A question of client {client.name}",
        fn=_asked,
        input_model=QuestionInput,
        unpack_args=False,
        context_param="ctx",
        source=client.name,
    )


def client_agent(client: Client) -> Agent:
    """The peer agent of ``client``: its model asks for what the caller names."""
    return Agent(
        id=client.name,
        name=client.name,
        description=f"Requests of client {client.name}",
        model=ClientModel(client),
        tool_sources=[ClientTools(client)],
    )
