"""Where cards go: an approvers' channel or each approver's direct messages, with a
pointer in the requester's thread; approvers named by user group; the inbox
(``/approvals``) and ending grants. Every copy decides the same call, once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot import (
    ApprovalCard,
    ApprovalPolicy,
    CardPointer,
    ChatBot,
    Click,
    ClickAction,
    Destination,
    Notice,
    Person,
    PolicyError,
    Posted,
    ThreadKey,
    texts,
)

from .helpers import OTHER_THREAD, THREAD, RecordingMessenger, message, refund_agent

CHANNEL = '[tools.refund]\napprovers = ["U2", "U3"]\nchannel = "C0APPROVERS"\n'
DIRECT = '[tools.refund]\napprovers = ["U2", "U3"]\nnotify = "dm"\n'


def wired(policy: str, **messenger: Any) -> tuple[ChatBot, RecordingMessenger, list[str]]:
    ran: list[str] = []
    bot = ChatBot(refund_agent(ran), policy=ApprovalPolicy.from_toml(policy))
    recording = RecordingMessenger(channels={"C0APPROVERS"}, **messenger)
    bot.register("test", recording)
    return bot, recording, ran


async def ask(bot: ChatBot, text: str, *, user: str = "U1", thread: ThreadKey = THREAD) -> None:
    await bot.on_message(message(text, user=user, thread=thread))
    await bot.drain()


def on(copy: tuple[Destination, Any, Posted], user: str, action: ClickAction = "approve") -> Click:
    """A click on a card copy, where it was posted (its buttons carry the ask)."""
    _, card, posted = copy
    assert isinstance(card, ApprovalCard)
    return Click(
        thread=posted.thread,
        user_id=user,
        run_id=card.run_id,
        tool_call_id=card.tool_call_id,
        action=action,
        message_ref=posted.ref,
        ask=card.ask,
    )


def press(
    card: ApprovalCard,
    user: str,
    action: ClickAction = "approve",
    *,
    thread: ThreadKey = THREAD,
    ask: str | None = "",
    grant_for: str | None = None,
) -> Click:
    """A click on ``card`` by ``user`` in ``thread``; its ask is the card's unless given."""
    return Click(
        thread=thread,
        user_id=user,
        run_id=card.run_id,
        tool_call_id=card.tool_call_id,
        action=action,
        ask=card.ask if ask == "" else ask,
        grant_for=grant_for,
    )


def shown_at(messenger: RecordingMessenger, thread: ThreadKey) -> list[Any]:
    return [view for t, _, view in messenger.updates if t == thread]


async def test_a_card_for_a_channel_goes_there_with_a_pointer_in_the_thread() -> None:
    bot, messenger, ran = wired(CHANNEL)
    await ask(bot, "A-1")

    (copy,) = messenger.elsewhere
    to, card, posted = copy
    assert to == Destination(channel="C0APPROVERS")
    assert isinstance(card, ApprovalCard)
    assert card.requested_in == THREAD
    assert messenger.views(ApprovalCard, THREAD) == []  # not in the thread itself
    (pointer,) = messenger.views(CardPointer, THREAD)
    assert pointer.channel == "C0APPROVERS"
    assert pointer.at == posted

    decided = await bot.on_click(on(copy, "U2"))
    assert decided.accepted
    assert isinstance(decided.card, ApprovalCard)
    assert decided.card.requested_in == THREAD  # shown where it was clicked
    await bot.drain()
    assert ran == ["A-1"]
    (in_channel,) = shown_at(messenger, posted.thread)
    assert in_channel.status == "approved"
    assert in_channel.decided_by == (Person(id="U2"),)
    (updated,) = shown_at(messenger, THREAD)
    assert isinstance(updated, CardPointer)
    assert updated.card.status == "approved"
    # The answer is the requester's: it comes in their thread.
    assert [t for t, view, _ in messenger.posts if getattr(view, "text", "") == "Done."] == [THREAD]

    again = await bot.on_click(on(copy, "U3"))
    assert not again.accepted
    assert again.message == "This request was already approved by U2."
    assert ran == ["A-1"]


