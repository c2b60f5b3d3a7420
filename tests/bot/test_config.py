"""BOT_CONFIG: agents, Python tools and MCP servers from one TOML file, checked at start."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from agents import DemoModel, MemoryStore, Message, Tool, ToolCall
from agents.models.demo import extract_fields
from bot import ApprovalCard, ApprovalPolicy, ChatBot, PolicyError, Prompt, Reply, load_settings
from bot.__main__ import main
from bot.config import ConfigError, load_config, read_config
from bot.server import build_app
from examples.ops.deploy import tools as deploy_tools
from tests.agents.helpers import call_then_answer
from tests.mcp.conftest import ROOT, SERVER_MODULE, Calls

from .helpers import RecordingMessenger, click, message

EXAMPLE = ROOT / "examples" / "bot.toml"

TREE = """
[bot]
root = "front"

[agents.front]
agents = ["desk"]

[agents.desk]
mcp = ["tickets"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bot.toml"
    path.write_text(text)
    return path


def tickets_server(calls: Calls, extra: str = "") -> str:
    return f"""
[mcp.tickets]
command = "python"
args = ["-m", "{SERVER_MODULE}", "stdio"]
cwd = "{ROOT}"
env = {{ MCP_TEST_CALLS = "{calls.path}" }}
{extra}
"""


def problems(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        read_config(path, env or {})
    prefix = f"config {path}: "
    assert all(line.startswith(prefix) for line in info.value.lines)
    return [line.removeprefix(prefix) for line in info.value.lines]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[bot]\nroot = 'a'\n[agents.a]\ntool = ['x:y']\n", ["agents.a.tool: unknown field"]),
        ("[bot]\nroot = 'b'\n[agents.a]\n", ["bot.root: no agent 'b' (known: a)"]),
        (
            "[bot]\nroot = 'a'\n[agents.a]\nagents = ['c']\n",
            ["agents.a.agents: no agent 'c' (known: a)"],
        ),
        (
            "[bot]\nroot = 'a'\n[agents.a]\nagents = ['b']\n[agents.b]\nagents = ['a']\n",
            ["agents.b.agents: a cycle: a -> b -> a"],
        ),
        (
            "[bot]\nroot = 'a'\n[agents.a]\n[agents.b]\n",
            ["agents.b: not reached from bot.root 'a'"],
        ),
        (
            "[bot]\nroot = 'a'\n[agents.a]\nmcp = ['wiki']\n",
            ["agents.a.mcp: no server 'wiki' (none declared)"],
        ),
        (
            "[bot]\nroot = 'a'\n[agents.a]\n[mcp.wiki]\nurl = 'http://x/mcp'\n",
            ["mcp.wiki: no agent uses this server"],
        ),
        (
            "[bot]\nroot = 'a'\n[agents.a]\nmcp = ['w']\n[mcp.w]\n"
            "url = 'http://x'\ncommand = 'y'\n",
            ["mcp.w: give exactly one of url and command"],
        ),
        (
            "[bot]\nroot = 'a'\n[agents.a]\nmcp = ['w']\n[mcp.w]\ncommand = 'y'\n"
            "require_approval = 'sometimes'\n",
            ["mcp.w.require_approval: Input should be 'always', 'never' or 'hints'"],
        ),
        (
            "[bot]\nroot = 'a'\n[agents.a]\nmax_steps = 0\n",
            ["agents.a.max_steps: Input should be greater than or equal to 1"],
        ),
        ("[bot\n", None),
    ],
)
def test_a_config_that_cannot_run_is_one_line_per_problem(
    tmp_path: Path, text: str, expected: list[str] | None
) -> None:
    found = problems(tmp_path, text)
    if expected is None:
        assert len(found) == 1
        assert found[0].startswith("not valid TOML")
    else:
        assert found == expected


def test_variables_come_from_the_environment_and_an_unset_one_is_a_problem(
    tmp_path: Path,
) -> None:
    text = (
        "[bot]\nroot = 'a'\n[agents.a]\nmcp = ['wiki']\n[mcp.wiki]\n"
        "url = 'http://${WIKI_HOST}/mcp'\nheaders = { Authorization = 'Bearer ${WIKI_TOKEN}' }\n"
    )
    assert problems(tmp_path, text, {"WIKI_HOST": "127.0.0.1:9"}) == [
        "mcp.wiki.headers.Authorization: ${WIKI_TOKEN} is not set"
    ]
    config = read_config(write(tmp_path, text), {"WIKI_HOST": "h:1", "WIKI_TOKEN": "t0k"})
    assert config.mcp["wiki"].url == "http://h:1/mcp"
    assert config.mcp["wiki"].headers == {"Authorization": "Bearer t0k"}
    defaulted = text.replace("${WIKI_HOST}", "${WIKI_HOST:-wiki:8931}")
    config = read_config(write(tmp_path, defaulted), {"WIKI_TOKEN": "t0k"})
    assert config.mcp["wiki"].url == "http://wiki:8931/mcp"


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    latin = tmp_path / "bot.toml"
    latin.write_bytes(b"[bot]\n# caf\xe9\n")
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 11 is 0xe9\)"):
        read_config(latin)


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read it"):
        read_config(tmp_path / "nope.toml")


