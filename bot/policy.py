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

A tool's section may hold ordered ``[[tools.<tool>.tiers]]``: the first whose ``when``
(CEL over the call, ``bot.tiers``) holds sets the rule over the section's, and
``approval = "none"`` lets the call run without a card. Who decides can be narrowed
further by ``distinct_groups``, ``deciders_when`` and ``editor_may_approve``, and
``review = "model"`` has a model read each call first (``bot.reviewer``).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from cachetools import LRUCache
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
)
from pydantic_core import ErrorDetails

from agents import PendingInfo
from agents.mcp import asks_for_a_server

from . import texts
from .tiers import DECIDER_NAMES, Call, TierError, When, asked_at, first_match
from .tomlfile import FileProblems, parse, read_file

TIERS_KEPT = 10_000
"""Waiting calls whose tier one process keeps (a lookup again costs microseconds)."""
POLICY_ACTOR = "policy:"
"""Who approved a call a tier lets run without a person (``policy:tools.x.tiers[0]``), in
the audit log."""
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


class _Fields(BaseModel):
    """What a section (or a tier of one) sets; unset fields inherit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approvers: list[Annotated[str, Field(min_length=1)]] | None = None
    allow_self_approval: StrictBool | None = None
    expires_in: Duration | None = None
    quorum: Annotated[StrictInt, Field(ge=1)] | None = None
    editor_may_approve: StrictBool | None = None
    """``false``: an edit does not approve; the edited call is asked again, and whoever
    edited it may not approve it."""
    distinct_groups: Annotated[StrictInt, Field(ge=2)] | None = None
    """A quorum's votes come from people of this many different user groups (of those
    the rule names)."""
    review: Literal["model"] | None = None
    """``"model"``: a model reviews each call first (``bot.reviewer``): ``clear`` runs it
    without a card, ``caution`` puts its reason on the card."""
    deciders_when: Annotated[StrictStr, Field(min_length=1)] | None = None
    """CEL over the call and ``decider`` (``id``, ``platform``, ``groups``: the policy's
    user groups they are in): who else the rule lets decide must also meet it."""
    remind_after: Duration | None = None
    """Undecided this long: the approvers are reminded once, in the card's thread."""
    escalate_after: Duration | None = None
    """Undecided this long: ``escalate_to`` may decide too, and are told."""
    escalate_to: list[Annotated[str, Field(min_length=1)]] | None = None
    grant_for: list[DurationText] | None = None
    """Durations of "Approve for this thread" on cards (off when unset or empty)."""
    grant: StrictBool | None = None
    """``false``: never offer a grant for this tool, whatever ``[default]`` says."""
    never_for: list[DurationText] | None = None
    """Durations of "Decline, don't ask again here" on cards (off when unset or empty):
    the call is declined, and so is every later call of the tool in that thread until
    it lapses, without a card."""
    batch: StrictBool | None = None
    """``true``: calls of this tool one model turn asks for together show as one card
    (with the others that may), Approve all and Decline all beside each call's own."""
    respond: StrictBool | None = None
    """``true``: cards offer Respond: an approver answers in the tool's place ("already
    restarted it by hand"), the tool never runs, the model gets their words."""
    channel: (
        Annotated[list[Annotated[str, Field(min_length=1)]], BeforeValidator(_listed)] | None
    ) = None
    """Post the card in this channel (one per platform) instead of the requester's thread,
    which gets a pointer to it."""
    notify: Literal["thread", "dm"] | None = None
    """``"dm"``: send each approver the card in a direct message instead (the thread gets
    a pointer); ``"thread"`` (the default): the card is posted where it was asked."""


class Tier(_Fields):
    """One of a tool's ordered tiers: the first whose ``when`` holds for a call sets its
    fields over the section's (``approval = "none"``: no person needs to decide)."""

    when: Annotated[StrictStr, Field(min_length=1)]
    """A CEL expression over the call (``CEL_NAMES``), true or false."""
    approval: Literal["required", "none"] = "required"


