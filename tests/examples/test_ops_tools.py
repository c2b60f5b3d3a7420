"""The example tools on their own: idempotency keys, rules and schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agents import Agent, StandingAsk, Tool, ToolContext
from bot import ApprovalPolicy, ChatBot
from examples.ops.deploy import outside_staging, parse_version

from .conftest import rows


def tool_of(ops: Agent, key: str, name: str) -> Tool:
    found = ops.agents[key].tool(name)
    assert found is not None
    return found


async def invoke(tool: Tool, args: dict[str, Any], *, call_id: str) -> Any:
    ctx = ToolContext(run_id="run-1", tool_call_id=call_id, tool_name=tool.name)
    return await tool.invoke(tool.validate_args(args), ctx)


async def test_one_tool_call_deploys_once(ops: Agent, db_path: Path) -> None:
    deploy = tool_of(ops, "deploy", "deploy_service")
    args = {"service": "worker", "environment": "staging", "version": "1.0.0"}
    first = await invoke(deploy, args, call_id="call-1")
    retried = await invoke(deploy, args, call_id="call-1")
    assert retried == first
    assert len(rows(db_path, "SELECT * FROM deployments WHERE tool_call_id = 'call-1'")) == 1
    another = await invoke(deploy, args, call_id="call-2")
    assert another["deployment_id"] != first["deployment_id"]


async def test_one_tool_call_refunds_once(ops: Agent, db_path: Path) -> None:
    refund = tool_of(ops, "billing", "refund")
    first = await invoke(refund, {"order_id": "A-1003", "amount": 700}, call_id="call-1")
    retried = await invoke(refund, {"order_id": "A-1003", "amount": 700}, call_id="call-1")
    assert retried == first
    assert [r["amount_cents"] for r in rows(db_path, "SELECT * FROM refunds")] == [70000]
    with pytest.raises(ValueError, match=r"only 500\.00 of its 1200\.00 total is left"):
        await invoke(refund, {"order_id": "A-1003", "amount": 700}, call_id="call-2")


async def test_refund_amounts_must_be_positive(ops: Agent) -> None:
    refund = tool_of(ops, "billing", "refund")
    with pytest.raises(ValidationError):
        refund.validate_args({"order_id": "A-1001", "amount": 0})


async def test_refund_approval_starts_above_100(ops: Agent) -> None:
    refund = tool_of(ops, "billing", "refund")
    ctx = ToolContext(run_id="r", tool_call_id="c", tool_name="refund")

    async def needs(amount: float) -> bool:
        return await refund.needs_approval(
            refund.validate_args({"order_id": "A-1001", "amount": amount}), ctx
        )

    assert [await needs(a) for a in (50, 100, 100.01)] == [False, False, True]


@pytest.mark.parametrize(
    ("environment", "needs_approval"),
    [("staging", False), ("Stage", False), ("production", True), ("prod", True), ("qa", True)],
)
def test_deploys_need_approval_unless_certainly_staging(
    environment: str, needs_approval: bool
) -> None:
    class Args:
        pass

    args = Args()
    args.environment = environment  # type: ignore[attr-defined]
    assert outside_staging(args) is needs_approval


@pytest.mark.parametrize("environment", ["qa", "prod-eu", ""])
async def test_an_unknown_environment_fails_argument_validation(
    ops: Agent, environment: str
) -> None:
    deploy = tool_of(ops, "deploy", "deploy_service")
    with pytest.raises(ValidationError, match="Input should be 'staging' or 'production'"):
        deploy.validate_args({"service": "api", "environment": environment, "version": "1.0"})
    schema = deploy.spec().input_schema["properties"]["environment"]
    assert schema["enum"] == ["staging", "production"]


@pytest.mark.parametrize(
    ("spelling", "environment"),
    [("staging", "staging"), (" Stage ", "staging"), ("PROD", "production")],
)
async def test_accepted_spellings_become_the_environment_name(
    ops: Agent, spelling: str, environment: str
) -> None:
    deploy = tool_of(ops, "deploy", "deploy_service")
    args = deploy.validate_args({"service": "api", "environment": spelling})
    assert args.environment == environment  # type: ignore[attr-defined]


async def needs_approval(tool: Tool, args: dict[str, Any]) -> bool:
    ctx = ToolContext(run_id="r", tool_call_id="c", tool_name=tool.name)
    return await tool.needs_approval(tool.validate_args(args), ctx)


async def test_production_needs_approval_once_the_version_is_known(ops: Agent) -> None:
    deploy = tool_of(ops, "deploy", "deploy_service")
    production = {"environment": "production", "version": "2.0.0"}
    assert await needs_approval(deploy, {"service": "api", **production})
    # Asking for the version comes first; the answer is then checked for approval.
    assert not await needs_approval(deploy, {"service": "api", "environment": "production"})


@pytest.mark.parametrize(
    ("text", "version"),
    [("1.5.0", "1.5.0"), (" v2.4.0 ", "2.4.0"), ("2.0", "2.0"), ("1.5.0-rc.1", "1.5.0-rc.1")],
)
def test_a_version_is_stored_bare(text: str, version: str) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize("text", ["not 1.4.1 - use 1.5.0", "find user 42", "42", "latest", ""])
def test_anything_but_a_version_is_refused(ops: Agent, text: str) -> None:
    with pytest.raises(ValueError, match="is not a version"):
        parse_version(text)
    deploy = tool_of(ops, "deploy", "deploy_service")
    with pytest.raises(ValidationError, match="is not a version"):
        deploy.validate_args({"service": "api", "environment": "staging", "version": text})


async def refusal(tool: Tool, args: dict[str, Any]) -> str | None:
    ctx = ToolContext(run_id="r", tool_call_id="c", tool_name=tool.name)
    return await tool.refusal(tool.validate_args(args), ctx)


async def test_checks_refuse_before_any_card_what_can_only_fail(ops: Agent) -> None:
    deploy = tool_of(ops, "deploy", "deploy_service")
    delete = tool_of(ops, "records", "delete_record")
    refund = tool_of(ops, "billing", "refund")
    production = {"environment": "production", "version": "1.0.0"}
    assert await refusal(deploy, {"service": "api", **production}) is None
    assert await refusal(deploy, {"service": "billing-engine", **production}) == (
        "Unknown service 'billing-engine'. Known services: api, web, worker."
    )
    assert await refusal(delete, {"record_id": "abc-123"}) is None
    assert await refusal(delete, {"record_id": "nope"}) == (
        "No record with id 'nope'; nothing was deleted."
    )
    assert await refusal(refund, {"order_id": "A-1003", "amount": 1200}) is None
    assert await refusal(refund, {"order_id": "A-9", "amount": 5}) == (
        "No order with id 'A-9'; nothing was refunded."
    )
    too_much = await refusal(refund, {"order_id": "A-1003", "amount": 1200.01})
    assert too_much is not None
    assert "only 1200.00 of its 1200.00 total is left" in too_much


async def test_production_is_never_deployed_unapproved(ops: Agent, db_path: Path) -> None:
    deploy = tool_of(ops, "deploy", "deploy_service")
    args = {"service": "api", "environment": "production", "version": "2.0.0"}
    with pytest.raises(PermissionError, match="nothing was deployed"):
        await invoke(deploy, args, call_id="c")
    assert rows(db_path, "SELECT * FROM deployments WHERE version = '2.0.0'") == []


async def test_one_tool_call_deletes_once(ops: Agent, db_path: Path) -> None:
    delete = tool_of(ops, "records", "delete_record")
    assert delete.idempotent
    first = await invoke(delete, {"record_id": "abc-123"}, call_id="call-1")
    retried = await invoke(delete, {"record_id": "abc-123"}, call_id="call-1")
    assert (
        retried
        == first
        == {
            "id": "abc-123",
            "user_id": "12345",
            "kind": "support-ticket",
            "summary": "Cannot log in after a password reset",
        }
    )
    assert rows(db_path, "SELECT * FROM records WHERE id = 'abc-123'") == []
    [tombstone] = rows(db_path, "SELECT * FROM deleted_records")
    assert (tombstone["tool_call_id"], tombstone["id"]) == ("call-1", "abc-123")
    # Another call for the same record finds nothing left to delete.
    with pytest.raises(LookupError, match="nothing was deleted"):
        await invoke(delete, {"record_id": "abc-123"}, call_id="call-2")


def test_tools_with_side_effects_are_idempotent_per_call(ops: Agent) -> None:
    assert tool_of(ops, "deploy", "deploy_service").idempotent
    assert tool_of(ops, "billing", "refund").idempotent
    assert tool_of(ops, "records", "delete_record").idempotent


async def test_deleting_a_missing_record_says_nothing_was_deleted(ops: Agent) -> None:
    delete = tool_of(ops, "records", "delete_record")
    with pytest.raises(LookupError, match="nothing was deleted"):
        await invoke(delete, {"record_id": "nope"}, call_id="c")


def test_every_sub_agent_is_described_for_the_supervisor(ops: Agent) -> None:
    specs = {s.name: s for s in ops.tool_specs()}
    assert set(specs) == {"agent-records", "agent-deploy", "agent-billing"}
    for key, sub in ops.agents.items():
        assert specs[f"agent-{key}"].description == sub.description
        assert sub.instructions
        for tool in sub.tool_specs():
            assert tool.name in sub.description
            assert tool.description
            for prop in tool.input_schema["properties"].values():
                assert prop["description"]


def test_the_example_policy_fits_the_ops_agents_and_tiers_its_refunds(ops: Agent) -> None:
    policy = ApprovalPolicy.load(Path(__file__).parents[2] / "examples" / "policy.toml")
    ChatBot(ops, policy=policy)  # every section names one of the agents' tools

    def refund(amount: float, requester: str = "U0ALICE01") -> StandingAsk:
        return StandingAsk(
            thread_id="slack:T0TEAM:C0OPS:1.2",
            requester=requester,
            tool_name="refund",
            args={"order_id": "A-1001", "amount": amount},
            agent_path=("ops", "billing"),
        )

    assert policy.rule("refund", refund(500)).approvers == frozenset({"U034LEAD"})
    finance = policy.rule("refund", refund(5000))
    assert (finance.quorum, finance.tier) == (2, "tools.refund.tiers[0]")
    assert not policy.rule("refund", refund(200, requester="U034LEAD")).approval
    assert policy.rule("refund", refund(200)).approval
