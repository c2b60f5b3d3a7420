"""The console adapter: in process with scripted agents, and ``python -m bot console``."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.console import ConsoleAdapter
from adapters.console.render import render
from agents import Agent
from bot import ApprovalCard, ApprovalPolicy, ChatBot, Person
from tests.agents.helpers import Counter
from tests.examples.conftest import deployed

from .helpers import booking_agent, restart_agent, weather_agent
from .test_batch import BATCHED, restarts

ROOT = Path(__file__).resolve().parents[2]


async def lines(*texts: str) -> AsyncIterator[str]:
    for text in texts:
        yield text + "\n"


async def chat(agent: Agent, *texts: str) -> str:
    bot = ChatBot(agent)
    out = io.StringIO()
    await ConsoleAdapter(bot, user="ada", lines=lines(*texts), out=out).run()
    await bot.aclose()
    return out.getvalue()


async def test_a_card_is_answered_on_the_next_line() -> None:
    ran = Counter()
    out = await chat(restart_agent(ran), "restart the api", "maybe", "a")
    assert "🔒 Approval needed: restart_service\n    Agent: ops" in out
    assert "    service: api" in out
    assert "Asked by: ada" in out
    assert out.count("Approve? [a]pprove / [e]dit / [d]ecline (reason) > ") == 2
    assert "Please answer 'a' (or 'y') to approve" in out
    assert "✅ Approved: restart_service\n    ✅ Approved by ada" in out
    assert out.rstrip().endswith("bot> Done. restart_service ok: restarted api")
    assert ran.count == 1


async def test_stop_at_a_card_stops_the_request_and_nothing_runs() -> None:
    ran = Counter()
    out = await chat(restart_agent(ran), "restart the api", "x", "stop")
    assert "'stop' to stop the whole request" in out  # named when it asks again
    assert (
        "🛑 Stopped: restart_service\n"
        "    🛑 Stopped by ada: the request ended before anyone decided" in out
    )
    assert "ada: stopped as you asked. Nothing more runs for this request." in out
    assert "still waiting" not in out
    assert ran.count == 0


async def test_declining_takes_the_rest_of_the_line_as_the_reason() -> None:
    ran = Counter()
    out = await chat(restart_agent(ran), "restart the api", "d not during lunch")
    assert (
        "❌ Declined: restart_service\n    ❌ Declined by ada\n    Reason: not during lunch" in out
    )
    assert "Reason: not during lunch" in out
    assert ran.count == 0


async def test_a_question_is_answered_by_the_next_line() -> None:
    out = await chat(weather_agent(), "weather?", "Lisbon")
    assert "💬 weather asks:\n    Which city?" in out
    assert (
        "Reply in this thread to answer (city).\n"
        "    (or type /decline to decline, /cancel to cancel)" in out
    )
    assert "bot> The weather in Lisbon: sunny" in out


async def test_end_of_input_with_a_card_open_leaves_it_pending() -> None:
    bot = ChatBot(restart_agent(Counter()))
    out = io.StringIO()
    console = ConsoleAdapter(bot, user="ada", lines=lines("restart the api"), out=out)
    await console.run()
    await bot.aclose()
    shown = out.getvalue().rstrip()
    assert shown.endswith(
        "Approve? [a]pprove / [e]dit / [d]ecline (reason) > \n"
        "(still waiting in thread 'main': restart_service; `make run` shows it again, "
        "or `python -m bot console --thread main`)"
    )
    assert console.thread.id.startswith("console:local:ada:")
    (pending,) = await bot.agent.list_suspended_runs(thread_id=console.thread.id)
    assert pending.tool_name == "restart_service"


def demo_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of ``python -m bot`` on the demo as grace, with its SQLite store
    and the example's database in ``tmp_path``; no platform and no other agent or
    policy than ``extra`` names."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLACK_", "MICROSOFT_", "TEAMS_", "ANTHROPIC_"))
    }
    env |= {
        "BOT_MODEL": "demo",
        "STORE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
        "OPS_DB_PATH": str(tmp_path / "ops.db"),
        "PYTHONPATH": str(ROOT),
        "USER": "grace",
    }
    env.pop("BOT_AGENT", None)
    env.pop("APPROVAL_POLICY", None)
    return env | extra


async def start_console(
    tmp_path: Path, argv: tuple[str, ...], env: dict[str, str]
) -> asyncio.subprocess.Process:
    """``python -m bot console [argv]`` in ``tmp_path``, its standard streams piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "console",
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )


