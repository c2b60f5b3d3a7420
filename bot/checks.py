"""What ``python -m bot check`` finds beyond the settings themselves: environment
variables that look like the bot's but are not (a typo falls back to a default
silently), and, with ``--live``, whether each configured service answers.

Each problem is one line, naming what failed and how to fix it.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
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
class LiveCheck:
    """One service to reach: what it is (for the report), and the call that reaches it,
    returning one line per problem (none when it answered)."""

    name: str
    run: Callable[[], Awaitable[list[str]]]


async def live_problems(checks: Iterable[LiveCheck], *, within: float = LIVE_TIMEOUT) -> list[str]:
    """Run every check at once; a check that raises or takes longer than ``within``
    seconds is one problem line (never a traceback)."""

    async def one(check: LiveCheck) -> list[str]:
        try:
            return await asyncio.wait_for(check.run(), within)
        except TimeoutError:
            return [f"{check.name}: no answer within {within:g} s"]
        except Exception as exc:
            log.debug("live check %s failed", check.name, exc_info=True)
            return [f"{check.name}: {exc}"]

    found = await asyncio.gather(*(one(check) for check in checks))
    return [line for lines in found for line in lines]
