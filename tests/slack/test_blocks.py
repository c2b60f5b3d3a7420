"""Block Kit rendering: limits, escaping, outcomes, splitting, the decline modal."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.blocks import draw, long_text, render
from adapters.slack.modals import decline_modal
from adapters.slack.mrkdwn import (
    SECTION_LIMIT,
    clip,
    cut,
    escape,
    mention,
    slack_date,
    split,
    text_mrkdwn,
    to_mrkdwn,
)
from adapters.slack.wire import (
    APPROVE_ACTION,
    ModalMetadata,
    PayloadError,
    decode_button_value,
    decode_metadata,
    encode_button_value,
)
from bot import (
    ApprovalCard,
    CardPointer,
    CardStatus,
    Code,
    Document,
    Inbox,
    InboxDecision,
    Link,
    Notice,
    Paragraph,
    Person,
    Place,
    Prompt,
    PromptField,
    Reply,
    ThreadKey,
    View,
    compose,
    inbox_document,
)
from bot import texts as core_texts

from .fake_slack import TOKEN, FakeSlack, _block_problem
from .harness import CHANNEL, BotServer, drawn, mention_event

EXPIRES = datetime(2030, 1, 2, 3, 4, tzinfo=UTC)


ALICE = Person(id="U0ALICE01", name="Alice")
BOB = Person(id="U0BOB0001")


def card(
    *,
    args: dict[str, Any] | None = None,
    status: CardStatus = "pending",
    requester: Person | None = ALICE,
    **extra: Any,
) -> ApprovalCard:
    return ApprovalCard(
        run_id="run-1",
        tool_call_id="call-1",
        tool_name="deploy",
        args={"service": "api"} if args is None else args,
        agent_path=("ops", "deploy"),
        requester=requester,
        expires_at=EXPIRES,
        status=status,
        **extra,
    )


def all_text(blocks: list[dict[str, Any]]) -> str:
    out = []
    for block in blocks:
        if "text" in block:
            out.append(block["text"]["text"])
        out.extend(e["text"] for e in block.get("elements", []) if e.get("type") == "mrkdwn")
    return "\n".join(out)


def test_a_pending_card_shows_tool_args_agent_requester_expiry_and_two_buttons() -> None:
    message = drawn(card())
    text = all_text(message.shown)
    assert "`deploy`" in text
    assert '"service": "api"' in text
    assert "ops › deploy" in text
    assert "<@U0ALICE01>" in text
    assert "<!date^1893553440^{date_short_pretty} at {time}|2030-01-02 03:04 UTC>" in text
    (actions,) = [b for b in message.shown if b["type"] == "actions"]
    approve, decline = actions["elements"]
    assert (approve["text"]["text"], approve["style"]) == ("Approve", "primary")
    assert (decline["text"]["text"], decline["style"]) == ("Decline", "danger")
    assert approve["confirm"]["confirm"]["text"] == "Approve"
    assert decode_button_value(approve["value"]).model_dump() == {
        "run": "run-1",
        "call": "call-1",
        "ask": None,
    }, "a card that does not say which asking it shows carries none"
    assert message.text  # top-level text for notifications


@pytest.mark.parametrize(
    ("status", "extra", "expected", "lines"),
    [
        ("approved", {"decided_by": (BOB,)}, "Approved by <@U0BOB0001>", ()),
        (
            "declined",
            {"decided_by": (BOB,), "reason": "a <b> & c"},
            "Declined by <@U0BOB0001>: a &lt;b&gt; &amp; c",
            ("❌ Declined by <@U0BOB0001>", "Reason: a &lt;b&gt; &amp; c"),
        ),
        ("declined", {"decided_by": (BOB,)}, "Declined by <@U0BOB0001>", ()),
        ("expired", {}, "⌛ Expired: nobody decided in time, nothing was run", ()),
    ],
)
def test_a_decided_card_has_no_buttons_and_says_what_happened(
    status: CardStatus, extra: dict[str, Any], expected: str, lines: tuple[str, ...]
) -> None:
    message = drawn(card(status=status, **extra))
    assert all(b["type"] != "actions" for b in message.shown)
    assert expected in message.text
    contexts = [b["elements"][0]["text"] for b in message.shown if b["type"] == "context"]
    if lines:  # a decline's reason is on a line of its own, after who declined
        assert contexts[-len(lines) :] == list(lines)
    else:
        assert expected in contexts[-1]
    assert "<!date^" not in all_text(message.shown)


@pytest.mark.parametrize(
    ("status", "title", "color"),
    [
        ("approved", "✅ *Approved:* `deploy`", "#2EB67D"),
        ("declined", "❌ *Declined:* `deploy`", "#E01E5A"),
        ("expired", "⌛ *Expired:* `deploy`", "#9A9A9A"),
    ],
)
def test_a_settled_card_changes_its_title_and_sits_beside_a_bar_of_its_colour(
    status: CardStatus, title: str, color: str
) -> None:
    message = drawn(card(status=status, decided_by=(BOB,)))
    (heading,) = message.blocks
    assert heading["text"]["text"] == title
    assert "Approval needed" not in all_text(message.shown)
    assert message.bar is not None
    assert message.bar.color == color
    shown = all_text(message.bar.blocks)
    assert "ops › deploy" in shown, "the details stay"
    assert '"service": "api"' in shown
    assert message.fields()["attachments"] == [{"color": color, "blocks": message.bar.blocks}]
    assert message.fields()["blocks"] == [heading]


def test_a_pending_card_keeps_its_title_and_has_no_bar() -> None:
    message = drawn(card())
    title = core_texts.CARD_TITLE.format(
        approval_needed=f"*{core_texts.APPROVAL_NEEDED}*", tool="`deploy`"
    )
    assert message.blocks[0]["text"]["text"] == title == "🔒 *Approval needed:* `deploy`"
    assert message.bar is None
    assert "attachments" not in message.fields()
    assert message.fields(replacing=True)["attachments"] == [], "an update clears any bar"


def test_long_arguments_are_truncated_with_a_note_within_the_limits() -> None:
    message = drawn(card(args={"script": "echo <&> " * 2000}))
    assert all(_block_problem(b) is None for b in message.shown)
    args_text = message.shown[2]["text"]["text"]
    assert len(args_text) <= SECTION_LIMIT
    assert args_text.endswith("```")
    assert "more characters" in all_text(message.shown)
    assert any(b["type"] == "actions" for b in message.shown)


def test_cutting_never_splits_an_entity() -> None:
    for limit in range(1, 12):
        kept, dropped = cut(escape("a&b<c>d&e"), limit)
        assert len(kept) <= limit
        assert "&" not in kept or kept.count("&") == kept.count(";")
        # What is dropped is counted in characters as people read them ("&amp;" is one).
        shown = kept.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        assert dropped == len("a&b<c>d&e") - len(shown)


def test_people_are_mentioned_from_their_ids_never_found_in_text() -> None:
    assert mention(Person(id="U0ALICE01", name="Alice")) == "<@U0ALICE01>"
    assert mention(Person(id="<!channel>")) == "<@&lt;!channel&gt;>"  # cannot ping a channel
    assert "*Asked by:* someone" in all_text(drawn(card(requester=None)).shown)
    (notice,) = render(Notice(text="your request <expired>", to=BOB))
    assert notice.text == "<@U0BOB0001>: your request &lt;expired&gt;"
    (reminder,) = render(Notice(text="reminder", also=(BOB, Person(id="U0CAROL01"))))
    assert reminder.text == "<@U0BOB0001>, <@U0CAROL01>: reminder"
    (reply,) = render(Reply(text="U0BOB0001 asked for it"))
    assert "<@" not in reply.text  # the agent's words never ping anyone


def test_a_naive_expiry_is_read_as_utc() -> None:
    assert slack_date(datetime(2030, 1, 2, 3, 4)) == slack_date(EXPIRES)


def test_long_text_splits_at_paragraphs_and_keeps_everything() -> None:
    text = "\n\n".join(f"paragraph {i} " + "x" * 500 for i in range(30))
    messages = long_text(text)
    sections = [b["text"]["text"] for m in messages for b in m.shown]
    assert all(len(s) <= SECTION_LIMIT for s in sections)
    assert all(s.startswith("paragraph") for s in sections)
    assert "".join(sections).replace("\n", "") == text.replace("\n", "")
    assert all(len(m.shown) <= 50 for m in messages)


def test_split_falls_back_to_a_hard_cut_without_spaces() -> None:
    pieces = split("y" * 7000, 3000)
    assert [len(p) for p in pieces] == [3000, 3000, 1000]


def test_markdown_becomes_mrkdwn_and_is_escaped() -> None:
    (message,) = long_text("# Title\n**bold** and [docs](https://example.com/a?b=1&c=2) 1 < 2")
    text = message.shown[0]["text"]["text"]
    assert text == "*Title*\n*bold* and docs (https://example.com/a?b=1&amp;c=2) 1 &lt; 2"


@pytest.mark.parametrize(
    ("markdown", "shown"),
    [
        ("[label](https://evil.example/x)", "label (https://evil.example/x)"),
        (
            "see [https://good.example](https://evil.example/x)",
            "see https://good.example (https://evil.example/x)",
        ),
        ("[https://example.com/a](https://example.com/a)", "https://example.com/a"),
        ("**[bold link](http://evil.example)**", "*bold link (http://evil.example)*"),
        ("[<!channel>](https://evil.example)", "&lt;!channel&gt; (https://evil.example)"),
    ],
)
def test_a_markdown_link_shows_its_real_target_never_a_hidden_one(
    markdown: str, shown: str
) -> None:
    assert to_mrkdwn(markdown) == shown
    (reply,) = render(Reply(text=markdown))
    assert reply.shown[0]["text"]["text"] == shown
    assert "<" not in reply.text


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("<https://evil.example/x|label>", "&lt;https://evil.example/x|label&gt;"),
        ("<https://evil.example/x>", "&lt;https://evil.example/x&gt;"),  # a Markdown autolink
        ("<!channel> <!here> <!everyone>", "&lt;!channel&gt; &lt;!here&gt; &lt;!everyone&gt;"),
        ("<@U123> <#C123> <!subteam^S1>", "&lt;@U123&gt; &lt;#C123&gt; &lt;!subteam^S1&gt;"),
        ("**<!channel>**", "*&lt;!channel&gt;*"),
        ("# <@U123>", "*&lt;@U123&gt;*"),
        ("&lt;!channel&gt;", "&amp;lt;!channel&amp;gt;"),  # entities stay as typed
    ],
)
def test_slack_control_sequences_in_the_agents_text_are_shown_not_parsed(
    written: str, shown: str
) -> None:
    assert to_mrkdwn(written) == shown
    (reply,) = render(Reply(text=written))
    assert reply.shown[0]["text"]["text"] == shown
    assert text_mrkdwn((written, BOB)) == f"{shown}<@U0BOB0001>"


# Pieces of Slack and Markdown syntax (whole links among them), mixed with any text.
_PIECES = st.sampled_from(
    [
        *"<>&|!@[]()*#_~`\n ",
        "https://evil.example/x",
        "[label](https://evil.example/x)",
        "[a](http://b)",
        "](",
        "**",
        "# ",
        "&lt;",
        "&gt;",
        "!channel",
        "@U123",
    ]
)


@given(st.lists(_PIECES | st.text(max_size=5), max_size=30).map("".join))
def test_no_text_becomes_a_link_or_a_ping(markdown: str) -> None:
    shown = to_mrkdwn(markdown)
    assert "<" not in shown
    assert ">" not in shown


@pytest.mark.parametrize("name", ["<!channel>", "<@U0EVIL001>", "<https://evil.example|Alice>"])
def test_a_display_name_never_reaches_a_card(name: str) -> None:
    eve = Person(id="U0EVE0001", name=name)
    pending = drawn(card(requester=eve, quorum=2, approvals=(eve,)))
    decided = drawn(card(status="declined", requester=eve, decided_by=(eve,)))
    for message in (pending, decided):
        shown = all_text(message.shown) + message.text
        assert "<@U0EVE0001>" in shown  # Slack shows the current name itself
        assert name not in shown
        assert "<!channel" not in shown
        assert "<@U0EVIL001" not in shown
        assert "<https" not in shown
    (notice,) = render(Notice(text="done", to=eve))
    assert notice.text == "<@U0EVE0001>: done"
    assert text_mrkdwn(("for ", eve)) == "for <@U0EVE0001>"


def test_the_decline_modal_carries_the_click_to_its_submission() -> None:
    meta = ModalMetadata(run="r", call="c", team="T", channel="C", root="1.1", ts="1.2")
    view = decline_modal(meta)
    assert decode_metadata(view["private_metadata"], ModalMetadata) == meta
    assert all(len(view[k]["text"]) <= 24 for k in ("title", "submit", "close"))
    (field,) = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["optional"] is True


def test_button_values_are_ours_or_rejected() -> None:
    assert decode_button_value(encode_button_value("run", "call")).run == "run"
    with pytest.raises(ValueError, match="limit"):
        encode_button_value("r" * 2000, "c")
    for bad in (None, "", "{}", '{"run": "a", "call": "b", "x": 1}', '"text"'):
        with pytest.raises(PayloadError):
            decode_button_value(bad)


async def test_a_card_with_huge_arguments_is_accepted_by_slack(
    bot: BotServer, slack: FakeSlack
) -> None:
    event = mention_event("big")
    await bot.send_event(event)
    await bot.idle()
    (posted,) = slack.posts_in(CHANNEL, event["ts"])  # the card, below the live steps
    assert any(b["type"] == "actions" for b in posted.shown)
    assert "more characters" in all_text(posted.shown)
    assert APPROVE_ACTION in str(posted.shown)


def test_a_quorum_card_lists_the_approvals_so_far_and_then_everyone_who_approved() -> None:
    plain = all_text(drawn(card()).shown)
    assert "Approvals" not in plain, "a quorum of one shows as before"

    pending = drawn(card(quorum=3, approvals=(BOB, Person(id="<Eve & co>"))))
    assert "*Approvals:* <@U0BOB0001>, <@&lt;Eve &amp; co&gt;> (2 of 3)" in all_text(pending.shown)
    assert any(b["type"] == "actions" for b in pending.shown)

    both = (BOB, Person(id="U0CAROL01"))
    approved = drawn(card(status="approved", quorum=2, decided_by=both, approvals=both))
    shown = all_text(approved.shown)
    assert "Approved by <@U0BOB0001>, <@U0CAROL01>" in shown
    assert "Approvals:" not in shown


async def test_the_fake_checks_block_kit_inside_attachments_and_keeps_them_on_update(
    slack: FakeSlack,
) -> None:
    client = AsyncWebClient(token=TOKEN, base_url=slack.url)
    too_long = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]
    with pytest.raises(SlackApiError, match="invalid_blocks"):
        await client.chat_postMessage(
            channel=CHANNEL, text="t", attachments=[{"color": "#2EB67D", "blocks": too_long}]
        )
    with pytest.raises(SlackApiError, match="invalid_attachments"):
        await client.chat_postMessage(
            channel=CHANNEL, text="t", attachments=[{"color": "green", "blocks": []}]
        )
    assert slack.problems == [
        "section text over 3000 characters",
        "attachment color 'green' is not #RRGGBB, good, warning or danger",
    ]
    slack.problems.clear()

    settled = drawn(card(status="approved", decided_by=(BOB,)))
    posted = await client.chat_postMessage(channel=CHANNEL, **settled.fields())
    message = slack.messages[(CHANNEL, posted["ts"])]
    assert message.colors == ["#2EB67D"]
    assert message.shown == settled.shown
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="t", blocks=[])
    assert message.colors == ["#2EB67D"], "Slack keeps attachments an update leaves out"
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="t", attachments=[])
    assert message.colors == []
    assert message.shown == []


def test_clip_keeps_short_text_and_ends_long_text_in_an_ellipsis_within_the_limit() -> None:
    assert clip("deploy", 6) == "deploy"
    assert clip("deploy api now", 12) == "deploy api…", "no space before the ellipsis"
    assert clip("a" * 10 + "&amp;", 14, escaped=True) == "a" * 10 + "…", "no entity cut"
    assert clip("a" * 10 + "&amp;", 14) == "a" * 10 + "&am…"


# -- documents ------------------------------------------------------------------------

REQUEST = ThreadKey(platform="slack", workspace="T0TEAM001", channel="C0OPS0001", root="1.1")
DOCUMENT = TypeAdapter(Document)


def every_kind_of_view() -> list[View]:
    """A view of each kind, with most of what a document can hold."""
    field = PromptField(name="amount", label="Amount", kind="integer", value=150)
    pending = card(
        quorum=2,
        approvals=(BOB,),
        grant_for=("1h", "1d"),
        editable=True,
        fields=(field,),
        requested_in=REQUEST,
        ask="ask-1",
    )
    edited = card(
        status="declined",
        decided_by=(BOB,),
        reason="not <now>",
        previous_args={"service": "web"},
        edited_by=BOB,
    )
    question = Prompt(
        run_id="run-2",
        tool_call_id="call-2",
        tool_name="schedule",
        agent_path=("desk", "tickets"),
        question="When?",
        fields=(field, PromptField(name="day", label="Day", kind="choice", choices=("mon",))),
        error="not a number",
    )
    return [
        pending,
        edited,
        question,
        CardPointer(card=pending, channel="C0APPROVE"),
        CardPointer(card=edited, people=(BOB,)),
        Notice(text="ran **under** a grant", to=ALICE, revoke=("run-1", "call-1")),
        Reply(text="# Done\n" + "x " * 4000, feedback="run-1"),
        Reply(text="First, a card.", stop="run-1"),
    ]


@pytest.mark.parametrize("view", every_kind_of_view(), ids=lambda view: view.kind)
def test_a_document_kept_as_json_draws_exactly_as_the_original(view: View) -> None:
    document = compose(view)
    kept = DOCUMENT.validate_json(DOCUMENT.dump_json(document))
    assert kept == document
    link = "https://fake.slack.com/archives/C0OPS0001/p11"
    assert draw(kept, link=link) == draw(document, link=link)
    assert draw(kept, link=link) == render(view, link=link)


def test_an_approvals_list_kept_as_json_draws_exactly_as_the_original() -> None:
    inbox = Inbox(
        person=BOB,
        waiting=(card(requested_in=REQUEST, quorum=2),),
        requested=(replace(card(requested_in=REQUEST), run_id="run-3"),),
        decided=(InboxDecision(tool_name="deploy", outcome="edited", at=EXPIRES, args={"a": 1}),),
        grants=2,
    )
    document = inbox_document(inbox, command="/approvals", note=("done",), kept_current=EXPIRES)
    kept = DOCUMENT.validate_json(DOCUMENT.dump_json(document))
    assert kept == document
    links = {(REQUEST.channel, REQUEST.root): "https://fake.slack.com/archives/C0OPS0001/p11"}

    def places(thread: ThreadKey) -> str | None:
        return links.get((thread.channel, thread.root))

    assert draw(kept, places=places) == draw(document, places=places)


def test_every_drawn_view_is_block_kit_slack_takes() -> None:
    for view in every_kind_of_view():
        for message in render(view, link="https://fake.slack.com/archives/C1/p1"):
            assert message.text
            assert all(_block_problem(block) is None for block in message.shown), view.kind


def test_a_name_with_a_backtick_stays_one_piece_of_code() -> None:
    (message,) = draw(Document(kind="notice", summary=("x",), title=(Code(text="a`b <c>"),)))
    title = message.blocks[0]["text"]["text"]
    assert title == "`a\u02cbb &lt;c&gt;`"
    assert title.count("`") == 2, "a backtick inside cannot close the code"
    assert "&lt;c&gt;" in title


def test_a_link_is_drawn_only_where_it_is_known_and_a_place_names_its_channel() -> None:
    line = Paragraph(text=("waits in ", Place(thread=REQUEST), " ", Link(words="(see the card)")))
    document = Document(kind="pointer", summary=("x",), body=(line,))
    (linked,) = draw(document, link="https://example.com/c?a=1&b=2")
    (unlinked,) = draw(document)
    assert linked.blocks[0]["text"]["text"] == (
        "waits in <#C0OPS0001> (<https://example.com/c?a=1&amp;b=2|open the request>) "
        "(<https://example.com/c?a=1&amp;b=2|see the card>)"
    )
    assert unlinked.blocks[0]["text"]["text"] == "waits in <#C0OPS0001>", "no dangling space"
