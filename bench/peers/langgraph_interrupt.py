"""LangGraph's raw ``interrupt()``: a model node, a tool node that pauses, InMemorySaver."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from . import Cycle


class State(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


def refund(order_id: str, amount: float) -> dict[str, Any]:
    """Refund an order."""
    return {"refunded": amount, "order_id": order_id}


def model(state: State) -> dict[str, Any]:
    """The scripted model: ask for the refund, then answer from its result."""
    last = state["messages"][-1]
    if last["role"] == "tool":
        return {"messages": [{"role": "assistant", "content": f"Done: {last['content']}"}]}
    call = {"name": "refund", "args": {"order_id": "A-100234", "amount": 249.99}}
    return {
        "messages": [{"role": "assistant", "content": "I'll refund that order.", "tool_call": call}]
    }


def gated_tool(state: State) -> dict[str, Any]:
    """Pause for a decision, then run the call the model made."""
    call = state["messages"][-1]["tool_call"]
    decision = interrupt({"tool": call["name"], "args": call["args"]})
    content = refund(**call["args"]) if decision == "approve" else "declined"
    return {"messages": [{"role": "tool", "content": str(content)}]}


def route(state: State) -> str:
    return "tool" if "tool_call" in state["messages"][-1] else END


async def cycle() -> Cycle:
    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tool", gated_tool)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tool", END])
    graph.add_edge("tool", "model")
    app = graph.compile(checkpointer=InMemorySaver())

    async def one(n: int) -> None:
        config = {"configurable": {"thread_id": f"bench:{n}"}}
        paused = await app.ainvoke(
            {"messages": [{"role": "user", "content": "refund A-100234"}]}, config
        )
        if "__interrupt__" not in paused:
            raise RuntimeError("the graph did not pause")
        final = await app.ainvoke(Command(resume="approve"), config)
        if not final["messages"][-1]["content"].startswith("Done"):
            raise RuntimeError(f"cycle {n} ended with {final['messages'][-1]}")

    return one
