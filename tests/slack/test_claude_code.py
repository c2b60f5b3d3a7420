"""The README's Claude Code set-up, as written: ``examples/claude-code/bot.toml`` serves
the bot, and the ``mcp.json`` Claude Code is given reaches its ``approval_prompt``
(``--permission-prompt-tool mcp__approvals__approval_prompt``) with the SDK's client."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from adapters.slack.wire import APPROVE_ACTION
from agents import DemoModel, MemoryStore
from bot.config import load_config

from .conftest import StartBot
from .fake_slack import FakeSlack
from .harness import ALICE
from .test_approvals import card_text
from .test_client_api import the_card
from .test_client_mcp import text_of

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "claude-code"
COMMAND = (
    "--mcp-config examples/claude-code/mcp.json "
    "--permission-prompt-tool mcp__approvals__approval_prompt"
)
CLAUDE_TOKEN = "claude-token-0123456789abcdef"


def expanded(text: str, env: dict[str, str]) -> str:
    """``${VAR}`` and ``${VAR:-default}`` as Claude Code expands them in ``mcp.json``."""

    def one(match: re.Match[str]) -> str:
        return env.get(match.group(1), match.group(2) or "")

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}", one, text)


def test_the_readme_shows_this_set_up() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert COMMAND in readme
    assert "examples/claude-code/bot.toml" in readme
    assert (EXAMPLE / "mcp.json").read_text(encoding="utf-8").strip() in readme


async def test_claude_codes_permission_prompt_waits_for_a_person(
    serve: StartBot, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_APPROVALS_TOKEN", CLAUDE_TOKEN)
    monkeypatch.setenv("CI_APPROVALS_TOKEN", "ci-token-0123456789abcdef")
    slack.add_channel("C0DEPLOYS", name="deploys")
    store = MemoryStore()
    config = await load_config(EXAMPLE / "bot.toml", DemoModel(), store)
    bot = await serve(config.agent, clients=config.clients)

    # What Claude Code does with --mcp-config: the server named in the tool's name.
    prefix, server, tool = ["mcp", "approvals", "approval_prompt"]
    assert prefix == "mcp"
    # As the README's command line sets them for Claude Code.
    url = str(bot.server.make_url("")).rstrip("/")
    env = {**os.environ, "APPROVALS_URL": url, "APPROVALS_TOKEN": CLAUDE_TOKEN}
    entry: dict[str, Any] = json.loads(
        expanded((EXAMPLE / "mcp.json").read_text(encoding="utf-8"), env)
    )["mcpServers"][server]
    assert entry["type"] == "http"
    async with (
        httpx2.AsyncClient(headers=entry["headers"], timeout=httpx2.Timeout(30)) as http,
        Client(streamable_http_client(entry["url"], http_client=http)) as client,
    ):
        assert tool in {t.name for t in (await client.list_tools()).tools}
        asking = asyncio.create_task(
            client.call_tool(
                tool,
                {
                    "tool_name": "Bash",
                    "input": {"command": "make deploy", "description": "Deploy"},
                    "tool_use_id": "toolu_01ABC",
                },
            )
        )
        card = await the_card(slack)
        assert "Bash (run by claude)" in card_text(card)
        assert await bot.press(card, APPROVE_ACTION, user=ALICE) == 200
        answer = json.loads(text_of(await asyncio.wait_for(asking, 10)))
    assert answer == {
        "behavior": "allow",
        "updatedInput": {"command": "make deploy", "description": "Deploy"},
    }
    await config.aclose()
