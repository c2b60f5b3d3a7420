"""An MCP server's questions in Slack: Decline and Cancel buttons, the Answer… form.

The tickets test server asks through MCP elicitation: ``escalate`` for one
``reason`` (answered by a reply), ``schedule`` for a day, an hour and whether to
tell the customer (answered with a form). A native tool asking for one choice is
answered with a form too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from adapters.slack.modals import answer_modal
from adapters.slack.wire import (
    ANSWER_ACTION,
    QUESTION_CANCEL_ACTION,
    QUESTION_DECLINE_ACTION,
    FormMetadata,
    ModalMetadata,
    decode_metadata,
)
from agents import Agent, Store, ToolCall, ToolContext, tool
from agents.mcp import McpTools
from bot import ApprovalPolicy, Person, Prompt, PromptField, PromptStatus
from bot import texts as core_texts
from tests.agents.helpers import call_then_answer
from tests.mcp.conftest import Calls, stdio_server

from .conftest import StartBot
from .fake_slack import TEAM_ID, FakeSlack, Posted, _view_problem
from .harness import (
    ALICE,
    BOB,
    CHANNEL,
    BotServer,
    block_actions,
    drawn,
    mention_event,
    message_event,
)
from .test_approvals import card_text

CAROL = "U0CAROL01"
ESCALATE = "Why should the ticket be escalated?"
SCHEDULE = "When should the maintenance run?"

Desk = Callable[..., Awaitable[BotServer]]


@pytest.fixture
async def desk(serve: StartBot, store: Store, tmp_path: Path) -> AsyncIterator[Desk]:
    """Start a bot whose model calls one tool of the tickets server (over stdio)."""
    opened: list[McpTools] = []

    async def start(
        tool: str, *, policy: ApprovalPolicy | None = None, socket_mode: bool = False
    ) -> BotServer:
        tools = McpTools(stdio_server(Calls(tmp_path / "calls.jsonl"), timeout=10.0))
        opened.append(tools)
        await tools.start(wait=20)
        model = call_then_answer(ToolCall(f"tickets__{tool}", {"ticket": "T-1"}))
        agent = Agent(id="desk", model=model, tool_sources=[tools], store=store)
        return await serve(agent, policy=policy, socket_mode=socket_mode)

    yield start
    for tools in opened:
        await tools.aclose()


def calls(tmp_path: Path) -> list[str]:
    """The tools the server ran, in order."""
    return [c["tool"] for c in Calls(tmp_path / "calls.jsonl")()]


async def ask(bot: BotServer, slack: FakeSlack, question: str) -> Posted:
    """Mention the bot; return the question it posts in the thread."""
    root = mention_event("please")
    assert await bot.send_event(root) == 200
    await bot.idle()
    (asked,) = [m for m in slack.in_thread(CHANNEL, root["ts"]) if question in m.text]
    return asked


def buttons(posted: Posted) -> list[tuple[str, str]]:
    """The buttons on a message: (action id, label)."""
    return [
        (element["action_id"], element["text"]["text"])
        for block in posted.shown
        if block["type"] == "actions"
        for element in block["elements"]
    ]


def answers(slack: FakeSlack, posted: Posted) -> str:
    return "\n".join(m.text for m in slack.in_thread(CHANNEL, posted.thread_ts or ""))


async def open_form(bot: BotServer, slack: FakeSlack, question: Posted) -> dict[str, Any]:
    """Press Answer… as Bob; the modal Slack was asked to open."""
    assert await bot.press(question, ANSWER_ACTION, user=BOB) == 200
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    (opened,) = slack.of("views.open")
    assert opened.args["trigger_id"].startswith("trigger-")
    view: dict[str, Any] = opened.args["view"]
    return view


def inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The form's input blocks by label."""
    return {b["label"]["text"]: b for b in view["blocks"] if b["type"] == "input"}