async def console_demo(
    tmp_path: Path, *typed: str, argv: tuple[str, ...] = (), **extra: str
) -> str:
    """``python -m bot console [argv]`` on the demo, fed ``typed`` line by line; its output."""
    process = await start_console(tmp_path, argv, demo_env(tmp_path, **extra))
    script = "\n".join([*typed, ""])
    stdout, stderr = await asyncio.wait_for(process.communicate(script.encode()), 60)
    out, err = stdout.decode(), stderr.decode()
    assert process.returncode == 0, err
    assert "Traceback" not in err
    return out


async def test_python_m_bot_console_runs_the_demo_from_piped_stdin(tmp_path: Path) -> None:
    out = await console_demo(
        tmp_path,
        "find user 12345",
        "delete record abc-123",
        "d keep it",
        "deploy web to staging",
        "9.9.9",
        "delete record abc-123",
        "a",
    )
    assert "you are grace" in out
    assert "- find user 12345: look a user up" in out  # the demo's help in the welcome
    assert "bot> User 12345: name: Ada Lovelace" in out
    assert "❌ Declined: delete_record\n    ❌ Declined by grace\n    Reason: keep it" in out
    assert "💬 deploy_service asks:\n    Which version of web" in out
    assert "Deployed web to staging" in out
    assert "9.9.9" in out
    assert "✅ Approved: delete_record\n    ✅ Approved by grace" in out
    assert out.rstrip().splitlines()[-1].startswith("bot> Deleted record abc-123: user id: 12345")
    assert (tmp_path / "bot.db").exists()


async def test_the_example_config_runs_its_mcp_ticket_desk_in_the_console(tmp_path: Path) -> None:
    tickets = tmp_path / "tickets.json"
    out = await console_demo(
        tmp_path,
        "show ticket T-100",
        "close ticket T-101",
        "a",
        "list tickets",
        "reopen ticket T-102",
        "a",
        "/decline",
        BOT_CONFIG=str(ROOT / "examples" / "bot.toml"),
        TICKETS_DB=str(tickets),
    )
    assert "bot> Ticket T-100: T-100 [open] Printer on floor 3 is on fire" in out
    assert "🔒 Approval needed: close_ticket (MCP server tickets)\n    Agent: ops › tickets" in out
    assert "✅ Approved: close_ticket (MCP server tickets)\n    ✅ Approved by grace" in out
    assert "T-101 [closed] VPN drops every hour" in out
    assert '"status": "closed"' in tickets.read_text()
    # The server's question, declined: the server hears it and leaves the ticket alone.
    assert "💬 reopen_ticket (MCP server tickets) asks:\n    Why should the ticket" in out
    assert (
        "Reply in this thread to answer (reason).\n"
        "    (or type /decline to decline, /cancel to cancel)" in out
    )
    assert "❌ Declined: reopen_ticket (MCP server tickets)\n    ❌ Declined by grace" in out
    assert "T-102 stays as it is: the reason was not given (decline)" in out
    assert json.loads(tickets.read_text())["T-102"]["status"] == "closed"


