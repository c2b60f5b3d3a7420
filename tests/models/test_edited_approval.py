"""What a model hears about an approval a person edited: the tool's own result, and
once, plainly, the arguments the call ran with."""

from __future__ import annotations

import json
from typing import Any, Literal

from agents import Agent, DemoModel, MemoryStore, tool
from agents.models.anthropic import AnthropicModel

from .fake_anthropic import FakeAnthropic, Text, ToolUse, stream_reply


def deploy_agent(model: Any, ran: list[dict[str, Any]]) -> Agent:
    @tool(require_approval=True)
    async def deploy_service(
        service: str, environment: Literal["staging", "production"], version: str
    ) -> dict[str, Any]:
        """Deploy a version of a service."""
        ran.append({"service": service, "environment": environment, "version": version})
        return {"service": service, "environment": environment, "version": version, "ok": True}

    return Agent(id="ops", model=model, tools=[deploy_service], store=MemoryStore())


STAGING = {"service": "api", "environment": "staging", "version": "1.4.2"}


async def test_the_demo_model_answers_with_the_edited_values_and_the_rendered_result() -> None:
    ran: list[dict[str, Any]] = []
    agent = deploy_agent(DemoModel(), ran)
    paused = await agent.generate("deploy api 1.4.2 to production")
    assert paused.suspend_payload is not None
    assert paused.suspend_payload.args["environment"] == "production"

    final = await agent.approve_tool_call_generate(run_id=paused.run_id, args=STAGING)

    assert ran == [STAGING]
    assert final.text == (
        "Deployed api to staging (arguments edited before approval): version: 1.4.2; ok: yes."
    )


async def test_the_demo_model_answers_an_unedited_approval_as_before() -> None:
    agent = deploy_agent(DemoModel(), [])
    paused = await agent.generate("deploy api 1.4.2 to production")
    final = await agent.approve_tool_call_generate(run_id=paused.run_id)
    assert final.text == "Deployed api to production: version: 1.4.2; ok: yes."


def script_deploy_then_answer(fake: FakeAnthropic) -> None:
    production = {**STAGING, "environment": "production"}
    fake.script(
        stream_reply(
            ToolUse(id="toolu_dep_01", name="deploy_service", input=production),
            stop_reason="tool_use",
            message_id="msg_1",
        ),
        stream_reply(Text(pieces=["Deployed to staging."]), message_id="msg_2"),
        stream_reply(Text(pieces=["Nothing more."]), message_id="msg_3"),
    )


async def test_claude_is_told_once_before_the_result_which_arguments_ran(
    fake: FakeAnthropic, claude: AnthropicModel
) -> None:
    script_deploy_then_answer(fake)
    agent = deploy_agent(claude, [])
    paused = await agent.generate("deploy api 1.4.2 to production", thread_id="t1")

    await agent.approve_tool_call_generate(run_id=paused.run_id, args=STAGING)
    await agent.generate("anything else?", thread_id="t1")

    after_approval, next_turn = fake.requests[1].body, fake.requests[2].body
    for body in (after_approval, next_turn):
        results = [
            block
            for message in body["messages"]
            if message["role"] == "user"
            for block in message["content"]
            if block["type"] == "tool_result"
        ]
        assert len(results) == 1
        note, content = results[0]["content"]
        assert note == {
            "type": "text",
            "text": "A person edited the arguments before approving; the call ran with "
            'exactly these: {"service": "api", "environment": "staging", "version": "1.4.2"}',
        }
        assert content == {
            "type": "text",
            "text": '{"service": "api", "environment": "staging", "version": "1.4.2", "ok": true}',
        }
        assert results[0]["is_error"] is False
        assert json.dumps(body).count("A person edited the arguments") == 1
    assert fake.unused_replies == 0


async def test_claude_gets_a_plain_result_for_a_call_approved_as_asked(
    fake: FakeAnthropic, claude: AnthropicModel
) -> None:
    script_deploy_then_answer(fake)
    agent = deploy_agent(claude, [])
    paused = await agent.generate("deploy api 1.4.2 to production", thread_id="t1")
    await agent.approve_tool_call_generate(run_id=paused.run_id)

    last = fake.requests[1].body["messages"][-1]
    (result,) = last["content"]
    assert isinstance(result["content"], str)
    assert "edited" not in result["content"]
