"""N-of-M approval: votes counted across clicks and replicas, one decision, one run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import BaseModel

from agents import (
    Agent,
    AgentOptions,
    MemoryStore,
    Store,
    ToolCall,
    ToolContext,
    open_store,
    tool,
)
from bot import ApprovalCard, ApprovalPolicy, ChatBot, Person, Prompt, Reply, ask_of
from tests.agents.helpers import Counter, call_then_answer

from .helpers import THREAD, RecordingMessenger, click, message, restart_agent, restart_requested

TWO_OF_THREE = """
[tools.restart_service]
approvers = ["U2", "U3", "U4"]
quorum = 2
"""
TWO_OF_FOUR = """
[tools.restart_service]
approvers = ["U2", "U3", "U4", "U5"]
quorum = 2
"""


async def started(
    ran: Counter, policy_toml: str = TWO_OF_THREE, store: Store | None = None
) -> tuple[ChatBot, RecordingMessenger, ApprovalCard]:
    """A bot whose thread shows a pending ``restart_service`` card requested by U1, under
    a quorum policy (two of three by default)."""
    return await restart_requested(ran, ApprovalPolicy.from_toml(policy_toml), store)


def shown(messenger: RecordingMessenger) -> ApprovalCard:
    """The card as people see it now: the last update, else as posted."""
    for _, _, view in reversed(messenger.updates):
        if isinstance(view, ApprovalCard):
            return view
    return messenger.views(ApprovalCard)[-1]


async def audit(bot: ChatBot, card: ApprovalCard) -> list[tuple[str, str | None]]:
    entries = await bot.store.list_audit(run_id=card.run_id)
    return [(e.event, e.actor) for e in entries]


async def waiting(bot: ChatBot) -> int:
    return len(await bot.agent.list_suspended_runs(thread_id=THREAD.id))


async def test_the_card_says_how_many_approvals_it_needs() -> None:
    _, _, card = await started(Counter())
    assert (card.status, card.quorum, card.approvals) == ("pending", 2, ())


async def test_a_first_approval_is_counted_on_the_card_and_runs_nothing() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran)
    requests = len(bot.agent.model.requests)  # type: ignore[attr-defined]

    result = await bot.on_click(click(card, user="U2"))

    assert result.accepted
    assert isinstance(result.card, ApprovalCard)
    assert (result.card.status, result.card.approvals, result.card.quorum) == (
        "pending",
        (Person(id="U2"),),
        2,
    )
    # Updated for everyone, right away, where the card was posted.
    assert messenger.updates == [(THREAD, messenger.ref_of(card), result.card)]
    await bot.drain()
    assert ran.count == 0
    assert await waiting(bot) == 1
    assert len(bot.agent.model.requests) == requests  # type: ignore[attr-defined]
    assert messenger.views(Reply) == [Reply(text="I'll restart api.", stop=card.run_id)]
    assert (await audit(bot, card))[-1] == ("voted", "U2")


async def test_approving_twice_is_refused_privately_and_changes_nothing() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran)
    await bot.on_click(click(card, user="U2"))
    before = (list(messenger.updates), await audit(bot, card))

    again = await bot.on_click(click(card, user="U2"))

    assert not again.accepted
    assert again.message == "You already approved; waiting for 1 more."
    await bot.drain()
    assert messenger.updates == before[0]
    assert await audit(bot, card) == [*before[1], ("refused", "U2")]  # on record, as refused
    assert shown(messenger).approvals == (Person(id="U2"),)
    assert ran.count == 0
    (pending,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    assert await bot.chat.votes(card.run_id, ask_of(pending)) == [Person(id="U2")]


async def test_the_vote_that_reaches_the_quorum_runs_the_tool_once() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran)
    await bot.on_click(click(card, user="U2"))

    final = await bot.on_click(click(card, user="U3"))

    assert final.accepted
    assert isinstance(final.card, ApprovalCard)
    both = (Person(id="U2"), Person(id="U3"))
    assert (final.card.status, final.card.approvals) == ("approved", both)
    assert final.card.decided_by == both
    await bot.drain()
    assert ran.calls == [{"service": "api"}]
    assert shown(messenger) == final.card
    assert [view.approvals for _, _, view in messenger.updates] == [  # type: ignore[union-attr]
        (Person(id="U2"),),
        both,
    ]
    assert messenger.views(Reply)[-1].text == "Done. restart_service ok: restarted api"
    assert await audit(bot, card) == [
        ("requested", None),
        ("shown", None),
        ("voted", "U2"),
        ("voted", "U3"),
        ("approved", "U2,U3"),
        ("executed", "U2,U3"),
    ]
    late = await bot.on_click(click(card, user="U4"))
    assert not late.accepted
    assert late.message == "This request was already approved by U2, U3."
    assert ran.count == 1


async def test_voters_are_named_by_display_name_when_known() -> None:
    bot, _, card = await started(Counter())
    await bot.on_click(replace(click(card, user="U2"), user_name="Grace"))
    final = await bot.on_click(replace(click(card, user="U3"), user_name="Linus"))
    assert isinstance(final.card, ApprovalCard)
    named = (Person(id="U2", name="Grace"), Person(id="U3", name="Linus"))
    assert final.card.approvals == named
    assert final.card.decided_by == named
    refused = await bot.on_click(click(card, user="U4"))
    assert refused.message == "This request was already approved by Grace, Linus."


async def test_one_decline_after_a_vote_declines_at_once() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran)
    await bot.on_click(click(card, user="U2"))

    declined = await bot.on_click(click(card, user="U4", action="decline", reason="not now"))

    assert declined.accepted
    assert isinstance(declined.card, ApprovalCard)
    assert (declined.card.status, declined.card.decided_by) == ("declined", (Person(id="U4"),))
    await bot.drain()
    assert ran.count == 0
    assert shown(messenger).status == "declined"
    assert "not approved by the user" in messenger.views(Reply)[-1].text
    refused = await bot.on_click(click(card, user="U3"))
    assert refused.message == "This request was already declined by U4."
    assert ran.count == 0


async def test_votes_follow_the_same_approver_rules() -> None:
    policy = TWO_OF_THREE + "allow_self_approval = false\n"
    bot, messenger, card = await started(Counter(), policy)
    outsider = await bot.on_click(click(card, user="U9"))
    requester = await bot.on_click(click(card, user="U1"))
    assert outsider.message == "You are not one of the approvers for `restart_service`."
    assert requester.message is not None
    assert "not one of the approvers" in requester.message
    assert messenger.updates == []
    assert await audit(bot, card) == [
        ("requested", None),
        ("shown", None),
        ("refused", "U9"),
        ("refused", "U1"),
    ]


async def test_three_approvers_racing_for_the_last_slot_decide_once() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran, TWO_OF_FOUR)
    (pending,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    await bot.on_click(click(card, user="U2"))

    results = await asyncio.gather(
        *(bot.on_click(click(card, user=user)) for user in ("U3", "U4", "U5"))
    )
    await bot.drain()

    (winner,) = [r for r in results if r.accepted]
    assert isinstance(winner.card, ApprovalCard)
    assert winner.card.status == "approved"
    (second,) = (v.id for v in winner.card.approvals if v.id != "U2")
    for loser in (r for r in results if not r.accepted):
        assert loser.message == f"This request was already approved by U2, {second}."
    assert ran.count == 1
    assert shown(messenger).status == "approved"
    assert [a for e, a in await audit(bot, card) if e in ("voted", "approved")] == [
        "U2",
        second,
        f"U2,{second}",
    ]
    stored = await bot.chat.votes(card.run_id, ask_of(pending))
    assert stored == [Person(id="U2"), Person(id=second)]


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The in-process store, and one whose every operation really waits on I/O."""
    opened = (
        MemoryStore() if request.param == "memory" else open_store(f"sqlite:///{tmp_path}/b.db")
    )
    yield opened
    await opened.close()


