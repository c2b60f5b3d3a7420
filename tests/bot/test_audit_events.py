"""Every event around an approval is on the audit log once, naming people by id and by
the name they had then, and the platform or client it came through: requests, where
each card went, refused clicks, votes, decisions, reminders, escalations, grants given,
used and revoked, expiries, stops, questions and their answers, and what ran (with a
digest of its result)."""

from __future__ import annotations

import hashlib
from collections import Counter as Tally
from datetime import UTC, datetime, timedelta

from agents import AuditEntry
from bot import ApprovalCard, ApprovalPolicy, ChatBot, Click, IncomingMessage, Prompt
from tests.agents.helpers import Counter

from .helpers import THREAD, RecordingMessenger, refund_agent, restart_agent, weather_agent

NAMES = {"U1": "Ada Lovelace", "U2": "Grace Hopper", "U3": "Alan Turing", "U9": "Eve"}


def said(text: str, user: str = "U1") -> IncomingMessage:
    return IncomingMessage(
        thread=THREAD, user_id=user, user_name=NAMES[user], text=text, dedupe_keys=()
    )


def pressed(card: ApprovalCard | Prompt, user: str, action: str = "approve", **kw: object) -> Click:
    return Click(
        thread=THREAD,
        user_id=user,
        user_name=NAMES[user],
        run_id=card.run_id,
        tool_call_id=card.tool_call_id,
        action=action,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def wired(agent: object, policy: str) -> tuple[ChatBot, RecordingMessenger]:
    bot = ChatBot(agent, policy=ApprovalPolicy.from_toml(policy))  # type: ignore[arg-type]
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    return bot, messenger


async def log_of(bot: ChatBot) -> list[AuditEntry]:
    return await bot.agent.audit(thread_id=THREAD.id)


def once(entries: list[AuditEntry], event: str) -> AuditEntry:
    (entry,) = [e for e in entries if e.event == event]
    return entry


async def test_a_decision_names_everyone_and_says_what_ran() -> None:
    ran: list[str] = []
    bot, messenger = wired(
        refund_agent(ran), '[tools.refund]\napprovers = ["U2"]\nallow_self_approval = false\n'
    )
    await bot.on_message(said("A-1"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)

    refused = await bot.on_click(pressed(card, "U9"))
    assert not refused.accepted
    await bot.on_click(pressed(card, "U2"))
    await bot.drain()
    assert ran == ["A-1"]

    entries = await log_of(bot)
    assert [e.event for e in entries] == ["requested", "shown", "refused", "approved", "executed"]
    assert all(e.via == "test" for e in entries)
    assert all((e.requester, e.requester_name) == ("U1", "Ada Lovelace") for e in entries)
    no = once(entries, "refused")
    assert (no.actor, no.actor_name) == ("U9", "Eve")
    assert no.reason == "You are not one of the approvers for `refund`."
    yes = once(entries, "approved")
    assert (yes.actor, yes.actor_name) == ("U2", "Grace Hopper")
    shown = once(entries, "shown")
    assert shown.where == THREAD.id
    done = once(entries, "executed")
    assert done.result == "refunded A-1"
    assert done.digest == "sha256:" + hashlib.sha256(b"refunded A-1").hexdigest()


async def test_a_refusal_before_a_form_opens_is_on_record_a_look_at_what_one_may_is_not() -> None:
    bot, messenger = wired(refund_agent([]), '[tools.refund]\napprovers = ["U2"]\n')
    await bot.on_message(said("A-3"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)

    # What a console asks to know which words to offer: nothing happened.
    assert await bot.check_click(pressed(card, "U9", "decline")) is not None
    assert [e.event for e in await log_of(bot)] == ["requested", "shown"]

    assert await bot.check_click(pressed(card, "U9", "decline"), made=True) is not None
    assert isinstance(await bot.edit_form(pressed(card, "U3", "edit")), tuple)
    refused = [e for e in await log_of(bot) if e.event == "refused"]
    assert [(e.actor, e.actor_name, e.via) for e in refused] == [
        ("U9", "Eve", "test"),
        ("U3", "Alan Turing", "test"),
    ]
    assert all(e.reason == "You are not one of the approvers for `refund`." for e in refused)


async def test_a_decline_keeps_its_reason_and_who() -> None:
    bot, messenger = wired(refund_agent([]), "[tools.refund]\n")
    await bot.on_message(said("A-2"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    await bot.on_click(pressed(card, "U3", "decline", reason="not this one"))
    await bot.drain()
    no = once(await log_of(bot), "declined")
    assert (no.actor, no.actor_name, no.reason, no.via) == (
        "U3",
        "Alan Turing",
        "not this one",
        "test",
    )


async def test_reminders_and_escalations_are_on_record_once() -> None:
    policy = """
[tools.restart_service]
approvers = ["U2", "U3"]
remind_after = "10m"
escalate_after = "20m"
escalate_to = ["U9"]
"""
    bot, _ = wired(restart_agent(Counter()), policy)
    await bot.on_message(said("restart the api"))
    await bot.drain()
    now = datetime.now(UTC)
    assert await bot.send_reminders(now + timedelta(minutes=11)) == 1
    assert await bot.send_reminders(now + timedelta(minutes=21)) == 1
    assert await bot.send_reminders(now + timedelta(minutes=30)) == 0
    entries = await log_of(bot)
    assert Tally(e.event for e in entries)["reminded"] == 1
    assert once(entries, "reminded").actor == "U2,U3"
    assert once(entries, "escalated").actor == "U9"


async def test_grants_given_used_and_revoked() -> None:
    ran: list[str] = []
    bot, messenger = wired(refund_agent(ran), '[tools.refund]\ngrant_for = ["1h"]\n')
    await bot.on_message(said("A-3"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    await bot.on_click(pressed(card, "U2", "grant", grant_for="1h"))
    await bot.drain()
    await bot.on_message(said("A-4"))  # runs under the grant, no card
    await bot.drain()
    assert ran == ["A-3", "A-4"]
    await bot.on_message(said("revoke", user="U3"))
    await bot.drain()

    entries = await log_of(bot)
    given = once(entries, "grant_given")
    assert (given.actor, given.actor_name, given.reason) == ("U2", "Grace Hopper", "for 1h")
    used = once(entries, "granted")
    assert (used.actor, used.args) == ("U2", {"order": "A-4"})
    assert used.requester_name == "Ada Lovelace"
    revoked = once(entries, "revoked")
    assert (revoked.actor, revoked.actor_name) == ("U3", "Alan Turing")
    assert revoked.reason == "1 standing grant ended"


async def test_an_expiry_and_a_stop_are_on_record() -> None:
    bot, _ = wired(refund_agent([]), '[tools.refund]\nexpires_in = "5m"\n')
    await bot.on_message(said("A-5"))
    await bot.drain()
    assert await bot.sweep_expired(datetime.now(UTC) + timedelta(minutes=6)) == 1
    await bot.drain()
    assert once(await log_of(bot), "expired").actor is None

    await bot.on_message(said("A-6"))
    await bot.drain()
    await bot.on_message(said("stop", user="U3"))
    await bot.drain()
    stopped = once(await log_of(bot), "stopped")
    assert (stopped.actor, stopped.actor_name, stopped.via) == ("U3", "Alan Turing", "test")


async def test_a_question_and_its_answer_are_on_record_with_the_answer() -> None:
    bot, _ = wired(weather_agent(), "")
    await bot.on_message(said("what's the weather?"))
    await bot.drain()
    await bot.on_message(said("Paris", user="U1"))
    await bot.drain()
    entries = await log_of(bot)
    asked = once(entries, "requested")
    assert asked.kind == "suspension"
    answered = once(entries, "resumed")
    assert answered.args == {"city": "Paris"}
    assert (answered.actor, answered.actor_name) == ("U1", "Ada Lovelace")


async def test_a_quorums_decision_names_every_voter() -> None:
    policy = '[tools.restart_service]\napprovers = ["U2", "U3"]\nquorum = 2\n'
    bot, messenger = wired(restart_agent(Counter()), policy)
    await bot.on_message(said("restart the api"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    await bot.on_click(pressed(card, "U2"))
    await bot.on_click(pressed(card, "U3"))
    await bot.drain()
    decided = once(await log_of(bot), "approved")
    assert (decided.actor, decided.actor_name) == ("U2,U3", "Grace Hopper, Alan Turing")
    assert decided.via == "test"


async def test_a_stop_button_is_on_record_with_the_name_and_platform() -> None:
    bot, _ = wired(refund_agent([]), "[tools.refund]\n")
    await bot.on_message(said("A-7"))
    await bot.drain()
    bot.presenter.people.remember_name(THREAD, "U3", NAMES["U3"])
    assert await bot.on_stop(THREAD, "U3") == ()
    await bot.drain()
    stopped = once(await log_of(bot), "stopped")
    assert (stopped.actor, stopped.actor_name, stopped.via) == ("U3", "Alan Turing", "test")
