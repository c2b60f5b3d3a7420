"""Views are plain data: stored as versioned JSON and read back as they were."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot import (
    ApprovalCard,
    CardPointer,
    Notice,
    Person,
    Posted,
    Prompt,
    PromptField,
    Reply,
    ThreadKey,
    View,
    ViewDocumentError,
    compose,
    dump_document,
    dump_view,
    load_document,
    load_view,
)

THREAD = ThreadKey(platform="slack", workspace="T1", channel="C1", root="1.0")
BOB = Person(id="U_BOB", name="Bob")
CARD = ApprovalCard(
    run_id="run",
    tool_call_id="call",
    tool_name="tickets__close_ticket",
    args={"ticket": "T-1", "force": True, "tags": ["a", "b"], "limit": 2.5, "note": None},
    agent_path=("ops", "desk"),
    requester=Person(id="U_ADA"),
    expires_at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
    status="approved",
    decided_by=(BOB,),
    previous_args={"ticket": "T-0"},
    edited_by=BOB,
    source="tickets",
    fields=(PromptField(name="ticket", label="Ticket", required=True, value="T-1"),),
    grant_for=("1h", "1d"),
    requested_in=THREAD,
    deciders=("U_BOB", "S0GROUP"),
)
VIEWS: list[View] = [
    CARD,
    Prompt(
        run_id="run",
        tool_call_id="ask",
        tool_name="deploy",
        agent_path=("ops",),
        question="Which version?",
        fields=(
            PromptField(name="when", label="When", kind="choice", choices=("now", "later")),
            PromptField(name="seats", label="Seats", kind="integer", value=4),
        ),
        error="seats: too many",
        status="answered",
        decided_by=BOB,
    ),
    Reply(text="Deployed *api* to staging.", feedback="run", stop=None),
    Notice(text="heads up", to=BOB, also=(Person(id="U2"),), revoke=("run", "call")),
    CardPointer(card=CARD, channel="C_APPROVALS", at=Posted(thread=THREAD, ref={"ts": "2.0"})),
]


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: type(v).__name__)
def test_every_view_reads_back_as_it_was_stored(view: View) -> None:
    assert load_view(dump_view(view)) == view


def test_a_stored_view_names_its_kind_and_version() -> None:
    stored = dump_view(Reply(text="hi"))
    assert b'"version":1' in stored
    assert b'"kind":"reply"' in stored


@pytest.mark.parametrize(
    "document",
    [
        b'{"version": 2, "view": {"kind": "reply", "text": "hi"}}',
        b'{"version": 1, "view": {"kind": "banner", "text": "hi"}}',
        b'{"version": 1, "view": {"kind": "reply"}}',
        b"not json",
        b"[]",
    ],
)
def test_what_is_not_a_stored_view_of_this_version_is_refused(document: bytes) -> None:
    with pytest.raises(ViewDocumentError):
        load_view(document)


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: type(v).__name__)
def test_every_composed_document_reads_back_as_it_was_stored(view: View) -> None:
    document = compose(view)
    assert load_document(dump_document(document)) == document


@pytest.mark.parametrize(
    "stored",
    [
        b'{"version": 2, "document": {"kind": "reply", "summary": ["hi"]}}',
        b'{"version": 1, "document": {"kind": "banner", "summary": ["hi"]}}',
        b'{"version": 1, "document": {"kind": "reply", "body": [{"type": "poster"}]}}',
        b"not json",
    ],
)
def test_what_is_not_a_stored_document_of_this_version_is_refused(stored: bytes) -> None:
    with pytest.raises(ViewDocumentError):
        load_document(stored)
