"""The approval cycle written for peer frameworks, to compare in one run.

Install the peers with ``pip install -e '.[bench-peers]'`` and run
``python -m bench.peers``. Every system does the same scenario as
``bench/approval_cycle_bench.py``: a scripted model asks for a gated refund,
the run pauses and its state is kept in memory (each system's in-memory
checkpointer, or the serialized message history where it has none), a person
approves, the tool runs and the model answers from its result.
"""

from collections.abc import Awaitable, Callable

Cycle = Callable[[int], Awaitable[None]]
"""One approval cycle; its argument numbers the thread."""
