"""Settings from the environment, and the composition root's loading of agent and model."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.slack import load_slack_settings
from adapters.teams import load_teams_settings
from agents import DEFAULT_LEASE, Agent, FunctionModel, MemoryStore, Model, Store
from agents.models.anthropic import AnthropicModel
from agents.models.demo import DemoModel
from bot import DEFAULT_AGENT, SettingsError, load_settings
from bot.__main__ import build_model, main, platforms_configured
from bot.config import load_agent
from bot.intake import DEFAULT_WORKERS

ENV = [
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "SLACK_API_URL",
    "MICROSOFT_APP_ID",
    "MICROSOFT_APP_PASSWORD",
    "MICROSOFT_APP_TYPE",
    "MICROSOFT_APP_TENANT_ID",
    "TEAMS_ALLOW_UNAUTHENTICATED",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "BOT_MODEL",
    "BOT_AGENT",
    "BOT_CONFIG",
    "STORE_URL",
    "APPROVAL_POLICY",
    "BOT_HOST",
    "BOT_PORT",
    "BOT_LEASE",
    "RUN_RETENTION",
    "BOT_WORKERS",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_defaults_run_the_console_demo() -> None:
    settings = load_settings()
    assert settings.store_url == "sqlite:///data/approval-bot.db"
    assert (settings.bot_host, settings.bot_port) == ("0.0.0.0", 3978)
    assert settings.bot_agent == DEFAULT_AGENT == "examples.ops:build_agent"
    assert settings.use_demo_model
    assert not load_slack_settings().enabled
    assert not load_teams_settings().enabled
    assert not platforms_configured()


def test_the_environment_names_of_design_md(clean_env: pytest.MonkeyPatch) -> None:
    values = {
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s",
        "SLACK_APP_TOKEN": "xapp-1",
        "SLACK_API_URL": "http://127.0.0.1:9/api/",
        "MICROSOFT_APP_ID": "app",
        "MICROSOFT_APP_PASSWORD": "pw",
        "MICROSOFT_APP_TYPE": "SingleTenant",
        "MICROSOFT_APP_TENANT_ID": "tenant",
        "ANTHROPIC_API_KEY": "sk-ant",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "BOT_MODEL": "claude-x",
        "BOT_AGENT": "pkg.mod:agent",
        "BOT_CONFIG": "bot.toml",
        "STORE_URL": "redis://127.0.0.1:6379/3",
        "APPROVAL_POLICY": "policy.toml",
        "BOT_HOST": "127.0.0.1",
        "BOT_PORT": "8080",
    }
    for name, value in values.items():
        clean_env.setenv(name, value)
    settings, slack, teams = load_settings(), load_slack_settings(), load_teams_settings()
    for name, value in values.items():
        owner = slack if name.startswith("SLACK_") else teams if "_APP_" in name else settings
        assert str(getattr(owner, name.lower())) == value
    assert slack.enabled
    assert teams.enabled
    assert platforms_configured()
    assert not settings.use_demo_model
    assert not teams.unauthenticated


def test_secrets_stay_out_of_the_repr(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    clean_env.setenv("SLACK_SIGNING_SECRET", "shh-secret")
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-secret")
    assert "secret" not in repr(load_settings())
    assert "secret" not in repr(load_slack_settings())


def test_empty_variables_count_as_unset(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("SLACK_BOT_TOKEN", "")
    clean_env.setenv("BOT_PORT", "")
    assert load_slack_settings().slack_bot_token is None
    assert load_settings().bot_port == 3978


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"SLACK_BOT_TOKEN": "x"}, "SLACK_SIGNING_SECRET is required when SLACK_BOT_TOKEN is set"),
        ({"SLACK_SIGNING_SECRET": "x"}, "SLACK_BOT_TOKEN is required when SLACK_SIGNING_SECRET"),
        ({"SLACK_APP_TOKEN": "x"}, "SLACK_APP_TOKEN (Socket Mode) needs SLACK_BOT_TOKEN"),
        ({"MICROSOFT_APP_PASSWORD": "x"}, "MICROSOFT_APP_ID is required"),
        ({"MICROSOFT_APP_ID": "x"}, "MICROSOFT_APP_PASSWORD is required"),
        (
            {
                "MICROSOFT_APP_ID": "x",
                "MICROSOFT_APP_PASSWORD": "p",
                "MICROSOFT_APP_TYPE": "SingleTenant",
            },
            "MICROSOFT_APP_TENANT_ID is required for MICROSOFT_APP_TYPE=SingleTenant",
        ),
        ({"MICROSOFT_APP_TYPE": "Personal"}, "MICROSOFT_APP_TYPE: Input should be"),
        ({"BOT_PORT": "http"}, "BOT_PORT: Input should be a valid integer"),
        ({"BOT_PORT": "70000"}, "BOT_PORT: Input should be less than or equal to 65535"),
        ({"BOT_AGENT": "examples.ops"}, "BOT_AGENT: 'examples.ops' is not 'module:attribute'"),
        ({"STORE_URL": "mysql://db"}, "STORE_URL: 'mysql://db': use memory://"),
        ({"TEAMS_ALLOW_UNAUTHENTICATED": "maybe"}, "TEAMS_ALLOW_UNAUTHENTICATED: Input should be"),
        ({"BOT_LEASE": "soon"}, "BOT_LEASE: 'soon' is not a duration"),
        ({"BOT_LEASE": "0s"}, "BOT_LEASE: a duration must be positive"),
        ({"BOT_WORKERS": "0"}, "BOT_WORKERS: Input should be greater than or equal to 1"),
    ],
)
def test_incomplete_or_invalid_configuration_is_a_clear_error(
    clean_env: pytest.MonkeyPatch, env: dict[str, str], problem: str
) -> None:
    for name, value in env.items():
        clean_env.setenv(name, value)
    errors: list[SettingsError] = []
    for load in (load_settings, load_slack_settings, load_teams_settings):
        try:
            load()
        except SettingsError as exc:
            errors.append(exc)
    problems = [p for error in errors for p in error.problems]
    assert any(p.startswith(problem) for p in problems), problems
    assert all(str(error).startswith("invalid configuration: ") for error in errors)


def test_how_long_a_crash_takes_to_be_noticed_is_a_setting(
    clean_env: pytest.MonkeyPatch,
) -> None:
    assert load_settings().bot_lease == DEFAULT_LEASE
    clean_env.setenv("BOT_LEASE", "90s")
    assert load_settings().bot_lease == timedelta(seconds=90)


def test_how_much_one_replica_works_on_at_once_is_a_setting(
    clean_env: pytest.MonkeyPatch,
) -> None:
    assert load_settings().bot_workers == DEFAULT_WORKERS
    clean_env.setenv("BOT_WORKERS", "4")
    assert load_settings().bot_workers == 4


def test_user_assigned_identity_needs_no_password(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("MICROSOFT_APP_ID", "x")
    clean_env.setenv("MICROSOFT_APP_TYPE", "UserAssignedMSI")
    clean_env.setenv("MICROSOFT_APP_TENANT_ID", "t")
    assert load_teams_settings().enabled


def test_teams_without_authentication_is_explicit(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("TEAMS_ALLOW_UNAUTHENTICATED", "true")
    settings = load_teams_settings()
    assert settings.enabled
    assert settings.unauthenticated


def test_a_bad_environment_exits_with_one_line(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("SLACK_BOT_TOKEN", "x")
    assert main(["console"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "Traceback" not in err
    assert err.startswith("approval-bot: invalid configuration: SLACK_SIGNING_SECRET")


def test_a_bad_policy_file_exits_with_one_line(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("[default]\nallow_self_approval = 3\n")
    clean_env.setenv("APPROVAL_POLICY", str(policy))
    clean_env.setenv("STORE_URL", "memory://")
    assert main(["console"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"approval-bot: approval policy {policy}: default.allow_self_approval: "
        "Input should be a valid boolean"
    )


# -- model and agent ---------------------------------------------------------


def test_the_demo_model_without_a_key_or_when_asked() -> None:
    assert isinstance(build_model(load_settings()), DemoModel)
    asked = load_settings(bot_model="demo", anthropic_api_key="sk")
    assert isinstance(build_model(asked), DemoModel)


def test_claude_with_a_key() -> None:
    model = build_model(
        load_settings(
            bot_model="claude-test", anthropic_api_key="sk", anthropic_base_url="http://127.0.0.1:9"
        )
    )
    assert isinstance(model, AnthropicModel)
    assert model.model_name == "claude-test"


def plain_agent(model: Model | None = None, store: Store | None = None) -> Agent:
    return Agent(id="plain", model=model or FunctionModel(lambda m, r: "hi"), store=store)


PLAIN = plain_agent()


def zero_args() -> Agent:
    return plain_agent()


def model_only(model: Model) -> Agent:
    return plain_agent(model)


async def async_factory(model: Model, store: Store) -> Agent:
    return plain_agent(model, store)


def not_an_agent() -> str:
    return "agent"


async def test_bot_agent_may_name_an_agent_or_a_factory() -> None:
    model, store = FunctionModel(lambda m, r: "x"), MemoryStore()
    here = __name__
    instance = await load_agent(f"{here}:PLAIN", model, store)
    assert instance is PLAIN
    assert instance.store is store
    assert (await load_agent(f"{here}:zero_args", model, store)).id == "plain"
    assert (await load_agent(f"{here}:model_only", model, store)).model is model
    built = await load_agent(f"{here}:async_factory", model, store)
    assert built.model is model
    assert built.store is store


async def test_the_bundled_example_is_the_default(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("OPS_DB_PATH", str(tmp_path / "ops.db"))
    store = MemoryStore()
    agent = await load_agent(DEFAULT_AGENT, DemoModel(), store)
    assert agent.id == "ops"
    assert agent.store is store
    assert set(agent.agents) == {"records", "deploy", "billing"}


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        ("no_such_module_xyz:agent", "cannot import 'no_such_module_xyz'"),
        (f"{__name__}:missing", "has no 'missing'"),
        (f"{__name__}:not_an_agent", "returned str, not an Agent"),
        (f"{__name__}:ENV", "not an Agent or a function returning one"),
    ],
)
async def test_a_bad_bot_agent_is_a_clear_error(ref: str, problem: str) -> None:
    with pytest.raises(SettingsError, match=problem):
        await load_agent(ref, FunctionModel(lambda m, r: "x"), MemoryStore())
    assert ref.split(":")[0] not in sys.modules or ref.startswith(__name__)


def test_claude_by_name_without_a_key_is_a_clear_start_up_error(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    clean_env.setenv("BOT_MODEL", "claude-sonnet-5-5")
    clean_env.setenv("BOT_LOG_FILE", str(tmp_path / "bot.log"))
    assert main(["console"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "approval-bot: invalid configuration: BOT_MODEL=claude-sonnet-5-5 needs ANTHROPIC_API_KEY "
        "(or BOT_MODEL=demo for the offline demo model)"
    ]


def test_an_unreachable_store_is_a_clear_start_up_error(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    clean_env.setenv("BOT_MODEL", "demo")
    clean_env.setenv("STORE_URL", "redis://127.0.0.1:1/0")
    clean_env.setenv("BOT_LOG_FILE", str(tmp_path / "bot.log"))
    assert main(["console"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "approval-bot: invalid configuration: STORE_URL=redis://127.0.0.1:1/0: the store"
    )


def test_a_failing_agent_factory_is_a_clear_start_up_error(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    clean_env.setenv("BOT_MODEL", "demo")
    clean_env.setenv("BOT_AGENT", "json:loads")
    clean_env.setenv("STORE_URL", f"sqlite:///{tmp_path / 'bot.db'}")
    clean_env.setenv("BOT_LOG_FILE", str(tmp_path / "bot.log"))
    assert main(["console"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "approval-bot: invalid configuration: BOT_AGENT=json:loads: building the agent failed:"
    )


# -- fail closed on the policy, and `python -m bot check` ----------------------


def write_policy(tmp_path: Path, text: str) -> Path:
    policy = tmp_path / "policy.toml"
    policy.write_text(text)
    return policy


@pytest.fixture
def demo_env(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    clean_env.setenv("BOT_MODEL", "demo")
    clean_env.setenv("STORE_URL", "memory://")
    clean_env.setenv("OPS_DB_PATH", str(tmp_path / "ops.db"))
    clean_env.setenv("BOT_LOG_FILE", str(tmp_path / "bot.log"))
    return clean_env


@pytest.mark.parametrize("command", ["console", "serve", "check"])
def test_a_policy_naming_an_unknown_tool_stops_every_mode(
    demo_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: str,
) -> None:
    policy = write_policy(tmp_path, '[tools.deploy_servise]\napprovers = ["U034LEAD"]\n')
    demo_env.setenv("APPROVAL_POLICY", str(policy))
    assert main([command]) == 2
    out = capsys.readouterr()
    assert out.err.strip().splitlines() == [
        f"approval-bot: approval policy {policy}: tools.deploy_servise: no agent has a tool "
        "named 'deploy_servise' (did you mean 'deploy_service'?)"
    ]
    assert out.out == ""


def test_check_accepts_a_valid_configuration_and_starts_nothing(
    demo_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    policy = write_policy(tmp_path, '[tools.deploy_service]\napprovers = ["U034LEAD"]\n')
    demo_env.setenv("APPROVAL_POLICY", str(policy))
    assert main(["check"]) == 0
    out = capsys.readouterr()
    assert out.err == ""
    assert out.out.strip() == (
        f"approval-bot: configuration OK: agent ops, model demo, store memory://, "
        f"policy {policy}, platforms: none"
    )


def test_check_says_every_problem_on_its_own_line(
    demo_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    policy = write_policy(tmp_path, "[default]\nquorum = 0\nexpires = '1h'\n")
    demo_env.setenv("APPROVAL_POLICY", str(policy))
    demo_env.setenv("BOT_MODEL", "claude-sonnet-5-5")
    assert main(["check"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"approval-bot: approval policy {policy}: default.quorum: "
        "Input should be greater than or equal to 1",
        f"approval-bot: approval policy {policy}: default.expires: unknown field "
        "(known: allow_self_approval, approval, approvers, batch, channel, deciders_when,"
        " distinct_groups, editor_may_approve, escalate_after, escalate_to, expires_in,"
        " grant, grant_for, never_for, notify, quorum, remind_after, respond, review,"
        " sensitive, tiers, when)",
        "approval-bot: invalid configuration: BOT_MODEL=claude-sonnet-5-5 needs "
        "ANTHROPIC_API_KEY (or BOT_MODEL=demo for the offline demo model)",
    ]


def test_check_validates_the_platform_settings_too(
    demo_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo_env.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    demo_env.setenv("SLACK_SIGNING_SECRET", "s")
    demo_env.setenv("SLACK_CLIENT_ID", "c")
    demo_env.setenv("SLACK_CLIENT_SECRET", "cs")
    assert main(["check"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "approval-bot: invalid configuration: Slack: unset SLACK_CLIENT_ID/SLACK_CLIENT_SECRET: "
        "this bot uses one token"
    ]
