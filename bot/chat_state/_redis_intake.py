"""A Lua script's calls on one Redis, made as one command when they arrive together.

Each call of the intake script is a command of its own, and in redis-py most of
its cost is that (packing it, reading and parsing its reply), not the script: a
burst of deliveries pays it once each, and every ack waits behind them. Calls that
arrive while one is under way go together instead, as one call of the script's
batch form (``batch_script``): each call runs in arrival order, as a script of its
own would, and an error of one call is its own (not a transaction, as a pipeline
of single calls was not).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from ._batches import Batches

_BATCH = """
local out, k, a = {}, 1, 1
while a <= #ARGV do
  local nkeys, nargs = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local keys = {unpack(KEYS, k, k + nkeys - 1)}
  local ok, reply = pcall(call, keys, {unpack(ARGV, a + 2, a + 1 + nargs)})
  if not ok then reply = {type(reply) == 'table' and reply.err or tostring(reply)} end
  out[#out + 1] = reply
  k, a = k + nkeys, a + 2 + nargs
end
return out
"""


def single_script(function: str) -> str:
    """A script whose body is ``function``, a ``local function call(KEYS, ARGV)``."""
    return f"{function}\nreturn call(KEYS, ARGV)\n"


def batch_script(function: str) -> str:
    """The batch form of ``single_script(function)``.

    KEYS: each call's keys in turn. ARGV: for each call, the number of its keys and
    of its arguments, then its arguments. Replies with each call's reply, or
    ``{message}`` for a call that failed. ``call`` must reply (``false`` for nil).
    """
    return f"{function}\n{_BATCH}"


@dataclass(frozen=True)
class ScriptCall:
    """One call of a script: its keys and arguments."""

    keys: Sequence[str]
    args: Sequence[str | int]


class BatchedScript:
    """Calls the script ``function`` (see ``batch_script``) for each ``ScriptCall``,
    in one command for the calls that arrived together."""

    def __init__(self, client: Redis, function: str, *, name: str) -> None:
        # redis-py loads it again when the server lost its scripts (a restart, a failover).
        self._script = client.register_script(batch_script(function))
        # Deferred: a burst's first call would otherwise go alone, a round trip before
        # the rest (the acks of a burst of 50 came 20% later).
        self._batches = Batches(self._alone, self._together, name=name, defer=True)

    async def __call__(self, call: ScriptCall) -> Any:
        """The script's reply to ``call``."""
        return await self._batches(call)

    async def _alone(self, call: ScriptCall) -> Any:
        (outcome,) = await self._together([call])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def _together(self, calls: list[ScriptCall]) -> list[Any]:
        keys: list[str] = []
        args: list[str | int] = []
        for call in calls:
            keys += call.keys
            args += (len(call.keys), len(call.args), *call.args)
        replies = await self._script(keys=keys, args=args)
        # A refusal of one call (a ResponseError) is that call's alone.
        return [ResponseError(r[0]) if isinstance(r, list) else r for r in replies]