async def test_the_console_card_shows_the_checked_version_and_that_version_deploys(
    tmp_path: Path,
) -> None:
    out = await console_demo(
        tmp_path,
        "deploy worker to production",
        "not 1.4.1 - use 1.5.0",
        "find user 42",
        "1.5.0",
        "a",
        "delete record zzz-999",
    )
    assert out.count("💬 deploy_service asks:") == 3
    assert out.count("    Which version of worker") == 3
    assert (
        "⚠️ That reply did not fit: version: 'not 1.4.1 - use 1.5.0' is not a version; "
        "answer with just the version, such as 1.4.2" in out
    )
    assert "⚠️ That reply did not fit: version: 'find user 42' is not a version" in out
    card = out[out.index("🔒 Approval needed:") :]
    assert "      version: 1.5.0\n" in card
    assert "not 1.4.1" not in card
    assert "Deployed worker to production: deployment id: 7; version: 1.5.0" in out
    assert deployed(tmp_path / "ops.db") == [("worker", "production", "1.5.0")]
    # No card for a record that is not there: the answer says why instead.
    assert out.count("🔒 Approval needed:") == 1
    assert out.rstrip().splitlines()[-1].startswith("bot> I could not delete record zzz-999")
    assert "No record with id 'zzz-999'" in out


def test_a_quorum_card_shows_its_approvals_in_the_terminal() -> None:
    card = ApprovalCard(
        run_id="run-1",
        tool_call_id="call-1",
        tool_name="deploy",
        args={"service": "api"},
        agent_path=("ops",),
        requester=Person(id="U1", name="ann"),
        expires_at=datetime(2030, 1, 2, 3, 4, tzinfo=UTC),
        quorum=2,
        approvals=(Person(id="U2", name="bob"),),
    )
    assert "    Approvals: bob (1 of 2)\n    Arguments:" in render(card)
    assert "Approvals" not in render(replace(card, quorum=1, approvals=()))
    voters = (Person(id="U2", name="bob"), Person(id="U3"))
    approved = replace(card, status="approved", decided_by=voters, approvals=voters)
    assert render(approved) == "✅ Approved: deploy\n    ✅ Approved by bob, U3"


async def test_a_card_left_open_is_shown_again_when_the_console_starts_on_its_thread(
    tmp_path: Path,
) -> None:
    first = await console_demo(tmp_path, "delete record abc-123")
    assert "(still waiting in thread 'main': delete_record;" in first
    # Ctrl-D, then `make run` again: the same thread, the same card, still decidable.
    second = await console_demo(tmp_path, "a")
    assert "(these still wait in thread 'main', from an earlier session)" in second
    assert "🔒 Approval needed: delete_record\n    Agent: ops › records" in second
    assert "✅ Approved: delete_record\n    ✅ Approved by grace" in second
    assert "Deleted record abc-123" in second
    # Another thread name is another conversation: nothing waits there.
    other = await console_demo(tmp_path, "help", argv=("--thread", "other"))
    assert "still wait" not in other


async def test_a_card_is_edited_field_by_field_then_approved_as_edited(tmp_path: Path) -> None:
    out = await console_demo(
        tmp_path,
        "refund order A-1001 150",
        "e",
        "",  # the order stays
        "lots",  # not an amount: asked again
        "e",
        "",
        "120",
    )
    assert "Approve? [a]pprove / [e]dit / [d]ecline (reason) >" in out
    assert "    Order Id [A-1001]: " in out
    assert "    Amount [150.0]: " in out
    assert "Those arguments do not fit: amount:" in out
    assert "✅ Approved: refund\n    ✏️ Edited by grace: amount: 150.0 → 120.0\n" in out
    assert "    ✅ Approved by grace" in out
    # The answer reads the tool's own result, for what ran: nothing glued in front.
    answer = out[out.index("bot> Refunded order A-1001") :]
    assert "amount: 120.00" in answer
    assert "150" not in answer


