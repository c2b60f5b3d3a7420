"""Teams end to end: activities over HTTP, the real CloudAdapter, a fake Bot Connector."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    FunctionModel,
    MemoryStore,
    Message,
    ModelResponse,
    ToolCall,
    open_store,
    tool,
)
from agents.models.base import ModelRequest
from bot import texts as core_texts
from bot.policy import ApprovalPolicy

from . import activities as act
from .conftest import MakeBot, TeamsBot
from .fake_connector import ConnectorCall, FakeConnector

THREAD_1 = "1700000001000"
THREAD_2 = "1700000002000"


def in_thread(root: str) -> str:
    return f"{act.CHANNEL};messageid={root}"


async def ask_for_deploy(
    teams: TeamsBot, connector: FakeConnector, *, service: str = "api", root: str = THREAD_1
) -> ConnectorCall:
    """Post "deploy <service>" as a new channel thread; return the card the bot posted."""
    post = act.channel_post(connector.url, f"deploy {service}", activity_id=root, mention=True)
    answer = await teams.post(post)
    assert answer.status == 200
    await teams.bot.drain()
    cards = connector.cards(in_thread(root))
    assert len(cards) == 1, connector.calls
    return cards[0]


def text_of_card(card: dict[str, Any]) -> str:
    """Every TextBlock and fact of a card, for asserting what people read."""
    parts: list[str] = []
    for element in card["body"]:
        if element["type"] == "TextBlock":
            parts.append(element["text"])
        elif element["type"] == "FactSet":
            parts.extend(f"{f['title']}: {f['value']}" for f in element["facts"])
    return "\n".join(parts)


async def test_approve_with_action_execute_updates_the_card_and_answers_in_the_thread(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    posted = await ask_for_deploy(teams, connector)
    card = posted.card
    assert card is not None
    assert card["version"] == "1.5"
    assert [(a["type"], a["title"]) for a in card["actions"]] == [
        ("Action.Execute", "Approve"),
        ("Action.Execute", "Decline"),
        ("Action.ShowCard", "Edit"),
    ]
    assert "deploy" in text_of_card(card)
    assert "service: api" in text_of_card(card)
    assert teams.deployed == []

    click = act.execute(
        connector.url,
        card,
        "approve",
        conversation=act.channel_conversation(THREAD_1),
        card_id=posted.response_id,
    )
    answer = await teams.post(click)

    assert answer.status == 200
    assert answer.body["statusCode"] == 200
    assert answer.body["type"] == "application/vnd.microsoft.card.adaptive"
    decided = answer.body["value"]
    assert "Approved by" in text_of_card(decided)
    assert "actions" not in decided
    await teams.bot.drain()
    updates = connector.updates()
    assert [(u.conversation_id, u.activity_id) for u in updates] == [
        (in_thread(THREAD_1), posted.response_id)
    ]
    assert "Approved by" in text_of_card(updates[0].body["attachments"][0]["content"])
    assert teams.deployed == ["api"]
    assert any("deploy ok: deployed api" in t for t in connector.texts(in_thread(THREAD_1)))


async def test_the_thread_goes_on_while_a_card_waits_and_the_card_still_decides(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    """A card waits -> "status of web?" is answered (the model told what waits) -> the
    card is approved -> the first call runs once, its answer naming its request."""
    teams = await make_bot()
    posted = await ask_for_deploy(teams, connector)
    assert posted.card is not None
    await teams.post(act.channel_post(connector.url, "status of web?", root=THREAD_1))
    await teams.bot.drain()
    thread = in_thread(THREAD_1)
    assert connector.texts(thread)[-1] == "You said: status of web? (still waiting here: deploy)"
    await teams.post(act.channel_post(connector.url, "lgtm", root=THREAD_1))
    await teams.bot.drain()
    assert "only the Approve and Decline buttons" in connector.texts(thread)[-1]
    assert teams.deployed == []

    click = act.execute(
        connector.url,
        posted.card,
        "approve",
        conversation=act.channel_conversation(THREAD_1),
        card_id=posted.response_id,
    )
    assert (await teams.post(click)).status == 200
    await teams.bot.drain()
    assert teams.deployed == ["api"]
    answer = connector.texts(thread)[-1]
    assert answer.startswith("About “deploy api”:")
    assert answer.endswith("deploy ok: deployed api")


async def test_decline_with_a_reason_from_the_card_input_never_runs_the_tool(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    posted = await ask_for_deploy(teams, connector)
    assert posted.card is not None
    answer = await teams.post(
        act.execute(
            connector.url,
            posted.card,
            "decline",
            conversation=act.channel_conversation(THREAD_1),
            card_id=posted.response_id,
            reason="  freeze until Monday ",
        )
    )
    assert answer.status == 200
    decided = text_of_card(answer.body["value"])
    assert "Declined by" in decided
    assert "freeze until Monday" in decided
    await teams.bot.drain()
    assert teams.deployed == []
    answer_text = connector.texts(in_thread(THREAD_1))[-1]
    assert "not approved" in answer_text
    assert "freeze until Monday" in answer_text


async def test_action_submit_fallback_decides_and_a_second_submit_is_told_why_not(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    posted = await ask_for_deploy(teams, connector)
    assert posted.card is not None
    conversation = act.channel_conversation(THREAD_1)
    card_id = posted.response_id

    first = await teams.post(
        act.submit(
            connector.url, posted.card, "approve", conversation=conversation, card_id=card_id
        )
    )
    assert first.status == 200
    await teams.bot.drain()
    assert teams.deployed == ["api"]
    assert len(connector.updates()) == 1

    second = await teams.post(
        act.submit(
            connector.url,
            posted.card,
            "decline",
            conversation=conversation,
            card_id=card_id,
            user=act.CAROL,
        )
    )
    assert second.status == 200
    await teams.bot.drain()
    refusal = connector.calls[-1]
    assert refusal.method == "POST"  # a reply to the submit
    assert refusal.activity_id is not None
    assert "already approved" in refusal.text
    assert teams.deployed == ["api"]


async def test_a_double_click_at_the_same_moment_decides_once_and_runs_the_tool_once(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    posted = await ask_for_deploy(teams, connector)
    assert posted.card is not None
    conversation = act.channel_conversation(THREAD_1)
    card_id = posted.response_id
    clicks = [
        act.execute(
            connector.url,
            posted.card,
            "approve",
            conversation=conversation,
            card_id=card_id,
            user=user,
        )
        for user in (act.ALICE, act.CAROL)
    ]

    answers = await asyncio.gather(*(teams.post(click) for click in clicks))
    await teams.bot.drain()

    assert [a.status for a in answers] == [200, 200]
    by_type = {a.body["type"]: a.body for a in answers}
    assert sorted(by_type) == [
        "application/vnd.microsoft.activity.message",
        "application/vnd.microsoft.card.adaptive",
    ]
    assert "already approved" in by_type["application/vnd.microsoft.activity.message"]["value"]
    run_id = posted.card["actions"][0]["data"]["run_id"]
    audit = await teams.bot.store.list_audit(run_id=run_id)
    assert [e.event for e in audit if e.event in ("approved", "declined")] == ["approved"]
    assert teams.deployed == ["api"]
    assert len(connector.updates()) == 1


async def test_a_click_refused_by_the_policy_changes_nothing(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    policy = ApprovalPolicy.from_toml('[tools.deploy]\napprovers = ["aad-carol"]\n')
    teams = await make_bot(policy=policy)
    posted = await ask_for_deploy(teams, connector)
    assert posted.card is not None
    conversation = act.channel_conversation(THREAD_1)
    card_id = posted.response_id
    assert "actions" not in posted.card  # everyone but Carol sees the status only
    carols = await teams.seen_by(
        posted, user=act.CAROL, conversation=conversation, service_url=connector.url
    )

    # Bob presses Approve anyway (a button from Carol's view, a forged click).
    refused = await teams.post(
        act.execute(connector.url, carols, "approve", conversation=conversation, card_id=card_id)
    )
    await teams.bot.drain()
    assert refused.status == 200
    assert refused.body == {
        "statusCode": 200,
        "type": "application/vnd.microsoft.activity.message",
        "value": core_texts.POLICY_NOT_APPROVER.format(tool="deploy"),
    }
    assert connector.updates() == []
    assert teams.deployed == []

    allowed = await teams.post(
        act.execute(
            connector.url, carols, "approve", conversation=conversation, card_id=card_id,
            user=act.CAROL,
        )
    )  # fmt: skip
    await teams.bot.drain()
    assert allowed.body["type"] == "application/vnd.microsoft.card.adaptive"
    assert teams.deployed == ["api"]


async def test_a_question_is_asked_in_the_thread_and_the_next_reply_resumes_the_tool(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    thread = in_thread(THREAD_1)
    await teams.post(act.channel_post(connector.url, "weather", activity_id=THREAD_1, mention=True))
    await teams.bot.drain()
    (asked,) = connector.cards(thread, kind="question")
    assert asked.card_text.splitlines()[:2] == ["💬 **weather** asks:", "Which city?"]

    # Replies in a thread the bot takes part in reach it without an @mention (RSC).
    await teams.post(act.channel_post(connector.url, "42", root=THREAD_1))
    await teams.bot.drain()
    reask = connector.cards(thread, kind="question")[-1]
    assert "Which city?" in reask.card_text
    assert "⚠️" in reask.card_text

    await teams.post(act.channel_post(connector.url, "Paris", root=THREAD_1))
    await teams.bot.drain()
    assert "weather ok: Paris: sunny" in connector.texts(thread)[-1]
    asked_here = {c.response_id for c in connector.cards(thread, kind="question")}
    answered = [u for u in connector.updates() if u.activity_id in asked_here]
    assert [u.card_text.splitlines()[-1] for u in answered] == ["✅ Answered by Alice"]


async def test_two_threads_in_one_channel_stay_separate(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    first = await ask_for_deploy(teams, connector, service="api", root=THREAD_1)
    second = await ask_for_deploy(teams, connector, service="web", root=THREAD_2)
    assert second.card is not None

    await teams.post(
        act.execute(
            connector.url,
            second.card,
            "approve",
            conversation=act.channel_conversation(THREAD_2),
            card_id=second.response_id,
        )
    )
    await teams.bot.drain()

    assert teams.deployed == ["web"]
    assert any("deployed web" in t for t in connector.texts(in_thread(THREAD_2)))
    assert not any("deployed" in t for t in connector.texts(in_thread(THREAD_1)))
    # The first thread still waits, and goes on: a message there is a new turn.
    await teams.post(act.channel_post(connector.url, "status?", root=THREAD_1))
    await teams.bot.drain()
    said = connector.texts(in_thread(THREAD_1))[-1]
    assert said == "You said: status? (still waiting here: deploy)"
    assert teams.deployed == ["web"]
    assert first.card is not None


async def test_a_click_from_another_thread_without_the_cards_ask_is_refused(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    """A card posted before buttons carried their ask counts only in its own thread
    (a button that carries it works anywhere, as the inbox's do: see test_inbox)."""
    teams = await make_bot()
    posted = await ask_for_deploy(teams, connector, root=THREAD_1)
    assert posted.card is not None
    click = act.execute(
        connector.url,
        posted.card,
        "approve",
        conversation=act.channel_conversation(THREAD_2),
        card_id=posted.response_id,
    )
    del click["value"]["action"]["data"]["ask"]
    answer = await teams.post(click)
    assert answer.body["type"] == "application/vnd.microsoft.activity.message"
    assert answer.body["value"] == core_texts.CLICK_OTHER_THREAD
    assert teams.deployed == []


async def test_a_redelivered_activity_starts_one_run(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    post = act.channel_post(connector.url, "deploy api", activity_id=THREAD_1, mention=True)
    assert (await teams.post(post)).status == 200
    assert (await teams.post(post)).status == 200
    await teams.bot.drain()
    assert len(connector.cards()) == 1


async def test_a_restart_between_card_and_click_still_resumes(
    make_bot: MakeBot, connector: FakeConnector, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    deployed: list[str] = []
    store = open_store(url)
    before = await make_bot(store=store, deployed=deployed)
    posted = await ask_for_deploy(before, connector)
    assert posted.card is not None
    await before.close()
    await store.close()

    after = await make_bot(store=open_store(url), deployed=deployed)
    answer = await after.post(
        act.execute(
            connector.url,
            posted.card,
            "approve",
            conversation=act.channel_conversation(THREAD_1),
            card_id=posted.response_id,
        )
    )
    assert answer.body["type"] == "application/vnd.microsoft.card.adaptive"
    await after.bot.drain()
    assert deployed == ["api"]
    assert [u.activity_id for u in connector.updates()] == [posted.response_id]
    assert any("deployed api" in t for t in connector.texts(in_thread(THREAD_1)))
    await after.close()
    await after.bot.store.close()


async def test_channel_messages_not_addressed_to_the_bot_are_ignored(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    answer = await teams.post(act.channel_post(connector.url, "deploy api"))
    assert answer.status == 200
    await teams.bot.drain()
    assert connector.calls == []


async def test_a_personal_chat_is_one_thread_without_mentions(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    chat = act.chat_conversation("personal")
    await teams.post(act.message(connector.url, "hello", conversation=chat))
    await teams.bot.drain()
    await teams.post(act.message(connector.url, "again", conversation=chat))
    await teams.bot.drain()
    assert connector.texts(act.PERSONAL_CHAT) == ["You said: hello", "You said: again"]
    typing = connector.typing()
    assert [c.conversation_id for c in typing] == [act.PERSONAL_CHAT] * 2


async def test_the_mention_is_removed_in_a_group_chat(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    chat = act.chat_conversation("groupChat")
    await teams.post(act.message(connector.url, "hello there", conversation=chat, mention=True))
    await teams.bot.drain()
    assert connector.texts(act.GROUP_CHAT) == ["You said: hello there"]


async def test_in_a_followed_group_chat_only_a_mention_starts_work(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    chat = act.chat_conversation("groupChat")
    await teams.post(act.message(connector.url, "first", conversation=chat, mention=True))
    await teams.bot.drain()
    await teams.post(act.message(connector.url, "lunch anyone?", conversation=chat))
    await teams.bot.drain()
    await teams.post(act.message(connector.url, "second", conversation=chat, mention=True))
    await teams.bot.drain()
    assert connector.texts(act.GROUP_CHAT) == ["You said: first", "You said: second"]


async def test_in_a_group_chat_a_mention_is_a_new_turn_while_a_question_waits_and_cancel_leaves_it(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    teams = await make_bot()
    chat = act.chat_conversation("groupChat")
    await teams.post(act.message(connector.url, "weather", conversation=chat, mention=True))
    await teams.bot.drain()
    (asked,) = connector.cards(act.GROUP_CHAT, kind="question")
    await teams.post(act.message(connector.url, "how is api", conversation=chat, mention=True))
    await teams.bot.drain()
    said = connector.texts(act.GROUP_CHAT)[-1]
    assert said == "You said: how is api (still waiting here: weather)"
    await teams.post(act.message(connector.url, "cancel", conversation=chat))
    await teams.bot.drain()
    assert "cancelled the question" in connector.texts(act.GROUP_CHAT)[-1]
    settled = [u for u in connector.updates() if u.activity_id == asked.response_id]
    assert [u.card_text.splitlines()[-1] for u in settled] == ["🚫 Cancelled by Alice"]


async def test_turns_return_before_the_agent_has_answered(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    """The HTTP request ends with the turn; the model's answer is posted later."""
    thinking = asyncio.Event()
    deployed: list[str] = []

    @tool(require_approval=True)
    def deploy(service: str) -> str:
        """Deploy a service."""
        deployed.append(service)
        return f"deployed {service}"

    async def respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
        last = messages[-1]
        if last.text.startswith("deploy"):
            return ModelResponse(tool_calls=[ToolCall("deploy", {"service": "api"})])
        await thinking.wait()  # the model is slow: the turn must not wait for it
        return ModelResponse(text=f"answer to {last.text or 'the tool result'}")

    slow = Agent(id="ops", model=FunctionModel(respond), tools=[deploy], store=MemoryStore())
    teams = await make_bot(agent=slow)
    chat = act.chat_conversation("personal")

    answer = await asyncio.wait_for(
        teams.post(act.message(connector.url, "hello", conversation=chat)), 5
    )
    assert answer.status == 200
    assert not thinking.is_set()
    assert not any(t.startswith("answer") for t in connector.texts(act.PERSONAL_CHAT))

    thinking.set()
    await teams.bot.drain()
    assert connector.texts(act.PERSONAL_CHAT)[-1] == "answer to hello"

    # A click too: the invoke is answered with the decided card while the resumed
    # run still waits for the model.
    thinking.clear()
    await teams.post(act.message(connector.url, "deploy api", conversation=chat))
    await teams.bot.drain()
    (posted,) = connector.cards(act.PERSONAL_CHAT)
    assert posted.card is not None
    click = act.execute(
        connector.url, posted.card, "approve", conversation=chat, card_id=posted.response_id
    )
    decided = await asyncio.wait_for(teams.post(click), 5)
    assert decided.status == 200
    assert decided.body["type"] == "application/vnd.microsoft.card.adaptive"
    assert not thinking.is_set()

    thinking.set()
    await teams.bot.drain()
    assert deployed == ["api"]
    assert connector.texts(act.PERSONAL_CHAT)[-1].startswith("answer to the tool result\n")


async def test_a_quorum_of_two_needs_action_execute_from_two_people(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    policy = ApprovalPolicy.from_toml(
        '[tools.deploy]\napprovers = ["aad-bob", "aad-carol", "aad-dave"]\nquorum = 2\n'
    )
    teams = await make_bot(policy=policy)
    posted = await ask_for_deploy(teams, connector)
    assert posted.card is not None
    assert "Approvals: none yet (0 of 2)" in text_of_card(posted.card)
    conversation = act.channel_conversation(THREAD_1)

    # The approvers in the thread see the buttons (Dave is not in it), the requester too
    # gets the card as it is now; the message itself shows the status only.
    assert "actions" not in posted.card
    assert posted.card["refresh"]["userIds"] == ["29:bob", "29:carol", "29:alice"]

    async def press(user: dict[str, Any]) -> dict[str, Any]:
        seen = await teams.seen_by(
            posted, user=user, conversation=conversation, service_url=connector.url
        )
        return act.execute(
            connector.url,
            seen,
            "approve",
            conversation=conversation,
            card_id=posted.response_id,
            user=user,
        )

    first = await teams.post(await press(act.BOB))
    await teams.bot.drain()
    assert first.body["type"] == "application/vnd.microsoft.card.adaptive"
    counted = first.body["value"]
    assert "Approvals: Bob (1 of 2)" in text_of_card(counted)
    assert [a["title"] for a in counted["actions"]] == ["Approve", "Decline"]
    (update,) = connector.updates()
    assert "Approvals: Bob (1 of 2)" in text_of_card(update.body["attachments"][0]["content"])
    assert teams.deployed == []

    second = await teams.post(await press(act.CAROL))
    await teams.bot.drain()
    decided = second.body["value"]
    assert "Approved by Bob, Carol" in text_of_card(decided)
    assert "actions" not in decided
    updates = connector.updates()
    assert len(updates) == 2
    assert "Approved by Bob, Carol" in text_of_card(updates[-1].body["attachments"][0]["content"])
    assert teams.deployed == ["api"]
    assert any("deploy ok: deployed api" in t for t in connector.texts(in_thread(THREAD_1)))
    run_id = posted.card["refresh"]["action"]["data"]["run_id"]
    audit = await teams.bot.store.list_audit(run_id=run_id)
    assert [(e.event, e.actor) for e in audit if e.event not in ("requested", "shown")] == [
        ("voted", "aad-bob"),
        ("voted", "aad-carol"),
        ("approved", "aad-bob,aad-carol"),
        ("executed", "aad-bob,aad-carol"),
    ]


async def test_one_card_for_a_batch_each_decided_alone_or_all_at_once(
    make_bot: MakeBot, connector: FakeConnector
) -> None:
    policy = ApprovalPolicy.from_toml("[tools.deploy]\nbatch = true\n")
    teams = await make_bot(policy=policy)
    post = act.channel_post(
        connector.url, "deploy api web worker", activity_id=THREAD_1, mention=True
    )
    assert (await teams.post(post)).status == 200
    await teams.bot.drain()
    (posted,) = connector.cards(in_thread(THREAD_1))
    card = posted.card
    assert card is not None
    assert "Approval needed: 3 calls" in json.dumps(card)
    executes = list(_executes(card))
    verbs = [e["verb"] for e in executes]
    assert verbs.count("approve") == 3
    assert verbs[-2:] == ["approve_all", "decline_all"]

    first = next(e for e in executes if e["verb"] == "approve")
    one = act.execute(
        connector.url,
        {"actions": [first]},
        "approve",
        conversation=act.channel_conversation(THREAD_1),
        card_id=posted.response_id,
    )
    answer = await teams.post(one)
    assert answer.body["type"] == "application/vnd.microsoft.card.adaptive"
    assert "Approve all (2)" in json.dumps(answer.body["value"])
    await teams.bot.drain()
    assert teams.deployed == ["api"]

    every = act.execute(
        connector.url,
        answer.body["value"],
        "approve_all",
        conversation=act.channel_conversation(THREAD_1),
        card_id=posted.response_id,
    )
    done = await teams.post(every)
    await teams.bot.drain()
    assert "approve_all" not in json.dumps(done.body["value"])
    assert sorted(teams.deployed) == ["api", "web", "worker"]
    answers = [t for t in connector.texts(in_thread(THREAD_1)) if t.startswith("Done.")]
    assert len(answers) == 1


def _executes(node: Any) -> Iterator[dict[str, Any]]:
    """Every Action.Execute of a card, in its body's action sets and its actions, in order."""
    if isinstance(node, dict):
        if node.get("type") == "Action.Execute":
            yield node
        for value in node.values():
            yield from _executes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _executes(value)
