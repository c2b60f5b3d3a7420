"""A scripted ops agent for the Teams tests: one gated tool, one asking tool.

"deploy <service>..." asks to run ``deploy`` (always needs approval; once per service,
in one turn); "weather"
runs ``weather``, which suspends to ask for a city (letters only) and resumes
from the next reply in the thread; "fail" fails the run (the model is down); anything
else is echoed, with the calls the chat layer says still wait in the thread.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agents import (
    Agent,
    FunctionModel,
    Message,
    ModelError,
    ModelResponse,
    Store,
    ToolCall,
    ToolContext,
    tool,
)
from agents.models.base import ModelRequest
from tests.agents.helpers import still_waiting

MODEL_DOWN = "The model is down."
"""Why a run asked to ``fail`` failed, as people are told."""


class AskCity(BaseModel):
    message: str


class City(BaseModel):
    city: str = Field(pattern=r"^[A-Za-z][A-Za-z ]*$", description="A city name, letters only.")


def build_agent(store: Store, deployed: list[str]) -> Agent:
    """The agent; every real deploy is appended to ``deployed``."""

    @tool(require_approval=True)
    def deploy(service: str) -> str:
        """Deploy a service."""
        deployed.append(service)
        return f"deployed {service}"

    @tool(suspend_schema=AskCity, resume_schema=City)
    def weather(ctx: ToolContext) -> str:
        """Tell the weather in a city."""
        if ctx.resume_data is None:
            ctx.suspend({"message": "Which city?"})
        return f"{ctx.resume_data.city}: sunny"

    def respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
        last = messages[-1]
        if last.tool_results:
            summary = "; ".join(
                f"{r.tool_name} {'error' if r.is_error else 'ok'}: {r.content}"
                for r in last.tool_results
            )
            return ModelResponse(text=f"Done. {summary}")
        text, waiting = still_waiting(last.text)
        words = text.split()
        if words[:1] == ["deploy"] and len(words) > 1:  # one call per service, one turn
            calls = [ToolCall("deploy", {"service": service}) for service in words[1:]]
            return ModelResponse(tool_calls=calls)
        if words[:1] == ["weather"]:
            return ModelResponse(tool_calls=[ToolCall("weather", {})])
        if words == ["fail"]:
            raise ModelError("asked to fail", user_message=MODEL_DOWN)
        if waiting:
            return ModelResponse(
                text=f"You said: {text} (still waiting here: {', '.join(waiting)})"
            )
        return ModelResponse(text=f"You said: {last.text}")

    return Agent(id="ops", model=FunctionModel(respond), tools=[deploy, weather], store=store)
