"""The cost of a policy with tiers, per rule lookup, against a section without any.

Run with ``python -m bench.policy_bench``. One call (a refund of 5000, asked in a Slack
thread) is looked up in three policies, in the same process, alternating rounds:

- ``section``: ``[tools.refund]`` alone (today's lookup: the merged rule, read as kept);
- ``20 tiers, last``: twenty tiers whose ``when`` (CEL) the call fails but the last;
- ``20 tiers, none``: twenty it fails (the section's rule applies);

each first for a new call every time (a fresh ask: its tiers evaluated), then for the
same waiting call again (``kept``: what a card's later lookups cost).

Printed: the median microseconds per lookup over the rounds and each tiered policy's
ratio to ``section``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from itertools import repeat

from agents import PendingInfo
from bot import ApprovalPolicy

SECTION = '[tools.refund]\napprovers = ["U0LEAD001"]\n'


def tiered(matches_last: bool) -> str:
    """A refund section with 20 tiers, the call meeting only the last (or none)."""
    tiers = [
        f"[[tools.refund.tiers]]\nwhen = \"args.amount > {10_000 + n} && requester != 'U{n}'\"\n"
        f'approvers = ["U0FIN{n:04d}"]\n'
        for n in range(19)
    ]
    last = 1000 if matches_last else 100_000
    tiers.append(f'[[tools.refund.tiers]]\nwhen = "args.amount > {last}"\napproval = "none"\n')
    return SECTION + "\n".join(tiers)


def call(run_id: str = "run-1") -> PendingInfo:
    now = datetime.now(UTC)
    return PendingInfo(
        run_id=run_id,
        tool_call_id="call-1",
        tool_name="refund",
        args={"order": "A-1001", "amount": 5000},
        kind="approval",
        agent_path=("ops", "billing"),
        created_at=now,
        expires_at=now + timedelta(hours=1),
        requester="U0ALICE01",
        thread_id="slack:T0TEAM:C0BILLING:1700000000.000100",
    )


def per_lookup(lookup: Callable[[], object], count: int) -> float:
    """Microseconds per call of ``lookup``, over ``count`` calls."""
    started = time.perf_counter()
    for _ in range(count):
        lookup()
    return (time.perf_counter() - started) / count * 1e6


def _looking(policy: ApprovalPolicy, calls: Iterator[PendingInfo]) -> Callable[[], object]:
    """One lookup of the next of ``calls`` in ``policy``."""
    return lambda: policy.rule("refund", next(calls))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--count", type=int, default=20_000)
    options = parser.parse_args()
    asked = call()
    policies = {
        "section": ApprovalPolicy.from_toml(SECTION),
        "20 tiers, last": ApprovalPolicy.from_toml(tiered(matches_last=True)),
        "20 tiers, none": ApprovalPolicy.from_toml(tiered(matches_last=False)),
    }
    assert policies["20 tiers, last"].rule("refund", asked).tier == "tools.refund.tiers[19]"
    assert policies["20 tiers, none"].rule("refund", asked).tier is None
    timings: dict[str, list[float]] = {}
    for round_ in range(options.rounds):
        for name, policy in policies.items():
            fresh = iter([call(f"run-{round_}-{n}") for n in range(options.count)])
            timings.setdefault(name, []).append(per_lookup(_looking(policy, fresh), options.count))
            if name != "section":
                again = per_lookup(_looking(policy, repeat(asked)), options.count)
                timings.setdefault(f"{name}, kept", []).append(again)
    base = statistics.median(timings["section"])
    print(f"{'policy':<22} {'us/lookup':>10} {'vs section':>11}")
    for name, runs in timings.items():
        median = statistics.median(runs)
        print(f"{name:<22} {median:>10.2f} {median / base:>10.1f}x")


if __name__ == "__main__":
    main()
