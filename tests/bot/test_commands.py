"""The approvals command: one grammar, whichever platform it is typed on."""

from __future__ import annotations

import pytest

from bot import ApprovalsCommand, approvals_command


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("approvals", "list"),
        ("/approvals", "list"),
        ("  /Approvals  ", "list"),
        ("approvals revoke", "revoke"),
        ("/APPROVALS   Revoke", "revoke"),
        ("approvals needed for the deploy?", None),
        ("please show approvals", None),
        ("", None),
        ("revoke", None),
    ],
)
def test_a_message_is_the_command_only_in_its_exact_words(
    text: str, command: ApprovalsCommand | None
) -> None:
    assert approvals_command(text) == command


@pytest.mark.parametrize(
    ("text", "command"),
    [("", "list"), ("revoke", "revoke"), (" REVOKE ", "revoke"), ("everything", "usage")],
)
def test_after_a_slash_command_unknown_words_ask_for_its_usage(
    text: str, command: ApprovalsCommand
) -> None:
    assert approvals_command(text, named=True) == command
