"""``BOT_CONFIG``: the agent tree, Python tools and MCP servers, from one TOML file.

```toml
[bot]
root = "ops"                        # the agent the chat talks to

[agents.ops]
description = "Ops team assistant"
instructions = "You help the ops team..."
agents = ["deploy", "tickets"]      # sub-agents, any depth
auto_resume = true                  # a reply in the thread answers a tool's question

[agents.deploy]
tools = ["examples.ops.deploy:tools"]   # Python tools by import path

[agents.tickets]
mcp = ["tickets"]                   # every tool of these MCP servers

[mcp.tickets]
url = "http://127.0.0.1:8931/mcp"   # streamable HTTP; or command = "...", args = [...], env = {...}
headers = { Authorization = "Bearer ${TICKETS_TOKEN}" }   # ${VAR} (or ${VAR:-default})
require_approval = "hints"          # "always" | "never" | "hints" (default)

[mcp.tickets.tools.delete_ticket]
require_approval = true             # per-tool override
```

Everything is checked before the bot starts, and every problem is one line
(``ConfigError.lines``): unknown fields, agents or servers named but not
declared, declared but unused, a cycle, a tool path that does not import, an
unset ``${VAR}``, a server that cannot be reached, an override of a tool the
server does not have. A tool path names a ``Tool``, a list of them, or a
function taking no arguments that returns either.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agents import Agent, AgentOptions, Model, Store, Tool
from agents.mcp import SERVER_NAME, McpServer, McpTools, McpUnavailable

from .clients import QUESTION, Client, Clients
from .settings import SettingsError
from .tomlfile import FileProblems, Problem, parse_lenient, read_file
from .types import SuggestedPrompt

log = logging.getLogger(__name__)

MCP_START_WAIT = 20.0
"""Seconds each MCP server has to answer at start."""

MIN_TOKEN = 16
"""The shortest client token taken: a bearer token is all a caller shows."""
MAX_CLIENT_NAME = 31
"""The longest client name (an MCP server's shape: words joined by single ``_``)."""
CLIENT_TOOL = re.compile(r"^[A-Za-z0-9_-]{1,40}$")

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
"""``${VAR}``, or ``${VAR:-default}`` for a value used when ``VAR`` is unset."""


class ConfigError(FileProblems):
    """The config file is missing, not TOML, or describes something that cannot run."""

    what = "config"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PromptSection(_Section):
    title: str = Field(min_length=1, max_length=75)
    message: str = Field(min_length=1, max_length=1000)


class BotSection(_Section):
    root: str
    prompts: list[PromptSection] = Field(default_factory=list, max_length=4)
    """Requests to suggest where a platform offers them (``[[bot.prompts]]``)."""


class AgentSection(_Section):
    name: str = ""
    description: str = ""
    instructions: str = ""
    agents: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    mcp: list[str] = Field(default_factory=list)
    auto_resume: bool = False
    """A reply in the thread answers a tool's question (``auto_resume_suspended_tools``)."""
    require_approval: bool = False
    """Every tool call of this agent waits for a person, whatever the tool says."""
    max_steps: int = Field(default=10, ge=1, le=100)


class ToolOverride(_Section):
    require_approval: bool


class McpSection(_Section):
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    require_approval: Literal["always", "never", "hints"] = "hints"
    timeout: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    protocol: Literal["auto", "legacy"] = "auto"
    tools: dict[str, ToolOverride] = Field(default_factory=dict)


class ClientSection(_Section):
    token: str
    """The client's bearer token (``${VAR}`` from the environment), at least 16 characters."""
    tools: list[str] | None = None
    """The tools it may ask about (``None``: any); the policy names them ``<client>__<tool>``."""
    channel: str | None = None
    """Where its cards go unless a request names a channel."""
    workspace: str | None = None
    """The workspace of ``channel``: its Slack team id (for a bot of many workspaces) or
    its Teams tenant id."""


class ConfigFile(_Section):
    bot: BotSection
    agents: dict[str, AgentSection]
    mcp: dict[str, McpSection] = Field(default_factory=dict)
    clients: dict[str, ClientSection] = Field(default_factory=dict)


@dataclass
class BotConfig:
    """What a config file built: the root agent, and the MCP connections it uses
    (started; ``aclose`` ends them)."""

    agent: Agent
    servers: list[McpTools]
    source: str
    digest: str | None = None
    """``sha256:`` of the file's bytes, as read and parsed."""
    prompts: tuple[SuggestedPrompt, ...] = ()
    """``[[bot.prompts]]``: the requests to suggest (Slack's assistant view)."""
    clients: Clients = field(default_factory=Clients)
    """``[clients.<name>]``: the team's other agents that ask through the bot."""

    async def aclose(self) -> None:
        await asyncio.gather(*(server.aclose() for server in self.servers))


def read_config(path: str | Path, env: Mapping[str, str] | None = None) -> ConfigFile:
    """Parse and check a config file, without importing or connecting anything.

    Raises:
        ConfigError: Every problem found, one per line.
    """
    config, problems, _ = _read(path, env)
    if problems or config is None:
        raise ConfigError(str(path), problems)
    return config


def _read(
    path: str | Path, env: Mapping[str, str] | None
) -> tuple[ConfigFile | None, list[Problem], str]:
    """The file, every problem found in it (a value the schema refuses is left out, its
    default instead, so what else is wrong is found in the same run), and its digest."""
    source = str(path)
    read = read_file(path, ConfigError)
    config, problems = parse_lenient(ConfigFile, read.text, source=source, error=ConfigError)
    if config is None:
        return None, problems, read.digest
    # With values left out, who reaches whom is not what the file says: not judged.
    problems += _tree_problems(config, reach=not problems)
    config, unset = _with_environment(config, os.environ if env is None else env)
    return config, problems + unset, read.digest


async def load_config(path: str | Path, model: Model, store: Store) -> BotConfig:
    """Read the file, import its tools, connect its MCP servers and build the agents.

    Raises:
        ConfigError: Every problem found, one per line; nothing is left running.
    """
    source = str(path)
    config, problems, digest = _read(path, None)
    if config is None:
        raise ConfigError(source, problems)
    python_tools: dict[str, list[Tool]] = {}
    for key, section in config.agents.items():
        found: list[Tool] = []
        for index, ref in enumerate(section.tools):
            try:
                found += import_tools(ref)
            except ValueError as exc:
                problems.append((f"agents.{key}.tools[{index}]", str(exc)))
        python_tools[key] = found
        names = [t.name for t in found]
        for name in sorted({n for n in names if names.count(n) > 1}):
            problems.append((f"agents.{key}.tools", f"two tools are named {name!r}"))
    if problems:
        raise ConfigError(source, problems)
    servers = {name: McpTools(_server(name, section)) for name, section in config.mcp.items()}
    started = await asyncio.gather(
        *(server.start(wait=MCP_START_WAIT) for server in servers.values()),
        return_exceptions=True,
    )
    for (name, server), outcome in zip(servers.items(), started, strict=True):
        if isinstance(outcome, McpUnavailable):
            problems.append((f"mcp.{name}", f"cannot connect: {server.error}"))
        elif isinstance(outcome, BaseException):
            problems.append((f"mcp.{name}", f"cannot connect: {outcome}"))
        else:
            offered = set(server.tool_names())
            for tool in sorted(set(config.mcp[name].tools) - offered):
                problems.append(
                    (f"mcp.{name}.tools.{tool}", f"the server has no such tool ({_known(offered)})")
                )
    if not problems:
        try:
            agent = _build(config, config.bot.root, model, store, python_tools, servers)
        except ValueError as exc:  # a tool named like a sub-agent's delegation tool
            problems.append((None, str(exc)))
        else:
            prompts = tuple(
                SuggestedPrompt(title=p.title, message=p.message) for p in config.bot.prompts
            )
            return BotConfig(
                agent=agent,
                servers=list(servers.values()),
                source=source,
                digest=digest,
                prompts=prompts,
                clients=clients_of(config, source),
            )
    await asyncio.gather(*(server.aclose() for server in servers.values()))
    raise ConfigError(source, problems)


def import_tools(ref: str) -> list[Tool]:
    """The tools ``module:attribute`` names: a ``Tool``, a list of them, or a function
    taking no arguments that returns either.

    Raises:
        ValueError: It does not import or is none of those.
    """
    module_name, _, attribute = ref.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{ref!r} is not 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{ref!r}: cannot import {module_name!r} ({exc})") from exc
    try:
        value: Any = getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{ref!r}: {module_name!r} has no {attribute!r}") from None
    if callable(value) and not isinstance(value, Tool):
        try:
            value = value()
        except Exception as exc:
            raise ValueError(f"{ref!r}: building the tools failed: {exc}") from exc
    tools = [value] if isinstance(value, Tool) else value
    if not isinstance(tools, Sequence) or not all(isinstance(t, Tool) for t in tools):
        raise ValueError(f"{ref!r}: not a Tool, a list of Tools, or a function returning one")
    return list(tools)


def _build(
    config: ConfigFile,
    key: str,
    model: Model,
    store: Store,
    tools: Mapping[str, list[Tool]],
    servers: Mapping[str, McpTools],
) -> Agent:
    section = config.agents[key]
    subs = {sub: _build(config, sub, model, store, tools, servers) for sub in section.agents}
    return Agent(
        id=key,
        name=section.name or key,
        description=section.description,
        instructions=section.instructions,
        model=model,
        tools=tools[key],
        tool_sources=[servers[name] for name in section.mcp],
        agents=subs,
        store=store if key == config.bot.root else None,
        default_options=AgentOptions(
            auto_resume_suspended_tools=section.auto_resume,
            require_tool_approval=section.require_approval,
            max_steps=section.max_steps,
        ),
    )


def _server(name: str, section: McpSection) -> McpServer:
    return McpServer(
        name=name,
        url=section.url,
        headers=section.headers,
        command=section.command,
        args=section.args,
        env=section.env,
        cwd=section.cwd,
        require_approval=section.require_approval,
        tool_approval={tool: rule.require_approval for tool, rule in section.tools.items()},
        timeout=section.timeout,
        protocol=section.protocol,
    )


def _tree_problems(config: ConfigFile, *, reach: bool = True) -> list[Problem]:
    """Names that point nowhere, and (``reach``) agents nobody reaches, cycles, servers
    nobody uses."""
    problems: list[Problem] = []
    agents, servers = set(config.agents), set(config.mcp)
    if config.bot.root not in agents:
        problems.append(("bot.root", f"no agent {config.bot.root!r} ({_known(agents)})"))
    for key, section in config.agents.items():
        for sub in section.agents:
            if sub not in agents:
                problems.append((f"agents.{key}.agents", f"no agent {sub!r} ({_known(agents)})"))
            elif sub == key:
                problems.append((f"agents.{key}.agents", "an agent cannot be its own sub-agent"))
        for name in section.mcp:
            if name not in servers:
                problems.append((f"agents.{key}.mcp", f"no server {name!r} ({_known(servers)})"))
    problems += _client_problems(config)
    for name, server in config.mcp.items():
        if not SERVER_NAME.fullmatch(name):
            problems.append((f"mcp.{name}", "a server name has letters, digits, '-', single '_'"))
        if (server.url is None) == (server.command is None):
            problems.append((f"mcp.{name}", "give exactly one of url and command"))
        if server.url is not None and (server.args or server.env or server.cwd):
            problems.append((f"mcp.{name}", "args, env and cwd are for a command, not a url"))
        if server.command is not None and server.headers:
            problems.append((f"mcp.{name}.headers", "headers are for a url, not a command"))
    if problems or not reach:
        return problems
    reached: set[str] = set()

    def visit(key: str, path: tuple[str, ...]) -> None:
        if key in path:
            cycle = " -> ".join([*path[path.index(key) :], key])
            problems.append((f"agents.{path[-1]}.agents", f"a cycle: {cycle}"))
            return
        reached.add(key)
        for sub in config.agents[key].agents:
            visit(sub, (*path, key))

    visit(config.bot.root, ())
    for key in sorted(agents - reached):
        problems.append((f"agents.{key}", f"not reached from bot.root {config.bot.root!r}"))
    used = {name for key in reached for name in config.agents[key].mcp}
    for name in sorted(servers - used):
        problems.append((f"mcp.{name}", "no agent uses this server"))
    return problems


def _with_environment(
    config: ConfigFile, env: Mapping[str, str]
) -> tuple[ConfigFile, list[Problem]]:
    """``${VAR}`` in the servers' url, command, args, env and headers, and in the
    clients' tokens, from ``env``."""
    problems: list[Problem] = []
    servers: dict[str, McpSection] = {}
    for name, section in config.mcp.items():
        fill = _filler(env, problems, f"mcp.{name}")
        servers[name] = section.model_copy(
            update={
                "url": fill(section.url, "url") if section.url else None,
                "command": fill(section.command, "command") if section.command else None,
                "args": [fill(a, f"args[{i}]") for i, a in enumerate(section.args)],
                "env": {k: fill(v, f"env.{k}") for k, v in section.env.items()},
                "headers": {k: fill(v, f"headers.{k}") for k, v in section.headers.items()},
            }
        )
    clients: dict[str, ClientSection] = {}
    for name, client in config.clients.items():
        token = _filler(env, problems, f"clients.{name}")(client.token, "token")
        if token and len(token) < MIN_TOKEN:
            problems.append((f"clients.{name}.token", f"shorter than {MIN_TOKEN} characters"))
        clients[name] = client.model_copy(update={"token": token})
    tokens = [c.token for c in clients.values() if c.token]
    if len(set(tokens)) != len(tokens):
        problems.append(("clients", "two clients have the same token"))
    return config.model_copy(update={"mcp": servers, "clients": clients}), problems


def _filler(
    env: Mapping[str, str], problems: list[Problem], section: str
) -> Callable[[str, str], str]:
    """Fills ``${VAR}`` in a value of ``section`` (its field named by the second
    argument), adding a problem for each variable unset."""

    def fill(text: str, where: str) -> str:
        def one(match: re.Match[str]) -> str:
            variable, default = match.group(1), match.group(2)
            if variable not in env and default is not None:
                return default
            if variable not in env:
                problems.append((f"{section}.{where}", f"${{{variable}}} is not set"))
                return ""
            return env[variable]

        return _VARIABLE.sub(one, text)

    return fill


def _client_problems(config: ConfigFile) -> list[Problem]:
    """Clients named so their tools or runs could be taken for something else."""
    problems: list[Problem] = []
    taken = {config.bot.root, *config.agents, *config.mcp}
    for name, client in config.clients.items():
        if not SERVER_NAME.fullmatch(name) or len(name) > MAX_CLIENT_NAME:
            problems.append(
                (f"clients.{name}", "a client name has letters, digits, '-', single '_'")
            )
        elif name in taken:
            problems.append((f"clients.{name}", "an agent or MCP server has this name already"))
        for index, tool in enumerate(client.tools or ()):
            if not CLIENT_TOOL.fullmatch(tool):
                problems.append((f"clients.{name}.tools[{index}]", f"{tool!r} is no tool name"))
            elif tool == QUESTION:
                problems.append((f"clients.{name}.tools[{index}]", f"{tool!r} is its questions'"))
    return problems


def clients_of(config: ConfigFile, source: str) -> Clients:
    """The file's clients, as the bot serves them."""
    return Clients(
        [
            Client(
                name=name,
                token=section.token,
                tools=frozenset(section.tools) if section.tools is not None else None,
                channel=section.channel,
                workspace=section.workspace,
            )
            for name, section in config.clients.items()
        ],
        source=source,
    )


def _known(names: set[str]) -> str:
    return f"known: {', '.join(sorted(names))}" if names else "none declared"


async def load_agent(ref: str, model: Model, store: Store) -> Agent:
    """Import ``BOT_AGENT`` (``module:attribute``): an ``Agent``, or a factory building one.

    A factory is called with as many of ``(model, store)`` as it takes
    positionally (``build_agent(model, store)`` is the convention); it may be async.

    Raises:
        SettingsError: The reference cannot be imported or does not give an Agent.
    """
    module_name, _, attribute = ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingsError([f"BOT_AGENT={ref}: cannot import {module_name!r} ({exc})"]) from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            problem = f"BOT_AGENT={ref}: {module_name!r} has no {attribute!r}"
            raise SettingsError([problem]) from None
    if isinstance(target, Agent):
        agent = target
        if agent.store is None:
            agent.store = store
        else:
            log.info("BOT_AGENT=%s brings its own store; STORE_URL is not used", ref)
        return agent
    if not callable(target):
        raise SettingsError([f"BOT_AGENT={ref}: not an Agent or a function returning one"])
    try:
        built = target(*(model, store)[: _positional_arity(target)])
        if inspect.isawaitable(built):
            built = await built
    except Exception as exc:
        log.debug("BOT_AGENT factory failed", exc_info=True)
        raise SettingsError([f"BOT_AGENT={ref}: building the agent failed: {exc}"]) from exc
    if not isinstance(built, Agent):
        raise SettingsError([f"BOT_AGENT={ref}: returned {type(built).__name__}, not an Agent"])
    return built


def _positional_arity(fn: Any) -> int:
    kinds = [p.kind for p in inspect.signature(fn).parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return 2
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return min(2, sum(1 for kind in kinds if kind in positional))
