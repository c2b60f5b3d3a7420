"""``python -m bot audit``: the audit log as a person reads it, from the real store."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
import os
import sys
from pathlib import Path

from tests.bot.test_console import ROOT, console_demo


async def audit(tmp_path: Path, *argv: str, **env: str) -> tuple[int, str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "MICROSOFT_"))}
    environ |= {
        "STORE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
        "PYTHONPATH": str(ROOT),
        **env,
    }
    environ.pop("APPROVAL_POLICY", None)
    environ |= env
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "audit",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=environ,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_audit_prints_requests_decisions_and_what_came_of_them(tmp_path: Path) -> None:
    await console_demo(
        tmp_path, "delete record abc-123", "d keep it", "refund order A-1001 150", "e", "", "120"
    )
    code, out, err = await audit(tmp_path, "--format", "jsonl")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    events = [(r["event"], r["tool"]) for r in rows]
    assert events == [
        ("requested", "delete_record"),
        ("shown", "delete_record"),
        ("declined", "delete_record"),
        ("requested", "refund"),
        ("shown", "refund"),
        ("edited", "refund"),
        ("approved", "refund"),
        ("executed", "refund"),
    ]
    shown, declined, edited, executed = rows[1], rows[2], rows[5], rows[7]
    assert shown["detail"] == "console:local:grace:main"  # where the card went
    assert all(r["via"] == "console" for r in rows)
    result, digest = executed["detail"].split("; ")
    assert digest == "sha256:" + hashlib.sha256(result.encode()).hexdigest()
    assert declined["actor"] == "grace"
    assert declined["detail"] == "keep it"
    assert json.loads(edited["args"])["amount"] == 120.0
    assert edited["detail"] == "changed amount: 150.0 → 120.0"
    assert "120.00" in executed["detail"]
    assert all(r["thread"] == "console:local:grace:main" for r in rows)

    code, table, _ = await audit(tmp_path)
    assert code == 0
    header, *lines = table.splitlines()
    assert header.split()[:4] == ["at", "event", "tool", "actor"]
    assert len(lines) == 8
    # Every argument fits its cell, the one an edit changed included.
    assert "order_id=A-1001 amount=120.0" in lines[5]
    assert "changed amount: 150.0 → 120.0" in lines[5]

    code, text, _ = await audit(tmp_path, "--format", "csv", "--thread", "elsewhere")
    assert list(csv.reader(io.StringIO(text))) == [
        [
            "at",
            "event",
            "tool",
            "actor",
            "requester",
            "via",
            "args",
            "detail",
            "thread",
            "run",
            "call",
        ]
    ]
    code, recent, _ = await audit(tmp_path, "--format", "jsonl", "--since", "1h")
    assert len(recent.splitlines()) == 8


async def test_a_sensitive_tool_shows_a_hash_of_its_arguments(tmp_path: Path) -> None:
    await console_demo(tmp_path, "delete record abc-123", "d no")
    policy = tmp_path / "policy.toml"
    policy.write_text("[tools.delete_record]\nsensitive = true\n")
    code, out, err = await audit(tmp_path, "--format", "jsonl", APPROVAL_POLICY=str(policy))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["args"][:7] for r in rows} == {"sha256:"}
    assert "abc-123" not in out


async def test_a_bad_duration_is_one_clear_line(tmp_path: Path) -> None:
    code, _, err = await audit(tmp_path, "--since", "soon")
    assert code == 2
    assert "--since" in err
    assert "Traceback" not in err


async def test_an_edit_of_a_sensitive_tool_names_what_changed_but_not_the_values(
    tmp_path: Path,
) -> None:
    await console_demo(tmp_path, "refund order A-1001 150", "e", "", "120")
    policy = tmp_path / "policy.toml"
    policy.write_text("[tools.refund]\nsensitive = true\n")
    code, out, err = await audit(tmp_path, "--format", "jsonl", APPROVAL_POLICY=str(policy))
    assert code == 0, err
    (edited,) = [json.loads(line) for line in out.splitlines() if '"edited"' in line]
    assert edited["detail"] == "changed amount"
    assert edited["args"].startswith("sha256:")


async def test_the_policy_a_bot_starts_with_is_on_record_with_its_digest(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.refund]\napprovers = ["grace"]\n')
    await console_demo(tmp_path, "refund order A-1001 150", "a", APPROVAL_POLICY=str(policy))
    policy.write_text('[tools.refund]\napprovers = ["grace", "ada"]\n')  # changed, restarted
    await console_demo(tmp_path, "hello", APPROVAL_POLICY=str(policy))
    code, out, err = await audit(tmp_path, "--format", "jsonl")
    assert code == 0, err
    loads = [json.loads(line) for line in out.splitlines() if '"policy_loaded"' in line]
    assert [row["detail"] for row in loads] == [
        f"{policy}; sha256:{hashlib.sha256(text.encode()).hexdigest()}"
        for text in ('[tools.refund]\napprovers = ["grace"]\n', policy.read_text())
    ]
