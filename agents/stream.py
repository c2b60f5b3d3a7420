"""The stream object returned by ``Agent.stream`` and the approval calls."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any

from .chunks import AgentResult, Chunk, TextDeltaChunk


class AgentStream:
    """Chunks of one run segment, in order; iterate it once.

    ``async for chunk in stream`` yields every chunk (sub-agents' included);
    ``stream.text_stream`` yields only the top agent's text; ``await stream`` (or
    ``await stream.result()``) consumes what is left and returns the result.
    The run advances only while the stream is consumed.
    """

    def __init__(
        self,
        run_id: str,
        chunks: AsyncIterator[Chunk],
        result: Callable[[], Awaitable[AgentResult]],
        top_path: tuple[str, ...],
    ) -> None:
        self.run_id = run_id
        self._chunks = chunks
        self._result = result
        self._top_path = top_path
        self._iterator: AsyncIterator[Chunk] | None = None
        self._final: AgentResult | None = None

    def __aiter__(self) -> AsyncIterator[Chunk]:
        if self._iterator is not None:
            raise RuntimeError("an AgentStream can be iterated only once")
        self._iterator = self._chunks
        return self._iterator

    @property
    def text_stream(self) -> AsyncIterator[str]:
        """The top agent's text deltas as strings."""
        return self._texts()

    async def _texts(self) -> AsyncIterator[str]:
        async for chunk in self:
            if isinstance(chunk, TextDeltaChunk) and chunk.agent_path == self._top_path:
                yield chunk.text

    async def result(self) -> AgentResult:
        """Consume the rest of the stream and return the run's result."""
        if self._final is None:
            async for _ in self._iterator or self:
                pass
            self._final = await self._result()
        return self._final

    def __await__(self) -> Generator[Any, None, AgentResult]:
        return self.result().__await__()
