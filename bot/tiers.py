"""Tiers of a tool's policy section: which applies to a call, by a CEL condition.

```toml
[[tools.refund.tiers]]
when = "args.amount <= 100"
approval = "none"

[[tools.refund.tiers]]
when = "args.amount > 1000"
approvers = ["@finance"]
quorum = 2
```

``when`` is CEL (Common Expression Language), run by ``common-expression-language``
(the Rust ``cel`` crate: a compiled program runs in microseconds). It sees the call
(``CEL_NAMES``): ``args`` (the validated arguments), ``tool``, ``agent`` (the path of
agents that asked, outermost first), ``requester`` (a user id, or ``""``),
``platform``, ``workspace``, ``channel`` (where it was asked, ``""`` when unknown) and
``now`` (when it was asked, a timestamp). An expression that does not compile, or names
anything else, stops the bot at start. One that fails on a call (a missing argument, a
type mismatch, an answer that is not true or false) cannot be told: when such a tier
comes before the one the call meets (or none is met), the strictest of them applies,
and never a tier that needs nobody (fail closed; ``ApprovalPolicy._choose``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import cel

from agents import PendingInfo, StandingAsk

log = logging.getLogger(__name__)

CEL_NAMES: Final = frozenset(
    {"args", "tool", "agent", "requester", "platform", "workspace", "channel", "now"}
)
"""What a tier's ``when`` may look at."""
DECIDER_NAMES: Final = CEL_NAMES | {"decider"}
"""What a ``deciders_when`` may look at: the call, and ``decider`` (``id``, ``platform``,
``groups``)."""
_POSITION = re.compile(r"<input>:(\d+):(\d+): ([^\n]*)")


class TierError(ValueError):
    """A tier's ``when`` that cannot be used (its message says where and why)."""


@dataclass(frozen=True)
class When:
    """A tier's compiled condition."""

    source: str
    program: cel.Program

    @classmethod
    def compile(cls, source: str, names: frozenset[str] = CEL_NAMES) -> When:
        """Compile ``source``, which may look at ``names``.

        Raises:
            TierError: It is not CEL (line and column said), or names something a call
                does not have.
        """
        try:
            program = cel.compile(source)
        except (ValueError, TypeError) as exc:
            raise TierError(_parse_error(str(exc))) from None
        unknown = [name for name in program.variables() if not _known(name, source, names)]
        if unknown:
            known = ", ".join(sorted(names))
            raise TierError(f"unknown name {', '.join(unknown)} (a call has: {known})")
        return cls(source, program)


def _known(name: str, source: str, names: frozenset[str]) -> bool:
    """Whether ``name`` is one of ``names``, or the variable of a macro (``x`` in
    ``args.items.all(x, x > 0)``)."""
    macro = rf"\.(?:all|exists|exists_one|map|filter)\(\s*{re.escape(name)}\s*,"
    return name in names or bool(re.search(macro, source))


def _parse_error(message: str) -> str:
    """The CEL parser's message as "line L, column C: what"."""
    found = _POSITION.search(message)
    if found is None:
        return message.splitlines()[0] if message else "not a CEL expression"
    line, column, what = found.groups()
    return f"line {line}, column {column}: {what}"


Call = PendingInfo | StandingAsk
"""A call a tier is chosen for: one waiting for a person, or one about to."""


def asked_at(call: Call) -> datetime | None:
    """When ``call`` was asked (a waiting call's ``created_at``); ``None``: not yet."""
    return call.created_at if isinstance(call, PendingInfo) else call.asked_at


def facts(call: Call) -> dict[str, Any]:
    """What a tier's ``when`` sees of ``call``."""
    at = asked_at(call) or datetime.now(UTC)
    platform, workspace, channel = _place(call.thread_id)
    return {
        "args": call.args,
        "tool": call.tool_name,
        "agent": list(call.agent_path),
        "requester": call.requester or "",
        "platform": platform,
        "workspace": workspace,
        "channel": channel,
        "now": at,
    }


def _place(thread_id: str | None) -> tuple[str, str, str]:
    """``platform:workspace:channel:root`` as its first three (a channel may hold ``:``)."""
    if not thread_id or thread_id.count(":") < 3:
        return "", "", ""
    platform, workspace, rest = thread_id.split(":", 2)
    return platform, workspace, rest.rsplit(":", 1)[0]


def first_match(tool: str, conditions: Sequence[When], call: Call) -> tuple[int | None, list[int]]:
    """The index of the first condition ``call`` meets (``None``: none), and those before
    it that could not be told (they failed, or are not true or false: logged). What
    to do with a failure is the policy's: it fails closed (``ApprovalPolicy._choose``)."""
    failed: list[int] = []
    try:
        seen = cel.Context(variables=facts(call))  # converted once, read by every condition
    except Exception as exc:  # arguments CEL cannot hold: none can be told
        log.warning("tools.%s: the call cannot be looked at: %s", tool, exc)
        return None, list(range(len(conditions)))
    for index, when in enumerate(conditions):
        try:
            verdict = when.program.execute(seen)
        except Exception as exc:  # a missing argument, a type mismatch
            log.warning("tools.%s.tiers[%d]: %r failed: %s", tool, index, when.source, exc)
            failed.append(index)
            continue
        if verdict is True:
            return index, failed
        if verdict is not False:
            log.warning(
                "tools.%s.tiers[%d]: %r is %r, not true or false", tool, index, when.source, verdict
            )
            failed.append(index)
    return None, failed


def allows(when: When, call: Call, decider: dict[str, Any]) -> bool:
    """Whether ``decider`` meets ``when`` on ``call``; one that fails or is not true or
    false does not (fail closed: logged)."""
    try:
        verdict = when.program.execute({**facts(call), "decider": decider})
    except Exception as exc:
        log.warning("deciders_when %r failed for %s: %s", when.source, decider.get("id"), exc)
        return False
    if not isinstance(verdict, bool):
        log.warning("deciders_when %r is %r, not true or false", when.source, verdict)
        return False
    return verdict
