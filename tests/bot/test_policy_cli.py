"""``python -m bot policy test`` and ``policy replay``: a policy tried before it decides."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from agents import AuditEntry, open_store
from agents.snapshot import utcnow
from bot.__main__ import main

CURRENT = """
[tools.refund]
approvers = ["U0LEAD001"]
[[tools.refund.tiers]]
when = "args.amount <= 100"
approval = "none"
[[tools.refund.tiers]]
when = "args.amount > 1000"
approvers = ["U0FIN0001", "U0FIN0002"]
quorum = 2
"""
CASES = """
policy = "policy.toml"

[[case]]
name = "a small refund runs at once"
tool = "refund"
args = { order = "A-1", amount = 90 }
expect = { person = false, tier = 0 }

[[case]]
name = "a middling refund waits for the lead"
tool = "refund"
args = { order = "A-1", amount = 500 }
requester = "U0ALICE01"
expect = { person = true, tier = -1, approvers = ["U0LEAD001"], quorum = 1 }

[[case]]
name = "a large refund needs two of finance"
tool = "refund"
args = { order = "A-1", amount = 5000 }
expect = { person = true, tier = 1, quorum = 2 }
"""


def test_policy_test_prints_each_case_and_passes_when_all_are_as_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "policy.toml").write_text(CURRENT)
    (tmp_path / "cases.toml").write_text(CASES)
    assert main(["policy", "test", str(tmp_path / "cases.toml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "ok   a small refund runs at once: tools.refund.tiers[0]: no person decides",
        "ok   a middling refund waits for the lead: the section: U0LEAD001 decide (quorum 1)",
        "ok   a large refund needs two of finance: tools.refund.tiers[1]: "
        "U0FIN0001, U0FIN0002 decide (quorum 2)",
        "3 of 3 cases as expected",
    ]


def test_policy_test_fails_on_a_case_that_differs_and_says_how(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "policy.toml").write_text(CURRENT)
    (tmp_path / "cases.toml").write_text(CASES.replace("quorum = 2 }", "quorum = 3 }"))
    assert main(["policy", "test", str(tmp_path / "cases.toml")]) == 1
    out = capsys.readouterr().out
    assert "FAIL a large refund needs two of finance" in out
    assert "quorum: expected 3, got 2" in out
    assert "2 of 3 cases as expected" in out


def test_policy_test_refuses_a_cases_file_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "policy.toml").write_text(CURRENT)
    (tmp_path / "cases.toml").write_text(CASES.replace("tool =", "tools ="))
    assert main(["policy", "test", str(tmp_path / "cases.toml")]) == 2
    assert "case.0.tools" in capsys.readouterr().err


def test_policy_replay_lists_past_calls_the_new_policy_treats_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/bot.db"
    (tmp_path / "policy.toml").write_text(CURRENT)
    new = tmp_path / "new.toml"
    new.write_text(CURRENT.replace("amount > 1000", "amount > 400").replace("<= 100", "<= 50"))
    asyncio.run(_seed(url))
    monkeypatch.setenv("STORE_URL", url)
    monkeypatch.setenv("APPROVAL_POLICY", str(tmp_path / "policy.toml"))

    assert main(["policy", "replay", str(new), "--since", "30d"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3, out
    assert "refund  by U0ALICE01" in out[0]
    assert out[0].endswith("someone else: U0LEAD001 -> U0FIN0001, U0FIN0002"), (
        "500 now needs finance"
    )
    assert out[1].endswith("needed nobody, now a person"), "90 now needs the lead"
    assert out[2] == "2 past call(s) would be treated otherwise"


async def _seed(url: str) -> None:
    """The audit log of four refunds: 500 and 90 lately, 5000 (the same under both),
    and an old one of 500 (before --since)."""
    store = open_store(url)
    now = utcnow()
    entries = [
        ("requested", "r1", 500, now - timedelta(days=2), None),
        ("granted", "r2", 90, now - timedelta(days=1), "policy:tools.refund.tiers[0]"),
        ("requested", "r3", 5000, now - timedelta(hours=1), None),
        ("approved", "r3", 5000, now, "U0FIN0001"),
        ("requested", "r4", 500, now - timedelta(days=40), None),
    ]
    try:
        for event, run, amount, at, actor in entries:
            await store.append_audit(
                AuditEntry(
                    at=at,
                    event=event,
                    run_id=run,
                    thread_id="slack:T0TEAM:C0BILLING:1.2",
                    tool_call_id=f"call-{run}",
                    tool_name="refund",
                    args={"order": "A-1", "amount": amount},
                    kind="approval",
                    requester="U0ALICE01",
                    actor=actor,
                )
            )
    finally:
        await store.close()