def submission(
    view: dict[str, Any], values: Mapping[str, str | None], *, user: str
) -> dict[str, Any]:
    """What Slack sends when ``user`` submits the form filled in with ``values`` by field."""
    names = decode_metadata(view["private_metadata"], FormMetadata).fields
    blocks = [b for b in view["blocks"] if b["type"] == "input"]
    state: dict[str, Any] = {}
    for name, block in zip(names, blocks, strict=True):
        element = block["element"]
        value = values.get(name)
        if element["type"] == "static_select":
            chosen = [o for o in element["options"] if o["value"] == value]
            entry = {"type": "static_select", "selected_option": chosen[0] if chosen else None}
        else:
            entry = {"type": element["type"], "value": value}
        state[block["block_id"]] = {element["action_id"]: entry}
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0APP0001",
        "token": "legacy",
        "trigger_id": "trigger-submit",
        "view": {**view, "id": "V0VIEW002", "state": {"values": state}},
    }


SUNDAY_AT_4 = {"day": "sunday", "hour": "4", "notify": "true"}


@pytest.mark.parametrize(
    ("tool", "question", "shown"),
    [
        (
            "escalate",
            ESCALATE,
            [(QUESTION_DECLINE_ACTION, "Decline"), (QUESTION_CANCEL_ACTION, "Cancel")],
        ),
        (
            "schedule",
            SCHEDULE,
            [
                (ANSWER_ACTION, "Answer…"),
                (QUESTION_DECLINE_ACTION, "Decline"),
                (QUESTION_CANCEL_ACTION, "Cancel"),
            ],
        ),
    ],
)
async def test_a_question_shows_decline_and_cancel_and_answer_only_for_a_form(
    desk: Desk, slack: FakeSlack, tool: str, question: str, shown: list[tuple[str, str]]
) -> None:
    bot = await desk(tool)
    asked = await ask(bot, slack, question)
    assert buttons(asked) == shown
    hint = core_texts.QUESTION_FORM_HINT if tool == "schedule" else "Reply in this thread"
    assert hint in card_text(asked)


class AskSwitch(BaseModel):
    message: str


class Switch(BaseModel):
    action: Literal["start", "stop"]


SWITCH = "Start or stop api?"


async def test_a_question_with_one_choice_is_answered_with_a_select_in_the_form(
    serve: StartBot, slack: FakeSlack, store: Store
) -> None:
    switched: list[str] = []

    @tool(suspend_schema=AskSwitch, resume_schema=Switch)
    def switch(service: str, ctx: ToolContext) -> dict[str, str]:
        """Start or stop a service; asks which."""
        data = ctx.resume_data
        if data is None:
            ctx.suspend({"message": SWITCH})
        switched.append(data.action)
        return {"service": service, "action": data.action}

    model = call_then_answer(ToolCall("switch", {"service": "api"}))
    bot = await serve(Agent(id="switcher", model=model, tools=[switch], store=store))
    asked = await ask(bot, slack, SWITCH)
    assert buttons(asked) == [
        (ANSWER_ACTION, "Answer…"),
        (QUESTION_DECLINE_ACTION, "Decline"),
        (QUESTION_CANCEL_ACTION, "Cancel"),
    ]
    assert core_texts.QUESTION_FORM_HINT in card_text(asked)

    view = await open_form(bot, slack, asked)
    (field,) = inputs(view).values()
    assert field["element"]["type"] == "static_select"
    assert [o["value"] for o in field["element"]["options"]] == ["start", "stop"]

    status, body = await bot.interact(submission(view, {"action": "stop"}, user=BOB))
    assert (status, body) == (200, "")
    await bot.idle()

    assert switched == ["stop"]
    assert '"action": "stop"' in answers(slack, asked), "the run continues with the choice"
    assert f"Answered by <@{BOB}>" in card_text(asked)
    assert buttons(asked) == []