async def test_the_example_config_builds_the_ops_tree_with_the_mcp_desk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_DB_PATH", str(tmp_path / "ops.db"))
    monkeypatch.setenv("TICKETS_DB", str(tmp_path / "tickets.json"))
    loaded = await load_config(EXAMPLE, DemoModel(), MemoryStore())
    try:
        ops = loaded.agent
        assert ops.id == "ops"
        assert set(ops.agents) == {"records", "deploy", "billing", "tickets"}
        assert ops.agents["deploy"].tool("deploy_service") is not None
        desk = ops.agents["tickets"]
        names = {spec.name for spec in desk.tool_specs()}
        assert names == {
            "tickets__list_tickets",
            "tickets__show_ticket",
            "tickets__close_ticket",
            "tickets__reopen_ticket",
        }
        assert ops.default_options.auto_resume_suspended_tools
    finally:
        await loaded.aclose()


async def test_tool_paths_that_do_not_import_are_one_line_each(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[bot]\nroot = 'a'\n[agents.a]\n"
        "tools = ['examples.ops.deploy:nothing', 'no.such.module:tools',"
        " 'examples.ops:DEFAULT_DB_PATH']\n",
    )
    with pytest.raises(ConfigError) as info:
        await load_config(path, DemoModel(), MemoryStore())
    assert [line.removeprefix(f"config {path}: ") for line in info.value.lines] == [
        "agents.a.tools[0]: 'examples.ops.deploy:nothing': 'examples.ops.deploy' has no 'nothing'",
        "agents.a.tools[1]: 'no.such.module:tools': cannot import 'no.such.module' "
        "(No module named 'no')",
        "agents.a.tools[2]: 'examples.ops:DEFAULT_DB_PATH': not a Tool, a list of Tools, "
        "or a function returning one",
    ]


async def test_a_value_the_schema_refuses_hides_no_other_problem(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[bot]\nroot = 'a'\n[agents.a]\nrequire_approval = 'sometimes'\nmax_steps = 0\n"
        "agents = ['b', 'nobody']\ntools = ['no.such.module:tools']\n[agents.b]\n"
        "tools = 7\n[mcp.desk]\nurl = 'http://127.0.0.1:9/mcp'\ncommand = 'desk'\n",
    )
    with pytest.raises(ConfigError) as info:
        await load_config(path, DemoModel(), MemoryStore())
    assert [line.removeprefix(f"config {path}: ") for line in info.value.lines] == [
        "agents.a.require_approval: Input should be a valid boolean, unable to interpret input",
        "agents.a.max_steps: Input should be greater than or equal to 1",
        "agents.b.tools: Input should be a valid list",
        "agents.a.agents: no agent 'nobody' (known: a, b)",
        "mcp.desk: give exactly one of url and command",
        "agents.a.tools[0]: 'no.such.module:tools': cannot import 'no.such.module' "
        "(No module named 'no')",
    ]


@pytest.mark.parametrize(
    ("agents", "problem"),
    [
        (
            "[agents.a]\ntools = ['examples.ops.deploy:tools', 'examples.ops.deploy:tools']\n",
            "agents.a.tools: two tools are named 'deploy_service'\n"
            "agents.a.tools: two tools are named 'service_status'",
        ),
        (
            "[agents.a]\nagents = ['deploy_service']\ntools = ['tests.bot.test_config:clash']\n"
            "[agents.deploy_service]\n",
            "agent 'a': tool 'agent-deploy_service' clashes with sub-agent 'deploy_service'",
        ),
    ],
)
async def test_tool_names_that_clash_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agents: str, problem: str
) -> None:
    monkeypatch.setenv("OPS_DB_PATH", str(tmp_path / "ops.db"))
    path = write(tmp_path, "[bot]\nroot = 'a'\n" + agents)
    with pytest.raises(ConfigError) as info:
        await load_config(path, DemoModel(), MemoryStore())
    assert info.value.lines == [f"config {path}: {line}" for line in problem.splitlines()]


def clash() -> list[Tool]:
    """A tool named like the delegation tool of a sub-agent ``deploy_service``."""
    return [replace(deploy_tools()[0], name="agent-deploy_service")]


