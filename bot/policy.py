"""Who may decide on an approval: the policy file (TOML) and its checks.

```toml
[default]
approvers = ["U123", "U456"]   # empty or missing: anyone in the conversation
allow_self_approval = true     # may the requester approve their own request?
expires_in = "24h"             # s, m, h, d, combinable ("1h30m"), or seconds
quorum = 1                     # how many different people must approve (default 1)

[tools.restart_service]        # overrides [default] for one tool
approvers = ["U999", "U998", "U997"]
allow_self_approval = false
expires_in = "30m"
quorum = 2                     # two of the three approvers
```

Without a file anyone may decide, the requester included. A section for a tool
no agent has (a typo) stops the bot at start, like any other invalid field. A requester may
always *decline* their own request (withdrawing it); self-approval rules only
restrict approving. With a quorum above 1 each allowed Approve is one vote and
the call runs once enough different people approved; a single allowed Decline
still declines at once. A quorum above the number of listed approvers could
never be reached, so it is refused when the file is loaded.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
)
from pydantic_core import ErrorDetails

from agents import PendingInfo
from agents.mcp import asks_for_a_server

from . import texts
from .tomlfile import FileProblems, parse, read_text

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> timedelta:
    """``"30m"``, ``"1h30m"``, ``"2d"`` or a number of seconds, as a positive timedelta."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError("expected a duration such as '30m' or '24h'")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        parts = _DURATION.findall(text)
        if not parts or _DURATION.sub("", text).strip():
            raise ValueError(f"{value!r} is not a duration; use e.g. '90s', '30m', '24h', '2d'")
        seconds = sum(float(n) * _UNITS[unit] for n, unit in parts)
    else:
        raise ValueError("expected a duration such as '30m' or '24h'")
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return timedelta(seconds=seconds)


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


def _duration_text(value: Any) -> str:
    """A duration kept as written (``"1h"``), once it is known to be one."""
    if not isinstance(value, str):
        raise ValueError("a duration such as '1h' or '1d'")
    parse_duration(value)
    return value.strip()


DurationText = Annotated[str, BeforeValidator(_duration_text)]


def _listed(value: Any) -> Any:
    """One name or a list of them."""
    return [value] if isinstance(value, str) else value


class Rule(BaseModel):
    """One section of the policy file; unset fields inherit from ``[default]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approvers: list[Annotated[str, Field(min_length=1)]] | None = None
    allow_self_approval: StrictBool | None = None
    expires_in: Duration | None = None
    quorum: Annotated[StrictInt, Field(ge=1)] | None = None
    sensitive: StrictBool | None = None
    """The audit report shows a hash of this tool's arguments, never the arguments."""
    remind_after: Duration | None = None
    """Undecided this long: the approvers are reminded once, in the card's thread."""
    escalate_after: Duration | None = None
    """Undecided this long: ``escalate_to`` may decide too, and are told."""
    escalate_to: list[Annotated[str, Field(min_length=1)]] | None = None
    grant_for: list[DurationText] | None = None
    """Durations of "Approve for this thread" on cards (off when unset or empty)."""
    grant: StrictBool | None = None
    """``false``: never offer a grant for this tool, whatever ``[default]`` says."""
    channel: (
        Annotated[list[Annotated[str, Field(min_length=1)]], BeforeValidator(_listed)] | None
    ) = None
    """Post the card in this channel (one per platform) instead of the requester's thread,
    which gets a pointer to it."""
    notify: Literal["thread", "dm"] | None = None
    """``"dm"``: send each approver the card in a direct message instead (the thread gets
    a pointer); ``"thread"`` (the default): the card is posted where it was asked."""


