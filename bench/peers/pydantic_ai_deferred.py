"""Pydantic AI deferred tools (``requires_approval``) with a ``FunctionModel``.

Pydantic AI keeps no run state of its own: a paused run is its message history,
so the cycle serializes it to JSON and reads it back, as a bot must to survive
a restart.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from . import Cycle


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask for the refund, then answer from its result."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"Done: {part.content}")])
    return ModelResponse(
        parts=[
            TextPart("I'll refund that order."),
            ToolCallPart("refund", {"order_id": "A-100234", "amount": 249.99}),
        ]
    )


async def cycle() -> Cycle:
    agent = Agent(FunctionModel(script), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str, amount: float) -> dict[str, Any]:
        """Refund an order."""
        return {"refunded": amount, "order_id": order_id}

    async def one(n: int) -> None:
        paused = await agent.run("refund A-100234")
        requests = paused.output
        if not isinstance(requests, DeferredToolRequests):
            raise RuntimeError("the agent did not pause")
        kept = ModelMessagesTypeAdapter.dump_json(paused.all_messages())
        history = ModelMessagesTypeAdapter.validate_json(kept)
        results = DeferredToolResults(approvals={c.tool_call_id: True for c in requests.approvals})
        final = await agent.run(message_history=history, deferred_tool_results=results)
        if not str(final.output).startswith("Done"):
            raise RuntimeError(f"cycle {n} ended with {final.output}")

    return one
