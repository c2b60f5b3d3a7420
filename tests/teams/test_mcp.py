"""An MCP server's tools through Teams: the example config's ticket desk, the demo model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents import MemoryStore
from agents.models.demo import DemoModel
from bot.config import load_config
from tests.examples.conftest import EXAMPLE_CONFIG

from . import activities as act
from .conftest import MakeBot
from .fake_connector import FakeConnector


async def test_an_mcp_tool_that_changes_data_runs_once_its_card_is_approved(
    make_bot: MakeBot, connector: FakeConnector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tickets = tmp_path / "tickets.json"
    monkeypatch.setenv("OPS_DB_PATH", str(tmp_path / "ops.db"))
    monkeypatch.setenv("TICKETS_DB", str(tickets))
    loaded = await load_config(EXAMPLE_CONFIG, DemoModel(), MemoryStore())
    try:
        teams = await make_bot(agent=loaded.agent)
        root = act.next_id()
        thread = f"{act.CHANNEL};messageid={root}"
        await teams.post(
            act.channel_post(connector.url, "close ticket T-101", activity_id=root, mention=True)
        )
        await teams.bot.drain()
        (posted,) = connector.cards(thread)
        assert posted.card is not None
        assert posted.card_text.splitlines()[:2] == [
            "🔒 **Approval needed:** **close\\_ticket (MCP server tickets)**",
            "Agent: ops › tickets",
        ]
        assert json.loads(tickets.read_text())["T-101"]["status"] == "open"

        await teams.post(
            act.execute(
                connector.url,
                posted.card,
                "approve",
                conversation=act.channel_conversation(root),
                card_id=posted.response_id,
            )
        )
        await teams.bot.drain()
        assert json.loads(tickets.read_text())["T-101"]["status"] == "closed"
        assert any("Closed T-101" in t for t in connector.texts(thread))
    finally:
        await loaded.aclose()
