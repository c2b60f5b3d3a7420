"""Activities -> bot types: thread keys, mentions, users, references."""

from __future__ import annotations

from typing import Any

import pytest
from botbuilder.core import TurnContext
from botbuilder.schema import Activity

from adapters.teams import convert
from bot.types import ThreadKey

from . import activities as act

URL = "https://smba.example.invalid/"


def parse(data: dict[str, Any]) -> Activity:
    activity: Activity = Activity().deserialize(data)
    return activity


def test_a_channel_reply_belongs_to_the_thread_of_its_root() -> None:
    activity = parse(act.channel_post(URL, "hi", root="1000", activity_id="1005"))
    assert convert.thread_of(activity) == ThreadKey(
        platform="teams", workspace=act.TENANT, channel=act.CHANNEL, root="1000"
    )


def test_a_new_top_level_post_is_the_root_of_its_thread() -> None:
    data = act.message(URL, "hi", conversation=act.channel_conversation(None), activity_id="2000")
    activity = parse(data)
    thread = convert.thread_of(activity)
    assert thread.root == "2000"
    reference = convert.reference_of(activity, thread)
    assert reference["conversation"]["id"] == f"{act.CHANNEL};messageid=2000"
    assert reference["conversation"]["tenantID"] == act.TENANT
    assert reference["serviceUrl"] == URL


def test_chats_are_one_thread_each() -> None:
    for kind, conv_id in (("personal", act.PERSONAL_CHAT), ("groupChat", act.GROUP_CHAT)):
        first = parse(act.message(URL, "a", conversation=act.chat_conversation(kind)))
        second = parse(act.message(URL, "b", conversation=act.chat_conversation(kind)))
        assert convert.thread_of(first) == convert.thread_of(second)
        assert convert.thread_of(first).channel == conv_id


def test_the_tenant_comes_from_channel_data_when_the_conversation_lacks_it() -> None:
    data = act.message(URL, "hi", conversation={"id": "a:1", "conversationType": "personal"})
    assert convert.thread_of(parse(data)).workspace == act.TENANT


def test_only_the_bots_mention_is_removed_not_its_name_or_other_mentions() -> None:
    data = act.channel_post(URL, "ask Ops (prod) Bot about\n- api", mention=True)
    data["text"] += " <at>Carol</at>"
    data["entities"].append(
        {"type": "mention", "text": "<at>Carol</at>", "mentioned": {"id": "29:carol"}}
    )
    activity = parse(data)
    assert convert.mentions_bot(activity)
    assert convert.message_text(activity) == "ask Ops (prod) Bot about\n- api <at>Carol</at>"
    # The SDK's helper deletes the bot's name wherever it appears.
    assert "Ops (prod) Bot" not in TurnContext.remove_recipient_mention(parse(data))


def test_a_message_is_from_the_persons_entra_id_and_deduped_by_activity() -> None:
    activity = parse(act.channel_post(URL, "hi", root="1000", activity_id="1005"))
    message = convert.incoming_message(activity, convert.thread_of(activity))
    assert message.user_id == "aad-alice"
    assert message.user_name == "Alice"
    assert message.dedupe_keys == (f"activity:{act.CHANNEL}:1005",)


def test_a_foreign_submit_is_not_a_click() -> None:
    data = act.message(URL, "", conversation=act.chat_conversation())
    data["value"] = {"kind": "survey", "answer": 3}
    activity = parse(data)
    assert not convert.is_submit(activity)
    assert convert.submit_click(activity, convert.thread_of(activity)) is None


def test_an_execute_whose_verb_and_data_disagree_is_not_a_click() -> None:
    data = act.message(URL, "", conversation=act.chat_conversation())
    payload = {"kind": "approval", "action": "decline", "run_id": "r", "tool_call_id": "c"}
    data.update(
        type="invoke",
        name="adaptiveCard/action",
        value={"action": {"type": "Action.Execute", "verb": "approve", "data": payload}},
    )
    activity = parse(data)
    assert convert.execute_click(activity, convert.thread_of(activity)) is None