class Rule(_Fields):
    """One section of the policy file; unset fields inherit from ``[default]``."""

    sensitive: StrictBool | None = None
    """The audit report shows a hash of this tool's arguments, never the arguments."""
    tiers: list[Tier] | None = None
    """Ordered tiers (a tool's section only): the first that matches applies."""


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
    never_for: tuple[str, ...] = ()
    """Durations a standing decline may last (empty: not offered)."""
    batch: bool = False
    """Whether its calls asked together share one card (only one person decides each,
    and only cards posted in the thread: never a quorum, a channel or direct messages)."""
    respond: bool = False
    """Whether an approver may answer in the tool's place (never with a quorum)."""
    channels: tuple[str, ...] = ()
    """Where the card goes instead of the thread: the first of these its platform knows."""
    notify: Literal["thread", "dm"] = "thread"
    """``"dm"``: each person who may decide gets the card in a direct message."""
    approval: bool = True
    """Whether a person must decide (``False``: a tier with ``approval = "none"``)."""
    distinct_groups: int = 1
    """How many different user groups a quorum's votes must come from."""
    editor_may_approve: bool = True
    """Whether an edit approves (else it asks again, for someone else)."""
    review: bool = False
    """A model reviews each call before a person is asked (``bot.reviewer``)."""
    deciders_when: When | None = None
    """What a decider must meet besides being listed (``bot.tiers.allows``)."""
    tier: str | None = None
    """The tier that applies, as the file names it (``tools.refund.tiers[1]``)."""


