"""Model Context Protocol servers as thinkloop tools (official ``mcp`` SDK).

``async with MCPServer(MCPServerConfig(...)) as server: Agent(tools=server.tools)``. Each MCP
tool becomes a :class:`Tool` named ``<prefix>_<tool>`` whose JSON schema is the server's own,
passed through unchanged; arguments are checked against it before the call.

The SDK's client lives in anyio task groups that must be entered and left by the same task, so
each connection runs in a background task of its own; ``connect`` and ``close`` only start and
stop that task and may be called from anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import BaseModel, Field, RootModel, model_validator

from thinkloop.core.errors import ConfigError, ToolExecutionError
from thinkloop.core.settings import TOOL_TIMEOUT_S
from thinkloop.core.tool import Tool

_NAME_OK = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_NAME = 64
# Programs that run a server rather than being one; the server's name is the next word.
_LAUNCHERS = frozenset({"uvx", "uv", "run", "npx", "pipx", "bunx", "node", "deno", "python",
                        "python3", "docker"})


class MCPServerConfig(BaseModel):
    """One server: a ``command`` (stdio) or a ``url`` (streamable HTTP)."""

    name: str
    command: list[str] | None = None
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    prefix: str | None = None
    timeout_s: float = TOOL_TIMEOUT_S
    # Only a server the configuration trusts may relax gating with its annotations
    # (readOnlyHint, openWorldHint: false); anyone else's tools are destructive and open-world.
    trusted: bool = False

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError(f"MCP server {self.name!r} needs exactly one of command or url")
        return self


def parse_mcp_spec(spec: str) -> MCPServerConfig:
    """A ``--mcp`` value: ``"uvx mcp-server-time"``, ``"time=uvx mcp-server-time"`` or a URL;
    ``"trusted:time=uvx mcp-server-time"`` trusts the server's tool annotations."""
    trusted = spec.startswith("trusted:")
    if trusted:
        return parse_mcp_spec(spec.removeprefix("trusted:")).model_copy(update={"trusted": True})
    name, sep, rest = spec.partition("=")
    if not sep or " " in name or "/" in name:
        name, rest = "", spec
    rest = rest.strip()
    if not rest:
        raise ConfigError(f"empty MCP server spec {spec!r}")
    if rest.startswith(("http://", "https://")):
        return MCPServerConfig(name=name or _default_name(rest), url=rest)
    argv = shlex.split(rest)
    words = [a for a in argv if not a.startswith("-") and a.split("/")[-1] not in _LAUNCHERS]
    return MCPServerConfig(name=name or _default_name(words[0] if words else argv[0]),
                           command=argv)


def mcp_configs(data: Mapping[str, Any]) -> list[MCPServerConfig]:
    """Servers from a settings mapping in the common ``mcpServers`` shape (the one MCP clients
    such as Claude Desktop use) or thinkloop's ``mcp`` table::

        {"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"], "env": {}},
                        "docs": {"url": "http://127.0.0.1:8000/mcp"}}}
    """
    servers = data.get("mcpServers", data.get("mcp", {}))
    if not isinstance(servers, Mapping):
        raise ConfigError("MCP settings: expected a table of servers by name")
    configs = []
    for name, spec in servers.items():
        if not isinstance(spec, Mapping):
            raise ConfigError(f"MCP server {name!r}: expected a table")
        fields = dict(spec)
        command = fields.pop("command", None)
        args = list(fields.pop("args", []))
        if isinstance(command, str):
            fields["command"] = [*shlex.split(command), *args]
        elif command is not None:
            fields["command"] = [*command, *args]
        try:
            configs.append(MCPServerConfig(name=name, **fields))
        except ValueError as exc:
            raise ConfigError(f"MCP server {name!r}: {exc}") from None
    return configs


def load_mcp_file(path: Path) -> list[MCPServerConfig]:
    """``mcpServers`` from a JSON or TOML file."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read MCP settings {path}: {exc}") from None
    return mcp_configs(data)


def _default_name(text: str) -> str:
    tail = text.rstrip("/").split("/")[-1] or "mcp"
    return _NAME_OK.sub("_", tail.removeprefix("mcp-server-").removesuffix(".py"))


def tool_name(prefix: str, name: str) -> str:
    full = _NAME_OK.sub("_", f"{prefix}_{name}")
    return full[:_MAX_NAME]


def render_result(result: Any) -> str:
    """A ``CallToolResult``'s content as text: text blocks joined, others described."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{kind} content: {getattr(block, 'mime_type', '') or 'binary'}]")
    if not parts and getattr(result, "structured_content", None) is not None:
        import orjson

        parts.append(orjson.dumps(result.structured_content).decode())
    return "\n".join(parts)