def invoke(data: dict[str, Any], verb: str) -> Activity:
    activity = act.message(URL, "", conversation=act.chat_conversation())
    activity.update(
        type="invoke",
        name="adaptiveCard/action",
        value={"action": {"type": "Action.Execute", "verb": verb, "data": data}},
    )
    return parse(activity)


QUESTION = {"kind": "question", "run_id": "r", "tool_call_id": "c"}


def test_a_forms_send_carries_only_its_inputs_by_field_name() -> None:
    data = {
        **QUESTION,
        "action": "answer",
        "field:day": "sunday",
        "field:hour": "4",
        "field:notify": True,
        "field:run_id": "from an input",  # a field named like our own key stays a field
        "reason": "not an input of this card",
    }
    activity = invoke(data, "answer")
    click = convert.execute_click(activity, convert.thread_of(activity))
    assert click is not None
    assert (click.action, click.run_id, click.tool_call_id) == ("answer", "r", "c")
    assert click.values == {"day": "sunday", "hour": "4", "notify": True, "run_id": "from an input"}


def test_a_submit_of_a_question_is_one_of_our_clicks() -> None:
    data = act.message(URL, "", conversation=act.chat_conversation())
    data["value"] = {**QUESTION, "action": "cancel", "field:day": "sunday"}
    activity = parse(data)
    assert convert.is_submit(activity)
    click = convert.submit_click(activity, convert.thread_of(activity))
    assert click is not None
    assert (click.action, click.values) == ("cancel", None)  # only an answer has values


@pytest.mark.parametrize(
    ("kind", "verb"),
    [("approval", "answer"), ("approval", "cancel"), ("question", "approve"), ("question", "edit")],
)
def test_an_action_the_kind_of_card_does_not_have_is_not_a_click(kind: str, verb: str) -> None:
    activity = invoke({"kind": kind, "action": verb, "run_id": "r", "tool_call_id": "c"}, verb)
    assert convert.execute_click(activity, convert.thread_of(activity)) is None


@pytest.mark.parametrize("value", [{"a": 1}, [1], [{"b": "c"}]])
def test_an_answer_with_a_value_that_is_not_plain_is_not_a_click(value: Any) -> None:
    activity = invoke({**QUESTION, "action": "answer", "field:hour": value}, "answer")
    assert convert.execute_click(activity, convert.thread_of(activity)) is None


APPROVAL = {"kind": "approval", "run_id": "r", "tool_call_id": "c"}


def test_approve_edited_carries_the_edited_arguments_by_name() -> None:
    data = {
        **APPROVAL,
        "action": "edit",
        "field:order": "A-1001",
        "field:amount": "120",
        "field:refund_all": "false",
        "reason": "",
    }
    activity = invoke(data, "edit")
    click = convert.execute_click(activity, convert.thread_of(activity))
    assert click is not None
    assert (click.action, click.run_id, click.tool_call_id) == ("edit", "r", "c")
    assert click.values == {"order": "A-1001", "amount": "120", "refund_all": "false"}

    submitted = act.message(URL, "", conversation=act.chat_conversation())
    submitted["value"] = data
    parsed = parse(submitted)
    assert convert.is_submit(parsed)
    fallback = convert.submit_click(parsed, convert.thread_of(parsed))
    assert fallback is not None
    assert (fallback.action, fallback.values) == ("edit", click.values)


def test_approve_and_decline_carry_no_values_even_beside_an_edit_form() -> None:
    for verb in ("approve", "decline"):
        activity = invoke({**APPROVAL, "action": verb, "field:amount": "120"}, verb)
        click = convert.execute_click(activity, convert.thread_of(activity))
        assert click is not None
        assert (click.action, click.values) == (verb, None)


@pytest.mark.parametrize("value", [{"a": 1}, [1]])
def test_an_edit_with_a_value_that_is_not_plain_is_not_a_click(value: Any) -> None:
    activity = invoke({**APPROVAL, "action": "edit", "field:amount": value}, "edit")
    assert convert.execute_click(activity, convert.thread_of(activity)) is None
