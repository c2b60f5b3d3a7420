"""Every view composed once: what a card, question, pointer, notice, answer and approvals
list say, as documents every adapter draws (``bot.compose``, ``bot.inbox_document``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from pydantic import TypeAdapter

from adapters.slack.mrkdwn import rich_mrkdwn as slack_mrkdwn
from adapters.teams.blocks import markdown as teams_markdown
from bot import (
    Arguments,
    Changes,
    Channel,
    Code,
    Document,
    Facts,
    Inbox,
    InboxDecision,
    Link,
    Markdown,
    Paragraph,
    Person,
    Place,
    Section,
    TextInput,
    ThreadKey,
    changes_rich,
    compose,
    decision_buttons,
    inbox_document,
    inbox_note,
    rich_plain,
)
from bot import texts as core_texts
from bot.types import ApprovalCard, CardPointer, Notice, Prompt, PromptField, Reply

ALICE = Person(id="U1", name="alice")
BOB = Person(id="U2", name="bob")
THREAD = ThreadKey(platform="slack", workspace="T1", channel="C1", root="1.0")
DOCUMENT = TypeAdapter(Document)


def card(**changes: object) -> ApprovalCard:
    base = ApprovalCard(
        run_id="run-1",
        tool_call_id="call-1",
        tool_name="refund",
        args={"order": "A-1", "amount": 150},
        agent_path=("ops", "billing"),
        requester=ALICE,
        expires_at=datetime(2030, 1, 2, 3, 4, tzinfo=UTC),
        ask="a1",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def question(**changes: object) -> Prompt:
    base = Prompt(
        run_id="run-1",
        tool_call_id="call-2",
        tool_name="deploy",
        agent_path=("ops", "deploy"),
        question="Which version?",
        fields=(PromptField(name="version", label="Version"),),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def buttons(document: Document) -> list[tuple[str, str]]:
    return [(button.action, button.label) for button in document.actions]


def blocks(document: Document, kind: type[object]) -> list[object]:
    return [block for block in document.body if isinstance(block, kind)]


def test_a_pending_card_says_what_runs_who_asks_until_when_with_its_buttons() -> None:
    fields = (PromptField(name="amount", label="Amount", kind="number", value=150),)
    document = compose(card(editable=True, fields=fields, grant_for=("1h", "1d")))
    assert rich_plain(document.title) == "🔒 Approval needed: refund"
    assert rich_plain(document.summary) == "Approval needed: refund (asked by alice)"
    (facts,) = blocks(document, Facts)
    assert isinstance(facts, Facts)
    assert [fact.label for fact in facts.facts] == ["Agent", "Asked by", "Expires"]
    assert facts.facts[1].value == (ALICE,)
    (arguments,) = blocks(document, Arguments)
    assert isinstance(arguments, Arguments)
    assert arguments.args == {"order": "A-1", "amount": 150}
    assert buttons(document) == [
        ("approve", "Approve"),
        ("decline", "Decline"),
        ("edit", "Edit"),
        ("grant", "Approve for this thread (1h)"),
        ("grant", "Approve for this thread (1d)"),
    ]
    approve, decline, edit, hour, _ = document.actions
    assert approve.confirm is not None
    assert Code(text="refund") in approve.confirm.text
    assert decline.inputs
    assert blocks(document, TextInput)
    assert edit.form is not None
    assert edit.form.fields == fields
    assert not edit.form.inline
    assert hour.target.grant_for == "1h"
    assert hour.target.ask == "a1"
    assert document.tone is None


def test_a_card_for_someone_who_may_not_decide_has_no_buttons_and_says_who_may() -> None:
    document = compose(card(), actionable=False)
    assert document.actions == ()
    assert not blocks(document, TextInput)
    shown = [rich_plain(p.text) for p in blocks(document, Paragraph) if isinstance(p, Paragraph)]
    assert core_texts.FOR_APPROVERS in shown


def test_a_card_sent_to_one_approver_links_their_page_and_every_platform_draws_it() -> None:
    page = "https://approvals.example.com/approve/t0ken"
    document = compose(card(page=page))
    (line,) = [p for p in blocks(document, Paragraph) if isinstance(p, Paragraph) and p.small]
    assert isinstance(line, Paragraph)
    assert Link(words=core_texts.PAGE_LINK_WORDS, href=page) in line.text
    assert f"<{page}|{core_texts.PAGE_LINK_WORDS}>" in slack_mrkdwn(line.text)
    assert f"[{core_texts.PAGE_LINK_WORDS}]({page})" in teams_markdown(line.text)
    assert not any(
        isinstance(p, Paragraph) and Link in map(type, p.text)
        for p in blocks(compose(card()), Paragraph)
    ), "a card in a thread or a channel links no one's page"


def test_a_quorum_card_counts_its_approvals_in_its_facts() -> None:
    document = compose(card(quorum=2, approvals=(BOB,)))
    (facts,) = blocks(document, Facts)
    assert isinstance(facts, Facts)
    assert facts.facts[-1].label == "Approvals"
    assert rich_plain(facts.facts[-1].value) == "bob (1 of 2)"


def test_a_settled_card_is_titled_by_its_ending_and_says_who_why_and_what_changed() -> None:
    declined = compose(card(status="declined", decided_by=(BOB,), reason="too much"))
    assert rich_plain(declined.title) == "❌ Declined: refund"
    assert declined.tone == "refused"
    assert declined.actions == ()
    lines = [rich_plain(p.text) for p in blocks(declined, Paragraph) if isinstance(p, Paragraph)]
    assert lines == ["❌ Declined by bob", "Reason: too much"]
    assert rich_plain(declined.summary) == "refund: ❌ Declined by bob: too much"

    edited = compose(
        card(
            status="approved",
            decided_by=(BOB,),
            args={"amount": True, "note": "late"},
            previous_args={"order": "A-1", "amount": 1},
            edited_by=BOB,
        )
    )
    (changes,) = blocks(edited, Changes)
    assert isinstance(changes, Changes)
    # One diff: JSON-equal, so 1 -> true is a change; added and removed arguments shown.
    assert [(c.name, c.kind) for c in changes.changes] == [
        ("order", "removed"),
        ("amount", "changed"),
        ("note", "added"),
    ]
    assert rich_plain(changes_rich(changes)) == (
        "✏️ Edited by bob: order: A-1 → (none); amount: 1 → true; note: (none) → late"
    )
    assert rich_plain(changes_rich(changes, most=1)) == (
        "✏️ Edited by bob: order: A-1 → (none); …and 2 more"
    )
    assert "(edited: order: A-1 → (none)" in rich_plain(edited.summary)


@pytest.mark.parametrize(
    ("status", "title", "tone"),
    [
        ("expired", "⌛ Expired: refund", "void"),
        ("stopped", "🛑 Stopped: refund", "void"),
        ("approved", "✅ Approved: refund", "done"),
    ],
)
def test_every_ending_has_its_title_and_tone(status: str, title: str, tone: str) -> None:
    document = compose(card(status=status, decided_by=(BOB,)))
    assert (rich_plain(document.title), document.tone) == (title, tone)


def test_a_question_asks_with_its_hint_and_buttons_then_says_who_answered() -> None:
    waiting = compose(question(error="not a version"))
    assert rich_plain(waiting.title) == "💬 deploy asks:"
    lines = [rich_plain(p.text) for p in blocks(waiting, Paragraph) if isinstance(p, Paragraph)]
    assert lines == [
        "⚠️ That reply did not fit: not a version",
        "Which version?",
        "via ops › deploy",
        "Reply in this thread to answer (version).",
    ]
    assert buttons(waiting) == [("question_decline", "Decline"), ("question_cancel", "Cancel")]
    form = question(fields=(PromptField(name="n", label="N", kind="integer"),))
    answer = compose(form).actions[0]
    assert answer.action == "answer"
    assert answer.form is not None
    assert answer.form.inline
    answered = compose(question(status="answered", decided_by=ALICE))
    assert rich_plain(answered.title) == "✅ Answered: deploy"
    assert answered.actions == ()
    assert answered.tone == "done"


def test_a_pointer_names_where_the_card_waits_and_links_to_it() -> None:
    waiting = compose(CardPointer(card=card(), channel="C9"))
    (line,) = blocks(waiting, Paragraph)
    assert isinstance(line, Paragraph)
    assert Channel(id="C9") in line.text
    assert Link(words=core_texts.POINTER_LINK) in line.text
    sent = compose(CardPointer(card=card(), people=(ALICE, BOB)))
    (to_people,) = blocks(sent, Paragraph)
    assert isinstance(to_people, Paragraph)
    assert rich_plain(to_people.text) == "📨 refund was sent to alice, bob for approval."
    settled = compose(CardPointer(card=card(status="approved", decided_by=(BOB,)), channel="C9"))
    assert rich_plain(settled.title) == "✅ Approved: refund"
    (ended,) = blocks(settled, Paragraph)
    assert isinstance(ended, Paragraph)
    assert Link(words=core_texts.POINTER_LINK) in ended.text


def test_notices_and_answers_carry_their_buttons() -> None:
    notice = compose(Notice(text="ran `refund`", to=ALICE, revoke=("run-1", "call-1")))
    (text,) = blocks(notice, Markdown)
    assert isinstance(text, Markdown)
    assert text.lead == (ALICE, ": ")
    assert buttons(notice) == [("revoke", core_texts.END_GRANT)]
    going = compose(Reply(text="Let me check.", stop="run-1"))
    (stop,) = going.actions
    assert stop.action == "stop"
    assert stop.confirm is not None
    assert stop.target.run_id == "run-1"
    done = compose(Reply(text="Done.", feedback="run-1"))
    assert done.feedback == "run-1"
    assert done.actions == ()


def test_an_approvals_list_offers_the_cards_buttons_and_names_what_ran() -> None:
    waiting = card(requested_in=THREAD)
    inbox = Inbox(
        person=BOB,
        waiting=(waiting,),
        decided=(
            InboxDecision(
                tool_name="refund",
                outcome="edited",
                at=datetime(2030, 1, 1, tzinfo=UTC),
                args={"amount": 120},
            ),
        ),
        grants=2,
    )
    document = inbox_document(inbox, command="/approvals")
    first, requested, decided = (b for b in document.body if isinstance(b, Section))
    (item,) = first.items
    assert [b.action for b in item.actions] == ["approve", "decline"]
    assert Place(thread=THREAD) in item.details
    assert rich_plain(requested.empty) == core_texts.INBOX_NONE_REQUESTED
    assert rich_plain(decided.items[0].text) == "✏️ Approved as edited refund (amount: 120)"
    grants = [p for p in document.body if isinstance(p, Paragraph)][-1]
    assert Code(text="/approvals revoke") in grants.text
    voted = inbox_note(card(quorum=2, approvals=(BOB,)))
    assert rich_plain(voted) == "Your approval of refund is counted (1 of 2)."


@pytest.mark.parametrize(
    "view",
    [
        card(editable=True, fields=(PromptField(name="amount", label="Amount", value=1),)),
        card(status="approved", decided_by=(BOB,), previous_args={"amount": 1}, edited_by=BOB),
        question(),
        CardPointer(card=card(), channel="C9"),
        Notice(text="hi", to=ALICE, revoke=("r", "c")),
        Reply(text="Done.", feedback="run-1"),
    ],
)
def test_a_document_is_plain_data_kept_and_read_back_whole(view: object) -> None:
    document = compose(view)  # type: ignore[arg-type]
    assert DOCUMENT.validate_json(DOCUMENT.dump_json(document)) == document


def test_an_inbox_document_is_plain_data_too() -> None:
    inbox = Inbox(person=BOB, waiting=(card(requested_in=THREAD),))
    document = inbox_document(inbox, command="approvals", kept_current=datetime.now(UTC))
    read_back = DOCUMENT.validate_json(DOCUMENT.dump_json(document))
    assert read_back == document
    waiting = next(block for block in read_back.body if isinstance(block, Section))
    (item,) = waiting.items
    assert item.actions == decision_buttons(card(requested_in=THREAD))  # still the card's