async def test_approvals_lists_what_waits_in_other_threads_and_decides_it(tmp_path: Path) -> None:
    await console_demo(tmp_path, "delete record abc-123")  # left waiting in 'main'
    out = await console_demo(tmp_path, "/approvals", "a", "/approvals", argv=("--thread", "b"))
    assert "Waiting for you (1)\n" in out
    assert (
        "  - delete_record record_id: abc-123 (asked by grace · via ops › records · "
        "requested in thread 'main'" in out
    )
    assert "✅ Approved: delete_record\n    ✅ Approved by grace" in out
    assert "Deleted record abc-123" in out
    assert "Nothing waits for your decision." in out
    assert "✅ Approved delete_record (record_id: abc-123)" in out  # the recent decisions
    revoked = await console_demo(tmp_path, "/approvals revoke")
    assert "(only you see this) You have no grants or standing declines running." in revoked


async def test_y_and_n_answer_a_card_too() -> None:
    ran = Counter()
    out = await chat(restart_agent(ran), "restart the api", "y")
    assert "✅ Approved: restart_service\n    ✅ Approved by ada" in out
    declined = await chat(restart_agent(ran), "restart the api", "n not now")
    assert "❌ Declined: restart_service\n    ❌ Declined by ada\n    Reason: not now" in declined
    assert ran.count == 1


async def test_a_card_expiring_at_the_prompt_gets_a_fresh_prompt_below() -> None:
    bot = ChatBot(restart_agent(Counter()))
    out = io.StringIO()

    async def typed() -> AsyncIterator[str]:
        yield "restart the api\n"
        await bot.drain()
        later = datetime.now(UTC) + timedelta(days=30)
        assert await bot.sweep_expired(later) == 1
        await bot.drain()  # the expiry is printed while the prompt shows

    console = ConsoleAdapter(bot, user="ada", lines=typed(), out=out, interactive=True)
    await console.run()
    await bot.aclose()
    shown = out.getvalue()
    expired = shown.index("⌛ Expired: restart_service\n    ⌛ Expired")
    assert shown.index("you> ", expired) > expired  # asked again, below the notice
    assert "still waiting" not in shown  # nothing is left


async def test_make_reset_demo_removes_the_demo_data_and_only_that(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for name in ("ops.db", "ops.db-wal", "approval-bot.db", "approval-bot.db-shm", "mine.db"):
        (data / name).write_text("x")
    make = await asyncio.create_subprocess_exec(
        "make", "-s", "-f", str(ROOT / "Makefile"), "reset-demo", cwd=tmp_path
    )
    assert await make.wait() == 0
    assert sorted(p.name for p in data.iterdir()) == ["mine.db"]


async def test_a_question_with_several_fields_is_answered_field_by_field() -> None:
    booked = Counter()
    agent = booking_agent([], booked)
    out = await chat(agent, "book a table", "", "friday", "many", "friday", "4")
    assert "Fill in the answer, or reply in this thread." in out
    assert "    Date (required): " in out
    assert "    (Date is required)" in out
    assert "    Seats (a whole number, required): " in out
    assert "(only you see this)" in out  # "many" is no whole number: asked again
    assert booked.count == 1
    assert booked.calls == [{"date": "friday", "seats": 4}]
    assert "✅ Answered: book_table\n    ✅ Answered by ada" in out


async def test_a_form_question_can_be_left_from_its_fields() -> None:
    booked = Counter()
    out = await chat(booking_agent([], booked), "book a table", "/cancel")
    assert "🚫 Cancelled: book_table\n    🚫 Cancelled by ada" in out
    assert booked.count == 0


async def chat_under(policy_toml: str, *texts: str, ran: Counter | None = None) -> str:
    bot = ChatBot(restart_agent(ran or Counter()), policy=ApprovalPolicy.from_toml(policy_toml))
    out = io.StringIO()
    await ConsoleAdapter(bot, user="ada", lines=lines(*texts), out=out).run()
    await bot.aclose()
    return out.getvalue()


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ('approvers = ["bob"]', "You are not one of the approvers for `restart_service`."),
        (
            "allow_self_approval = false",
            "You asked for `restart_service` yourself; someone else has to approve it.",
        ),
    ],
)
async def test_a_requester_who_may_not_approve_is_told_why_and_offered_decline_only(
    rule: str, why: str
) -> None:
    ran = Counter()
    policy = f"[tools.restart_service]\n{rule}\n"
    out = await chat_under(policy, "restart the api", "a", "d not now", ran=ran)
    assert "🔒 Approval needed: restart_service\n    Agent: ops" in out
    assert f"(only you see this) {why}" in out
    assert "Approve?" not in out
    assert "[e]dit" not in out
    assert out.count("Decline? [d]ecline (reason) > ") == 2
    assert "Please answer 'd' or 'n'" in out
    assert "❌ Declined: restart_service\n    ❌ Declined by ada\n    Reason: not now" in out
    assert ran.count == 0