async def test_simultaneous_approvals_count_once_each_and_decide_once(store: Store) -> None:
    ran = Counter()
    bot, messenger, card = await started(ran, TWO_OF_FOUR, store)

    results = await asyncio.gather(
        *(bot.on_click(click(card, user=user)) for user in ("U2", "U3", "U4", "U5"))
    )
    await bot.drain()

    accepted = [r.card for r in results if r.accepted and isinstance(r.card, ApprovalCard)]
    assert sorted(c.status for c in accepted) == ["approved", "pending"]
    assert ran.count == 1
    assert shown(messenger).status == "approved"
    events = [e for e, _ in await audit(bot, card)]
    assert events == ["requested", "shown", "voted", "voted", "approved", "executed"]
    refusals = [r.message or "" for r in results if not r.accepted]
    assert len(refusals) == 2
    assert all(m.startswith("This request was already approved by") for m in refusals)
    await bot.aclose()


async def test_a_double_click_on_two_replicas_is_one_vote_and_one_refusal_on_record(
    store: Store,
) -> None:
    ran = Counter()
    one, _, card = await started(ran, TWO_OF_THREE, store)
    two = ChatBot(
        restart_agent(ran, store), policy=ApprovalPolicy.from_toml(TWO_OF_THREE), chat=one.chat
    )
    two.register("test", RecordingMessenger())
    # However the two clicks meet (one after the other, or both past the first look
    # and one found late under the card's lock): one vote, one refusal, on record.
    await asyncio.gather(one.on_click(click(card, user="U2")), two.on_click(click(card, user="U2")))
    await one.drain()
    await two.drain()
    assert sorted((await audit(one, card))[-2:]) == [("refused", "U2"), ("voted", "U2")]
    assert ran.count == 0
    await two.aclose()
    await one.aclose()


