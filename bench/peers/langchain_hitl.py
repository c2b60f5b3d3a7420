"""LangChain 1.x ``create_agent`` with ``HumanInTheLoopMiddleware`` and InMemorySaver."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from . import Cycle


@tool
def refund(order_id: str, amount: float) -> dict[str, Any]:
    """Refund an order."""
    return {"refunded": amount, "order_id": order_id}


class ScriptedChatModel(BaseChatModel):
    """Ask for the refund, then answer from its result (tools bind to nothing)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            message = AIMessage(content=f"Done: {last.content}")
        else:
            message = AIMessage(
                content="I'll refund that order.",
                tool_calls=[
                    {
                        "name": "refund",
                        "args": {"order_id": "A-100234", "amount": 249.99},
                        "id": f"call-{len(messages)}",
                    }
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


async def cycle() -> Cycle:
    agent = create_agent(
        ScriptedChatModel(),
        tools=[refund],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"refund": True})],
        checkpointer=InMemorySaver(),
    )

    async def one(n: int) -> None:
        config = {"configurable": {"thread_id": f"bench:{n}"}}
        paused = await agent.ainvoke(
            {"messages": [{"role": "user", "content": "refund A-100234"}]}, config
        )
        if "__interrupt__" not in paused:
            raise RuntimeError("the agent did not pause")
        final = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
        if not str(final["messages"][-1].content).startswith("Done"):
            raise RuntimeError(f"cycle {n} ended with {final['messages'][-1]}")

    return one