async def test_a_grant_for_a_duration_the_card_does_not_offer_asks_again() -> None:
    ran = Counter()
    policy = '[tools.restart_service]\ngrant_for = ["1h"]\n'
    out = await chat_under(policy, "restart the api", "g 5h", "g 1h", ran=ran)
    assert "Please answer" in out
    assert "✅ Approved: restart_service\n    ✅ Approved by ada for this thread (1h)" in out
    assert ran.count == 1


async def test_the_readme_transcript_is_what_the_console_prints(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```text\nyou> ") + len("```text\n")
    shown = readme[start : readme.index("```", start)].splitlines()
    ordered = [line for line in shown if line.startswith(("you> ", "Approve? "))]
    typed = [
        line.removeprefix("you> ") if line.startswith("you> ") else line.rpartition("> ")[2]
        for line in ordered
    ]
    out = (await console_demo(tmp_path, *typed, USER="you")).splitlines()
    at = 0
    for line in shown:
        if line.startswith("you> "):
            continue
        if line.startswith("Approve? "):
            line = line.rpartition("> ")[0] + ">"
        found = next((i for i in range(at, len(out)) if _same_line(line, out[i].rstrip())), None)
        assert found is not None, f"the README shows {line!r}, the console does not:\n{out}"
        at = found + 1


def _same_line(readme: str, printed: str) -> bool:
    """A README line matches a printed one; its times and a trailing ``...`` are elided."""
    if "Expires: " in readme:
        return printed.startswith(readme.partition("Expires: ")[0] + "Expires: ")
    if readme.endswith("..."):
        return printed.startswith(readme.removesuffix("..."))
    return readme == printed


async def test_an_edited_deploy_answers_with_what_ran_and_recent_decisions_say_so(
    tmp_path: Path,
) -> None:
    out = await console_demo(
        tmp_path,
        "deploy api 1.4.2 to production",
        "e",
        "",  # service stays
        "staging",
        "",  # version stays
        "/approvals",
    )
    assert (
        "✅ Approved: deploy_service\n    ✏️ Edited by grace: environment: production → staging"
        in out
    )
    assert "    ✅ Approved by grace" in out
    answer = out[out.index("bot> ") :]
    assert answer.startswith("bot> Deployed api to staging (")
    assert "production" not in answer.partition("\n")[0]
    decisions = out[out.index("Recent decisions\n") :]
    assert (
        "✏️ Approved as edited deploy_service (service: api, environment: staging, version: 1.4.2)"
        in (decisions)
    )


async def test_an_edit_that_changes_nothing_is_an_approval(tmp_path: Path) -> None:
    out = await console_demo(tmp_path, "delete record abc-123", "e", "", "/approvals")
    assert "✅ Approved: delete_record\n    ✅ Approved by grace" in out
    assert "Edited" not in out
    assert "edited" not in out[out.index("Recent decisions\n") :]
    assert "✅ Approved delete_record (record_id: abc-123)" in out


async def test_an_edited_mcp_call_answers_for_the_ticket_that_ran(tmp_path: Path) -> None:
    tickets = tmp_path / "tickets.json"
    out = await console_demo(
        tmp_path,
        "close ticket T-101",
        "e",
        "T-100",
        BOT_CONFIG=str(ROOT / "examples" / "bot.toml"),
        TICKETS_DB=str(tickets),
    )
    assert "    ✏️ Edited by grace: ticket_id: T-101 → T-100" in out
    answer = out[out.index("bot> Ticket") :]
    assert answer.startswith("bot> Ticket T-100 (arguments edited before approval): Closed T-100")
    assert "T-101" not in answer
    assert json.loads(tickets.read_text())["T-101"]["status"] == "open"


async def test_a_follow_up_at_a_card_is_answered_and_the_card_still_decides(
    tmp_path: Path,
) -> None:
    """A card waits -> "status of api?" is answered -> the card is approved -> the first
    call runs once, and its answer says which request it answers."""
    out = await console_demo(
        tmp_path, "deploy api to production", "1.4.2", "status of api?", "maybe", "a"
    )
    prompt = "Approve? [a]pprove / [d]ecline (reason) > "
    assert out.count(prompt) == 3  # asked, after the follow-up, and after "maybe"
    status = out.index("bot> Status of api: staging: 1.4.1")
    assert "production: 1.4.0" in out[status:]
    assert "A longer line is sent as a message, and the card waits." in out
    approved = out.index("✅ Approved: deploy_service")
    assert status < approved
    assert out[approved:].count("bot> About “deploy api to production”:") == 1
    assert out.count("Deployed api to production: deployment id: 7; version: 1.4.2") == 1
    assert deployed(tmp_path / "ops.db") == [("api", "production", "1.4.2")]


async def test_respond_at_a_card_answers_for_the_tool_and_it_never_runs() -> None:
    ran = Counter()
    out = await chat_under(
        "[tools.restart_service]\nrespond = true\n",
        "restart the api",
        "r",
        "r Restarted it by hand an hour ago.",
        ran=ran,
    )
    assert "[r]espond instead (text)" in out
    assert "'r' then your answer" in out  # a bare r is asked again
    assert (
        "💬 Answered instead: restart_service\n"
        "    💬 Not run: ada answered for it: Restarted it by hand an hour ago."
    ) in out
    assert out.rstrip().endswith("Restarted it by hand an hour ago.")
    assert ran.count == 0


async def test_never_at_a_card_declines_it_and_the_tools_later_calls_here() -> None:
    ran = Counter()
    out = await chat_under(
        '[tools.restart_service]\nnever_for = ["1h"]\n',
        "restart the api",
        "never",
        "restart the api again",
        ran=ran,
    )
    assert "[never] again here (1h)" in out
    assert "❌ Declined by ada, and not asked again in this thread for 1h" in out
    assert out.count("🔒 Approval needed: restart_service") == 1  # no second card
    assert "said not to ask again for restart_service in this thread" in out
    assert ran.count == 0


async def test_a_batch_card_asks_each_call_in_turn_and_a_all_approves_the_rest() -> None:
    ran = Counter()
    bot = ChatBot(restarts(ran), policy=ApprovalPolicy.from_toml(BATCHED))
    out = io.StringIO()
    typed = lines("restart everything", "d", "a all")
    await ConsoleAdapter(bot, user="ada", lines=typed, out=out).run()
    await bot.aclose()
    printed = out.getvalue()
    assert "🔒 Approval needed: 3 calls" in printed
    assert "Approve restart_service (service: api)? [a]pprove" in printed
    assert "[a all] / [d all] (3 calls)" in printed  # at the first call's prompt
    assert "[a all] / [d all] (2 calls)" in printed  # one declined, two left
    assert sorted(call["service"] for call in ran.calls) == ["web", "worker"]
    assert "3 calls, each decided" in printed
    assert "✅ restart_service service: worker (Approved by ada)" in printed
    assert printed.count("bot> Done.") == 1