class ApprovalPolicy:
    """The approval rules; ``ApprovalPolicy()`` lets anyone decide.

    Raises:
        PolicyError: A quorum is larger than the approvers listed for it.
    """

    def __init__(self, rules: PolicyFile | None = None, *, source: str | None = None) -> None:
        self.rules = rules or PolicyFile()
        self.source = source
        self.digest: str | None = None
        """``sha256:`` of the file's bytes it was read from (``load``), as parsed."""
        self._merged: dict[tuple[str, int | None], EffectiveRule] = {}
        self._when: dict[str, list[When]] = {}
        """Each tool's tiers' conditions, compiled, in order."""
        self._deciders: dict[str, When] = {}
        """Every ``deciders_when``, compiled, by its text."""
        self._tiers: LRUCache[tuple[Any, ...], int | None] = LRUCache(maxsize=TIERS_KEPT)
        """The tier of each waiting call looked up lately (``_tier``)."""
        problems = self._compile_tiers()
        if problems:
            raise PolicyError(source or "<policy>", problems)
        problems = (
            self._tier_problems()
            + self._unreachable_quorums()
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
        read = read_file(path, PolicyError)
        policy = cls.from_toml(read.text, source=str(path))
        policy.digest = read.digest
        return policy

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

    def rule(self, tool_name: str, call: Call | None = None) -> EffectiveRule:
        """The merged rule for a call of a tool: its tier's, when its section has tiers
        and ``call`` meets one (``bot.tiers``), else its section's. Merged once per tool
        and tier, then read as it is (the policy never changes once loaded)."""
        tier = None
        if call is not None and tool_name in self._when:
            tier = self._tier(tool_name, call)
        return self._at(tool_name, tier)

    def _at(self, tool_name: str, tier: int | None) -> EffectiveRule:
        """The rule of a tool's section (``tier`` ``None``) or of one of its tiers,
        merged once."""
        merged = self._merged.get((tool_name, tier))
        if merged is None:
            merged = self._merged[tool_name, tier] = self._merge(tool_name, tier)
        return merged

    def anyone_of(self, tool_name: str) -> frozenset[str]:
        """Everyone the rules of ``tool_name`` name to decide (its section's and every
        tier's approvers and escalations): whose approvals lists a call of it touches."""
        count = len(self._when.get(tool_name, ()))
        rules = [self._at(tool_name, tier) for tier in [None, *range(count)]]
        return frozenset().union(*(rule.approvers | rule.escalate_to for rule in rules))

    def tiers_of(self, tool_name: str) -> list[str | None]:
        """Every rule a call of ``tool_name`` may come under, as ``EffectiveRule.tier``
        names it (``None``: the section's own)."""
        count = len(self._when.get(tool_name, ()))
        return [None, *(f"tools.{tool_name}.tiers[{i}]" for i in range(count))]

    def _tier(self, tool_name: str, call: Call) -> int | None:
        """The tier ``call`` is in; a waiting call's is kept (a card reads its rule a
        dozen times; what it is asked with, and when, never change)."""
        at = asked_at(call)
        if call.run_id is None or call.tool_call_id is None or at is None:
            return self._choose(tool_name, call)  # no call of a run: nothing to keep
        # A call about to wait and the same call waiting share one key (one asked_at).
        key = (tool_name, call.run_id, call.tool_call_id, at, _frozen(call.args))
        if key not in self._tiers:
            self._tiers[key] = self._choose(tool_name, call)
        return self._tiers[key]

    def _choose(self, tool_name: str, call: Call) -> int | None:
        """The first tier ``call`` meets (``None``: the section's rule). Fail closed: when
        a tier before it (or any, without a match) could not be told, the strictest of
        those and it applies (the most votes; a tier that needs nobody is none of them)."""
        match, failed = first_match(tool_name, self._when[tool_name], call)
        if not failed:
            return match
        own = self.rules.tools[tool_name].tiers or []
        if match is not None and own[match].approval == "none":
            match = None  # nobody deciding is never the fallback of an error
        candidates = [i for i in failed if own[i].approval == "required"] + [match]
        return max(candidates, key=lambda i: self._at(tool_name, i).quorum)

    def _merge(self, tool_name: str, tier: int | None = None) -> EffectiveRule:
        """``[default]``, then the tool's section, then its tier ``tier``: each field from
        the most specific that sets it."""
        default = self.rules.default
        own = self.rules.tools.get(tool_name, Rule())
        layers: list[_Fields] = [own, default]
        tiers = own.tiers or []
        if tier is not None:
            layers.insert(0, tiers[tier])

        def pick(name: str) -> Any:
            return next((v for v in (getattr(x, name) for x in layers) if v is not None), None)

        allow_self = pick("allow_self_approval")
        quorum = pick("quorum") or 1
        chosen = tiers[tier] if tier is not None else None
        where = _destination(layers)
        in_thread = not where["channels"] and where["notify"] == "thread"
        return EffectiveRule(
            approvers=frozenset(pick("approvers") or ()),
            allow_self_approval=True if allow_self is None else allow_self,
            expires_in=pick("expires_in"),
            quorum=quorum,
            sensitive=bool(own.sensitive if own.sensitive is not None else default.sensitive),
            remind_after=pick("remind_after"),
            escalate_after=pick("escalate_after"),
            escalate_to=frozenset(pick("escalate_to") or ()),
            grant_for=_grants(pick("grant"), pick("grant_for"), quorum),
            respond=pick("respond") is True and quorum == 1,
            never_for=tuple(dict.fromkeys(pick("never_for") or ())),
            batch=pick("batch") is True and quorum == 1 and in_thread,
            approval=chosen is None or chosen.approval == "required",
            tier=f"tools.{tool_name}.tiers[{tier}]" if tier is not None else None,
            distinct_groups=pick("distinct_groups") or 1,
            editor_may_approve=pick("editor_may_approve") is not False,
            review=pick("review") == "model",
            deciders_when=self._deciders.get(pick("deciders_when") or ""),
            **where,
        )

    def quorum(self, tool_name: str, call: Call | None = None) -> int:
        """How many different people must approve a call of this tool."""
        return self.rule(tool_name, call).quorum

    def _compile_tiers(self) -> list[tuple[str | None, str]]:
        """Compile every tier's ``when``; a problem per one that cannot be used."""
        problems: list[tuple[str | None, str]] = []
        if self.rules.default.tiers:
            problems.append(("default.tiers", "tiers belong to a tool's section"))
        layers: list[tuple[str, _Fields]] = [("default", self.rules.default)]
        for name, own in self.rules.tools.items():
            layers.append((f"tools.{name}", own))
            layers += [(f"tools.{name}.tiers[{i}]", t) for i, t in enumerate(own.tiers or ())]
        for where, layer in layers:
            text = layer.deciders_when
            if text is None or text in self._deciders:
                continue
            try:
                self._deciders[text] = When.compile(text, DECIDER_NAMES)
            except TierError as exc:
                problems.append((f"{where}.deciders_when", str(exc)))
        for name, own in self.rules.tools.items():
            compiled: list[When] = []
            for index, tier in enumerate(own.tiers or ()):
                try:
                    compiled.append(When.compile(tier.when))
                except TierError as exc:
                    problems.append((f"tools.{name}.tiers[{index}].when", str(exc)))
            if own.tiers:
                self._when[name] = compiled
        return problems

    def _tier_problems(self) -> list[tuple[str | None, str]]:
        """Tiers whose merged rule could never work: a quorum above its approvers, cards
        sent to people nobody lists, or to a channel and people at once, a grant on a
        quorum, half an escalation."""
        problems: list[tuple[str | None, str]] = []
        for name, own in self.rules.tools.items():
            for index, tier in enumerate(own.tiers or ()):
                where = f"tools.{name}.tiers[{index}]"
                rule = self._merge(name, index)
                if rule.approvers and rule.quorum > len(rule.approvers):
                    problems.append((f"{where}.quorum", _too_few(rule.quorum, rule.approvers)))
                if tier.notify == "dm" and tier.channel:
                    problems.append((f"{where}.notify", 'choose one: channel, or notify = "dm"'))
                elif rule.notify == "dm" and not rule.approvers and rule.approval:
                    problems.append(
                        (f"{where}.notify", 'notify = "dm" needs approvers (whom to send it to)')
                    )
                problems += _rule_problems(where, rule)
                if tier.grant_for and rule.quorum > 1:
                    problems.append(
                        (f"{where}.grant_for", "a call that needs a quorum is never granted")
                    )
                if rule.escalate_after is None and rule.escalate_to:
                    problems.append(
                        (f"{where}.escalate_to", "needs escalate_after (when to escalate)")
                    )
                elif rule.escalate_after is not None and not rule.escalate_to:
                    problems.append((f"{where}.escalate_after", "needs escalate_to (who to add)"))
        return problems

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
        """Every person or group the file names (approvers, escalations), and every channel
        (its tiers' too)."""
        sections = [self.rules.default, *self.rules.tools.values()]
        rules: list[_Fields] = [*sections, *(t for r in sections for t in r.tiers or ())]
        people = {n for r in rules for n in (r.approvers or []) + (r.escalate_to or [])}
        channels = {c for r in rules for c in r.channel or []}
        return frozenset(people), frozenset(channels)

    def _unreachable_quorums(self) -> list[tuple[str | None, str]]:
        """Sections whose quorum exceeds the approvers they list (it could never be met)."""
        problems: list[tuple[str | None, str]] = []
        default = self.rules.default
        if default.approvers and (default.quorum or 1) > len(set(default.approvers)):
            problems.append(("default.quorum", _too_few(default.quorum or 1, default.approvers)))
        for name in self.rules.tools:
            problems += _rule_problems(f"tools.{name}", self.rule(name))
        problems += _rule_problems("default", self._merge(""))
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
        call: Call | None = None,
    ) -> str | None:
        """Why ``decider`` may not decide on a call of ``tool_name``, or ``None`` if they may.

        ``escalated``: the call waited past ``escalate_after``, so ``escalate_to`` may too.
        ``allowed``: ``deciders`` with their user groups expanded to members (``Groups``);
        by default the names as listed. ``call``: the call itself (its tier's rule).
        """
        rule = self.rule(tool_name, call)
        is_requester = requester is not None and decider == requester
        if action == "decline" and is_requester:
            return None
        if allowed is None:
            allowed = self.deciders(tool_name, escalated=escalated, call=call)
        if rule.approvers and decider not in allowed:
            return texts.POLICY_NOT_APPROVER.format(tool=tool_name)
        if action == "approve" and is_requester and not rule.allow_self_approval:
            return texts.POLICY_SELF_APPROVAL.format(tool=tool_name)
        edited_by = call.edited_by if isinstance(call, PendingInfo) else None
        if action == "approve" and not rule.editor_may_approve and decider == edited_by:
            return texts.POLICY_EDITOR.format(tool=tool_name)
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
        escalated = self.escalated(question, datetime.now(UTC))
        refusal = self.check(
            question.tool_name,
            question.requester,
            person,
            action=action,
            escalated=escalated,
            allowed=allowed,
            call=question,
        )
        if refusal is None or not reply:
            return refusal
        return texts.ANSWER_NOT_ALLOWED.format(tool=question.tool_name)

    def deciders(
        self, tool_name: str, *, escalated: bool, call: Call | None = None
    ) -> frozenset[str]:
        """The people listed to decide a call of ``tool_name`` (empty: anyone may); once
        ``escalated``, its ``escalate_to`` too. ``call``: the call itself (its tier's)."""
        rule = self.rule(tool_name, call)
        return rule.approvers | (rule.escalate_to if escalated else frozenset())

    def deciders_of(self, call: Call, now: datetime | None = None) -> frozenset[str]:
        """Who is listed to decide ``call`` at ``now`` (empty: anyone may): its approvers,
        and its ``escalate_to`` once it waited past ``escalate_after``."""
        escalated = self.escalated(call, now or datetime.now(UTC))
        return self.deciders(call.tool_name, escalated=escalated, call=call)

    def escalated(self, call: Call, now: datetime) -> bool:
        """Whether ``call`` has waited past its ``escalate_after`` at ``now`` (one not yet
        asked has not)."""
        after = self.rule(call.tool_name, call).escalate_after
        at = asked_at(call)
        return after is not None and at is not None and at + after <= now

    def expires_in(self, call: Call) -> timedelta | None:
        """How long ``call`` stays decidable, if the policy says (else the agent's)."""
        return self.rule(call.tool_name, call).expires_in


