"""Policy tiers: the first ``when`` (CEL) a call meets sets its rule; a ``when`` that
cannot be used stops the bot at start, one that fails on a call leaves it to the
section (a person decides)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agents import DemoModel, PendingInfo, StandingAsk
from bot import ApprovalPolicy, PolicyError
from bot.policy import treated_otherwise
from bot.reviewer import DEMO, Reviewer
from bot.tiers import allows
from bot.votes import spanned

REFUNDS = """
[tools.refund]
approvers = ["U0LEAD001"]

[[tools.refund.tiers]]
when = "args.amount <= 100"
approval = "none"

[[tools.refund.tiers]]
when = "args.amount > 1000"
approvers = ["U0FIN0001", "U0FIN0002", "U0FIN0003"]
quorum = 2
expires_in = "4h"
"""
THREAD = "slack:T0TEAM:C0BILLING:1700000000.000100"


def ask(args: dict[str, Any], **changes: Any) -> StandingAsk:
    fields: dict[str, Any] = {
        "thread_id": THREAD,
        "requester": "U0ALICE01",
        "tool_name": "refund",
        "args": args,
        "agent_path": ("ops", "billing"),
    }
    return StandingAsk(**{**fields, **changes})


def waiting(args: dict[str, Any], **changes: Any) -> PendingInfo:
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "tool_call_id": "call-1",
        "tool_name": "refund",
        "args": args,
        "kind": "approval",
        "agent_path": ("ops", "billing"),
        "created_at": now,
        "expires_at": now + timedelta(hours=1),
        "requester": "U0ALICE01",
        "thread_id": THREAD,
    }
    return PendingInfo(**{**fields, **changes})


def test_the_first_tier_a_call_meets_sets_its_rule_and_none_meets_the_section() -> None:
    policy = ApprovalPolicy.from_toml(REFUNDS)
    small = policy.rule("refund", ask({"order": "A-1", "amount": 90}))
    assert (small.approval, small.tier) == (False, "tools.refund.tiers[0]")

    middle = policy.rule("refund", ask({"order": "A-1", "amount": 500}))
    assert (middle.approval, middle.tier) == (True, None)
    assert (middle.approvers, middle.quorum) == (frozenset({"U0LEAD001"}), 1)

    large = policy.rule("refund", waiting({"order": "A-1", "amount": 5000}))
    assert (large.approval, large.tier) == (True, "tools.refund.tiers[1]")
    assert large.approvers == frozenset({"U0FIN0001", "U0FIN0002", "U0FIN0003"})
    assert (large.quorum, large.expires_in) == (2, timedelta(hours=4))
    assert policy.quorum("refund", waiting({"amount": 5000})) == 2
    assert policy.deciders_of(waiting({"amount": 5000})) == large.approvers
    assert policy.expires_in(ask({"amount": 5000})) == timedelta(hours=4)
    # Without the call, the section's rule (what a tool name alone can say).
    assert policy.rule("refund").approvers == frozenset({"U0LEAD001"})


def test_a_tier_sees_who_asks_where_and_when() -> None:
    policy = ApprovalPolicy.from_toml(
        """