async def test_replies_under_a_card_in_the_channel_are_not_for_the_bot() -> None:
    bot, messenger, _ = wired(CHANNEL)
    await ask(bot, "A-1")
    (_, _, posted) = messenger.elsewhere[0]
    assert not await bot.following.follows(posted.thread)


async def test_direct_messages_go_to_each_approver_and_one_decides_for_all() -> None:
    bot, messenger, ran = wired(DIRECT)
    await ask(bot, "A-2")

    assert [to.user_id for to, _, _ in messenger.elsewhere] == ["U2", "U3"]
    (pointer,) = messenger.views(CardPointer, THREAD)
    assert pointer.people == (Person(id="U2"), Person(id="U3"))
    assert pointer.channel is None

    declined = await bot.on_click(on(messenger.elsewhere[1], "U3", "decline"))
    assert declined.accepted
    await bot.drain()
    assert ran == []
    for _, _, posted in messenger.elsewhere:
        (copy,) = shown_at(messenger, posted.thread)
        assert copy.status == "declined"
        assert copy.requested_in == THREAD
    (updated,) = shown_at(messenger, THREAD)
    assert isinstance(updated, CardPointer)
    assert updated.card.status == "declined"


async def test_without_direct_messages_the_card_stays_in_the_thread() -> None:
    bot, messenger, _ = wired(DIRECT, places=False)
    await ask(bot, "A-3")
    (card,) = messenger.views(ApprovalCard, THREAD)
    assert card.status == "pending"
    assert messenger.views(CardPointer) == []


async def test_a_channel_the_platform_does_not_know_keeps_the_card_in_the_thread() -> None:
    bot, messenger, _ = wired(CHANNEL.replace("C0APPROVERS", "C0ELSEWHERE"))
    await ask(bot, "A-4")
    assert messenger.elsewhere == []
    assert len(messenger.views(ApprovalCard, THREAD)) == 1


async def test_a_click_on_a_copy_of_an_earlier_ask_or_another_workspace_decides_nothing() -> None:
    bot, messenger, ran = wired(CHANNEL)
    await ask(bot, "A-5")
    copy = messenger.elsewhere[0]
    stale = replace(on(copy, "U2"), ask="call@2000-01-01T00:00:00+00:00")
    refused = await bot.on_click(stale)
    assert not refused.accepted
    assert "out of date" in (refused.message or "")

    _, _, posted = copy
    foreign = replace(posted.thread, workspace="W2")
    elsewhere = await bot.on_click(replace(on(copy, "U2"), thread=foreign))
    assert not elsewhere.accepted
    unknown = await bot.on_click(replace(on(copy, "U2"), ask=None, message_ref={"ts": "x"}))
    assert unknown.message == "This card does not belong to this conversation."
    await bot.drain()
    assert ran == []


async def test_the_policy_still_decides_who_may_click_a_copy() -> None:
    bot, messenger, ran = wired(CHANNEL)
    await ask(bot, "A-6")
    refused = await bot.on_click(on(messenger.elsewhere[0], "U7"))
    assert not refused.accepted
    assert "approver" in (refused.message or "")
    await bot.drain()
    assert ran == []


async def test_a_reminder_for_a_card_in_a_channel_goes_under_the_card() -> None:
    policy = CHANNEL + 'remind_after = "10m"\n'
    bot, messenger, _ = wired(policy)
    await ask(bot, "A-7")
    _, _, posted = messenger.elsewhere[0]
    later = datetime.now(UTC) + timedelta(minutes=11)
    assert await bot.send_reminders(later) == 1
    (reminder,) = messenger.views(Notice, posted.thread)
    assert reminder.people == (Person(id="U2"), Person(id="U3"))
    assert messenger.views(Notice, THREAD) == []


async def test_an_escalation_sends_the_card_to_the_added_people_directly() -> None:
    policy = DIRECT + 'escalate_after = "1h"\nescalate_to = ["U9"]\n'
    bot, messenger, _ = wired(policy)
    await ask(bot, "A-8")
    later = datetime.now(UTC) + timedelta(hours=2)
    assert await bot.send_reminders(later) == 1
    assert [to.user_id for to, _, _ in messenger.elsewhere] == ["U2", "U3", "U9"]
    _, _, posted = messenger.elsewhere[2]
    (told,) = messenger.views(Notice, posted.thread)
    assert told.people == (Person(id="U9"),)
    (pointer,) = [view for t, _, view in messenger.updates if t == THREAD]
    assert isinstance(pointer, CardPointer)
    assert Person(id="U9") in pointer.people