def treated_otherwise(before: EffectiveRule, after: EffectiveRule) -> str | None:
    """How a call's treatment changes from ``before`` to ``after`` (``None``: it does not)."""
    if before.approval != after.approval:
        return "needed nobody, now a person" if after.approval else "needed a person, now nobody"
    if not after.approval:
        return None
    if before.approvers != after.approvers:
        was = ", ".join(sorted(before.approvers)) or "anyone"
        now = ", ".join(sorted(after.approvers)) or "anyone"
        return f"someone else: {was} -> {now}"
    if before.quorum != after.quorum:
        more = "more" if after.quorum > before.quorum else "fewer"
        return f"{more} votes: {before.quorum} -> {after.quorum}"
    if before.review != after.review:
        return "now a model reviews it first" if after.review else "no longer reviewed by a model"
    if before.distinct_groups != after.distinct_groups:
        return f"votes from {before.distinct_groups} -> {after.distinct_groups} groups"
    old_rule = before.deciders_when.source if before.deciders_when else "none"
    new_rule = after.deciders_when.source if after.deciders_when else "none"
    if old_rule != new_rule:
        return f"deciders_when: {old_rule} -> {new_rule}"
    if before.escalate_to != after.escalate_to or before.escalate_after != after.escalate_after:
        return "another escalation"
    return None


