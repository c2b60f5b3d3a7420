"""A scripted agent for the Slack tests: a gated tool, a suspending tool, plain answers.

The model reads the user's latest words: ``deploy <service>...`` asks for the gated
``deploy`` tool (once per service, in one turn), ``release <service>`` for ``release``
(which asks for a version and resumes from the reply), ``long`` answers at length;
anything else is echoed, with the calls the chat layer says still wait in the thread
(``still_waiting``). After tool results it reports them, errors and declines included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from agents import (
    Agent,
    FunctionModel,
    Message,
    ModelResponse,
    Store,
    Tool,
    ToolCall,
    ToolContext,
    tool,
)
from agents.models.base import ModelRequest
from tests.agents.helpers import still_waiting

LONG_ANSWER_PARAGRAPH = "All systems nominal. " * 40


class AskVersion(BaseModel):
    message: str


class Version(BaseModel):
    version: str = Field(pattern=r"^\d+\.\d+\.\d+$", description="a semantic version, 1.2.3")


@dataclass
class Ran:
    """What the tools really did (to assert at-most-once execution)."""

    deploys: list[dict[str, Any]] = field(default_factory=list)
    releases: list[dict[str, Any]] = field(default_factory=list)


def build_tools(ran: Ran) -> list[Tool]:
    """The two tools, recording into ``ran``."""

    @tool(require_approval=True)
    def deploy(service: str, ctx: ToolContext) -> dict[str, str]:
        """Deploy a service to production."""
        ran.deploys.append({"service": service, "call": ctx.tool_call_id})
        return {"deployed": service}

    @tool(suspend_schema=AskVersion, resume_schema=Version)
    def release(service: str, ctx: ToolContext) -> dict[str, str]:
        """Release a service; asks which version."""
        data = ctx.resume_data
        if data is None:
            ctx.suspend({"message": f"Which version of {service} should I release?"})
        ran.releases.append({"service": service, "version": data.version})
        return {"released": service, "version": data.version}

    return [deploy, release]


def _respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
    last = messages[-1]
    if last.role == "user" and last.tool_results:
        lines = [
            f"{r.tool_name} {'failed' if r.is_error else 'ok'}: {r.content}"
            for r in last.tool_results
        ]
        return ModelResponse(text="Done. " + " ".join(lines))
    text, waiting = still_waiting(last.text)
    words = text.strip().split()
    if len(words) >= 2 and words[0] == "deploy":  # one call per service, in one turn
        calls = [ToolCall("deploy", {"service": service}) for service in words[1:]]
        return ModelResponse(text="Deploying.", tool_calls=calls)
    if len(words) == 2 and words[0] == "release":
        return ModelResponse(tool_calls=[ToolCall("release", {"service": words[1]})])
    if words == ["big"]:
        return ModelResponse(tool_calls=[ToolCall("deploy", {"service": "<&>" * 2000})])
    if words == ["long"]:
        return ModelResponse(text="\n\n".join([LONG_ANSWER_PARAGRAPH] * 20))
    if waiting:
        return ModelResponse(text=f"You said: {text} (still waiting here: {', '.join(waiting)})")
    return ModelResponse(text=f"You said: {text}")


def build_agent(store: Store, ran: Ran | None = None) -> Agent:
    """The scripted agent over ``store``."""
    return Agent(
        id="helper",
        name="Helper",
        model=FunctionModel(_respond),
        tools=build_tools(ran or Ran()),
        store=store,
    )