async def test_an_override_of_a_tool_the_server_lacks_stops_the_start(
    tmp_path: Path,
) -> None:
    calls = Calls(tmp_path / "calls.jsonl")
    extra = "[mcp.tickets.tools.delete_tiket]\nrequire_approval = false\n"
    path = write(tmp_path, TREE + tickets_server(calls, extra))
    with pytest.raises(ConfigError) as info:
        await load_config(path, DemoModel(), MemoryStore())
    (line,) = info.value.lines
    assert line.startswith(f"config {path}: mcp.tickets.tools.delete_tiket: the server has no")
    assert "delete_ticket" in line


async def test_a_server_that_cannot_start_stops_the_start(tmp_path: Path) -> None:
    path = write(tmp_path, TREE + '[mcp.tickets]\ncommand = "/nonexistent/server"\n')
    with pytest.raises(ConfigError) as info:
        await load_config(path, DemoModel(), MemoryStore())
    (line,) = info.value.lines
    assert line.startswith(f"config {path}: mcp.tickets: cannot connect:")


async def test_the_policy_names_mcp_tools_as_the_model_sees_them(tmp_path: Path) -> None:
    calls = Calls(tmp_path / "calls.jsonl")
    loaded = await load_config(
        write(tmp_path, TREE + tickets_server(calls)), DemoModel(), MemoryStore()
    )
    try:
        good = write(tmp_path, "[tools.tickets__delete_ticket]\napprovers = ['U1']\n")
        ChatBot(loaded.agent, policy=ApprovalPolicy.load(good))
        bad = tmp_path / "bad.toml"
        bad.write_text("[tools.tickets__delete_tiket]\napprovers = ['U1']\n")
        with pytest.raises(PolicyError, match="did you mean 'tickets__delete_ticket'"):
            ChatBot(loaded.agent, policy=ApprovalPolicy.load(bad))
    finally:
        await loaded.aclose()


async def test_an_mcp_card_in_the_thread_runs_the_call_once_when_approved(tmp_path: Path) -> None:
    """Chat end to end: a card for the destructive tool, none for the read-only one."""
    calls = Calls(tmp_path / "calls.jsonl")
    model = call_then_answer(
        ToolCall("tickets__lookup", {"ticket": "T-1"}),
        ToolCall("tickets__delete_ticket", {"ticket": "T-1"}),
    )
    text = '[bot]\nroot = "desk"\n[agents.desk]\nmcp = ["tickets"]\n' + tickets_server(calls)
    loaded = await load_config(write(tmp_path, text), model, MemoryStore())
    bot = ChatBot(loaded.agent)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    try:
        await bot.on_message(message("clean up T-1"))
        await bot.drain()
        (card,) = messenger.views(ApprovalCard)  # one card: the lookup ran unasked
        assert card.tool_name == "tickets__delete_ticket"
        assert [c["tool"] for c in calls()] == ["lookup"]

        result = await bot.on_click(click(card, user="U2"))
        await bot.drain()
        assert result.accepted
        assert [c["tool"] for c in calls()] == ["lookup", "delete_ticket"]
        assert "deleted T-1" in messenger.views(Reply)[-1].text
    finally:
        await bot.aclose()
        await loaded.aclose()


