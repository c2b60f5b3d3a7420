"""Drawing views for Teams: approval cards and questions (Adaptive Cards 1.5), text messages.

The words are the core's (``bot.compose``); these tests check how Teams draws them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.teams import cards
from adapters.teams import texts as teams_texts
from adapters.teams.messenger import render
from bot import (
    ApprovalCard,
    CardStatus,
    Notice,
    Person,
    Prompt,
    PromptField,
    PromptStatus,
    View,
    compose,
)
from bot import texts as core_texts

EXPIRES = datetime(2030, 5, 17, 14, 30, 5, 123456, tzinfo=UTC)


def approval(
    *, args: dict[str, Any] | None = None, status: CardStatus = "pending", **kw: Any
) -> ApprovalCard:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "tool_call_id": "call-1",
        "tool_name": "refund",
        "args": {"order_id": "A-1001", "amount": 250.0} if args is None else args,
        "agent_path": ("ops", "billing"),
        "requester": Person(id="aad-alice", name="Alice"),
        "expires_at": EXPIRES,
        "status": status,
    }
    return ApprovalCard(**{**fields, **kw})


def drawn(view: View) -> dict[str, Any]:
    """The Adaptive Card Teams shows for ``view``."""
    return cards.draw(compose(view))


def texts(card: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for element in card["body"]:
        if element["type"] == "TextBlock":
            out.append(element["text"])
        elif element["type"] == "FactSet":
            out.extend(f"{f['title']}: {f['value']}" for f in element["facts"])
    return out


def size(card: dict[str, Any]) -> int:
    return len(json.dumps(card).encode())


def test_a_pending_card_shows_what_will_run_who_asks_and_until_when() -> None:
    card = drawn(approval())
    assert card["type"] == "AdaptiveCard"
    assert card["version"] == "1.5"
    shown = texts(card)
    assert shown[0] == f"🔒 **{core_texts.APPROVAL_NEEDED}** **refund**"
    assert f"{core_texts.FACT_AGENT}: ops › billing" in shown
    assert "order\\_id: A-1001" in shown  # shown as order_id: see escape
    assert "amount: 250.0" in shown
    assert f"{core_texts.FACT_ASKED_BY}: Alice" in shown
    expires = "{{DATE(2030-05-17T14:30:05Z, SHORT)}} {{TIME(2030-05-17T14:30:05Z)}}"
    assert f"{core_texts.FACT_EXPIRES}: {expires}" in shown
    assert card["fallbackText"] == "Approval needed: refund (asked by Alice)"


def test_approve_and_decline_are_execute_actions_with_a_submit_fallback() -> None:
    card = drawn(approval())
    actions = card["actions"]
    assert [(a["type"], a["title"], a["verb"]) for a in actions] == [
        ("Action.Execute", "Approve", "approve"),
        ("Action.Execute", "Decline", "decline"),
    ]
    for action in actions:
        assert action["data"] == {
            "kind": "approval",
            "action": action["verb"],
            "run_id": "run-1",
            "tool_call_id": "call-1",
        }
        own = {k: v for k, v in action.items() if k not in ("type", "verb", "fallback")}
        assert action["fallback"] == {"type": "Action.Submit", **own}
    (reason,) = [e for e in card["body"] if e["type"] == "Input.Text"]
    assert reason["id"] == "reason"
    approve, decline = actions
    assert approve["associatedInputs"] == "none"  # the reason is a decline's
    assert "associatedInputs" not in decline


@pytest.mark.parametrize(
    ("status", "title", "line"),
    [
        ("approved", "✅ **Approved:** **refund**", "✅ Approved by Bob"),
        ("declined", "❌ **Declined:** **refund**", "❌ Declined by Bob"),
        (
            "expired",
            "⌛ **Expired:** **refund**",
            "⌛ Expired: nobody decided in time, nothing was run",
        ),
    ],
)
def test_a_decided_card_says_by_whom_and_has_no_buttons(
    status: CardStatus, title: str, line: str
) -> None:
    bob = (Person(id="aad-bob", name="Bob"),)
    card = drawn(approval(status=status, decided_by=bob, reason="too much"))
    assert texts(card)[0] == title
    assert line in texts(card)
    assert "actions" not in card
    assert not [e for e in card["body"] if e["type"].startswith("Input.")]
    assert not any(t.startswith(core_texts.FACT_EXPIRES) for t in texts(card))
    # A decline's reason is a line of its own, under how it ended.
    assert ("Reason: too much" in texts(card)) == (status == "declined")


def test_huge_arguments_are_shortened_to_fit_a_teams_message() -> None:
    big = {f"field_{i}": "x" * 10_000 for i in range(60)}
    card = drawn(approval(args=big))
    assert size(card) <= cards.CARD_BUDGET_BYTES < 28 * 1024
    shown = texts(card)
    assert any(t.endswith(teams_texts.TRUNCATED) for t in shown)
    assert any("more" in t for t in shown)
    assert len(card["actions"]) == 2


def test_nested_arguments_are_shown_as_json() -> None:
    card = drawn(approval(args={"target": {"env": "prod", "replicas": [1, 2]}}))
    assert 'target: {"env": "prod", "replicas": \\[1, 2\\]}' in texts(card)


def test_a_card_without_arguments_says_so() -> None:
    assert core_texts.NO_ARGUMENTS in texts(drawn(approval(args={})))


def question(**kw: Any) -> Prompt:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "tool_call_id": "call-1",
        "tool_name": "deploy_service",
        "agent_path": ("ops", "deploy"),
        "question": "Which version?",
        "fields": (PromptField(name="version", label="version", required=True),),
    }
    return Prompt(**{**fields, **kw})


WINDOW = (
    PromptField(name="day", label="Day", kind="choice", choices=("sat", "sun"), required=True),
    PromptField(name="hour", label="Hour", kind="integer", required=True, description="0-23"),
    PromptField(name="share", label="Share", kind="number"),
    PromptField(name="notify", label="Tell them", kind="boolean", required=True),
    PromptField(name="note", label="Note", description="Anything else?"),
)


def test_a_question_card_names_the_tool_the_problem_and_that_a_reply_answers_it() -> None:
    card = drawn(question(error="version: must look like 1.2.3"))
    assert card["version"] == "1.5"
    assert texts(card) == [
        "💬 **deploy\\_service** asks:",
        "⚠️ That reply did not fit: version: must look like 1.2.3",
        "Which version?",
        "via ops › deploy",
        "Reply in this thread to answer (**version**).",
    ]
    assert not [e for e in card["body"] if e["type"].startswith("Input.")]
    assert card["fallbackText"] == "deploy\\_service asks: Which version?"


def test_decline_and_cancel_are_execute_actions_that_send_no_inputs() -> None:
    for prompt in (question(), question(fields=WINDOW)):
        card = drawn(prompt)
        decline, cancel = card["actions"][-2:]
        for action, verb in ((decline, "decline"), (cancel, "cancel")):
            assert action["type"] == "Action.Execute"
            assert action["verb"] == verb
            assert action["data"] == {
                "kind": "question",
                "action": verb,
                "run_id": "run-1",
                "tool_call_id": "call-1",
            }
            assert action["associatedInputs"] == "none"  # a required input cannot hold them up
            fallback = action["fallback"]
            assert fallback["type"] == "Action.Submit"
            assert (fallback["data"], fallback["associatedInputs"]) == (action["data"], "none")
        assert (decline["title"], cancel["title"]) == ("Decline", "Cancel")


def test_a_form_has_one_input_per_field_of_its_kind_and_send() -> None:
    card = drawn(question(fields=WINDOW))
    day, hour, share, notify, note = [e for e in card["body"] if e["type"].startswith("Input.")]
    assert (day["type"], day["style"], day["choices"]) == (
        "Input.ChoiceSet",
        "compact",
        [{"title": "sat", "value": "sat"}, {"title": "sun", "value": "sun"}],
    )
    assert (hour["type"], hour["placeholder"]) == ("Input.Number", "0-23")
    assert share["type"] == "Input.Number"
    assert (notify["type"], notify["valueOn"], notify["valueOff"]) == (
        "Input.Toggle",
        "true",
        "false",
    )
    assert (note["type"], note["placeholder"]) == ("Input.Text", "Anything else?")
    assert [e["label"] for e in (day, hour, share, notify, note)] == [f.label for f in WINDOW]
    assert (day["isRequired"], day["errorMessage"]) == (True, "Day is required.")
    assert hour["isRequired"] is True
    assert "isRequired" not in share
    assert "isRequired" not in note
    assert "isRequired" not in notify  # a required toggle would have to be on: off is an answer
    assert texts(card)[-1] == core_texts.QUESTION_FORM_HINT
    send = card["actions"][0]
    assert (send["title"], send["verb"], send["data"]["action"]) == ("Send", "answer", "answer")
    assert "associatedInputs" not in send
    assert send["fallback"]["data"] == send["data"]


def test_no_input_can_replace_the_actions_own_data() -> None:
    own = ("kind", "action", "run_id", "tool_call_id", "reason")
    fields = tuple(PromptField(name=name, label=name) for name in own)
    card = drawn(question(fields=fields))
    ids = [e["id"] for e in card["body"] if e["type"].startswith("Input.")]
    assert ids == [cards.FIELD_INPUT_PREFIX + name for name in own]
    assert not set(ids) & set(card["actions"][0]["data"])


@pytest.mark.parametrize(
    ("status", "title", "line"),
    [
        ("answered", "✅ **Answered:**", "✅ Answered by Bob"),
        ("declined", "❌ **Declined:**", "❌ Declined by Bob"),
        ("cancelled", "🚫 **Cancelled:**", "🚫 Cancelled by Bob"),
        ("expired", "⌛ **Expired:**", "⌛ Expired: nobody answered in time"),
    ],
)
def test_a_settled_question_says_by_whom_and_has_no_actions(
    status: PromptStatus, title: str, line: str
) -> None:
    bob = Person(id="aad-bob", name="Bob")
    card = drawn(question(fields=WINDOW, status=status, decided_by=bob, error="hour: too big"))
    assert texts(card) == [f"{title} **deploy\\_service**", "Which version?", line]
    assert "actions" not in card
    assert not [e for e in card["body"] if e["type"].startswith("Input.")]


def test_a_huge_question_or_form_is_shortened_to_fit_a_teams_message() -> None:
    long = drawn(question(question="why? " * 20_000, error="x" * 50_000))
    assert size(long) <= cards.CARD_BUDGET_BYTES
    assert all(len(t) < 3100 for t in texts(long))
    assert any(t.endswith(teams_texts.TRUNCATED) for t in texts(long))

    many = tuple(f"option-{i}-{'x' * 20}" for i in range(3000))
    huge = (*WINDOW, PromptField(name="pick", label="Pick", kind="choice", choices=many))
    card = drawn(question(fields=huge))
    assert size(card) <= cards.CARD_BUDGET_BYTES
    # Too many choices for a card: a reply in the thread answers it instead.
    assert not [e for e in card["body"] if e["type"].startswith("Input.")]
    assert texts(card)[-1] == core_texts.QUESTION_FORM_HINT
    assert [a["verb"] for a in card["actions"]] == ["decline", "cancel"]


# -- user text is shown, never rendered as markdown -----------------------------------

INJECTIONS = [
    "[Approve here](https://evil.example/phish)",
    "**URGENT** _approve_ `now` ~~safe~~",
    "<https://evil.example> <at>Alice</at>",
    "ok\n\n- looks like a list\n1. and a numbered one\n# and a heading\n> and a quote",
    "{{DATE(2030-01-01T00:00:00Z, SHORT)}}",
    "back\\[slash\\] tricks \\\\[x](y)",
]
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def unescape(text: str) -> str:
    """What a markdown renderer shows for escaped text: each ``\\x`` as ``x``."""
    return _ESCAPED.sub(r"\1", text)


def assert_literal(rendered: str, original: str) -> None:
    """``rendered`` shows ``original`` exactly and leaves no markup active."""
    assert unescape(rendered) == original
    unescaped_markup = _ESCAPED.sub("", rendered)  # what is left once escapes are removed
    for token in ("[", "]", "*", "_", "`", "<", ">", "~", "{{"):
        assert token not in unescaped_markup, (token, rendered)
    for line in unescaped_markup.splitlines():
        assert not re.match(r"\s*(#|[-+]|\d+[.)])(\s|$)", line), (line, rendered)


@pytest.mark.parametrize("payload", INJECTIONS)
def test_arguments_reason_and_names_cannot_add_markup_to_a_card(payload: str) -> None:
    nested = {"note": payload}
    pending = drawn(
        approval(args={payload: payload, "nested": nested}, requester=Person(id="x", name=payload))
    )
    facts = {
        unescape(f["title"]): f
        for e in pending["body"]
        if e["type"] == "FactSet"
        for f in e["facts"]
    }
    assert_literal(facts[payload]["title"], payload)
    assert_literal(facts[payload]["value"], payload)
    assert_literal(facts["nested"]["value"], json.dumps(nested, ensure_ascii=False))
    assert_literal(facts[core_texts.FACT_ASKED_BY]["value"], payload)
    assert_literal(pending["fallbackText"], f"Approval needed: refund (asked by {payload})")

    decided = drawn(approval(status="declined", decided_by=(Person(id=payload),), reason=payload))
    (line,) = [t for t in texts(decided) if t.startswith("❌ Declined by ")]
    assert_literal(line.removeprefix("❌ Declined by "), payload)
    (reason,) = [t for t in texts(decided) if t.startswith("Reason: ")]
    assert_literal(reason.removeprefix("Reason: "), payload)


def test_tool_and_agent_names_are_escaped_but_the_cards_own_markup_stays() -> None:
    card = drawn(approval(tool_name="delete_*all*", agent_path=("ops", "[x](y)")))
    assert texts(card)[0] == "🔒 **Approval needed:** **delete\\_\\*all\\***"
    assert f"{core_texts.FACT_AGENT}: ops › \\[x\\](y)" in texts(card)
    assert_literal(card["fallbackText"], "Approval needed: delete_*all* (asked by Alice)")


@pytest.mark.parametrize("payload", INJECTIONS)
def test_a_question_cannot_be_given_markup_by_its_text_the_reply_it_quotes_or_names(
    payload: str,
) -> None:
    waiting = drawn(
        question(question=payload, error=f"version: {payload}", agent_path=("ops", payload))
    )
    title, error, asks, via = texts(waiting)[:4]
    assert title == "💬 **deploy\\_service** asks:"  # the card's own markup stays
    assert_literal(error, f"⚠️ That reply did not fit: version: {payload}")
    assert_literal(asks, payload)
    assert_literal(via, f"via ops › {payload}")
    assert_literal(waiting["fallbackText"], f"deploy_service asks: {payload}")

    settled = drawn(question(question=payload, status="declined", decided_by=Person(id=payload)))
    (line,) = [t for t in texts(settled) if t.startswith("❌ Declined by ")]
    assert_literal(line.removeprefix("❌ Declined by "), payload)


def test_form_labels_and_hints_are_plain_text_shown_as_given() -> None:
    field = PromptField(name="n", label="max_*size*", kind="choice", choices=("a_b",))
    card = drawn(question(fields=(field, field)))
    choice = next(e for e in card["body"] if e["type"] == "Input.ChoiceSet")
    assert choice["label"] == "max_*size*"  # an input label is never markdown: no escapes
    assert choice["choices"] == [{"title": "a_b", "value": "a_b"}]


def test_a_quorum_card_lists_the_approvals_so_far_escaped_and_then_who_approved() -> None:
    assert not any(t.startswith("Approvals") for t in texts(drawn(approval())))

    link = Person(id="aad-bob", name="[Bob](https://x.example)")
    pending = drawn(approval(quorum=2, approvals=(link,)))
    assert r"Approvals: \[Bob\](https://x.example) (1 of 2)" in texts(pending)
    assert "actions" in pending

    both = (Person(id="aad-bob", name="Bob"), Person(id="*C*"))
    approved = drawn(approval(status="approved", quorum=2, decided_by=both, approvals=both))
    assert r"✅ Approved by Bob, \*C\*" in texts(approved)
    assert not any(t.startswith("Approvals") for t in texts(approved))


def test_a_notice_names_whom_it_is_for_escaped() -> None:
    notice = Notice(text="your request expired", to=Person(id="", name="*Ann*"))
    assert render(notice).text == r"\*Ann\*: your request expired"
    assert render(Notice(text="plain")).text == "plain"
    everyone = Notice(text="reminder", also=(Person(id="aad-1", name="Ann"), Person(id="aad-2")))
    assert render(everyone).text == "<at>Ann</at>, <at>aad-2</at>: reminder"


# -- Edit: the arguments as a form, approved as edited --------------------------------

REFUND_FIELDS = (
    PromptField(name="order", label="order", required=True, value="A-1001"),
    PromptField(name="amount", label="amount", kind="integer", required=True, value=150),
    PromptField(
        name="currency", label="currency", kind="choice", choices=("EUR", "USD"), value="EUR"
    ),
    PromptField(name="share", label="share", kind="number", value=0.5),
    PromptField(name="notify", label="Tell them", kind="boolean", value=True),
    PromptField(name="note", label="note", description="Anything else?", value="line 1\nline 2"),
)


def editable(**kw: Any) -> ApprovalCard:
    return approval(editable=True, fields=REFUND_FIELDS, **kw)


def edit_action(card: dict[str, Any]) -> dict[str, Any]:
    (show,) = [a for a in card.get("actions", []) if a["type"] == "Action.ShowCard"]
    found: dict[str, Any] = show
    return found


def test_an_editable_card_has_edit_which_opens_the_arguments_and_approve_edited() -> None:
    card = drawn(editable())
    assert [(a["type"], a["title"]) for a in card["actions"]] == [
        ("Action.Execute", "Approve"),
        ("Action.Execute", "Decline"),
        ("Action.ShowCard", "Edit"),
    ]
    form = edit_action(card)["card"]
    assert form["type"] == "AdaptiveCard"
    ids = [e["id"] for e in form["body"] if e["type"].startswith("Input.")]
    assert ids == [cards.FIELD_INPUT_PREFIX + f.name for f in REFUND_FIELDS]
    (send,) = form["actions"]
    assert (send["type"], send["title"], send["verb"]) == (
        "Action.Execute",
        "Approve edited",
        "edit",
    )
    assert send["data"] == {
        "kind": "approval",
        "action": "edit",
        "run_id": "run-1",
        "tool_call_id": "call-1",
    }
    assert "associatedInputs" not in send  # it sends the form's inputs
    assert send["fallback"] == {
        "type": "Action.Submit",
        "title": "Approve edited",
        "style": "positive",
        "data": send["data"],
    }
    # The edit inputs are in the shown card only: the card's own Approve and Decline
    # (which gather the inputs of their own card) never send or wait for them.
    assert [e["id"] for e in card["body"] if e["type"].startswith("Input.")] == ["reason"]


def test_each_edit_input_starts_from_the_value_the_card_shows() -> None:
    form = edit_action(drawn(editable()))["card"]
    order, amount, currency, share, notify, note = [
        e for e in form["body"] if e["type"].startswith("Input.")
    ]
    assert (order["type"], order["value"], order["isRequired"]) == ("Input.Text", "A-1001", True)
    assert "isMultiline" not in order
    assert (amount["type"], amount["value"]) == ("Input.Number", 150)
    assert (currency["type"], currency["value"]) == ("Input.ChoiceSet", "EUR")
    assert (share["type"], share["value"]) == ("Input.Number", 0.5)
    assert (notify["type"], notify["value"], notify["valueOn"]) == ("Input.Toggle", "true", "true")
    assert (note["value"], note["isMultiline"], note["placeholder"]) == (
        "line 1\nline 2",
        True,
        "Anything else?",
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (PromptField(name="n", label="n", kind="number", value=float("nan")), None),
        (PromptField(name="n", label="n", kind="integer", value=True), None),
        (PromptField(name="n", label="n", kind="integer", value="12"), None),
        (PromptField(name="c", label="c", kind="choice", choices=("a",), value="b"), None),
        (PromptField(name="b", label="b", kind="boolean", value=None), "false"),
        (PromptField(name="t", label="t", value=None), None),
        (PromptField(name="t", label="t", value=7), "7"),
        (PromptField(name="t", label="t", value="[x](y) *not markup*"), "[x](y) *not markup*"),
    ],
)
def test_an_edit_input_holds_only_a_value_it_can_show_as_given(
    field: PromptField, value: Any
) -> None:
    form = edit_action(drawn(approval(editable=True, fields=(field,))))["card"]
    (element,) = [e for e in form["body"] if e["type"].startswith("Input.")]
    assert element.get("value") == value


@pytest.mark.parametrize(
    "card",
    [
        approval(),  # not editable
        approval(editable=True),  # no fields
        editable(status="approved", decided_by=(Person(id="aad-bob", name="Bob"),)),
        editable(status="expired"),
    ],
)
def test_only_a_pending_editable_card_has_edit(card: ApprovalCard) -> None:
    rendered = drawn(card)
    assert not any(a["type"] == "Action.ShowCard" for a in rendered.get("actions", []))


def test_an_edit_value_is_never_shortened_and_a_form_too_big_for_a_message_is_left_out() -> None:
    long = "y" * 5_000
    fits = drawn(
        approval(
            args={"note": long},
            editable=True,
            fields=(PromptField(name="note", label="note", value=long),),
        )
    )
    (note,) = [e for e in edit_action(fits)["card"]["body"] if e["type"] == "Input.Text"]
    assert note["value"] == long

    huge = "z" * 30_000
    card = drawn(
        approval(
            args={"note": huge},
            editable=True,
            fields=(PromptField(name="note", label="note", value=huge),),
        )
    )
    assert size(card) <= cards.CARD_BUDGET_BYTES
    assert [a["title"] for a in card["actions"]] == ["Approve", "Decline"]
    assert any(t.endswith(teams_texts.TRUNCATED) for t in texts(card))


BOB = Person(id="aad-bob", name="Bob")


def edited(previous: dict[str, Any], args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return drawn(
        approval(
            status="approved",
            decided_by=(BOB,),
            args=args,
            previous_args=previous,
            edited_by=kw.pop("edited_by", BOB),
            **kw,
        )
    )


def test_a_card_approved_as_edited_shows_what_ran_and_who_changed_what() -> None:
    card = edited(
        {"order": "A-1", "amount": 150, "currency": "EUR"},
        {"order": "A-1", "amount": 120, "currency": "USD"},
    )
    shown = texts(card)
    assert shown[0] == "✅ **Approved:** **refund**"
    assert "✅ Approved by Bob" in shown
    assert "amount: 120" in shown
    assert "currency: USD" in shown
    assert "✏️ Edited by Bob: **amount**: 150 → 120; **currency**: EUR → USD" in shown
    assert "actions" not in card


def test_the_edit_line_names_arguments_added_or_left_out_and_type_changes() -> None:
    card = edited(
        {"a": 1, "gone": "x", "same": 1, "n": "1"}, {"a": 1.0, "same": 1, "n": 1, "new": True}
    )
    (line,) = [t for t in texts(card) if t.startswith("✏️ Edited by")]
    assert line == (
        '✏️ Edited by Bob: **a**: 1 → 1.0; **gone**: x → (none); **n**: "1" → 1; '
        "**new**: (none) → true"
    )


def test_an_edit_that_changed_nothing_shows_no_edit_line() -> None:
    unchanged = edited({"a": 1}, {"a": 1}, edited_by=None)
    assert not [t for t in texts(unchanged) if "Edited" in t]
    assert "✅ Approved by Bob" in texts(unchanged)
    plain = drawn(approval(status="approved", decided_by=(BOB,), args={"a": 1}))
    assert texts(unchanged) == texts(plain)


@pytest.mark.parametrize("payload", INJECTIONS)
def test_the_edit_line_cannot_be_given_markup(payload: str) -> None:
    card = edited({payload: "before"}, {payload: payload}, edited_by=Person(id=payload))
    (line,) = [t for t in texts(card) if t.startswith("✏️ Edited by ")]
    before, _, after = line.removeprefix("✏️ Edited by ").partition(": ")
    assert_literal(before, payload)
    key_and_before, _, value = after.partition(" → ")
    key = key_and_before.removesuffix(": before")
    assert key.startswith("**")  # the card's own bold stays
    assert key.endswith("**")
    assert_literal(key.removeprefix("**").removesuffix("**"), payload)
    assert_literal(value, payload)


def test_huge_edits_are_shortened_to_fit_a_teams_message() -> None:
    previous = {f"field_{i}": "a" * 10_000 for i in range(60)}
    args = {f"field_{i}": "b" * 10_000 for i in range(60)}
    card = edited(previous, args)
    assert size(card) <= cards.CARD_BUDGET_BYTES
    (line,) = [t for t in texts(card) if t.startswith("✏️ Edited by")]
    assert line.endswith("more")
    assert "a" * 1000 not in line
    assert "b" * 1000 not in line
    assert "…" in line