@pytest.mark.parametrize(("action", "said"), [("decline", "Declined"), ("cancel", "Cancelled")])
async def test_decline_or_cancel_tells_the_server_and_the_question_says_who(
    desk: Desk, slack: FakeSlack, tmp_path: Path, action: str, said: str
) -> None:
    bot = await desk("escalate")
    asked = await ask(bot, slack, ESCALATE)
    button = QUESTION_DECLINE_ACTION if action == "decline" else QUESTION_CANCEL_ACTION
    assert await bot.press(asked, button, user=BOB) == 200
    await bot.idle()

    assert slack.of("views.open") == [], "no reason dialog for a question"
    assert f"not escalated ({action})" in answers(slack, asked)
    assert f"{said} by <@{BOB}>" in card_text(asked)
    assert ESCALATE in card_text(asked)
    assert buttons(asked) == []
    assert calls(tmp_path) == ["escalate"]


async def test_answer_opens_a_form_with_one_input_per_field(
    desk: Desk, slack: FakeSlack, tmp_path: Path
) -> None:
    bot = await desk("schedule")
    asked = await ask(bot, slack, SCHEDULE)
    view = await open_form(bot, slack, asked)

    assert len(view["title"]["text"]) <= 24
    assert SCHEDULE in json.dumps(view["blocks"][0])
    fields = inputs(view)
    assert list(fields) == ["Day", "Hour (UTC)", "Tell the customer"]
    day, hour, notify = (fields[k]["element"] for k in fields)
    assert day["type"] == "static_select"
    assert [o["value"] for o in day["options"]] == ["saturday", "sunday"]
    assert hour["type"] == "number_input"
    assert hour["is_decimal_allowed"] is False
    assert notify["type"] == "static_select"
    assert [o["value"] for o in notify["options"]] == ["true", "false"]
    assert [fields[k]["optional"] for k in fields] == [False, False, True]
    assert asked.updates == 0, "opening the form decides nothing"
    assert calls(tmp_path) == []


async def test_a_submitted_form_runs_the_tool_once_with_typed_values(
    desk: Desk, slack: FakeSlack, tmp_path: Path
) -> None:
    bot = await desk("schedule")
    asked = await ask(bot, slack, SCHEDULE)
    view = await open_form(bot, slack, asked)

    status, body = await bot.interact(submission(view, SUNDAY_AT_4, user=BOB))
    assert (status, body) == (200, ""), "an empty answer closes the modal"
    await bot.idle()

    assert "T-1 scheduled: sunday 04:00 UTC, customer told" in answers(slack, asked)
    assert calls(tmp_path) == ["schedule"]
    assert f"Answered by <@{BOB}>" in card_text(asked)
    assert buttons(asked) == []


async def test_an_answer_that_does_not_fit_is_shown_in_the_form_and_the_question_waits(
    desk: Desk, slack: FakeSlack, tmp_path: Path
) -> None:
    bot = await desk("schedule")
    asked = await ask(bot, slack, SCHEDULE)
    view = await open_form(bot, slack, asked)

    status, body = await bot.interact(submission(view, {**SUNDAY_AT_4, "hour": "30"}, user=BOB))
    assert status == 200
    answer = json.loads(body)
    assert answer["response_action"] == "errors"
    first = next(b["block_id"] for b in view["blocks"] if b["type"] == "input")
    (error,) = answer["errors"].values()
    assert list(answer["errors"]) == [first]
    assert "hour" in error
    assert len(error) <= 150
    await bot.idle()
    assert asked.updates == 0
    assert len(buttons(asked)) == 3
    assert calls(tmp_path) == []

    status, body = await bot.interact(submission(view, SUNDAY_AT_4, user=BOB))
    assert (status, body) == (200, "")
    await bot.idle()
    assert calls(tmp_path) == ["schedule"]


