"""An event loop on a thread of its own, for sync tests (hypothesis) that drive async servers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """Runs coroutines on a loop that lives on its own thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, work: Coroutine[Any, Any, T], *, timeout: float = 60) -> T:
        """Run ``work`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def close(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@contextmanager
def background_loop() -> Iterator[BackgroundLoop]:
    """A background loop for the ``with`` block."""
    loop = BackgroundLoop()
    try:
        yield loop
    finally:
        loop.close()