# -- user groups --------------------------------------------------------------


async def test_members_of_a_group_may_approve_and_others_may_not() -> None:
    policy = '[tools.refund]\napprovers = ["S0LEADS"]\n'
    bot, messenger, ran = wired(policy, groups={"S0LEADS": frozenset({"U5"})})
    await ask(bot, "A-9")
    (card,) = messenger.views(ApprovalCard)
    click = press(card, "U6")
    refused = await bot.on_click(click)
    assert not refused.accepted
    assert (await bot.on_click(replace(click, user_id="U5"))).accepted
    await bot.drain()
    assert ran == ["A-9"]
    assert messenger.group_lookups == 1  # kept for a while, not asked on every click


async def test_direct_messages_go_to_a_groups_members() -> None:
    policy = '[tools.refund]\napprovers = ["@leads"]\nnotify = "dm"\n'
    bot, messenger, _ = wired(policy, groups={"@leads": frozenset({"U5", "U6"})})
    await ask(bot, "A-10")
    assert sorted(to.user_id or "" for to, _, _ in messenger.elsewhere) == ["U5", "U6"]


async def test_a_group_that_cannot_be_looked_up_lets_nobody_decide() -> None:
    policy = '[tools.refund]\napprovers = ["S0GONE"]\n'
    bot, messenger, ran = wired(policy)
    await ask(bot, "A-11")
    (card,) = messenger.views(ApprovalCard)
    click = press(card, "U5", ask=None)
    assert not (await bot.on_click(click)).accepted
    await bot.drain()
    assert ran == []


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        ('[tools.refund]\nchannel = "C0NOWHERE"\n', "'C0NOWHERE' is no channel"),
        ('[tools.refund]\napprovers = ["@nobody"]\n', "'@nobody' is no user group"),
        ('[default]\napprovers = ["S0GONE"]\n', "'S0GONE' is no user group"),
    ],
)
async def test_a_policy_naming_an_unknown_channel_or_group_stops_the_bot(
    policy: str, named: str
) -> None:
    bot, _, _ = wired(policy)
    with pytest.raises(PolicyError) as info:
        await bot.check_places()
    assert named in str(info.value)


async def test_known_channels_and_groups_pass_the_start_check() -> None:
    policy = '[tools.refund]\napprovers = ["@leads", "U1"]\nchannel = "C0APPROVERS"\n'
    bot, _, _ = wired(policy, groups={"@leads": frozenset({"U5"})})
    await bot.check_places()


def test_a_section_may_not_send_cards_both_to_a_channel_and_by_direct_message() -> None:
    with pytest.raises(PolicyError, match="choose one"):
        ApprovalPolicy.from_toml(DIRECT + 'channel = "C0APPROVERS"\n')
    with pytest.raises(PolicyError, match="needs approvers"):
        ApprovalPolicy.from_toml('[tools.refund]\nnotify = "dm"\n')


def test_a_tools_own_section_decides_where_its_cards_go() -> None:
    policy = ApprovalPolicy.from_toml(
        '[default]\napprovers = ["U2"]\nchannel = "C0APPROVERS"\n'
        '[tools.refund]\nnotify = "dm"\n[tools.ship]\nnotify = "thread"\n'
    )
    assert policy.rule("refund").notify == "dm"
    assert policy.rule("refund").channels == ()
    assert policy.rule("ship").channels == ()
    assert policy.rule("other").channels == ("C0APPROVERS",)


# -- the inbox ----------------------------------------------------------------


