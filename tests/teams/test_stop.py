"""Stop under the text before a card, in channels and group chats (whole messages: Teams
streams only in 1:1 chats, which have Teams' own Stop): a small card with one
Action.Execute naming the run, pressed over HTTP with signed invokes. Whoever asked may
stop their request (and anyone who may decide it); the presser reads how it went."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from adapters.teams import texts as teams_texts
from agents import Agent, MemoryStore, ToolCall, tool
from bot import texts as core_texts
from bot.policy import ApprovalPolicy
from tests.agents.helpers import call_then_answer

from . import activities as act
from .conftest import Answer, MakeBot
from .fake_connector import ConnectorCall, FakeConnector
from .refunds import message_answer
from .signed import SignedBot, in_thread, signed_settings, token_for

INTRO = "Deploying api to production now."
BOB_DECIDES = '[tools.deploy]\napprovers = ["aad-bob"]\n'


def deploy_agent(deployed: list[str]) -> Agent:
    """Any message says ``INTRO``, then asks to deploy api (which needs approval)."""

    @tool(require_approval=True)
    def deploy(service: str) -> str:
        """Deploy a service."""
        deployed.append(service)
        return f"deployed {service}"

    model = call_then_answer(ToolCall("deploy", {"service": "api"}), before=INTRO)
    return Agent(id="ops", model=model, tools=[deploy], store=MemoryStore())


@dataclass
class Thread:
    """A channel thread where Alice asked to deploy: the text before the card, the card."""

    root: str
    intro: ConnectorCall
    approval: ConnectorCall

    @property
    def conversation(self) -> dict[str, Any]:
        return act.channel_conversation(self.root)

    @property
    def stop_card(self) -> dict[str, Any]:
        assert self.intro.card is not None, self.intro.body
        return self.intro.card


@dataclass
class Ops(SignedBot):
    """The deploying bot behind real Bot Framework auth (Bob decides deploys)."""

    deployed: list[str]

    async def ask_to_deploy(self) -> Thread:
        root = act.next_id()
        await self.post(
            act.channel_post(self.connector.url, "deploy api", activity_id=root, mention=True)
        )
        await self.teams.bot.drain()
        intro, approval = self.connector.messages(in_thread(root))
        return Thread(root=root, intro=intro, approval=approval)

    async def press_stop(self, thread: Thread, *, user: dict[str, Any], data: Any = None) -> Answer:
        """Press Stop as ``user`` (with other ``data``, as a forged invoke would); settle."""
        invoke = act.execute(
            self.connector.url,
            thread.stop_card,
            "stop",
            conversation=thread.conversation,
            card_id=thread.intro.response_id,
            user=user,
        )
        if data is not None:
            invoke["value"]["action"]["data"] = data
        answer = await self.teams.post(invoke, headers={"Authorization": f"Bearer {self.token}"})
        await self.teams.bot.drain()
        return answer

    async def run_status(self, thread: Thread) -> str:
        run_id = act.action_data(thread.stop_card, "stop")["run_id"]
        return (await self.teams.bot.agent.get_run(run_id)).status


@pytest.fixture
async def ops(
    make_bot: MakeBot, connector: FakeConnector, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Ops]:
    async with token_for(connector, monkeypatch) as token:
        deployed: list[str] = []
        teams = await make_bot(
            agent=deploy_agent(deployed),
            policy=ApprovalPolicy.from_toml(BOB_DECIDES),
            settings=signed_settings(),
        )
        yield Ops(teams=teams, connector=connector, token=token, deployed=deployed)


def approval_run(approval: ConnectorCall) -> str:
    card = approval.card
    assert card is not None
    action = card.get("refresh", {}).get("action") or card["actions"][0]
    run_id: str = action["data"]["run_id"]
    return run_id


async def test_the_text_before_a_card_in_a_channel_offers_stop_for_its_run(ops: Ops) -> None:
    thread = await ops.ask_to_deploy()

    assert thread.intro.text == INTRO
    card = thread.stop_card
    assert card["version"] == "1.5"
    (stop,) = card["actions"]
    assert (stop["type"], stop["title"], stop["verb"]) == ("Action.Execute", "Stop", "stop")
    assert stop["fallback"]["type"] == "Action.Submit"
    assert stop["data"]["run_id"] == approval_run(thread.approval)
    assert thread.approval.card_kind == "approval"
    assert await ops.run_status(thread) == "paused"


async def test_the_text_before_a_card_in_a_group_chat_offers_stop_too(ops: Ops) -> None:
    chat = act.chat_conversation("groupChat")
    await ops.post(act.message(ops.connector.url, "deploy api", conversation=chat, mention=True))
    await ops.teams.bot.drain()

    intro, approval = ops.connector.messages(act.GROUP_CHAT)
    assert intro.text == INTRO
    assert intro.card is not None
    assert act.action_data(intro.card, "stop")["run_id"] == approval_run(approval)


async def test_the_requester_pressing_stop_stops_the_run_and_the_card(ops: Ops) -> None:
    thread = await ops.ask_to_deploy()

    answer = await ops.press_stop(thread, user=act.ALICE)

    assert answer.status == 200
    assert answer.body == message_answer(teams_texts.STOPPED)
    assert await ops.run_status(thread) == "stopped"
    (updated,) = [
        u for u in ops.connector.updates() if u.activity_id == thread.approval.response_id
    ]
    title = updated.body["attachments"][0]["content"]["body"][0]["text"]
    assert "Stopped" in title
    assert any(core_texts.STOPPED in t for t in ops.connector.texts(in_thread(thread.root)))
    assert ops.deployed == []


async def test_someone_not_allowed_to_stop_is_told_why_and_the_run_waits(ops: Ops) -> None:
    thread = await ops.ask_to_deploy()

    answer = await ops.press_stop(thread, user=act.CAROL)

    assert answer.status == 200
    assert answer.body == message_answer(core_texts.STOP_NOT_YOURS)
    assert await ops.run_status(thread) == "paused"
    assert ops.connector.updates() == []


async def test_an_approver_may_stop_what_waits_for_them(ops: Ops) -> None:
    thread = await ops.ask_to_deploy()

    answer = await ops.press_stop(thread, user=act.BOB)

    assert answer.body["value"] == teams_texts.STOPPED
    assert await ops.run_status(thread) == "stopped"


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "stop", "action": "stop"},
        {"kind": "stop", "action": "stop", "run_id": ""},
        {"kind": "stop", "action": "stop", "run_id": 7},
        {"kind": "stop", "action": "approve", "run_id": "run-1"},
        {"kind": "stop", "run_id": "run-1"},
        "stop",
    ],
    ids=["no run", "empty run", "run not text", "verb and action differ", "no action", "text"],
)
async def test_a_malformed_stop_is_a_bad_request(ops: Ops, data: Any) -> None:
    thread = await ops.ask_to_deploy()

    answer = await ops.press_stop(thread, user=act.ALICE, data=data)

    assert answer.status == 400
    assert answer.body["type"] == "application/vnd.microsoft.error"
    assert await ops.run_status(thread) == "paused"


async def test_stop_through_the_submit_fallback_stops_the_run_too(ops: Ops) -> None:
    thread = await ops.ask_to_deploy()
    before = ops.connector.texts(in_thread(thread.root))
    submit = act.submit(
        ops.connector.url,
        thread.stop_card,
        "stop",
        conversation=thread.conversation,
        card_id=thread.intro.response_id,
        user=act.ALICE,
    )

    await ops.post(submit)
    await ops.teams.bot.drain()

    assert await ops.run_status(thread) == "stopped"
    said = ops.connector.texts(in_thread(thread.root))[len(before) :]
    assert [t for t in said if core_texts.STOPPED in t] == said != []
