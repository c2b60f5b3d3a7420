"""The approval policy file: parsing, clear errors, and the rules it enforces."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path

import pytest

from bot import ApprovalPolicy, PolicyError
from bot.policy import parse_duration

POLICY = """
[default]
approvers = ["U1", "U2"]
expires_in = "24h"

[tools.restart_service]
approvers = ["U9"]
allow_self_approval = false
expires_in = "1h30m"

[tools.find_user]
approvers = []
"""


def test_without_a_file_anyone_may_decide_the_requester_included() -> None:
    policy = ApprovalPolicy()
    assert policy.check("anything", "U1", "U1") is None
    assert policy.check("anything", "U1", "U5") is None
    assert policy.rule("anything").expires_in is None


def test_a_tool_section_overrides_the_default() -> None:
    policy = ApprovalPolicy.from_toml(POLICY)
    assert policy.check("restart_service", "U1", "U9") is None
    assert policy.check("restart_service", "U1", "U1") is not None
    assert policy.check("restart_service", "U9", "U9") is not None  # no self-approval
    assert policy.rule("restart_service").expires_in == timedelta(hours=1, minutes=30)


def test_unlisted_tools_follow_the_default() -> None:
    policy = ApprovalPolicy.from_toml(POLICY)
    assert policy.check("refund", "U7", "U2") is None
    assert policy.check("refund", "U7", "U7") == "You are not one of the approvers for `refund`."
    assert policy.rule("refund").expires_in == timedelta(hours=24)


def test_an_empty_approver_list_means_anyone() -> None:
    assert ApprovalPolicy.from_toml(POLICY).check("find_user", "U7", "U8") is None


def test_a_requester_may_always_withdraw_their_own_request() -> None:
    policy = ApprovalPolicy.from_toml(POLICY)
    assert policy.check("restart_service", "U1", "U1", action="decline") is None
    assert policy.check("restart_service", "U1", "U3", action="decline") is not None


def test_a_policy_file_is_loaded_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    assert ApprovalPolicy.load(path).tool_names == {"restart_service", "find_user"}


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('[default]\napprovers = "U1"', "default.approvers", "valid list"),
        ('[tools.deploy]\nexpires_in = "soon"', "tools.deploy.expires_in", "not a duration"),
        ("[tools.deploy]\nexpires_in = 0", "tools.deploy.expires_in", "positive"),
        (
            "[tools.deploy]\nquorom = 2",
            "tools.deploy.quorom",
            "never_for, notify, quorum, remind_after, respond, review, sensitive, tiers, when)",
        ),
        ("[default]\nquorum = 0", "default.quorum", "greater than or equal to 1"),
        ('[default]\nquorum = "2"', "default.quorum", "valid integer"),
        ("[default]\nquorum = 1.5", "default.quorum", "valid integer"),
        ("[tools.deploy]\nquorum = true", "tools.deploy.quorum", "valid integer"),
        (
            '[default]\napprovers = ["U1", "U2"]\nquorum = 3',
            "default.quorum",
            "quorum = 3 can never be reached: only 2 approvers are listed",
        ),
        (
            '[tools.deploy]\napprovers = ["U1", "U1"]\nquorum = 2',
            "tools.deploy.quorum",
            "only 1 approver is listed",
        ),
        (
            '[default]\napprovers = ["U1", "U2"]\n[tools.deploy]\nquorum = 3',
            "tools.deploy.quorum",
            "only 2 approvers are listed",
        ),
        (
            '[default]\nquorum = 2\n[tools.deploy]\napprovers = ["U9"]',
            "tools.deploy.approvers",
            "quorum = 2 can never be reached",
        ),
        ("[defaults]\napprovers = []", "defaults", "unknown section"),
        ('[default]\nallow_self_approval = "no"', "default.allow_self_approval", "boolean"),
        ('[default]\napprovers = [""]', "default.approvers.0", "at least 1 character"),
    ],
)
def test_an_invalid_field_is_named_with_the_file(text: str, field: str, words: str) -> None:
    with pytest.raises(PolicyError) as info:
        ApprovalPolicy.from_toml(text, source="/etc/bot/policy.toml")
    assert info.value.path == "/etc/bot/policy.toml"
    assert info.value.field == field
    assert str(info.value).startswith(f"approval policy /etc/bot/policy.toml: {field}: ")
    assert words in str(info.value)


def test_broken_toml_is_a_clear_error() -> None:
    with pytest.raises(PolicyError, match=r"policy.toml: not valid TOML: .*line 2, column 19\)"):
        ApprovalPolicy.from_toml('[default]\napprovers = ["U1" "U2"]', source="policy.toml")


def test_a_file_that_is_not_utf8_is_a_clear_error_and_a_loaded_one_keeps_its_digest(
    tmp_path: Path,
) -> None:
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[tools.deploy]\n# caf\xe9\napprovers = ["U1"]\n')
    with pytest.raises(PolicyError, match=r"latin.toml: not UTF-8 text \(byte 20 is 0xe9\)"):
        ApprovalPolicy.load(latin)
    good = tmp_path / "good.toml"
    good.write_bytes('[tools.deploy]\r\n# café\r\napprovers = ["U1"]\r\n'.encode())
    loaded = ApprovalPolicy.load(good)
    assert loaded.digest == "sha256:" + hashlib.sha256(good.read_bytes()).hexdigest()


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(PolicyError, match=r"nope.toml: cannot read it \(No such file"):
        ApprovalPolicy.load(missing)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("24h", 86400), ("2d", 172800), ("1h30m", 5400), (45, 45)],
)
def test_durations(text: str | int, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_the_quorum_is_one_unless_set_and_a_tool_section_overrides_it() -> None:
    policy = ApprovalPolicy.from_toml(
        """
        [default]
        approvers = ["U1", "U2", "U3"]
        quorum = 2

        [tools.deploy]
        quorum = 3

        [tools.find_user]
        approvers = []
        quorum = 1

        [tools.refund]
        approvers = []
        quorum = 5
        """
    )
    assert ApprovalPolicy().quorum("anything") == 1
    assert policy.quorum("anything") == 2
    assert policy.quorum("deploy") == 3
    assert policy.quorum("find_user") == 1
    # Without a list anyone may vote, so any quorum can be met.
    assert policy.quorum("refund") == 5


def test_a_section_for_a_tool_no_agent_has_is_refused_with_a_suggestion() -> None:
    policy = ApprovalPolicy.from_toml(
        "[tools.deploy_servise]\napprovers = ['U1']\n[tools.launch_rockets]\n", source="p.toml"
    )
    with pytest.raises(PolicyError) as info:
        policy.check_tools({"deploy_service", "refund"})
    assert info.value.lines == [
        "approval policy p.toml: tools.deploy_servise: no agent has a tool named "
        "'deploy_servise' (did you mean 'deploy_service'?)",
        "approval policy p.toml: tools.launch_rockets: no agent has a tool named "
        "'launch_rockets' (known: deploy_service, refund)",
    ]


def test_a_section_for_a_sub_agent_is_refused_since_only_its_tools_are_approved() -> None:
    policy = ApprovalPolicy.from_toml("[tools.agent-deploy]\nquorum = 1\n", source="p.toml")
    with pytest.raises(PolicyError, match="hands work to a sub-agent"):
        policy.check_tools({"deploy_service"}, sub_agents={"agent-deploy"})


def test_sections_for_known_tools_pass() -> None:
    ApprovalPolicy.from_toml(POLICY).check_tools({"restart_service", "find_user", "other"})