def _args_model(schema: dict[str, Any], name: str) -> type[BaseModel]:
    """A root model holding the raw arguments, validated against the server's schema."""
    validator = jsonschema.Draft202012Validator(schema)

    class Args(RootModel[dict[str, Any]]):
        @model_validator(mode="after")
        def _check(self) -> Args:
            errors = sorted(validator.iter_errors(self.root), key=lambda e: list(e.path))
            if errors:
                where = "/".join(str(p) for p in errors[0].path) or "(arguments)"
                raise ValueError(f"{where}: {errors[0].message}")
            return self

    Args.__name__ = f"{name}_args"
    return Args


@dataclass
class MCPServer:
    """A live connection to one MCP server; its tools are in :attr:`tools` once connected."""

    config: MCPServerConfig

    def __post_init__(self) -> None:
        self.tools: list[Tool] = []
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def _target(self) -> Any:
        from mcp import StdioServerParameters

        c = self.config
        if c.url:
            return c.url
        assert c.command
        return StdioServerParameters(command=c.command[0], args=c.command[1:],
                                     env=c.env or None, cwd=c.cwd)

    async def connect(self) -> list[Tool]:
        if self._task is not None:
            return self.tools
        from mcp import Client

        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def own() -> None:
            try:
                async with Client(self._target(),
                                  read_timeout_seconds=self.config.timeout_s) as client:
                    self._client = client
                    listed = await client.list_tools()
                    self.tools = [self._wrap(t) for t in listed.tools]
                    ready.set_result(None)
                    await self._stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise
            finally:
                self._client = None

        self._task = asyncio.create_task(own(), name=f"mcp:{self.config.name}")
        try:
            await ready
        except Exception as exc:
            await self.close()
            raise ConfigError(
                f"could not connect to MCP server {self.config.name!r}: {_root_cause(exc)}"
            ) from exc
        return self.tools

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        with contextlib.suppress(Exception):
            await task
        self._stop = asyncio.Event()

    async def __aenter__(self) -> MCPServer:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        client = self._client
        if client is None:
            raise ToolExecutionError(f"MCP server {self.config.name!r} is not connected")
        result = await client.call_tool(name, arguments)
        text = render_result(result)
        if result.is_error:
            raise ToolExecutionError(text or f"{name} failed on {self.config.name!r}")
        return text

    def _wrap(self, mcp_tool: Any) -> Tool:
        full = tool_name(self.config.prefix or self.config.name, mcp_tool.name)
        schema = dict(mcp_tool.input_schema or {"type": "object", "properties": {}})
        remote = mcp_tool.name

        async def run(root: dict[str, Any]) -> str:
            return await self.call(remote, root)

        annotations = getattr(mcp_tool, "annotations", None)
        return Tool(
            name=full,
            description=mcp_tool.description or remote,
            fn=run,
            args_model=_args_model(schema, full),
            parameters=schema,
            is_async=True,
            idempotent=bool(getattr(annotations, "idempotent_hint", False)),
            trusted_output=False,
            meta={"mcp_server": self.config.name, "mcp_tool": remote},
            needs_approval=needs_approval(annotations, trusted=self.config.trusted),
        )


def needs_approval(annotations: Any, trusted: bool = False) -> bool:
    """Does a tool wait for a person (and pass provenance gating)? The MCP specification's
    defaults: a tool is destructive and open-world unless it says otherwise, and a server's
    word counts only when the configuration trusts it. A trusted server's tool runs freely
    when read-only (``readOnlyHint``) or declared neither destructive nor open-world."""
    if not trusted:
        return True

    def hint(name: str, default: bool) -> bool:
        value = getattr(annotations, name, None)
        return default if value is None else value is True

    if hint("read_only_hint", False):  # reads only: harmless unless it reaches outside
        return hint("open_world_hint", True)
    return hint("destructive_hint", True) or hint("open_world_hint", True)


def _root_cause(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


@contextlib.asynccontextmanager
async def mcp_tools(configs: Sequence[MCPServerConfig]) -> Any:
    """Connect to every server, yield all their tools, close them all on exit."""
    async with contextlib.AsyncExitStack() as stack:
        tools: list[Tool] = []
        for cfg in configs:
            server = await stack.enter_async_context(MCPServer(cfg))
            tools.extend(server.tools)
        yield tools
