"""Approval cards: posting, clicking, policy, double clicks and foreign threads."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from agents import (
    Agent,
    AgentOptions,
    AuditEntry,
    MemoryStore,
    RunSnapshot,
    StoreConflict,
    ToolCall,
    tool,
)
from agents._decide import CLAIM_TRIES
from agents.stores import Remember
from bot import ApprovalCard, ApprovalPolicy, CardPlace, ChatBot, Notice, Person, Reply, ask_of
from tests.agents.helpers import Counter, call_then_answer, last_results

from .helpers import (
    OTHER_THREAD,
    THREAD,
    RecordingMessenger,
    click,
    message,
    restart_agent,
    restart_requested,
)

started = restart_requested


async def test_a_message_posts_an_approval_card_and_remembers_where() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran)
    assert card.status == "pending"
    assert card.tool_name == "restart_service"
    assert card.args == {"service": "api"}
    assert card.requester == Person(id="U1")
    assert card.agent_path == ("ops",)
    (pending,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    assert card.expires_at == pending.expires_at
    place = await bot.chat.card_of(pending.run_id, ask_of(pending))
    assert place == CardPlace(thread=THREAD, ref=messenger.ref_of(card))
    assert ran.count == 0


async def test_the_text_before_a_card_is_posted_above_it() -> None:
    _, messenger, card = await started(Counter())
    views = [view for _, view, _ in messenger.posts]
    # It offers to stop the run that waits for the card.
    assert views == [Reply(text="I'll restart api.", stop=card.run_id), card]


async def test_the_status_shows_while_the_agent_works() -> None:
    _, messenger, _ = await started(Counter())
    assert [status for _, status in messenger.statuses] == ["is thinking…", None]


async def test_approving_decides_at_once_updates_the_card_and_posts_the_answer() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran)
    result = await bot.on_click(click(card, user="U2"))
    assert result.accepted
    assert isinstance(result.card, ApprovalCard)
    assert (result.card.status, result.card.decided_by) == ("approved", (Person(id="U2"),))
    # Decided before returning: the call no longer waits, even before the work ran.
    assert await bot.agent.list_suspended_runs(thread_id=THREAD.id) == []
    await bot.drain()
    assert messenger.updates == [(THREAD, messenger.ref_of(card), result.card)]
    assert ran.calls == [{"service": "api"}]
    assert messenger.views(Reply)[-1].text == "Done. restart_service ok: restarted api"


async def test_a_click_on_a_message_that_is_not_the_newest_card_decides_nothing() -> None:
    # Say the call was asked again with other arguments: only its newest card
    # may decide, never an older one that still shows the old arguments.
    ran = Counter()
    bot, messenger, card = await started(ran)
    result = await bot.on_click(click(card, ref={"channel": "C1", "ts": "an-older-card"}))
    assert not result.accepted
    assert result.message == (
        "This card is out of date: the request changed since it was posted. "
        "Use its newest card in the thread."
    )
    await bot.drain()
    assert messenger.updates == []
    assert ran.count == 0
    assert (await bot.on_click(click(card, ref=messenger.ref_of(card)))).accepted


async def test_declining_carries_the_reason_and_the_tool_never_runs() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran)
    result = await bot.on_click(click(card, action="decline", reason="  not during the demo "))
    assert result.accepted
    assert isinstance(result.card, ApprovalCard)
    assert result.card.status == "declined"
    assert result.card.reason == "not during the demo"
    await bot.drain()
    assert ran.count == 0
    answer = messenger.views(Reply)[-1].text
    assert "not approved by the user" in answer
    assert "not during the demo" in answer


async def test_a_click_by_someone_the_policy_excludes_changes_nothing() -> None:
    ran = Counter()
    policy = ApprovalPolicy.from_toml('[tools.restart_service]\napprovers = ["U9"]')
    bot, messenger, card = await started(ran, policy)
    refused = await bot.on_click(click(card, user="U2"))
    assert not refused.accepted
    assert refused.message == "You are not one of the approvers for `restart_service`."
    await bot.drain()
    assert messenger.updates == []
    assert messenger.tells == []
    assert len(await bot.agent.list_suspended_runs(thread_id=THREAD.id)) == 1
    assert (await bot.on_click(click(card, user="U9"))).accepted
    await bot.drain()
    assert ran.count == 1


async def test_self_approval_can_be_forbidden_but_withdrawing_is_allowed() -> None:
    policy = ApprovalPolicy.from_toml("[default]\nallow_self_approval = false")
    bot, _, card = await started(Counter(), policy)
    refused = await bot.on_click(click(card, user="U1"))
    assert not refused.accepted
    assert refused.message is not None
    assert "someone else has to approve" in refused.message
    assert (await bot.on_click(click(card, user="U1", action="decline"))).accepted


async def test_a_second_click_is_refused_naming_who_decided_and_the_tool_runs_once() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran)
    assert (await bot.on_click(click(card, user="U2"))).accepted
    while_running = await bot.on_click(click(card, user="U3", action="decline"))
    await bot.drain()
    after = await bot.on_click(click(card, user="U3"))
    for refused in (while_running, after):
        assert not refused.accepted
        assert refused.message == "This request was already approved by U2."
    assert ran.count == 1
    assert len(messenger.updates) == 1


async def test_simultaneous_clicks_make_exactly_one_decision() -> None:
    ran = Counter()
    bot, _, card = await started(ran)
    results = await asyncio.gather(*(bot.on_click(click(card, user=f"U{n}")) for n in range(2, 7)))
    await bot.drain()
    assert sum(r.accepted for r in results) == 1
    assert ran.count == 1


async def test_the_decider_is_named_by_display_name_when_known() -> None:
    bot, _, card = await started(Counter())
    await bot.on_click(replace(click(card, user="U2"), user_name="Grace"))
    refused = await bot.on_click(click(card, user="U3"))
    assert refused.message == "This request was already approved by Grace."


async def test_a_card_clicked_from_another_thread_is_refused() -> None:
    ran = Counter()
    bot, messenger, card = await started(ran)
    refused = await bot.on_click(click(card, thread=OTHER_THREAD))
    assert not refused.accepted
    assert refused.message == "This card does not belong to this conversation."
    assert len(await bot.agent.list_suspended_runs(thread_id=THREAD.id)) == 1
    await bot.drain()
    assert ran.count == 0
    assert messenger.updates == []


async def test_a_click_on_an_unknown_run_is_refused() -> None:
    bot, _, card = await started(Counter())
    refused = await bot.on_click(replace(click(card), run_id="run_nope"))
    assert not refused.accepted
    assert refused.message == "This request no longer exists, so there is nothing to decide."


async def test_a_message_while_an_approval_waits_points_at_the_card() -> None:
    ran = Counter()
    bot, messenger, _card = await started(ran)
    requests = len(bot.agent.model.requests)  # type: ignore[attr-defined]
    await bot.on_message(message("approve", user="U2"))
    await bot.drain()
    (notice,) = messenger.views(Notice)
    assert "`restart_service`" in notice.text
    assert "card" in notice.text
    assert ran.count == 0
    assert len(bot.agent.model.requests) == requests  # type: ignore[attr-defined]
    assert len(await bot.agent.list_suspended_runs(thread_id=THREAD.id)) == 1


async def test_a_sub_agents_approval_surfaces_with_its_path_and_resumes_the_supervisor() -> None:
    ran = Counter()

    @tool(require_approval=True)
    def delete_record(record_id: str) -> str:
        """Delete a record."""
        ran(record_id=record_id)
        return f"deleted {record_id}"

    records = Agent(
        id="records",
        description="Records.",
        model=call_then_answer(ToolCall("delete_record", {"record_id": "abc"})),
        tools=[delete_record],
    )
    ops = Agent(
        id="ops",
        model=call_then_answer(
            ToolCall("agent-records", {"task": "delete abc"}),
            answer=lambda m: "ops: " + last_results(m)[0].content,
        ),
        agents={"records": records},
        store=MemoryStore(),
    )
    bot = ChatBot(ops)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("delete record abc"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    assert card.agent_path == ("ops", "records")
    assert card.tool_name == "delete_record"
    assert (await bot.on_click(click(card))).accepted
    await bot.drain()
    assert ran.count == 1
    assert messenger.views(Reply)[-1].text.startswith("ops: ")


async def test_the_policys_expiry_is_the_runtimes_so_the_sweep_expires_the_card() -> None:
    policy = ApprovalPolicy.from_toml('[tools.restart_service]\nexpires_in = "30m"')
    bot, messenger, card = await started(Counter(), policy)
    (pending,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    assert pending.expires_at == pending.created_at + timedelta(minutes=30)
    assert card.expires_at == pending.expires_at
    assert await bot.sweep_expired(now=pending.expires_at + timedelta(seconds=1)) == 1
    await bot.drain()
    ((_, _, updated),) = messenger.updates
    assert isinstance(updated, ApprovalCard)
    assert updated.status == "expired"
    assert await bot.agent.list_suspended_runs(thread_id=THREAD.id) == []
    refused = await bot.on_click(click(card))
    assert not refused.accepted
    assert refused.message == "This request expired; nothing was run."


async def test_the_runtime_expiry_is_kept_when_the_policy_sets_none() -> None:
    bot = ChatBot(
        restart_agent(Counter(), default_options=AgentOptions(approval_ttl=timedelta(hours=2)))
    )
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("restart"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    (pending,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    assert card.expires_at == pending.created_at + timedelta(hours=2)


class RacedStore(MemoryStore):
    """A store on which another writer slips in: the next save of a run conflicts."""

    def __init__(self) -> None:
        super().__init__()
        self.conflicts = 0

    async def save_run(
        self,
        snapshot: RunSnapshot,
        audit: Sequence[AuditEntry] = (),
        *,
        remember: Remember | None = None,
    ) -> RunSnapshot:
        if self.conflicts:
            self.conflicts -= 1
            raise StoreConflict(snapshot.run_id, snapshot.revision, snapshot.revision + 1)
        return await super().save_run(snapshot, audit, remember=remember)


async def test_a_click_that_loses_a_write_race_is_told_so_and_changes_nothing() -> None:
    ran = Counter()
    store = RacedStore()
    bot = ChatBot(restart_agent(ran, store))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("restart the api"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)

    store.conflicts = CLAIM_TRIES  # the run changes under every try of the claim
    result = await bot.on_click(click(card, user="U2"))

    assert not result.accepted
    assert result.message == (
        "Someone changed this request at the same moment, so your click did not count. "
        "Please look at the card again."
    )
    assert messenger.updates == []
    (still,) = await bot.agent.list_suspended_runs(thread_id=THREAD.id)
    assert still.tool_call_id == card.tool_call_id
    assert (await bot.on_click(click(card, user="U2"))).accepted  # the next click counts
    await bot.drain()
    assert ran.count == 1


async def test_a_name_heard_on_one_platform_never_names_someone_on_another() -> None:
    bot = ChatBot(restart_agent(Counter()))
    here, there = RecordingMessenger(), RecordingMessenger()
    bot.register("test", here)
    bot.register("other", there)
    elsewhere = replace(THREAD, platform="other")
    # Someone on another platform claims the id U1 and a name.
    await bot.on_message(replace(message("hello", thread=elsewhere), user_name="Mallory"))
    await bot.on_message(message("restart the api"))  # U1 here, no name given
    await bot.drain()
    (card,) = here.views(ApprovalCard)
    assert card.requester == Person(id="U1")
