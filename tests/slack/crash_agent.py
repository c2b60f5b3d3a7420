"""The agent of a bot process the crash tests kill: ``BOT_AGENT=tests.slack.crash_agent:build``.

``deploy <service>`` asks for the gated ``deploy`` tool; anything else is
echoed as ``You said: <text>``, except ``hold`` (or ``hold <tag>``), over
which the model thinks for a minute the first time (as it does after deploying
a ``hold-...`` service), and ``fail``, on which the model fails every time.
Every start and end of a deploy, and every hold, is appended to the
JSON-lines file ``CRASH_RECORD`` names, so the test process can count what
really ran across processes. A service named ``slow-...`` keeps its deploy
running for a minute: long enough to kill the process in the middle of it.

``build_supervised`` puts that agent under a supervisor that hands it each deploy;
after a ``lead-...`` service is deployed, the supervisor thinks for a minute the
first time (``hold-supervisor``).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from agents import (
    Agent,
    FunctionModel,
    Message,
    Model,
    ModelError,
    ModelResponse,
    Store,
    ToolCall,
    ToolContext,
    tool,
)
from agents.models.base import ModelRequest

SLOW_PREFIX = "slow-"
HOLD_PREFIX = "hold-"
LEAD_PREFIX = "lead-"
FAIL = "fail"
FAILED = "the model failed, as asked"
"""What a failed run says went wrong (the model's ``user_message``)."""


def record(event: str, **fields: str) -> None:
    """Append one line to the record file (one ``write``: lines never interleave)."""
    line = json.dumps({"event": event, **fields}) + "\n"
    with Path(os.environ["CRASH_RECORD"]).open("a", encoding="utf-8") as file:
        file.write(line)


@tool(require_approval=True)
async def deploy(service: str, ctx: ToolContext) -> dict[str, str]:
    """Deploy a service to production."""
    record("deploy-start", service=service, call=ctx.tool_call_id)
    if service.startswith(SLOW_PREFIX):
        await asyncio.sleep(60)
    record("deploy-end", service=service, call=ctx.tool_call_id)
    return {"deployed": service}


def recorded(event: str, **fields: str) -> bool:
    """Whether some process recorded ``event`` (with these fields) already."""
    path = Path(os.environ["CRASH_RECORD"])
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    wanted = {"event": event, **fields}
    return any(json.loads(line) == wanted for line in lines)


async def _hold(event: str, **fields: str) -> None:
    """Think for a minute, the first time only: the process is killed meanwhile, and
    the model turn asked again after the restart answers at once."""
    if not recorded(event, **fields):
        record(event, **fields)
        await asyncio.sleep(60)


async def _respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
    last = messages[-1]
    if last.role == "user" and last.tool_results:
        if any(HOLD_PREFIX in str(r.content) for r in last.tool_results):
            await _hold("hold-after-tool")
        return ModelResponse(text="Done. " + " ".join(str(r.content) for r in last.tool_results))
    words = last.text.strip().split()
    if words == [FAIL]:
        raise ModelError("asked to fail", user_message=FAILED)
    if words == ["hold"]:
        await _hold("hold")
    elif len(words) == 2 and words[0] == "hold":  # one hold per tag
        await _hold("hold", tag=words[1])
    if len(words) == 2 and words[0] == "deploy":
        return ModelResponse(tool_calls=[ToolCall("deploy", {"service": words[1]})])
    return ModelResponse(text=f"You said: {last.text.strip()}")


def build(model: Model, store: Store) -> Agent:
    """The agent, over the bot's store (its model is scripted, not ``BOT_MODEL``)."""
    return Agent(id="crashy", model=FunctionModel(_respond), tools=[deploy], store=store)


async def _supervise(messages: list[Message], request: ModelRequest) -> ModelResponse:
    last = messages[-1]
    if last.role == "user" and last.tool_results:
        said = " ".join(str(r.content) for r in last.tool_results)
        if LEAD_PREFIX in said:
            await _hold("hold-supervisor")
        return ModelResponse(text=f"Done. {said}")
    task = last.text.strip()
    if task.startswith("deploy "):
        return ModelResponse(tool_calls=[ToolCall("agent-crashy", {"task": task})])
    return ModelResponse(text=f"You said: {task}")


def build_supervised(model: Model, store: Store) -> Agent:
    """A supervisor handing each deploy to ``build``'s agent, whose ``deploy`` is gated."""
    return Agent(
        id="lead",
        model=FunctionModel(_supervise),
        agents={"crashy": build(model, store)},
        store=store,
    )