async def test_recent_decisions_are_kept_per_person_newest_first_without_the_audit_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bot, _, ran = wired('[tools.refund]\napprovers = ["U2"]\nsensitive = true\n')
    for i in range(12):
        await ask(bot, f"B-{i}")
        (card,) = (await bot.inbox(THREAD, "U2")).waiting
        assert (await bot.on_click(press(card, "U2"))).accepted
        await bot.drain()
    assert len(ran) == 12

    async def no_scan(**_: Any) -> list[Any]:
        raise AssertionError("the inbox must not read the whole audit log")

    monkeypatch.setattr(bot.store, "list_audit", no_scan)
    decided = (await bot.inbox(THREAD, "U2")).decided
    assert len(decided) == 10  # the newest ten
    assert [d.outcome for d in decided] == ["approved"] * 10
    assert [d.at for d in decided] == sorted((d.at for d in decided), reverse=True)
    assert all(d.args == {} for d in decided)  # a sensitive tool's arguments stay out
    assert (await bot.inbox(THREAD, "U1")).decided == ()  # the requester decided nothing


async def test_the_inbox_lists_what_waits_for_a_person_and_its_buttons_decide() -> None:
    bot, messenger, ran = wired('[tools.refund]\napprovers = ["U2"]\n')
    await ask(bot, "B-1", thread=THREAD)
    await ask(bot, "B-2", user="U3", thread=OTHER_THREAD)

    mine = await bot.inbox(THREAD, "U2", "Dana")
    assert [card.args for card in mine.waiting] == [{"order": "B-1"}, {"order": "B-2"}]
    assert [card.requested_in for card in mine.waiting] == [THREAD, OTHER_THREAD]
    assert mine.person == Person(id="U2", name="Dana")
    theirs = await bot.inbox(THREAD, "U3")
    assert theirs.waiting == ()
    assert [c.args for c in theirs.requested] == [{"order": "B-2"}]

    # Approve from the inbox, shown in a third place (a DM with the bot, say).
    where = ThreadKey(platform="test", workspace="W1", channel="D-U2", root="inbox")
    card = mine.waiting[1]
    click = press(card, "U2", thread=where)
    assert (await bot.on_click(click)).accepted
    await bot.drain()
    assert ran == ["B-2"]
    (in_thread,) = shown_at(messenger, OTHER_THREAD)
    assert in_thread.status == "approved"  # the card in its own thread shows it

    later = await bot.inbox(THREAD, "U2")
    assert [c.args for c in later.waiting] == [{"order": "B-1"}]
    assert [(d.outcome, d.args) for d in later.decided] == [("approved", {"order": "B-2"})]
    other_workspace = replace(THREAD, workspace="W2")
    assert (await bot.inbox(other_workspace, "U2")).waiting == ()


async def test_grants_end_from_their_notice_or_all_at_once() -> None:
    bot, messenger, ran = wired('[tools.refund]\napprovers = ["U2"]\ngrant_for = ["1h"]\n')
    await ask(bot, "C-1")
    (card,) = messenger.views(ApprovalCard)
    granted = press(card, "U2", "grant", ask=None, grant_for="1h")
    assert (await bot.on_click(granted)).accepted
    await bot.drain()
    await ask(bot, "C-2")  # runs under the grant
    assert ran == ["C-1", "C-2"]
    (notice,) = [n for n in messenger.views(Notice) if n.revoke is not None]
    assert (await bot.inbox(THREAD, "U2")).grants == 1

    assert notice.revoke is not None
    run_id, call_id = notice.revoke
    end = Click(thread=THREAD, user_id="U7", run_id=run_id, tool_call_id=call_id, action="revoke")
    refused = await bot.on_click(end)  # neither requester, granter nor approver
    assert not refused.accepted
    assert "Only the requester" in (refused.message or "")
    no = [e for e in await bot.agent.audit(run_id=run_id) if e.event == "refused"]
    assert [(e.actor, e.tool_name, e.requester) for e in no] == [("U7", "refund", "U1")]
    assert "Only the requester" in (no[0].reason or "")
    assert (await bot.on_click(replace(end, user_id="U1"))).accepted
    assert "ended the grant for `refund`" in messenger.views(Notice)[-1].text
    again = await bot.on_click(replace(end, user_id="U1"))
    assert not again.accepted
    assert "ended already" in (again.message or "")

    await ask(bot, "C-3")  # asks again
    assert ran == ["C-1", "C-2"]
    assert len(messenger.views(ApprovalCard)) == 2

    assert (await bot.revoke_given(THREAD, "U2")) == (texts.NO_GRANTS_GIVEN,)
    (second,) = messenger.views(ApprovalCard)[1:]
    again_granted = replace(granted, run_id=second.run_id, tool_call_id=second.tool_call_id)
    assert (await bot.on_click(again_granted)).accepted
    await bot.drain()
    said = await bot.revoke_given(THREAD, "U2")
    assert said == (texts.GRANTS_GIVEN_ENDED.format(count=1),)
    assert (await bot.inbox(THREAD, "U2")).grants == 0