def test_check_connects_the_servers_and_says_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("BOT_AGENT", "APPROVAL_POLICY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BOT_MODEL", "demo")
    monkeypatch.setenv("STORE_URL", "memory://")
    monkeypatch.setenv("OPS_DB_PATH", str(tmp_path / "ops.db"))
    monkeypatch.setenv("BOT_LOG_FILE", str(tmp_path / "bot.log"))
    monkeypatch.setenv("TICKETS_DB", str(tmp_path / "tickets.json"))
    monkeypatch.setenv("BOT_CONFIG", str(EXAMPLE))
    assert main(["check"]) == 0
    assert f"agent ops ({EXAMPLE})" in capsys.readouterr().out

    broken = write(tmp_path, "[bot]\nroot = 'nobody'\n[agents.a]\n")
    monkeypatch.setenv("BOT_CONFIG", str(broken))
    assert main(["check"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"approval-bot: config {broken}: bot.root: no agent 'nobody' (known: a)"
    ]


async def test_healthz_and_metrics_report_each_mcp_server(tmp_path: Path) -> None:
    calls = Calls(tmp_path / "calls.jsonl")
    model = call_then_answer(ToolCall("tickets__lookup", {"ticket": "T-1"}))
    text = '[bot]\nroot = "desk"\n[agents.desk]\nmcp = ["tickets"]\n' + tickets_server(calls)
    loaded = await load_config(write(tmp_path, text), model, MemoryStore())
    bot = ChatBot(loaded.agent)
    app = build_app(load_settings(store_url="memory://"), bot, [])
    try:
        await loaded.agent.generate("T-1?")
        async with TestClient(TestServer(app)) as client:
            health = await (await client.get("/healthz")).json()
            assert health["ok"] is True
            assert health["mcp"] == {"tickets": {"state": "connected", "tools": 10, "error": None}}
            body = await (await client.get("/metrics")).text()
        assert 'approval_bot_mcp_calls_total{server="tickets"} 1.0' in body
        assert 'approval_bot_mcp_errors_total{server="tickets"} 0.0' in body
        assert 'approval_bot_mcp_connected{server="tickets"} 1.0' in body

        await loaded.aclose()  # the server goes away: health still 200, its state says so
        async with TestClient(TestServer(build_app(load_settings(), bot, []))) as client:
            response = await client.get("/healthz")
            assert response.status == 200
            assert (await response.json())["mcp"]["tickets"]["state"] == "closed"
    finally:
        await bot.aclose()
        await loaded.aclose()


def from_reply(messages: list[Message], schema: dict[str, Any]) -> dict[str, Any]:
    """What a model would read off the person's reply: the demo model's rules."""
    return extract_fields(messages[-1].text, schema)


@asynccontextmanager
async def escalation_desk(
    tmp_path: Path, ticket: str, policy: str | None = None
) -> AsyncIterator[tuple[ChatBot, RecordingMessenger, Calls]]:
    """A chat bot whose model escalates ``ticket`` (the server asks why), answers auto-resumed."""
    calls = Calls(tmp_path / "calls.jsonl")
    model = call_then_answer(
        ToolCall("tickets__escalate", {"ticket": ticket}), structured_handler=from_reply
    )
    text = (
        '[bot]\nroot = "desk"\n[agents.desk]\nmcp = ["tickets"]\nauto_resume = true\n'
        + tickets_server(calls)
    )
    loaded = await load_config(write(tmp_path, text), model, MemoryStore())
    rules = None
    if policy is not None:
        path = tmp_path / "policy.toml"
        path.write_text(policy)
        rules = ApprovalPolicy.load(path)
    bot = ChatBot(loaded.agent, policy=rules)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    try:
        yield bot, messenger, calls
    finally:
        await bot.aclose()
        await loaded.aclose()


async def test_a_servers_question_is_asked_in_the_thread_and_the_reply_answers_it(
    tmp_path: Path,
) -> None:
    async with escalation_desk(tmp_path, "T-1") as (bot, messenger, calls):
        await bot.on_message(message("escalate T-1"))
        await bot.drain()
        (asked,) = messenger.views(Prompt)
        assert asked.question == "Why should the ticket be escalated?"
        assert [f.name for f in asked.fields] == ["reason"]

        await bot.on_message(message("the whole floor is offline"))
        await bot.drain()
        assert "T-1 escalated: the whole floor is offline" in messenger.views(Reply)[-1].text
        assert [c["tool"] for c in calls()] == ["escalate"]  # its body ran once, answered


async def test_only_people_who_may_decide_the_tool_answer_its_servers_question(
    tmp_path: Path,
) -> None:
    policy = '[tools.tickets__escalate]\napprovers = ["U9LEAD"]\n'
    async with escalation_desk(tmp_path, "T-2", policy) as (bot, messenger, calls):
        await bot.on_message(message("escalate T-2", user="U1"))
        await bot.drain()
        assert len(messenger.views(Prompt)) == 1

        await bot.on_message(message("because I say so", user="U1"))
        await bot.drain()
        assert messenger.tells[-1][1:] == (
            "U1",
            "Only people who may approve `tickets__escalate` may answer its question; "
            "your reply was not used.",
        )
        assert calls() == []

        await bot.on_message(message("the VPN is down for everyone", user="U9LEAD"))
        await bot.drain()
        assert "T-2 escalated: the VPN is down for everyone" in messenger.views(Reply)[-1].text


async def test_the_file_names_the_requests_to_suggest(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[bot]\nroot = 'a'\n"
        "[[bot.prompts]]\ntitle = 'Deploy to staging'\nmessage = 'deploy web to staging'\n"
        "[agents.a]\ntools = ['examples.ops.deploy:tools']\n",
    )
    config = await load_config(path, DemoModel(), MemoryStore())
    try:
        assert [(p.title, p.message) for p in config.prompts] == [
            ("Deploy to staging", "deploy web to staging")
        ]
    finally:
        await config.aclose()
    five = "".join("[[bot.prompts]]\ntitle = 't'\nmessage = 'm'\n" for _ in range(5))
    assert problems(tmp_path, f"[bot]\nroot = 'a'\n{five}[agents.a]\n") == [
        "bot.prompts: List should have at most 4 items after validation, not 5"
    ]


def test_the_demo_suggests_its_own_requests_unless_the_file_names_some() -> None:
    from agents.models.demo import DEMO_PROMPTS
    from bot.__main__ import _prompts

    demo = load_settings(bot_model="demo")
    assert [(p.title, p.message) for p in _prompts(demo, None)] == list(DEMO_PROMPTS)
