"""``[clients.<name>]`` in BOT_CONFIG: checked at start, one line per problem; the policy
names a client's tools ``<client>__<tool>``; a channel the bot cannot post in stops it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents import DemoModel, MemoryStore
from bot import ApprovalPolicy, ChatBot, PolicyError
from bot.config import ConfigError, load_config

from .helpers import RecordingMessenger
from .test_config import problems, write

TREE = """
[bot]
root = "ops"

[agents.ops]
tools = ["examples.ops.deploy:tools"]
"""
TOKEN = "a-token-of-twenty-chars"


def test_clients_that_cannot_serve_are_one_line_each(tmp_path: Path) -> None:
    text = (
        TREE
        + """
[clients.ci]
token = "short"

[clients.ops]
token = "${OPS_TOKEN}"

[clients."two__parts"]
token = "another-token-of-20-chars"

[clients.ci_]
token = "a-third-token-of-20-chars"

[clients.cd]
token = "a-token-of-twenty-chars"
tools = ["deploy", "ask", "not a name"]
colour = "red"
"""
    )
    found = problems(tmp_path, text)
    assert "clients.ci.token: shorter than 16 characters" in found
    assert "clients.ops: an agent or MCP server has this name already" in found
    assert "clients.ops.token: ${OPS_TOKEN} is not set" in found
    assert any(p.startswith("clients.two__parts: a client name") for p in found)
    # ci_'s deploy and ci's _deploy would both be ci___deploy in the policy.
    assert any(p.startswith("clients.ci_: a client name") for p in found)
    assert "clients.cd.tools[1]: 'ask' is its questions'" in found
    assert "clients.cd.tools[2]: 'not a name' is no tool name" in found
    assert any(p.startswith("clients.cd.colour") for p in found)


def test_two_clients_may_not_share_a_token(tmp_path: Path) -> None:
    text = TREE + f'[clients.a]\ntoken = "{TOKEN}"\n[clients.b]\ntoken = "{TOKEN}"\n'
    assert "clients: two clients have the same token" in problems(tmp_path, text)


async def test_the_policy_names_a_clients_tools(tmp_path: Path) -> None:
    text = TREE + f'[clients.ci]\ntoken = "{TOKEN}"\ntools = ["deploy"]\nchannel = "C1"\n'
    config = await load_config(write(tmp_path, text), DemoModel(), MemoryStore())
    listed = ApprovalPolicy.from_toml("[tools.ci__deploy]\napprovers = ['U1']\n")
    await ChatBot(config.agent, policy=listed, clients=config.clients).aclose()  # known
    typo = ApprovalPolicy.from_toml("[tools.ci__deploi]\napprovers = ['U1']\n")
    with pytest.raises(PolicyError, match="ci__deploi"):
        ChatBot(config.agent, policy=typo, clients=config.clients)
    # A client that may ask about any tool: any name of it is one.
    text = TREE + f'[clients.cd]\ntoken = "{TOKEN}"\nchannel = "C1"\n'
    config = await load_config(write(tmp_path, text), DemoModel(), MemoryStore())
    anything = ApprovalPolicy.from_toml("[tools.cd__rollback]\nquorum = 1\n")
    await ChatBot(config.agent, policy=anything, clients=config.clients).aclose()


async def test_a_channel_the_bot_cannot_post_in_stops_it(tmp_path: Path) -> None:
    text = TREE + f'[clients.ci]\ntoken = "{TOKEN}"\nchannel = "C0NOWHERE"\n'
    config = await load_config(write(tmp_path, text), DemoModel(), MemoryStore())
    bot = ChatBot(config.agent, clients=config.clients)
    bot.register("test", RecordingMessenger(channels={"C0DEPLOYS"}))
    with pytest.raises(ConfigError) as info:
        await bot.check_clients()
    assert "clients.ci.channel: the bot cannot post in channel C0NOWHERE" in str(info.value)
    await bot.aclose()
