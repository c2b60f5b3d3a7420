"""What a settled card says, and what an edit changed: composed once in the core."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bot import (
    REASON_SHOWN,
    ApprovalCard,
    ArgChange,
    CardStatus,
    Person,
    arg_changes,
    card_outcome,
    changes_text,
    plain_text,
)

BOB = Person(id="U_BOB", name="Bob")


def card(status: CardStatus = "approved", **fields: Any) -> ApprovalCard:
    return ApprovalCard(
        run_id="run",
        tool_call_id="call",
        tool_name="deploy",
        args=fields.pop("args", {"service": "api"}),
        agent_path=("ops",),
        requester=None,
        expires_at=datetime(2030, 1, 1, tzinfo=UTC),
        status=status,
        decided_by=fields.pop("decided_by", (BOB,)),
        **fields,
    )


def test_an_edit_diff_shows_added_removed_and_changed_arguments() -> None:
    before = {"env": "production", "force": True, "note": "x"}
    after = {"env": "staging", "force": True, "replicas": 2}
    assert arg_changes(before, after) == (
        ArgChange(name="env", kind="changed", before="production", after="staging"),
        ArgChange(name="note", kind="removed", before="x"),
        ArgChange(name="replicas", kind="added", after=2),
    )
    assert changes_text(arg_changes(before, after)) == (
        "env: production → staging; note: x → (none); replicas: (none) → 2"
    )


def test_values_equal_in_python_but_not_in_json_are_a_change() -> None:
    # The tool receives JSON: 1 and True are not the same argument.
    (change,) = arg_changes({"count": 1}, {"count": True})
    assert changes_text((change,)) == "count: 1 → true"
    (text,) = arg_changes({"count": "1"}, {"count": 1})
    assert changes_text((text,)) == 'count: "1" → 1'
    assert arg_changes({"a": {"x": 1, "y": 2}}, {"a": {"y": 2, "x": 1}}) == ()


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"status": "approved"}, "✅ Approved by Bob"),
        ({"status": "approved", "granted_for": "1h"}, "✅ Approved by Bob for this thread (1h)"),
        ({"status": "declined"}, "❌ Declined by Bob"),
        ({"status": "declined", "reason": "too big"}, "❌ Declined by Bob: too big"),
        ({"status": "expired"}, "⌛ Expired: nobody decided in time, nothing was run"),
        (
            {"status": "stopped"},
            "🛑 Stopped by Bob: the request ended before anyone decided",
        ),
        ({"status": "approved", "decided_by": ()}, "✅ Approved by someone"),
    ],
)
def test_every_ending_has_one_line(fields: dict[str, Any], line: str) -> None:
    outcome = card_outcome(card(**fields))
    assert outcome is not None
    assert f"{outcome.mark} {plain_text(outcome.line)}" == line


def test_a_pending_card_has_no_outcome() -> None:
    assert card_outcome(card("pending")) is None


def test_an_edited_card_names_the_editor_and_the_changes_once() -> None:
    edited = card(args={"env": "staging"}, previous_args={"env": "production"}, edited_by=BOB)
    outcome = card_outcome(edited)
    assert outcome is not None
    assert outcome.edit == ("Edited by ", BOB, "")
    assert changes_text(outcome.changes) == "env: production → staging"


def test_an_edit_that_changed_nothing_is_no_edit() -> None:
    same = card(args={"env": "prod"}, previous_args={"env": "prod"}, edited_by=BOB)
    outcome = card_outcome(same)
    assert outcome is not None
    assert outcome.changes == ()
    assert outcome.edit == ()


def test_a_declines_reason_is_in_its_line_and_on_a_line_of_its_own_kept_short() -> None:
    outcome = card_outcome(card("declined", reason="too big"))
    assert outcome is not None
    assert plain_text(outcome.line) == "Declined by Bob: too big"
    assert plain_text(outcome.headline) == "Declined by Bob"
    assert outcome.because == "Reason: too big"
    long = card_outcome(card("declined", reason="x" * 5000))
    assert long is not None
    assert long.because is not None
    assert len(long.because) == len("Reason: ") + REASON_SHOWN
    assert long.because.endswith("…")
