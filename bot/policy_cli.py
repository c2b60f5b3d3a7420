"""``python -m bot policy``: try a policy before it decides anything.

- ``policy test CASES``: run the calls a TOML file declares through the policy and print,
  per case, its tier, approvers, quorum and whether a person decides; exit 1 when a
  case's ``expect`` differs (2 for a file that cannot be read).
- ``policy replay NEW --since 30d``: read the audit log (``STORE_URL``) and list the past
  calls the policy ``NEW`` would treat otherwise than the one in force
  (``APPROVAL_POLICY``): needed nobody, someone else, more votes, or fewer.

A cases file:

```toml
policy = "policy.toml"            # beside this file; else APPROVAL_POLICY

[[case]]
name = "a refund over 1000 needs two of finance"
tool = "refund"
args = { order_id = "A-1001", amount = 5000 }
requester = "U0ALICE01"           # optional, as are agent = [...] and thread = "..."
expect = { person = true, quorum = 2, tier = 0, approvers = ["U056FIN1", "U078FIN2"] }
```
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TextIO

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from agents import AuditEntry, StandingAsk, open_store

from .audit import since_of
from .policy import ApprovalPolicy, EffectiveRule, PolicyError, treated_otherwise
from .settings import SettingsError, load_settings
from .tomlfile import FileProblems, parse, read_text


class CasesError(FileProblems):
    """A cases file that is missing, not TOML, or has an invalid field."""

    what = "policy cases"


class Expect(BaseModel):
    """What a case expects of the policy (each field optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    person: StrictBool | None = None
    tier: StrictInt | None = None
    """The tier's index in its section (``-1``: none, the section's own rule)."""
    approvers: list[StrictStr] | None = None
    quorum: Annotated[StrictInt, Field(ge=1)] | None = None


class Case(BaseModel):
    """One declared call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[StrictStr, Field(min_length=1)]
    tool: Annotated[StrictStr, Field(min_length=1)]
    args: dict[str, Any] = Field(default_factory=dict)
    requester: StrictStr | None = None
    agent: list[StrictStr] = Field(default_factory=list)
    thread: StrictStr | None = None
    """Where it is asked, as a thread id (``platform:workspace:channel:root``)."""
    expect: Expect = Field(default_factory=Expect)


class Cases(BaseModel):
    """A cases file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: StrictStr | None = None
    case: list[Case] = Field(min_length=1)


def describe(rule: EffectiveRule) -> str:
    """A rule in one line: its tier, who decides, how many."""
    tier = rule.tier or "the section"
    if not rule.approval:
        return f"{tier}: no person decides"
    people = ", ".join(sorted(rule.approvers)) or "anyone"
    return f"{tier}: {people} decide (quorum {rule.quorum})"


def _tier_index(rule: EffectiveRule) -> int:
    return -1 if rule.tier is None else int(rule.tier.rsplit("[", 1)[1].rstrip("]"))


def differences(rule: EffectiveRule, expect: Expect) -> list[str]:
    """How ``rule`` differs from what ``expect`` says."""
    found = {
        "person": rule.approval,
        "tier": _tier_index(rule),
        "approvers": sorted(rule.approvers),
        "quorum": rule.quorum,
    }
    wanted = {k: v for k, v in expect.model_dump().items() if v is not None}
    if "approvers" in wanted:
        wanted["approvers"] = sorted(wanted["approvers"])
    return [f"{k}: expected {v!r}, got {found[k]!r}" for k, v in wanted.items() if found[k] != v]


def run_cases(path: Path, out: TextIO, policy_path: Path | None) -> int:
    """``policy test``: 0 when every case is as expected, else 1."""
    cases = parse(Cases, read_text(path, CasesError), source=str(path), error=CasesError)
    chosen = path.parent / cases.policy if cases.policy else policy_path
    if chosen is None:
        raise CasesError(str(path), [("policy", "no policy: name one here or set APPROVAL_POLICY")])
    policy = ApprovalPolicy.load(chosen)
    failed = 0
    for case in cases.case:
        ask = StandingAsk(
            thread_id=case.thread,
            requester=case.requester,
            tool_name=case.tool,
            args=case.args,
            agent_path=tuple(case.agent),
        )
        rule = policy.rule(case.tool, ask)
        wrong = differences(rule, case.expect)
        failed += bool(wrong)
        print(f"{'FAIL' if wrong else 'ok  '} {case.name}: {describe(rule)}", file=out)
        for line in wrong:
            print(f"       {line}", file=out)
    print(f"{len(cases.case) - failed} of {len(cases.case)} cases as expected", file=out)
    return 1 if failed else 0


async def replay(
    new: ApprovalPolicy, current: ApprovalPolicy, store_url: str, since: datetime | None
) -> list[tuple[AuditEntry, str]]:
    """The past calls (first asked, or run under the policy, since ``since``) that ``new``
    treats otherwise than ``current``, each with how."""
    store = open_store(store_url)
    try:
        entries = await store.list_audit()
    finally:
        await store.close()
    seen: set[tuple[str, str]] = set()
    changed: list[tuple[AuditEntry, str]] = []
    for entry in entries:
        key = (entry.run_id, entry.tool_call_id)
        if entry.event not in ("requested", "granted") or key in seen:
            continue
        seen.add(key)
        if since is not None and entry.at < since:
            continue
        ask = StandingAsk(
            thread_id=entry.thread_id,
            requester=entry.requester,
            tool_name=entry.tool_name,
            args=entry.args,
            agent_path=(),  # the audit log does not keep it: a tier on the agent sees none
            asked_at=entry.at,
        )
        how = treated_otherwise(current.rule(entry.tool_name, ask), new.rule(entry.tool_name, ask))
        if how is not None:
            changed.append((entry, how))
    return changed


def policy_main(argv: Sequence[str]) -> int:
    """``python -m bot policy ...``; the exit code."""
    parser = argparse.ArgumentParser(prog="python -m bot policy", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    test = commands.add_parser("test", help="run declared calls through a policy")
    test.add_argument("cases", type=Path)
    again = commands.add_parser("replay", help="what a new policy would have done otherwise")
    again.add_argument("policy", type=Path)
    again.add_argument("--since", metavar="DURATION", help="only calls this recent (30d)")
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
        if args.command == "test":
            return run_cases(args.cases, sys.stdout, settings.approval_policy)
        try:
            since = since_of(args.since, datetime.now(UTC))
        except ValueError as exc:
            parser.error(f"--since: {exc}")
        new = ApprovalPolicy.load(args.policy)
        current = (
            ApprovalPolicy.load(settings.approval_policy)
            if settings.approval_policy
            else ApprovalPolicy()
        )
        changed = asyncio.run(replay(new, current, settings.store_url, since))
    except (PolicyError, CasesError, SettingsError) as exc:
        for line in exc.lines:
            print(f"approval-bot: {line}", file=sys.stderr)
        return 2
    for entry, how in changed:
        when = entry.at.strftime("%Y-%m-%d %H:%M")
        who = entry.requester or "-"
        print(f"{when}  {entry.tool_name}  by {who}  {entry.thread_id or '-'}: {how}")
    print(f"{len(changed)} past call(s) would be treated otherwise")
    return 0
