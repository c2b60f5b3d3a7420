"""A Lua script's calls on one Redis, pipelined when they arrive together.

Each call of the intake script is its own round trip and connection from the
pool, and in redis-py most of its cost is that, not the script: a burst of
deliveries then pays it once each, in a row, and every ack behind them. Calls
that arrive while one is under way go together in one pipeline instead (not a
transaction: each script is atomic on its own, and they run in arrival order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from ._batches import Batches


@dataclass(frozen=True)
class ScriptCall:
    """One call of a script: its keys and arguments."""

    keys: Sequence[str]
    args: Sequence[str | int]


class PipelinedScript:
    """Calls ``script`` alone, or pipelined with the calls that arrived together."""

    def __init__(self, client: Redis, script: AsyncScript, *, name: str) -> None:
        self._client = client
        self._script = script
        # Deferred: a burst's first call would otherwise go alone, a round trip before
        # the rest (the acks of a burst of 50 came 20% later).
        self._batches = Batches(self._alone, self._together, name=name, defer=True)

    async def __call__(self, call: ScriptCall) -> Any:
        """The script's reply to ``call``."""
        return await self._batches(call)

    async def _alone(self, call: ScriptCall) -> Any:
        return await self._script(keys=list(call.keys), args=list(call.args))

    async def _together(self, calls: list[ScriptCall]) -> list[Any]:
        async with self._client.pipeline(transaction=False) as pipe:
            for call in calls:
                pipe.evalsha(self._script.sha, len(call.keys), *call.keys, *call.args)
            replies = await pipe.execute(raise_on_error=False)
        outcomes: list[Any] = []
        for call, reply in zip(calls, replies, strict=True):
            if isinstance(reply, NoScriptError):
                # The server lost its scripts (a restart, a failover): that call never
                # ran. Alone, the script is loaded again first.
                try:
                    reply = await self._alone(call)
                except Exception as exc:
                    reply = exc
            outcomes.append(reply)  # a refusal of that call alone (a ResponseError) included
        return outcomes