async def test_someone_the_policy_does_not_allow_is_told_privately_and_nothing_changes(
    desk: Desk, slack: FakeSlack, tmp_path: Path
) -> None:
    policy = ApprovalPolicy.from_toml(f'[tools.tickets__schedule]\napprovers = ["{BOB}"]\n')
    bot = await desk("schedule", policy=policy)
    asked = await ask(bot, slack, SCHEDULE)

    for button in (QUESTION_DECLINE_ACTION, ANSWER_ACTION, QUESTION_CANCEL_ACTION):
        assert await bot.press(asked, button, user=CAROL) == 200
        await bot.idle()
    told = slack.of("chat.postEphemeral")
    assert [t.args["user"] for t in told] == [CAROL] * 3
    assert all("tickets__schedule" in t.args["text"] for t in told)
    assert slack.of("views.open") == [], "no form for someone who may not answer"
    assert asked.updates == 0
    assert len(buttons(asked)) == 3
    assert calls(tmp_path) == []

    view = await open_form(bot, slack, asked)  # Bob may
    await bot.interact(submission(view, SUNDAY_AT_4, user=BOB))
    await bot.idle()
    assert calls(tmp_path) == ["schedule"]


async def test_a_click_on_a_question_already_answered_is_told_privately(
    desk: Desk, slack: FakeSlack, tmp_path: Path
) -> None:
    bot = await desk("escalate")
    asked = await ask(bot, slack, ESCALATE)
    late = block_actions(asked, QUESTION_DECLINE_ACTION, user=BOB)
    await bot.send_event(message_event("customer is down", thread_ts=asked.thread_ts))
    await bot.idle()
    assert "T-1 escalated: customer is down" in answers(slack, asked)
    assert f"Answered by <@{ALICE}>" in card_text(asked)
    updates = asked.updates

    assert (await bot.interact(late))[0] == 200
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert told.args["user"] == BOB
    assert "already answered" in told.args["text"]
    assert asked.updates == updates
    assert calls(tmp_path) == ["escalate"]


async def test_over_socket_mode_the_forms_errors_come_back_in_the_envelopes_ack(
    desk: Desk, slack: FakeSlack, tmp_path: Path
) -> None:
    bot = await desk("schedule", socket_mode=True)
    await slack.wait_for(lambda: bool(slack.sockets), what="the Socket Mode connection")
    asked = await ask(bot, slack, SCHEDULE)
    await slack.send_envelope("interactive", block_actions(asked, ANSWER_ACTION, user=BOB))
    await slack.wait_for(lambda: bool(slack.of("views.open")), what="views.open")
    view = slack.of("views.open")[0].args["view"]

    wrong = submission(view, {**SUNDAY_AT_4, "day": None}, user=BOB)
    refused = await slack.send_envelope("interactive", wrong)
    await slack.wait_for(lambda: refused in slack.socket_acks, what="the ack")
    payload = slack.socket_acks[refused]["payload"]
    assert payload["response_action"] == "errors"
    assert "day" in next(iter(payload["errors"].values()))

    taken = await slack.send_envelope("interactive", submission(view, SUNDAY_AT_4, user=BOB))
    await slack.wait_for(lambda: taken in slack.socket_acks, what="the ack")
    assert not slack.socket_acks[taken].get("payload")
    await bot.idle()
    assert calls(tmp_path) == ["schedule"]


async def test_a_forged_form_or_button_is_refused_without_a_decision(
    desk: Desk, slack: FakeSlack, tmp_path: Path
) -> None:
    bot = await desk("schedule")
    asked = await ask(bot, slack, SCHEDULE)
    view = await open_form(bot, slack, asked)
    good = submission(view, SUNDAY_AT_4, user=BOB)

    forged_metadata = {**good, "view": {**good["view"], "private_metadata": '{"run": "x"}'}}
    state = good["view"]["state"]["values"]
    block = next(iter(state))
    bad_state = {**state, block: {"value": {"type": "static_select", "selected_option": "x"}}}
    bad_value = {**good, "view": {**good["view"], "state": {"values": bad_state}}}
    for payload in (forged_metadata, bad_value):
        status, _ = await bot.interact(payload)
        assert status == 400

    assert await bot.interact(block_actions(asked, ANSWER_ACTION, user=BOB, value="{}")) == (
        200,
        "",
    )
    await bot.idle()
    (told,) = slack.of("chat.postEphemeral")
    assert "not a valid" in told.args["text"]
    assert len(slack.of("views.open")) == 1
    assert asked.updates == 0
    assert calls(tmp_path) == []