async def test_a_platform_refusing_to_say_who_is_in_a_group_is_a_clear_start_problem() -> None:
    bot, messenger, _ = wired('[tools.refund]\napprovers = ["S0LEADS"]\n')

    async def refusing(name: str) -> frozenset[str] | None:
        raise RuntimeError("missing_scope")

    messenger.group_members = refusing  # type: ignore[method-assign]
    with pytest.raises(PolicyError) as info:
        await bot.check_places()
    assert info.value.lines == [
        "approval policy <string>: approvers: test could not be asked about 'S0LEADS': "
        "missing_scope"
    ]


async def test_the_inbox_reads_only_what_is_indexed_for_its_reader_and_prunes_it() -> None:
    bot, _, _ = wired(
        '[tools.refund]\napprovers = ["S0LEADS"]\n', groups={"S0LEADS": frozenset({"U5"})}
    )
    await ask(bot, "D-1", user="U1")
    scope = "test:W1:"
    assert await bot.chat.waiting_for(scope, ["S0LEADS"]) != set()
    lead = await bot.inbox(THREAD, "U5")  # a member of the group the policy names
    (card,) = lead.waiting
    assert card.args == {"order": "D-1"}
    assert (await bot.inbox(THREAD, "U6")).waiting == ()  # not in the group
    decide = press(card, "U5")
    assert (await bot.on_click(decide)).accepted
    await bot.drain()
    assert (await bot.inbox(THREAD, "U5")).waiting == ()
    # Decided: pruned from the index under the names that inbox read.
    assert await bot.chat.waiting_for(scope, ["S0LEADS", "U5", "*", "asked:U5"]) == set()


# -- a card drawn again -----------------------------------------------------------


async def test_a_card_opened_again_reads_as_it_is_now_for_anyone() -> None:
    bot, messenger, _ = wired('[tools.refund]\napprovers = ["U2", "U3"]\n')
    await ask(bot, "E-1")
    (card,) = messenger.views(ApprovalCard)
    assert card.deciders == ("U2", "U3")
    looking = press(card, "U9", ask=None)
    now = await bot.card_now(looking)
    assert now is not None
    assert now.status == "pending"
    assert now.deciders == ("U2", "U3")

    decline = replace(looking, user_id="U3", action="decline", reason="not today")
    assert (await bot.on_click(decline)).accepted
    await bot.drain()
    later = await bot.card_now(looking)
    assert later is not None
    assert later.status == "declined"
    assert later.decided_by == (Person(id="U3"),)
    assert later.reason == "not today"
    assert later.args == {"order": "E-1"}
    assert later.deciders == ()

    elsewhere = replace(looking, thread=replace(THREAD, channel="D-U9", root="x"))
    shown_elsewhere = await bot.card_now(elsewhere)
    assert shown_elsewhere is not None
    assert shown_elsewhere.requested_in == THREAD
    assert await bot.card_now(replace(looking, thread=replace(THREAD, workspace="W2"))) is None
    assert await bot.card_now(replace(looking, run_id="run-unknown")) is None


async def test_the_platform_hears_whose_inboxes_a_call_changes() -> None:
    bot, messenger, _ = wired(
        '[tools.refund]\napprovers = ["S0LEADS", "U2"]\n', groups={"S0LEADS": frozenset({"U5"})}
    )
    await ask(bot, "F-1", user="U1")
    asked = frozenset({"U1", "U2", "U5"})
    assert [people for _, people in messenger.inbox_changes] == [asked]  # asked
    (card,) = messenger.views(ApprovalCard)
    decide = press(card, "U2")
    assert (await bot.on_click(decide)).accepted
    await bot.drain()
    assert [people for _, people in messenger.inbox_changes][1:] == [asked]  # decided