def _frozen(args: dict[str, Any]) -> str:
    """A call's arguments as a key (the same arguments, the same text)."""
    return json.dumps(args, sort_keys=True, default=str)


def _grants(granting: bool | None, durations: list[str] | None, quorum: int) -> tuple[str, ...]:
    """A rule's grant durations: none with ``grant = false`` or a quorum above 1."""
    if granting is False or quorum > 1:
        return ()
    return tuple(dict.fromkeys(durations or ()))


def _destination(layers: list[_Fields]) -> dict[str, Any]:
    """Where cards go: the most specific layer that says (``channel`` or ``notify``)."""
    source = next((x for x in layers if x.channel is not None or x.notify is not None), None)
    if source is None:
        return {"channels": (), "notify": "thread"}
    return {"channels": tuple(source.channel or ()), "notify": source.notify or "thread"}


_REVIEW_QUORUM = "a model never stands in for a quorum: review needs quorum = 1"


def _rule_problems(where: str, rule: EffectiveRule) -> list[tuple[str | None, str]]:
    """What makes one merged rule (a section's, a tier's) unworkable: groups a quorum
    can never span, a model standing in for a quorum, a grant that would outlive a
    ``deciders_when`` (it approves later calls the rule never saw)."""
    problems: list[tuple[str | None, str]] = []
    names = rule.approvers | rule.escalate_to
    if rule.distinct_groups > rule.quorum:
        problems.append(
            (
                f"{where}.distinct_groups",
                f"distinct_groups = {rule.distinct_groups} can never be met by "
                f"quorum = {rule.quorum} votes",
            )
        )
    elif 1 < rule.distinct_groups > len(names):
        problems.append(
            (
                f"{where}.distinct_groups",
                f"distinct_groups = {rule.distinct_groups} needs as many user groups "
                f"among the approvers (listed: {len(names)})",
            )
        )
    if rule.review and rule.quorum > 1:
        problems.append((f"{where}.review", _REVIEW_QUORUM))
    if rule.deciders_when is not None and rule.grant_for:
        problems.append(
            (
                f"{where}.grant_for",
                "a grant approves later calls deciders_when never looked at: choose one",
            )
        )
    return problems


def _too_few(quorum: int, approvers: Iterable[str]) -> str:
    listed = len(set(approvers))
    noun = "approver is" if listed == 1 else "approvers are"
    return f"quorum = {quorum} can never be reached: only {listed} {noun} listed"


def _unknown(err: ErrorDetails) -> str:
    if len(err["loc"]) == 1:
        return "unknown section (known: [default], [tools.<tool name>])"
    known = ", ".join(sorted(set(Rule.model_fields) | set(Tier.model_fields)))
    return f"unknown field (known: {known})"