# -- rendering, within Slack's limits ----------------------------------------------

WINDOW = (
    PromptField(name="day", label="Day", kind="choice", choices=("saturday", "sunday")),
    PromptField(name="hour", label="Hour", kind="integer", required=True),
)
META = ModalMetadata(run="r", call="c", team="T", channel="C", root="1.1", ts="1.2")


def question(*fields: PromptField, **extra: Any) -> Prompt:
    return Prompt(
        run_id="run-1",
        tool_call_id="call-1",
        tool_name="tickets__schedule",
        agent_path=("desk",),
        question="When? <!channel>",
        fields=fields,
        **extra,
    )


@pytest.mark.parametrize(
    ("status", "outcome"),
    [("answered", "Answered by"), ("declined", "Declined by"), ("cancelled", "Cancelled by")],
)
def test_a_settled_question_says_who_settled_it_and_has_no_buttons(
    status: PromptStatus, outcome: str
) -> None:
    bob = Person(id=BOB, name="<!channel>")
    settled = drawn(question(*WINDOW, status=status, decided_by=bob, error="bad"))
    posted = Posted(CHANNEL, "1.2", "1.1", settled.text, settled.shown)
    assert settled.bar is not None, "settled, it sits beside a bar of its colour, as a card"
    assert settled.blocks == settled.shown[:1], "only its title above the bar"
    assert f"{outcome} <@{BOB}>" in card_text(posted)
    assert "When? &lt;!channel&gt;" in card_text(posted)
    assert buttons(posted) == []
    assert "did not fit" not in card_text(posted)
    nobody = drawn(question(*WINDOW, status=status))
    assert f"{outcome} someone" in nobody.text


def test_an_expired_question_says_so_and_has_no_buttons() -> None:
    expired = drawn(question(*WINDOW, status="expired"))
    posted = Posted(CHANNEL, "1.2", "1.1", expired.text, expired.shown)
    assert "⌛ Expired: nobody answered in time" in card_text(posted)
    assert buttons(posted) == []


def test_form_inputs_stay_within_slack_limits() -> None:
    fields = (
        PromptField(name="long", label="L" * 5000, description="D" * 5000, required=True),
        PromptField(name="many", label="Many", kind="choice", choices=tuple(map(str, range(150)))),
        PromptField(name="wide", label="Wide", kind="choice", choices=("w" * 200, "v")),
        PromptField(name="named", label="Named", kind="choice", choices=("x" * 120, "y", "y")),
        PromptField(name="ratio", label=" ", kind="number"),
        PromptField(name="flag", label="Flag", kind="boolean"),
    )
    view = answer_modal(META, question(*fields))
    assert _view_problem(view) is None
    assert view["blocks"][0]["text"]["text"] == "When? &lt;!channel&gt;"
    blocks = [b for b in view["blocks"] if b["type"] == "input"]
    long, many, wide, named, ratio, flag = blocks
    assert len(long["label"]["text"]) == 2000
    assert len(long["hint"]["text"]) == 2000
    assert long["optional"] is False
    assert many["element"]["type"] == "plain_text_input", "over 100 choices: typed"
    assert wide["element"]["type"] == "plain_text_input", "a value Slack cannot carry: typed"
    options = named["element"]["options"]
    assert [o["value"] for o in options] == ["x" * 120, "y"]
    assert len(options[0]["text"]["text"]) == 75
    assert ratio["element"] == {
        "type": "number_input",
        "action_id": ratio["element"]["action_id"],
        "is_decimal_allowed": True,
    }
    assert ratio["label"]["text"]
    assert [o["value"] for o in flag["element"]["options"]] == ["true", "false"]
    metadata = decode_metadata(view["private_metadata"], FormMetadata)
    assert metadata.fields == ("long", "many", "wide", "named", "ratio", "flag")
    assert metadata.run == "r"