async def test_votes_on_two_replicas_count_together() -> None:
    ran = Counter()
    store = MemoryStore()
    one, messenger, card = await started(ran, TWO_OF_THREE, store)
    # A second replica: the same store and the same chat state, as on one Redis.
    two = ChatBot(
        restart_agent(ran, store), policy=ApprovalPolicy.from_toml(TWO_OF_THREE), chat=one.chat
    )
    other = RecordingMessenger()
    two.register("test", other)

    first = await one.on_click(replace(click(card, user="U2"), user_name="Grace"))
    again = await two.on_click(click(card, user="U2"))
    final = await two.on_click(click(card, user="U3"))
    await one.drain()
    await two.drain()

    assert first.accepted
    assert shown(messenger).approvals == (Person(id="U2", name="Grace"),)
    assert again.message == "You already approved; waiting for 1 more."
    assert isinstance(final.card, ApprovalCard)
    # The second replica never saw Grace click, yet names her: the vote remembers.
    assert final.card.approvals == (Person(id="U2", name="Grace"), Person(id="U3"))
    assert shown(other) == final.card
    assert ran.count == 1


async def test_a_card_with_some_votes_still_expires() -> None:
    ran = Counter()
    policy = TWO_OF_THREE + 'expires_in = "30m"\n'
    bot, messenger, card = await started(ran, policy)
    await bot.on_click(click(card, user="U2"))

    assert await bot.sweep_expired(now=card.expires_at + timedelta(seconds=1)) == 1
    await bot.drain()

    assert shown(messenger).status == "expired"
    refused = await bot.on_click(click(card, user="U3"))
    assert refused.message == "This request expired; nothing was run."
    assert ran.count == 0


async def test_a_quorum_of_one_decides_on_the_first_click_as_before() -> None:
    ran = Counter()
    policy = '[tools.restart_service]\napprovers = ["U2", "U3"]\nquorum = 1\n'
    bot, _, card = await started(ran, policy)
    assert (card.quorum, card.approvals) == (1, ())
    result = await bot.on_click(click(card, user="U2"))
    assert isinstance(result.card, ApprovalCard)
    assert (result.card.status, result.card.decided_by, result.card.approvals) == (
        "approved",
        (Person(id="U2"),),
        (),
    )
    await bot.drain()
    assert ran.count == 1
    assert "voted" not in [e for e, _ in await audit(bot, card)]


def regional_restart(ran: list[str]) -> Agent:
    """``restart`` (always gated) asks for a region after its approval when none is given."""

    class Region(BaseModel):
        region: str

    @tool(require_approval=True, resume_schema=Region)
    def restart_service(ctx: ToolContext, service: str, region: str = "") -> str:
        """Restart a service in a region."""
        if not region:
            ctx.suspend({"message": "Which region?"})
        ran.append(region)
        return f"restarted {service} in {region}"

    model = call_then_answer(ToolCall("restart_service", {"service": "api"}))
    return Agent(
        id="ops",
        model=model,
        tools=[restart_service],
        default_options=AgentOptions(auto_resume_suspended_tools=True),
    )


async def test_votes_for_one_version_of_a_call_do_not_approve_a_changed_one() -> None:
    ran: list[str] = []
    bot = ChatBot(regional_restart(ran), policy=ApprovalPolicy.from_toml(TWO_OF_THREE))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("restart the api"))
    await bot.drain()
    (first,) = messenger.views(ApprovalCard)
    await bot.on_click(click(first, user="U2"))
    assert (await bot.on_click(click(first, user="U3"))).accepted
    await bot.drain()
    assert messenger.views(Prompt)[-1].question == "Which region?"

    await bot.on_message(message("eu-west"))  # changes what the approval was for
    await bot.drain()
    second = messenger.views(ApprovalCard)[-1]
    assert second.args == {"service": "api", "region": "eu-west"}
    assert second.approvals == ()

    one = await bot.on_click(click(second, user="U4"))
    assert isinstance(one.card, ApprovalCard)
    assert (one.card.status, one.card.approvals) == ("pending", (Person(id="U4"),))
    assert ran == []
    done = await bot.on_click(click(second, user="U2"))
    assert isinstance(done.card, ApprovalCard)
    assert done.card.status == "approved"
    await bot.drain()
    assert ran == ["eu-west"]


async def test_a_card_you_already_approved_no_longer_waits_for_you() -> None:
    bot, _, card = await started(Counter())
    assert [c.tool_call_id for c in (await bot.inbox(THREAD, "U2")).waiting] == [card.tool_call_id]
    await bot.on_click(click(card, user="U2"))
    assert (await bot.inbox(THREAD, "U2")).waiting == ()
    # It still waits for the others.
    assert len((await bot.inbox(THREAD, "U3")).waiting) == 1
