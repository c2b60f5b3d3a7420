"""What ``python -m bot check`` finds beyond the settings themselves: environment
variables that look like the bot's but are not (a typo falls back to a default
silently), and, with ``--live``, whether each configured service answers.

Each problem is one line, naming what failed and how to fix it.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic_settings import BaseSettings

log = logging.getLogger(__name__)

OTHER_VARIABLES: Final = frozenset(
    {
        "BOT_LOG_FILE",  # the console's log file (bot/__main__.py)
        # Read by the Anthropic SDK itself.
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_LOG",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
    }
)
"""Variables the bot (or a library it uses) reads that no settings class declares."""

LIVE_TIMEOUT: Final = 15.0
"""Seconds one live check may take before it counts as failed."""


def variables_of(*classes: type[BaseSettings]) -> frozenset[str]:
    """The environment variables settings classes read (a field's name, in capitals)."""
    return frozenset(name.upper() for cls in classes for name in cls.model_fields)


def prefixes_of(known: Collection[str]) -> tuple[str, ...]:
    """The beginnings of the bot's variable names (``STORE_``, and each platform's, from
    the variables it declares)."""
    return tuple(sorted({name.partition("_")[0] + "_" for name in known if "_" in name}))


def unknown_variables(environ: Mapping[str, str], known: Collection[str]) -> list[str]:
    """One line per variable that starts like one of ``known`` (``prefixes_of``) but is
    none of them, with the nearest known name when there is one (``STORE_UR: unknown;
    did you mean STORE_URL?``)."""
    lines: list[str] = []
    names = sorted(known)
    prefixes = prefixes_of(known)
    for name in sorted(environ):
        if not name.startswith(prefixes) or name in known:
            continue
        near = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
        hint = f"; did you mean {near[0]}?" if near else "; the bot does not read it"
        lines.append(f"{name}: unknown{hint}")
    return lines


@dataclass(frozen=True, kw_only=True)
class LiveAnswer:
    """What a live check found: one line per problem, and, when its name does not say
    it all, what it reached (``app credentials and 2 installations``)."""

    problems: tuple[str, ...] = ()
    reached: str | None = None
    """Said in place of the check's name when nothing failed."""


@dataclass(frozen=True, kw_only=True)
class LiveCheck:
    """One service to reach: what it is (for the report), and the call that reaches it,
    returning one line per problem (none when it answered) or a ``LiveAnswer``."""

    name: str
    run: Callable[[], Awaitable[list[str] | LiveAnswer]]
    within: float | None = LIVE_TIMEOUT
    """Seconds the check may take; ``None`` for one that bounds each of its own calls
    (a call per installation: as many as there are)."""


@dataclass(frozen=True, kw_only=True)
class LiveReport:
    """What ``check --live`` found: every problem, one line each, and what it reached."""

    problems: list[str]
    reached: list[str]
    """Each check's name, or what it said it reached (``LiveAnswer.reached``)."""


async def live_report(checks: Sequence[LiveCheck]) -> LiveReport:
    """Run every check at once; a check that raises or takes longer than its ``within``
    seconds is one problem line (never a traceback)."""

    async def one(check: LiveCheck) -> LiveAnswer:
        try:
            async with asyncio.timeout(check.within):
                found = await check.run()
        except TimeoutError:
            within = f" within {check.within:g} s" if check.within is not None else ""
            return LiveAnswer(problems=(f"{check.name}: no answer{within}",))
        except Exception as exc:
            log.debug("live check %s failed", check.name, exc_info=True)
            return LiveAnswer(problems=(f"{check.name}: {exc}",))
        return found if isinstance(found, LiveAnswer) else LiveAnswer(problems=tuple(found))

    answers = await asyncio.gather(*(one(check) for check in checks))
    return LiveReport(
        problems=[line for answer in answers for line in answer.problems],
        reached=[
            answer.reached or check.name for check, answer in zip(checks, answers, strict=True)
        ],
    )