class PolicyFile(BaseModel):
    """The whole policy file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Rule = Field(default_factory=Rule)
    tools: dict[str, Rule] = Field(default_factory=dict)


class PolicyError(FileProblems):
    """The policy file is missing, not TOML, or has an invalid field.

    Attributes:
        path: The policy file.
        field: The first offending field (``tools.deploy.approvers``), if any.
        problems: Every ``(field, message)`` found.
        lines: One readable line per problem.
    """

    what = "approval policy"


@dataclass(frozen=True, kw_only=True)
class EffectiveRule:
    """The rule for one tool after ``[default]`` and ``[tools.<name>]`` are merged."""

    approvers: frozenset[str]
    allow_self_approval: bool
    expires_in: timedelta | None
    quorum: int = 1
    """How many different allowed people must approve before the call runs."""
    sensitive: bool = False
    """Reports show a hash of the arguments instead of them."""
    remind_after: timedelta | None = None
    escalate_after: timedelta | None = None
    escalate_to: frozenset[str] = frozenset()
    grant_for: tuple[str, ...] = ()
    """Durations a grant may last; empty when grants are off (or a quorum asks for more)."""
    channels: tuple[str, ...] = ()
    """Where the card goes instead of the thread: the first of these its platform knows."""
    notify: Literal["thread", "dm"] = "thread"
    """``"dm"``: each person who may decide gets the card in a direct message."""


class ApprovalPolicy:
    """The approval rules; ``ApprovalPolicy()`` lets anyone decide.

    Raises:
        PolicyError: A quorum is larger than the approvers listed for it.
    """

    def __init__(self, rules: PolicyFile | None = None, *, source: str | None = None) -> None:
        self.rules = rules or PolicyFile()
        self.source = source
        self._merged: dict[str, EffectiveRule] = {}
        problems = (
            self._unreachable_quorums()
            + self._half_escalations()
            + self._quorum_grants()
            + self._unroutable()
        )
        if problems:
            raise PolicyError(source or "<policy>", problems)

    @classmethod
    def load(cls, path: str | Path) -> ApprovalPolicy:
        """Read and validate a policy file.

        Raises:
            PolicyError: The file is missing, unreadable, not TOML or invalid.
        """
        return cls.from_toml(read_text(path, PolicyError), source=str(path))

    @classmethod
    def from_toml(cls, text: str, *, source: str = "<string>") -> ApprovalPolicy:
        """Parse and validate policy TOML; ``source`` names it in errors."""
        rules = parse(PolicyFile, text, source=source, error=PolicyError, unknown=_unknown)
        return cls(rules, source=source)

    @property
    def tool_names(self) -> frozenset[str]:
        """The tools the file has a section for."""
        return frozenset(self.rules.tools)

    def check_tools(self, tools: Iterable[str], *, sub_agents: Iterable[str] = ()) -> None:
        """Fail closed on sections for tools the agents do not have.

        A misspelled ``[tools.deploy_servise]`` would otherwise leave the real
        tool to ``[default]``, silently letting other people approve it.

        Raises:
            PolicyError: One problem per section that names no tool.
        """
        known, delegations = sorted(set(tools)), set(sub_agents)
        problems: list[tuple[str | None, str]] = []
        for name in sorted(self.tool_names - set(known)):
            if name in delegations:
                message = (
                    f"{name!r} hands work to a sub-agent and is never approved itself; "
                    "name that agent's tools instead"
                )
            else:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
                message = f"no agent has a tool named {name!r} ({hint})"
            problems.append((f"tools.{name}", message))
        if problems:
            raise PolicyError(self.source or "<policy>", problems)

    def rule(self, tool_name: str) -> EffectiveRule:
        """The merged rule for a tool: merged once per tool, then read as it is (a card
        reads its rule a dozen times; the policy never changes once loaded)."""
        merged = self._merged.get(tool_name)
        if merged is None:
            merged = self._merged[tool_name] = self._merge(tool_name)
        return merged

    def _merge(self, tool_name: str) -> EffectiveRule:
        default = self.rules.default
        own = self.rules.tools.get(tool_name, Rule())
        approvers = own.approvers if own.approvers is not None else default.approvers
        allow_self = (
            own.allow_self_approval
            if own.allow_self_approval is not None
            else default.allow_self_approval
        )
        return EffectiveRule(
            approvers=frozenset(approvers or ()),
            allow_self_approval=True if allow_self is None else allow_self,
            expires_in=own.expires_in or default.expires_in,
            quorum=own.quorum or default.quorum or 1,
            sensitive=bool(own.sensitive if own.sensitive is not None else default.sensitive),
            remind_after=own.remind_after or default.remind_after,
            escalate_after=own.escalate_after or default.escalate_after,
            escalate_to=frozenset(
                own.escalate_to if own.escalate_to is not None else default.escalate_to or ()
            ),
            grant_for=self._grant_for(own, default),
            **self._destination(own, default),
        )

    @staticmethod
    def _grant_for(own: Rule, default: Rule) -> tuple[str, ...]:
        """A tool's grant durations: none with ``grant = false`` or a quorum above 1."""
        granting = own.grant if own.grant is not None else default.grant
        quorum = own.quorum or default.quorum or 1
        if granting is False or quorum > 1:
            return ()
        durations = own.grant_for if own.grant_for is not None else default.grant_for
        return tuple(dict.fromkeys(durations or ()))

    @staticmethod
    def _destination(own: Rule, default: Rule) -> dict[str, Any]:
        """Where a tool's cards go: its own section decides when it says (``channel`` or
        ``notify``), else ``[default]``."""
        source = own if own.channel is not None or own.notify is not None else default
        return {"channels": tuple(source.channel or ()), "notify": source.notify or "thread"}

    def quorum(self, tool_name: str) -> int:
        """How many different people must approve a call of this tool."""
        return self.rule(tool_name).quorum

    def _half_escalations(self) -> list[tuple[str | None, str]]:
        """Sections with ``escalate_after`` but nobody to escalate to, or the reverse."""
        sections = self._sections()
        problems: list[tuple[str | None, str]] = []
        for where, own in sections:
            if own.escalate_after is None and own.escalate_to is None:
                continue
            rule = self.rule(where.removeprefix("tools.")) if where != "default" else None
            after = rule.escalate_after if rule else own.escalate_after
            to = rule.escalate_to if rule else frozenset(own.escalate_to or ())
            if after is None:
                problems.append((f"{where}.escalate_to", "needs escalate_after (when to escalate)"))
            elif not to:
                problems.append((f"{where}.escalate_after", "needs escalate_to (who to add)"))
        return problems

    def _quorum_grants(self) -> list[tuple[str | None, str]]:
        """Tool sections that ask for grants on a call several people must approve."""
        problems: list[tuple[str | None, str]] = []
        for name, own in self.rules.tools.items():
            quorum = own.quorum or self.rules.default.quorum or 1
            if own.grant_for and quorum > 1:
                problems.append(
                    (f"tools.{name}.grant_for", "a call that needs a quorum is never granted")
                )
        return problems

    def _sections(self) -> list[tuple[str, Rule]]:
        """Every section of the file, named as in its problems (``tools.deploy``)."""
        return [("default", self.rules.default)] + [
            (f"tools.{name}", rule) for name, rule in self.rules.tools.items()
        ]

    def _unroutable(self) -> list[tuple[str | None, str]]:
        """Sections that send cards both to a channel and to people, or to the direct
        messages of approvers nobody listed."""
        sections = self._sections()
        problems: list[tuple[str | None, str]] = []
        for where, own in sections:
            if own.notify == "dm" and own.channel:
                problems.append((f"{where}.notify", 'choose one: channel, or notify = "dm"'))
                continue
            name = where.removeprefix("tools.")
            rule = self.rule(name) if where != "default" else None
            dm = rule.notify == "dm" if rule else own.notify == "dm"
            approvers = rule.approvers if rule else frozenset(own.approvers or ())
            # A tool that takes both from [default] is reported there, not once more.
            says = rule is None or own.approvers is not None or own.notify is not None
            if dm and not approvers and says:
                problems.append(
                    (f"{where}.notify", 'notify = "dm" needs approvers (whom to send it to)')
                )
        return problems

    def names(self) -> tuple[frozenset[str], frozenset[str]]:
        """Every person or group the file names (approvers, escalations), and every channel."""
        rules = [self.rules.default, *self.rules.tools.values()]
        people = {n for r in rules for n in (r.approvers or []) + (r.escalate_to or [])}
        channels = {c for r in rules for c in r.channel or []}
        return frozenset(people), frozenset(channels)

    def _unreachable_quorums(self) -> list[tuple[str | None, str]]:
        """Sections whose quorum exceeds the approvers they list (it could never be met)."""
        problems: list[tuple[str | None, str]] = []
        default = self.rules.default
        if default.approvers and (default.quorum or 1) > len(set(default.approvers)):
            problems.append(("default.quorum", _too_few(default.quorum or 1, default.approvers)))
        for name, own in self.rules.tools.items():
            if own.approvers is None and own.quorum is None:
                continue  # [default] alone decides, and was checked above
            rule = self.rule(name)
            if rule.approvers and rule.quorum > len(rule.approvers):
                field = "quorum" if own.quorum is not None else "approvers"
                problems.append((f"tools.{name}.{field}", _too_few(rule.quorum, rule.approvers)))
        return problems

    def check(
        self,
        tool_name: str,
        requester: str | None,
        decider: str,
        *,
        action: Literal["approve", "decline"] = "approve",
        escalated: bool = False,
        allowed: frozenset[str] | None = None,
    ) -> str | None:
        """Why ``decider`` may not decide on a call of ``tool_name``, or ``None`` if they may.

        ``escalated``: the call waited past ``escalate_after``, so ``escalate_to`` may too.
        ``allowed``: ``deciders`` with their user groups expanded to members (``Groups``);
        by default the names as listed.
        """
        rule = self.rule(tool_name)
        is_requester = requester is not None and decider == requester
        if action == "decline" and is_requester:
            return None
        if allowed is None:
            allowed = self.deciders(tool_name, escalated=escalated)
        if rule.approvers and decider not in allowed:
            return texts.POLICY_NOT_APPROVER.format(tool=tool_name)
        if action == "approve" and is_requester and not rule.allow_self_approval:
            return texts.POLICY_SELF_APPROVAL.format(tool=tool_name)
        return None

    def question_refusal(
        self,
        question: PendingInfo,
        person: str,
        *,
        declining: bool = False,
        reply: bool = False,
        allowed: frozenset[str] | None = None,
    ) -> str | None:
        """Why ``person`` may not answer (or, ``declining``, decline) a question, or ``None``.

        An MCP server's question is part of deciding that tool's call: only the
        people the policy lets decide it may answer. A tool's own question (a
        missing version) is anyone's in the thread to answer, like any reply.
        Declining either is for those who may decline the tool's card, its
        requester included. ``reply``: the answer came as a reply (which is then
        not used), not from a button or a form. ``allowed``: as for ``check``.
        """
        action: Literal["approve", "decline"] = "decline" if declining else "approve"
        if not declining and not asks_for_a_server(question):
            return None
        escalated = self.escalated(question.tool_name, question.created_at, datetime.now(UTC))
        refusal = self.check(
            question.tool_name,
            question.requester,
            person,
            action=action,
            escalated=escalated,
            allowed=allowed,
        )
        if refusal is None or not reply:
            return refusal
        return texts.ANSWER_NOT_ALLOWED.format(tool=question.tool_name)

    def deciders(self, tool_name: str, *, escalated: bool) -> frozenset[str]:
        """The people listed to decide a call of ``tool_name`` (empty: anyone may); once
        ``escalated``, its ``escalate_to`` too."""
        rule = self.rule(tool_name)
        return rule.approvers | (rule.escalate_to if escalated else frozenset())

    def deciders_of(self, call: PendingInfo, now: datetime | None = None) -> frozenset[str]:
        """Who is listed to decide ``call`` at ``now`` (empty: anyone may): its approvers,
        and its ``escalate_to`` once it waited past ``escalate_after``."""
        escalated = self.escalated(call.tool_name, call.created_at, now or datetime.now(UTC))
        return self.deciders(call.tool_name, escalated=escalated)

    def escalated(self, tool_name: str, asked_at: datetime, now: datetime) -> bool:
        """Whether a call asked at ``asked_at`` has waited past its ``escalate_after``."""
        after = self.rule(tool_name).escalate_after
        return after is not None and asked_at + after <= now

    def expires_in(self, tool_name: str) -> timedelta | None:
        """How long a call of this tool stays decidable, if the policy says (else the agent's)."""
        return self.rule(tool_name).expires_in


def _too_few(quorum: int, approvers: Iterable[str]) -> str:
    listed = len(set(approvers))
    noun = "approver is" if listed == 1 else "approvers are"
    return f"quorum = {quorum} can never be reached: only {listed} {noun} listed"


def _unknown(err: ErrorDetails) -> str:
    if len(err["loc"]) == 1:
        return "unknown section (known: [default], [tools.<tool name>])"
    return (
        "unknown field (known: approvers, allow_self_approval, channel, escalate_after,"
        " escalate_to, expires_in, grant, grant_for, notify, quorum, remind_after, sensitive)"
    )
