"""The composition root: ``python -m bot`` (HTTP server), ``python -m bot console``,
``python -m bot check`` (validate the configuration, start nothing) and
``python -m bot audit`` (print the audit log), ``python -m bot audit verify`` (check it
is evidence: ``bot.evidence``).

This is the only module of ``bot`` that imports adapters. Configuration errors
(settings, policy, agent) end the process with one readable line per problem
and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, cast
from urllib.parse import urlsplit, urlunsplit

from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError
from redis.exceptions import RedisError

from adapters.web import page_routes
from agents import Model, ModelError, Reachable, Store, open_store
from agents.chain import Seal
from agents.stores.postgres import PostgresStore
from agents.stores.postgres_db import SchemaTooNew
from agents.stores.sqlite import database_path

from .audit import AuditFormat, audit_rows, since_of, write
from .chat_state.postgres import CHAT_MIGRATIONS
from .checks import OTHER_VARIABLES, LiveCheck, live_report, unknown_variables, variables_of
from .config import BotConfig, ConfigError, load_agent, load_config
from .core import ChatBot
from .evidence import KeyFileError, load_public_key, load_signing_key, sealer, verify
from .policy import ApprovalPolicy, PolicyError
from .policy_cli import policy_main
from .records import CONFIG_LOADED, POLICY_LOADED, record_loaded
from .server import Adapter, build_app
from .settings import DEMO_MODEL, Settings, SettingsError, load_settings
from .sink import AuditSink, SinkError
from .tracing import tracing_from_env
from .types import SuggestedPrompt

log = logging.getLogger("bot")

CONSOLE_LOG = "data/console.log"
"""Where ``python -m bot console`` logs (``BOT_LOG_FILE`` overrides)."""
STORE_TIMEOUT = 10.0
STORE_RETRY = 0.25
"""Seconds between two asks of a store that did not answer at start."""
"""Seconds the store has to answer at start."""
"""Seconds between expiry sweeps: how late, at most, an expired card is updated."""


def build_model(settings: Settings) -> Model:
    """The demo model when asked for (or without an Anthropic key), else Claude.

    Claude is built by ``AnthropicModel.from_env`` from the validated settings
    (``BOT_MODEL``, ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``,
    ``ANTHROPIC_MAX_RETRIES``, ``ANTHROPIC_TIMEOUT``).

    Raises:
        SettingsError: The Anthropic client cannot be built (say, a broken
            credential configuration of the SDK).
    """
    if settings.use_demo_model:
        if settings.bot_model not in (None, DEMO_MODEL):
            # Asked for Claude by name: running the demo instead would hide a broken setup.
            raise SettingsError(
                [
                    f"BOT_MODEL={settings.bot_model} needs ANTHROPIC_API_KEY "
                    f"(or BOT_MODEL={DEMO_MODEL} for the offline demo model)"
                ]
            )
        from agents.models.demo import DemoModel

        return DemoModel()
    from agents.models.anthropic import AnthropicModel
    from agents.models.base import ModelError

    try:
        return AnthropicModel.from_env(
            settings.bot_model,
            api_key=settings.anthropic_api_key,
            base_url=settings.anthropic_base_url,
            max_retries=settings.anthropic_max_retries,
            timeout=settings.anthropic_timeout,
        )
    except (ValueError, ModelError) as exc:
        raise SettingsError([str(exc)]) from exc


def load_policy(settings: Settings) -> ApprovalPolicy:
    """The policy file ``APPROVAL_POLICY`` names, or the permissive default."""
    if settings.approval_policy is None:
        log.info("no APPROVAL_POLICY: anyone in a conversation may decide, requesters included")
        return ApprovalPolicy()
    return ApprovalPolicy.load(settings.approval_policy)


PLATFORMS: tuple[str, ...] = ("adapters.slack", "adapters.teams")
"""Every platform the bot can serve: the adapter packages, each offering
``configured()``, ``from_env(bot)`` (the adapter, or ``None`` when the environment
does not configure it), ``variables()`` (the environment it reads) and
``live_checks(bot)`` (``check --live``: what to reach, some of it found in the bot's
chat state, such as each workspace's installation). Adding a platform is one entry
here."""


class _Platform(Protocol):
    def configured(self) -> bool: ...

    def from_env(self, bot: ChatBot) -> Adapter | None: ...

    def variables(self) -> frozenset[str]: ...

    def live_checks(self, bot: ChatBot) -> list[LiveCheck]: ...


def _platforms() -> list[tuple[str, _Platform]]:
    return [(name, cast(_Platform, importlib.import_module(name))) for name in PLATFORMS]


def known_variables() -> frozenset[str]:
    """Every environment variable the bot reads, its platforms' included."""
    known = variables_of(Settings) | OTHER_VARIABLES
    for _, platform in _platforms():
        known |= platform.variables()
    return known


def platforms_configured() -> bool:
    """Whether the environment configures any platform (``make run`` asks this).

    A platform configured badly counts as configured: serving then says what is wrong.
    """
    for _, platform in _platforms():
        try:
            if platform.configured():
                return True
        except SettingsError:
            return True
    return False


def build_adapters(bot: ChatBot) -> list[Adapter]:
    """The platform adapters the environment configures.

    Raises:
        SettingsError: Every problem of every platform's settings.
    """
    adapters: list[Adapter] = []
    problems: list[str] = []
    for name, platform in _platforms():
        try:
            adapter = platform.from_env(bot)
        except SettingsError as exc:
            problems += exc.problems
        except ValueError as exc:
            problems.append(f"{name.rpartition('.')[2].title()}: {exc}")
        else:
            if adapter is not None:
                adapters.append(adapter)
    if problems:
        raise SettingsError(problems)
    return adapters


async def serve(settings: Settings, bot: ChatBot) -> None:
    """Serve HTTP on ``BOT_HOST:BOT_PORT`` until SIGTERM or SIGINT."""
    adapters = build_adapters(bot)
    if not adapters:
        log.warning("no platform configured: serving only /healthz and /metrics")
    app = build_app(
        settings,
        bot,
        adapters,
        sweep_interval=bot.sweep_interval,
        pages=page_routes(bot.pages),
    )
    await bot.check_places()
    await bot.check_clients()
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        try:
            await web.TCPSite(runner, settings.bot_host, settings.bot_port).start()
        except OSError as exc:
            where = f"{settings.bot_host}:{settings.bot_port}"
            raise SettingsError(
                [f"BOT_HOST:BOT_PORT {where}: cannot listen ({exc.strerror})"]
            ) from exc
        platforms = ", ".join(a.platform for a in adapters) or "none"
        log.info(
            "serving on %s:%d (platforms: %s)", settings.bot_host, settings.bot_port, platforms
        )
        await stop.wait()
        log.info("shutting down")
    finally:
        await runner.cleanup()


async def console(settings: Settings, bot: ChatBot, thread: str | None = None) -> None:
    """Chat in the terminal until EOF, then finish pending work; ``thread`` names the
    conversation (the same name continues it)."""
    from adapters.console import DEFAULT_THREAD, ConsoleAdapter

    welcome = None
    if settings.use_demo_model:
        from agents.models.demo import DEMO_HELP

        welcome = DEMO_HELP
    adapter = ConsoleAdapter(bot, welcome=welcome, thread=thread or DEFAULT_THREAD)
    await bot.check_places()
    bot.start_sweeper()
    try:
        await adapter.run()
    finally:
        await bot.aclose()


async def audit(
    settings: Settings, *, thread: str | None, since: datetime | None, fmt: AuditFormat
) -> None:
    """Print the audit log (of one thread, from ``since`` on) to stdout."""
    policy = load_policy(settings)
    store = open_store(settings.store_url)
    try:
        entries = await store.list_audit(thread_id=thread)
        rows = audit_rows(entries, policy, since=since, compact=fmt == "table")
        write(rows, sys.stdout, fmt)
    finally:
        await store.close()


async def audit_verify(settings: Settings, key: Ed25519PublicKey | None) -> bool:
    """Walk every chain of the audit log (``bot.evidence.verify``), printing what holds
    and what does not; whether all of it holds."""
    store = open_store(settings.store_url)
    try:
        chains = await store.audit_chains()
    except (RedisError, OSError, sqlite3.Error, ValidationError) as exc:
        raise StartupError([f"cannot read the audit log: {exc}"]) from exc
    finally:
        await store.close()
    verdicts = [verify(chain, key, alone=len(chains) == 1) for chain in chains]
    for verdict in verdicts:
        for line in verdict.notes:
            print(f"approval-bot: audit {line}")
        for line in verdict.problems:
            print(f"approval-bot: audit {line}", file=sys.stderr)
    holds = all(v.holds for v in verdicts)
    print(f"approval-bot: audit {'verified' if holds else 'NOT verified'}")
    return holds


def _verifiable(url: str) -> None:
    """Refuse a store that cannot hold the log to verify: a verify of a mistyped path
    would otherwise make an empty database and find it sound."""
    if url.startswith("memory:"):
        raise StartupError(["STORE_URL: a memory store keeps no audit log to verify"])
    if url.startswith("sqlite:") and not Path(database_path(url)).is_file():
        raise StartupError([f"STORE_URL: no database at {database_path(url)}"])


def verify_main(argv: Sequence[str]) -> int:
    """``python -m bot audit verify [--public-key F]``: 0 when every chain holds (and,
    with the key, every signature verifies), 1 when not, 2 for a bad command line or
    configuration."""
    parser = argparse.ArgumentParser(
        prog="python -m bot audit verify",
        description="Check the audit log's hash chain, and with a public key its signatures.",
    )
    parser.add_argument(
        "--public-key",
        type=Path,
        metavar="FILE",
        help="the Ed25519 public key (PEM) of AUDIT_SIGNING_KEY: checkpoints and the"
        " retention anchor must be signed by it",
    )
    args = parser.parse_args(argv)
    _configure_logging(console=True)
    try:
        key = load_public_key(args.public_key) if args.public_key is not None else None
        settings = load_settings()
        _verifiable(settings.store_url)
        holds = asyncio.run(audit_verify(settings, key))
    except KeyFileError as exc:
        print(f"approval-bot: --public-key: {exc}", file=sys.stderr)
        return 2
    except (SettingsError, StartupError) as exc:
        for line in exc.lines:
            print(f"approval-bot: {line}", file=sys.stderr)
        return 2
    return 0 if holds else 1


class StartupError(Exception):
    """Several configuration problems at once; ``lines`` says each in one line."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines


def _policy_and_model(
    settings: Settings, problems: list[str]
) -> tuple[ApprovalPolicy, Model, Seal | None]:
    """The policy, the model and the audit's signing key (``AUDIT_SIGNING_KEY``), or
    every problem with them or the platforms' settings (after ``problems`` found before).

    Platform settings are checked in every mode, the console included: a
    half-configured platform is a deployment that cannot work.
    """
    problems = list(problems)
    for _, platform in _platforms():
        try:
            platform.configured()
        except SettingsError as exc:
            problems += exc.lines
    try:
        policy = load_policy(settings)
    except PolicyError as exc:
        problems += exc.lines
    try:
        model = build_model(settings)
    except SettingsError as exc:
        problems += exc.lines
    seal = None
    if settings.audit_signing_key is not None:
        try:
            seal = sealer(load_signing_key(settings.audit_signing_key))
        except KeyFileError as exc:
            problems.append(f"AUDIT_SIGNING_KEY: {exc}")
    if problems:
        raise StartupError(problems)
    return policy, model, seal


async def check(
    settings: Settings,
    bot: ChatBot,
    *,
    agent: str,
    model: Model,
    store: str,
    live: bool,
    sink: AuditSink | None = None,
) -> None:
    """Build the adapters too, reach each platform and the model once (``live``), say
    the configuration is fine, and stop them again."""
    adapters = build_adapters(bot)
    try:
        for adapter in adapters:
            bot.register(adapter.platform, adapter.messenger)
        await bot.check_places()
        await bot.check_clients()
        report = await live_report(_live_checks(bot, model, sink)) if live else None
    finally:
        for adapter in adapters:
            await adapter.stop()
    if report is not None and report.problems:
        raise StartupError(report.problems)
    platforms = ", ".join(a.platform for a in adapters) or "none"
    policy = bot.policy.source or "(none: anyone decides)"
    reached = ""
    if report is not None:
        reached = f" (live: {', '.join(report.reached) or 'nothing to reach'})"
    print(
        f"approval-bot: configuration OK{reached}: agent {agent}, model {model.name}, "
        f"store {store}, policy {policy}, platforms: {platforms}"
    )


def _live_checks(bot: ChatBot, model: Model, sink: AuditSink | None) -> list[LiveCheck]:
    """What ``check --live`` reaches: each configured platform, the model's service, and
    the audit sink (which is sent nothing)."""
    checks = [check for _, platform in _platforms() for check in platform.live_checks(bot)]
    if sink is not None:
        checks.append(LiveCheck(name=f"audit sink {sink.name}", run=sink.check))
    if isinstance(model, Reachable):
        reachable = model

        async def answers() -> list[str]:
            try:
                await reachable.check()
            except ModelError as exc:
                return [f"model {model.name}: {exc}"]
            return []

        checks.append(LiveCheck(name=f"model {model.name}", run=answers))
    return checks


async def run(
    command: str, settings: Settings, *, thread: str | None = None, live: bool = False
) -> None:
    """Wire store, model, agent, policy and bot, then run ``command``.

    ``check`` stops once everything is built and validated (adapters included; with
    ``live``, each service reached once), saying so on stdout, before anything listens
    or any chat starts. A variable that looks like the bot's but is unknown is a
    problem for ``check``, and a warning otherwise.
    """
    unknown = unknown_variables(os.environ, known_variables())
    if command != "check":
        for line in unknown:
            log.warning("%s", line)
    policy, model, seal = _policy_and_model(settings, unknown if command == "check" else [])
    tracing = tracing_from_env()  # OTEL_*: a setting it cannot follow is a start error
    if tracing is not None and command != "check":
        tracing.install()
    try:
        await _run(command, settings, policy, model, seal, thread=thread, live=live)
    finally:
        if tracing is not None:
            await tracing.aclose()


async def _run(
    command: str,
    settings: Settings,
    policy: ApprovalPolicy,
    model: Model,
    seal: Seal | None,
    *,
    thread: str | None,
    live: bool,
) -> None:
    """``run`` once the settings hold: the store, the agent and the bot, then ``command``."""
    sink = build_sink(settings)
    store = open_store(settings.store_url)
    config: BotConfig | None = None
    try:
        await _check_store(store)
        if settings.bot_config is not None:
            config = await load_config(settings.bot_config, model, store)
            agent, described = config.agent, f"{config.agent.id} ({config.source})"
        else:
            agent = await load_agent(settings.bot_agent, model, store)
            described = agent.id
        bot = ChatBot(
            agent,
            policy=policy,
            lease=settings.bot_lease,
            workers=settings.bot_workers,
            run_retention=settings.run_retention,
            audit_retention=settings.audit_retention,
            # A check validates the key and the sink, and neither signs nor sends.
            seal=seal if command != "check" else None,
            sink=sink if command != "check" else None,
            suggested_prompts=_prompts(settings, config),
            clients=config.clients if config is not None else None,
            public_url=settings.public_url,
            shadow=ApprovalPolicy.load(settings.shadow_policy) if settings.shadow_policy else None,
        )
        log.info("agent %s, model %s, store %s", described, model.name, _redact(store.url))
        try:
            if command != "check":  # what this process decides by, on record
                await record_loaded(bot.agent, POLICY_LOADED, policy.source, policy.digest)
                if config is not None:
                    await record_loaded(bot.agent, CONFIG_LOADED, config.source, config.digest)
            if command == "check":
                described_store = _redact(store.url) + await _schema(store)
                await check(
                    settings,
                    bot,
                    agent=described,
                    model=model,
                    store=described_store,
                    live=live,
                    sink=sink,
                )
            elif command == "console":
                await console(settings, bot, thread)
            else:
                await serve(settings, bot)
        finally:
            await bot.aclose()
    finally:
        if config is not None:
            await config.aclose()
        await store.close()
        closer = getattr(model, "aclose", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                await closer()


def build_sink(settings: Settings) -> AuditSink | None:
    """The audit sink ``AUDIT_SINK`` names (``None``: unset).

    Raises:
        StartupError: It names no place the log can go (say, its directory went since
            the settings were read).
    """
    if settings.audit_sink is None:
        return None
    secret = settings.audit_sink_secret
    try:
        return AuditSink(settings.audit_sink, secret=secret.get_secret_value() if secret else None)
    except SinkError as exc:
        raise StartupError([str(exc)]) from exc


def _prompts(settings: Settings, config: BotConfig | None) -> tuple[SuggestedPrompt, ...]:
    """The requests to suggest: the config file's ``[[bot.prompts]]``, else the demo's
    when the demo model runs, else none."""
    if config is not None and config.prompts:
        return config.prompts
    if settings.use_demo_model:
        from agents.models.demo import DEMO_PROMPTS

        return tuple(SuggestedPrompt(title=t, message=m) for t, m in DEMO_PROMPTS)
    return ()


async def _check_store(store: Store) -> None:
    """Fail at start, in one line, when the store does not answer within
    ``STORE_TIMEOUT``: asked again meanwhile, since a replica starting beside another
    may find it busy for a moment (an SQLite file the other is creating)."""
    where = _redact(store.url)
    deadline = time.monotonic() + STORE_TIMEOUT
    why = ""
    while True:
        left = deadline - time.monotonic()
        try:
            if await asyncio.wait_for(store.ping(), max(left, 0.1)):
                await _migrate_chat(store)
                return
            why = ""
        except SchemaTooNew as exc:  # waiting will not help
            raise SettingsError([f"STORE_URL={where}: {exc}"]) from exc
        except Exception as exc:
            log.debug("store ping failed", exc_info=True)
            why = f" ({exc})"
        if time.monotonic() + STORE_RETRY >= deadline:
            raise SettingsError([f"STORE_URL={where}: the store does not answer{why}"])
        await asyncio.sleep(STORE_RETRY)


async def _migrate_chat(store: Store) -> None:
    """The chat layer's tables in the store's PostgreSQL database brought up to date at
    start, beside the runtime's (``ping``): a database too new stops the bot here, not
    at its first message."""
    if isinstance(store, PostgresStore):
        await store.db.migrate("chat", CHAT_MIGRATIONS)


async def _schema(store: Store) -> str:
    """The database's schema versions, where the store keeps them (PostgreSQL)."""
    if not isinstance(store, PostgresStore):
        return ""
    versions = await store.db.versions()
    return " (schema " + ", ".join(f"{name} v{n}" for name, n in sorted(versions.items())) + ")"


def _redact(url: str) -> str:
    """A store URL without credentials, for logs."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _configure_logging(*, console: bool) -> None:
    """Server: INFO to stderr. Console: the chat owns the terminal, so logs go to a file."""
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    if not console:
        logging.basicConfig(level=logging.INFO, format=fmt, stream=sys.stderr)
        return
    path = Path(os.environ.get("BOT_LOG_FILE", CONSOLE_LOG))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        logging.basicConfig(level=logging.INFO, format=fmt, filename=path)
    except OSError:
        logging.basicConfig(level=logging.ERROR, format=fmt, stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["policy"]:  # python -m bot policy test|replay ... (bot.policy_cli)
        _configure_logging(console=True)
        return policy_main(argv[1:])
    if argv[:2] == ["audit", "verify"]:
        return verify_main(argv[2:])
    parser = argparse.ArgumentParser(
        prog="python -m bot",
        description="Approval bot: AI agents run tools, people approve (Slack, Teams, terminal).",
    )
    parser.add_argument(
        "command",
        nargs="?",
        default="serve",
        choices=("serve", "console", "check", "audit"),
        help="serve HTTP (default), chat in the terminal, check the configuration and exit,"
        " or print the audit log",
    )
    parser.add_argument(
        "--thread",
        metavar="NAME",
        help="console: the conversation to continue (default: main), what waits in it shown"
        " again; audit: only this thread's entries (its id, e.g. slack:T1:C1:1700.1)",
    )
    parser.add_argument(
        "--since", metavar="DURATION", help="audit: only entries this recent (30m, 24h, 7d)"
    )
    parser.add_argument(
        "--live",
        action="store_true",
        help="check: also reach each configured platform and the model once",
    )
    parser.add_argument(
        "--format",
        choices=("table", "csv", "jsonl"),
        default="table",
        help="audit: how to print (default: table)",
    )
    args = parser.parse_args(argv)
    if args.thread is not None and args.command not in ("console", "audit"):
        parser.error("--thread is for the console and the audit")
    if args.thread is not None and not args.thread.strip():
        parser.error("--thread needs a name")
    if args.command != "audit" and (args.since is not None or args.format != "table"):
        parser.error("--since and --format are for the audit")
    if args.live and args.command != "check":
        parser.error("--live is for check")
    try:
        since = since_of(args.since, datetime.now(UTC))
    except ValueError as exc:
        parser.error(f"--since: {exc}")
    _configure_logging(console=args.command != "serve")
    try:
        settings = load_settings()
        if args.command == "audit":
            asyncio.run(audit(settings, thread=args.thread, since=since, fmt=args.format))
            return 0
        asyncio.run(run(args.command, settings, thread=args.thread, live=args.live))
    except (SettingsError, PolicyError, ConfigError, StartupError) as exc:
        for line in exc.lines:
            print(f"approval-bot: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