[tools.refund]
approvers = ["U0LEAD001"]
[[tools.refund.tiers]]
when = "platform == 'slack' && channel == 'C0BILLING' && requester == 'U0ALICE01'"
approvers = ["U0BOB0001"]
[[tools.refund.tiers]]
when = "agent[0] == 'ops' && tool == 'refund' && now > timestamp('2000-01-01T00:00:00Z')"
approvers = ["U0CAROL01"]
"""
    )
    assert policy.rule("refund", ask({})).approvers == frozenset({"U0BOB0001"})
    # Asked elsewhere, or by someone else: the second tier (its agent, tool and time hold).
    elsewhere = ask({}, thread_id="teams:tenant-1:19:ops@thread.tacv2:1700")
    assert policy.rule("refund", elsewhere).tier == "tools.refund.tiers[1]"
    assert policy.rule("refund", ask({}, requester=None)).tier == "tools.refund.tiers[1]"
    # ... unless another agent asks, or before 2000: the section's own rule.
    other = ask({}, requester=None, agent_path=("support",))
    assert policy.rule("refund", other).tier is None
    long_ago = ask({}, requester=None, asked_at=datetime(1999, 1, 1, tzinfo=UTC))
    assert policy.rule("refund", long_ago).tier is None


def test_a_when_that_fails_on_a_call_fails_closed_to_the_strictest_it_could_be(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = ApprovalPolicy.from_toml(REFUNDS)
    with caplog.at_level(logging.WARNING, logger="bot.tiers"):
        missing = policy.rule("refund", ask({"order": "A-1"}))  # no amount
        wrong = policy.rule("refund", ask({"amount": "5000"}))  # a string, as a Decimal is
    for rule in (missing, wrong):  # neither tier can be told: the finance one, not nobody
        assert (rule.approval, rule.tier, rule.quorum) == (True, "tools.refund.tiers[1]", 2)
    assert len([r for r in caplog.records if "tools.refund.tiers[0]" in r.message]) == 2

    # A tier before the match that cannot be told: the stricter of the two.
    ahead = ApprovalPolicy.from_toml(
        REFUNDS.replace('when = "args.amount <= 100"', "when = \"args.note == 'auto'\"")
    )
    assert ahead.rule("refund", ask({"amount": 5000})).tier == "tools.refund.tiers[1]"
    # ... and never a tier that needs nobody after one that failed.
    nobody = ApprovalPolicy.from_toml(
        '[tools.refund]\napprovers = ["U0LEAD001"]\n'
        '[[tools.refund.tiers]]\nwhen = "args.note == \'x\'"\napprovers = ["U0FIN0001"]\n'
        '[[tools.refund.tiers]]\nwhen = "true"\napproval = "none"\n'
    )
    held = nobody.rule("refund", ask({"amount": 5}))
    assert held.approval
    assert held.tier == "tools.refund.tiers[0]"

    not_a_verdict = ApprovalPolicy.from_toml(
        '[[tools.refund.tiers]]\nwhen = "args.amount"\napproval = "none"\n'
    )
    assert not_a_verdict.rule("refund", ask({"amount": 5})).approval


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("args.amount <= ", "line 1, column 16: Syntax error"),
        ("args.amount > 1 &&\n  (", "line 2, column 4"),
        ("argz.amount > 1", "unknown name argz"),
        ("args.amount > limit", "unknown name limit"),
    ],
)
def test_a_when_that_is_no_cel_or_names_what_a_call_lacks_stops_the_bot(
    when: str, says: str
) -> None:
    toml = f"[tools.refund]\n[[tools.refund.tiers]]\nwhen = {when!r}\napproval = 'none'\n"
    toml = toml.replace("'", '"') if "\n" not in when else toml.replace(repr(when), f'"""{when}"""')
    with pytest.raises(PolicyError) as raised:
        ApprovalPolicy.from_toml(toml)
    assert raised.value.field == "tools.refund.tiers[0].when"
    assert says in " ".join(raised.value.lines)


def test_a_macros_own_variable_is_no_unknown_name() -> None:
    policy = ApprovalPolicy.from_toml(
        '[[tools.refund.tiers]]\nwhen = "args.lines.all(x, x.amount < 10)"\napproval = "none"\n'
    )
    assert not policy.rule("refund", ask({"lines": [{"amount": 1}, {"amount": 2}]})).approval
    assert policy.rule("refund", ask({"lines": [{"amount": 50}]})).approval


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ('[default]\n[[default.tiers]]\nwhen = "true"\n', "default.tiers"),
        (
            '[[tools.refund.tiers]]\nwhen = "true"\napprovers = ["U1"]\nquorum = 2\n',
            "tools.refund.tiers[0].quorum",
        ),
        ('[[tools.refund.tiers]]\nwhen = "true"\nnotify = "dm"\n', "tools.refund.tiers[0].notify"),
        (
            '[[tools.refund.tiers]]\nwhen = "true"\napprovers = ["U1", "U2"]\nquorum = 2\n'
            'grant_for = ["1h"]\n',
            "tools.refund.tiers[0].grant_for",
        ),
        (
            '[[tools.refund.tiers]]\nwhen = "true"\nescalate_after = "1h"\n',
            "tools.refund.tiers[0].escalate_after",
        ),
        ('[[tools.refund.tiers]]\nwhen = "true"\nsensitive = true\n', "tools.refund.tiers.0"),
    ],
)
def test_a_tier_that_could_never_work_stops_the_bot(toml: str, field: str) -> None:
    with pytest.raises(PolicyError) as raised:
        ApprovalPolicy.from_toml(toml)
    assert raised.value.field is not None
    assert raised.value.field.startswith(field)


def test_the_people_and_channels_of_tiers_are_the_policys_names() -> None:
    policy = ApprovalPolicy.from_toml(
        REFUNDS + '\n[[tools.refund.tiers]]\nwhen = "true"\nchannel = "C0FINANCE"\n'
    )
    people, channels = policy.names()
    assert {"U0LEAD001", "U0FIN0001", "U0FIN0002"} <= people
    assert channels == frozenset({"C0FINANCE"})
    assert policy.anyone_of("refund") == frozenset(  # whose approvals lists a call touches
        {"U0LEAD001", "U0FIN0001", "U0FIN0002", "U0FIN0003"}
    )


def test_votes_span_as_many_groups_as_a_matching_of_voters_to_groups_gives() -> None:
    fin, sec, ops = "S0FIN", "S0SEC", "S0OPS"
    assert spanned([]) == 0
    assert spanned([frozenset({fin}), frozenset({fin})]) == 1
    assert spanned([frozenset({fin, sec}), frozenset({fin})]) == 2  # the first stands for sec
    assert spanned([frozenset({fin, sec}), frozenset({sec, ops}), frozenset({fin})]) == 3
    assert spanned([frozenset(), frozenset({ops})]) == 1


@pytest.mark.parametrize(
    ("toml", "field", "says"),
    [
        (
            '[tools.refund]\napprovers = ["S1", "S2"]\nquorum = 2\ndistinct_groups = 3\n',
            "tools.refund.distinct_groups",
            "can never be met",
        ),
        (
            '[tools.refund]\ndeciders_when = "decider.id != requester &&"\n',
            "tools.refund.deciders_when",
            "line 1, column",
        ),
        (
            '[default]\ndeciders_when = "clicker.id == \\"U1\\""\n',
            "default.deciders_when",
            "unknown name clicker",
        ),
    ],
)
def test_a_rule_on_who_decides_that_could_never_work_stops_the_bot(
    toml: str, field: str, says: str
) -> None:
    with pytest.raises(PolicyError) as raised:
        ApprovalPolicy.from_toml(toml)
    assert raised.value.field == field
    assert says in " ".join(raised.value.lines)


def test_deciders_when_sees_the_decider_and_fails_closed() -> None:
    policy = ApprovalPolicy.from_toml(
        '[tools.refund]\ndeciders_when = "\\"S0FIN\\" in decider.groups || args.amount < 10"\n'
    )
    when = policy.rule("refund").deciders_when
    assert when is not None
    asked = waiting({"amount": 500})
    assert allows(when, asked, {"id": "U1", "platform": "slack", "groups": ["S0FIN"]})
    assert not allows(when, asked, {"id": "U2", "platform": "slack", "groups": []})
    assert not allows(when, waiting({}), {"id": "U2", "platform": "slack", "groups": []})


def test_a_name_that_only_looks_like_a_macros_variable_is_still_unknown() -> None:
    with pytest.raises(PolicyError) as raised:
        ApprovalPolicy.from_toml(
            '[[tools.refund.tiers]]\nwhen = "matches(reqester, \\"^U0\\")"\napproval = "none"\n'
        )
    assert "unknown name reqester" in " ".join(raised.value.lines)


async def test_the_offline_demo_model_urges_caution_and_never_clears() -> None:
    reviewer = Reviewer(DemoModel())
    review = await reviewer.review(ask({"amount": 5}))
    assert review.verdict is not None
    assert (review.verdict.verdict, review.verdict.reason) == ("caution", DEMO)


def test_replay_and_shadow_see_a_reviewer_and_a_rule_on_who_decides() -> None:
    before = ApprovalPolicy.from_toml('[tools.refund]\napprovers = ["U1"]\n')
    reviewed = ApprovalPolicy.from_toml('[tools.refund]\napprovers = ["U1"]\nreview = "model"\n')
    ruled = ApprovalPolicy.from_toml(
        '[tools.refund]\napprovers = ["U1"]\ndeciders_when = "decider.id != requester"\n'
    )
    call = ask({"amount": 5})
    was = before.rule("refund", call)
    assert treated_otherwise(was, reviewed.rule("refund", call)) == "now a model reviews it first"
    assert treated_otherwise(was, ruled.rule("refund", call)) == (
        "deciders_when: none -> decider.id != requester"
    )
    assert treated_otherwise(was, was) is None
