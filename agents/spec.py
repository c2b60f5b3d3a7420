"""What the runtime runs: an agent frozen into a spec, with its tools by name.

``Agent`` is the facade people build and call; when it first runs it freezes
into an ``AgentSpec`` (its sub-agents too), which the run loop and the
decisions read. Nothing in a spec changes while runs use it, except the tools
of its sources (an MCP server's list follows the server).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from . import texts
from .models.base import Model, ToolSpec
from .tools import Tool

DELEGATION_PREFIX = "agent-"
"""A sub-agent ``key`` is offered to its supervisor's model as tool ``agent-<key>``."""


class DelegationInput(BaseModel):
    """The input of an ``agent-<key>`` tool: the task handed to the sub-agent."""

    task: str


@dataclass(frozen=True, kw_only=True)
class AgentOptions:
    """Defaults for every call of an agent; most can be overridden per call.

    ``history_window`` bounds the messages a thread remembers; ``approval_ttl``
    is how long a pending call stays decidable unless its tool says otherwise.
    """

    require_tool_approval: bool = False
    auto_resume_suspended_tools: bool = False
    max_steps: int = 10
    history_window: int = 50
    approval_ttl: timedelta = timedelta(hours=24)


@dataclass(frozen=True, kw_only=True)
class AgentSpec:
    """One agent as the runtime sees it: model, instructions, tools, sub-agents, options."""

    id: str
    instructions: str
    model: Model
    tools: Mapping[str, Tool]
    """Every tool by the name the model knows, delegation tools included."""
    agents: Mapping[str, AgentSpec]
    options: AgentOptions
    peers: Mapping[str, AgentSpec] = field(default_factory=dict)
    """Agents run beside this one by the same engine (``Agent.peers``), by id."""

    def tool(self, name: str) -> Tool | None:
        """The tool (or delegation tool) the model knows by ``name``."""
        return self.tools.get(name)

    def tool_specs(self) -> list[ToolSpec]:
        """The tools as offered to the model."""
        return [t.spec() for t in self.tools.values()]

    def at(self, path: Sequence[str]) -> AgentSpec:
        """The agent a snapshot's ``agent_path`` names, from this one (the top), or from
        the peer whose id starts it."""
        spec = self.peers.get(path[0], self) if path else self
        for key in path[1:]:
            spec = spec.agents[key]
        return spec


def tools_by_name(
    agent_id: str, tools: Sequence[Tool] | Mapping[str, Tool], sub_agents: Mapping[str, str]
) -> dict[str, Tool]:
    """An agent's tools by name, plus an ``agent-<key>`` tool per sub-agent.

    ``sub_agents`` maps each key to the sub-agent's description.

    Raises:
        ValueError: A tool's name clashes with a sub-agent's tool name.
    """
    if isinstance(tools, Mapping):
        by_name = {key: replace(t, name=key) for key, t in tools.items()}
    else:
        by_name = {t.name: t for t in tools}
    for key, description in sub_agents.items():
        name = f"{DELEGATION_PREFIX}{key}"
        if name in by_name:
            raise ValueError(f"agent {agent_id!r}: tool {name!r} clashes with sub-agent {key!r}")
        by_name[name] = Tool(
            name=name,
            description=description or texts.DELEGATE.format(key=key),
            fn=_never_called,
            input_model=DelegationInput,
            delegate_to=key,
        )
    return by_name


async def _never_called(**_: Any) -> None:
    raise AssertionError("delegation tools are run by the run loop")
