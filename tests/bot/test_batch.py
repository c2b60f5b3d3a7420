"""One card for a batch: the gated calls one model turn asks for, on one card (the
policy's ``batch``), each decided on its own or all at once; every decision audited."""

from __future__ import annotations

from dataclasses import replace

from agents import Agent, MemoryStore, ToolCall, tool
from bot import ApprovalCard, ApprovalPolicy, BatchCard, ChatBot, Click
from bot.compose import compose
from bot.document import Button, Section
from tests.agents.helpers import Counter, call_then_answer

from .helpers import THREAD, RecordingMessenger, message

BATCHED = "[tools.restart_service]\nbatch = true\n"
SERVICES = ("api", "web", "worker")


def restarts(ran: Counter) -> Agent:
    """``ops`` asks to restart three services in one turn (each gated)."""

    @tool(require_approval=True)
    def restart_service(service: str) -> str:
        """Restart a service."""
        ran(service=service)
        return f"restarted {service}"

    calls = [ToolCall("restart_service", {"service": s}) for s in SERVICES]
    return Agent(
        id="ops", model=call_then_answer(*calls), tools=[restart_service], store=MemoryStore()
    )


async def asked(
    policy: str = BATCHED,
) -> tuple[ChatBot, RecordingMessenger, BatchCard, Counter]:
    ran = Counter()
    bot = ChatBot(restarts(ran), policy=ApprovalPolicy.from_toml(policy))
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("restart everything"))
    await bot.drain()
    (batch,) = messenger.views(BatchCard)
    return bot, messenger, batch, ran


def on(batch: BatchCard, action: str, *, index: int = 0, user: str = "U2") -> Click:
    card = batch.cards[index]
    return Click(
        thread=THREAD,
        user_id=user,
        run_id=card.run_id,
        tool_call_id=card.tool_call_id,
        action=action,  # type: ignore[arg-type]
        ask=card.ask,
    )


def latest(messenger: RecordingMessenger) -> BatchCard:
    shown = [v for _, _, v in messenger.updates if isinstance(v, BatchCard)]
    return shown[-1]


async def test_a_turns_calls_show_as_one_card_with_all_and_each_calls_buttons() -> None:
    _, messenger, batch, ran = await asked()
    assert messenger.views(ApprovalCard) == []
    assert [c.args["service"] for c in batch.cards] == list(SERVICES)
    document = compose(batch)
    assert [b.label for b in document.actions] == ["Approve all (3)", "Decline all (3)"]
    (calls,) = [b for b in document.body if isinstance(b, Section)]
    assert [[b.action for b in item.actions] for item in calls.items] == [
        ["approve", "decline", "edit"]
    ] * 3
    assert all(isinstance(b, Button) and b.confirm for b in document.actions)
    assert ran.count == 0


async def test_deciding_one_leaves_the_others_waiting_and_the_card_says_each() -> None:
    bot, messenger, batch, ran = await asked()
    clicked = replace(on(batch, "approve", index=1), message_ref=messenger.ref_of(batch))
    result = await bot.on_click(clicked)
    await bot.drain()
    assert result.accepted
    assert isinstance(result.card, BatchCard)  # the clicked message, as it now reads
    assert [c.status for c in result.card.cards] == ["pending", "approved", "pending"]
    assert ran.calls == [{"service": "web"}]
    shown = latest(messenger)
    assert [c.status for c in shown.cards] == ["pending", "approved", "pending"]
    assert [b.label for b in compose(shown).actions] == ["Approve all (2)", "Decline all (2)"]

    # From elsewhere (an approvals list, a decision page): that call's own card.
    declined = await bot.on_click(on(shown, "decline", index=0))
    await bot.drain()
    assert isinstance(declined.card, ApprovalCard)
    assert declined.card.status == "declined"
    assert declined.accepted
    assert [c.status for c in latest(messenger).cards] == ["declined", "approved", "pending"]
    assert len(await bot.agent.list_suspended_runs(thread_id=THREAD.id)) == 1


async def test_approve_all_decides_each_waiting_call_once_and_the_audit_says_each() -> None:
    bot, messenger, batch, ran = await asked()
    await bot.on_click(on(batch, "decline", index=2))
    await bot.drain()
    result = await bot.on_click(on(latest(messenger), "approve_all"))
    await bot.drain()
    assert result.accepted
    assert isinstance(result.card, BatchCard)
    assert [c.status for c in result.card.cards] == ["approved", "approved", "declined"]
    assert compose(result.card).actions == ()
    assert sorted(call["service"] for call in ran.calls) == ["api", "web"]
    audit = await bot.agent.audit(thread_id=THREAD.id)
    decided = [
        (e.event, e.args.get("service")) for e in audit if e.event in ("approved", "declined")
    ]
    assert sorted(decided) == [("approved", "api"), ("approved", "web"), ("declined", "worker")]
    assert await bot.agent.list_suspended_runs(thread_id=THREAD.id) == []
    run = await bot.agent.get_run(batch.cards[0].run_id)
    assert run.status == "finished"

    again = await bot.on_click(on(batch, "approve_all"))
    assert not again.accepted


async def test_decline_all_and_a_policy_without_batch_shows_a_card_each() -> None:
    bot, _, batch, ran = await asked()
    result = await bot.on_click(on(batch, "decline_all"))
    await bot.drain()
    assert isinstance(result.card, BatchCard)
    assert [c.status for c in result.card.cards] == ["declined"] * 3
    assert ran.count == 0

    plain = ChatBot(restarts(Counter()))
    apart = RecordingMessenger()
    plain.register("test", apart)
    await plain.on_message(message("restart everything"))
    await plain.drain()
    assert apart.views(BatchCard) == []
    assert len(apart.views(ApprovalCard)) == 3


async def test_someone_not_allowed_approves_nothing_of_it() -> None:
    policy = BATCHED + 'approvers = ["U9"]\n'
    bot, _, batch, ran = await asked(policy)
    refused = await bot.on_click(replace(on(batch, "approve_all"), user_id="U2"))
    assert not refused.accepted
    assert ran.count == 0


async def test_approve_all_from_a_card_not_redrawn_yet_decides_the_others() -> None:
    """Its button names the first call, which someone decided a moment ago: the others
    still wait, and each is decided (and checked) on its own."""
    bot, _, batch, ran = await asked()
    await bot.on_click(on(batch, "decline", index=0))
    await bot.drain()
    result = await bot.on_click(on(batch, "approve_all"))  # the card as first shown
    await bot.drain()
    assert result.accepted
    assert sorted(call["service"] for call in ran.calls) == ["web", "worker"]


async def test_approve_all_approves_only_what_the_clicker_may() -> None:
    policy = (
        BATCHED + "[[tools.restart_service.tiers]]\n"
        'when = \'args.service == "api"\'\napprovers = ["U9"]\n'
    )
    bot, _, batch, ran = await asked(policy)
    result = await bot.on_click(on(batch, "approve_all"))
    await bot.drain()
    assert result.accepted
    assert sorted(call["service"] for call in ran.calls) == ["web", "worker"]
    assert "1 of them were not decided" in (result.message or "")
