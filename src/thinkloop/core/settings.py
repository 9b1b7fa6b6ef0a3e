"""The one ``Settings``: arguments > environment > ``thinkloop.toml`` > defaults.

:func:`load_settings` is the only reader of the environment in thinkloop: the CLI, the gateway,
workers and ``Agent`` call it once at their edge and pass the result down (providers get
:meth:`Settings.provider_env`, the tools ``settings.tools``, stores ``settings.store_location``).
Each value remembers where it came from, which ``thinkloop config`` prints. Every default lives
here once; other modules import the constants below rather than repeat a number.

The one exception: OpenTelemetry's OTLP exporter reads its own ``OTEL_EXPORTER_OTLP_*``
variables (headers, timeout) inside the library.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from thinkloop.core.errors import ConfigError

MIB = 1024 * 1024
RUN_TIMEOUT_S = 600.0
TOOL_TIMEOUT_S = 60.0
MODEL_MAX_ATTEMPTS = 3
OBSERVATION_MAX_TOKENS = 4000
# What one reply and one tool can put in front of the model (issue 30): the calls of a reply
# past MAX_PARALLEL_CALLS are refused (the model sends them again), and any tool's output,
# built-in, custom or MCP, is cut to TOOL_OUTPUT_CHARS with a note.
MAX_PARALLEL_CALLS = 16
TOOL_OUTPUT_CHARS = 200_000
# How long a person has to answer: an approval on a terminal, one through the gateway (a web
# page or a chat, so slower), and an ask_human question.
APPROVAL_TIMEOUT_S = 60.0
GATEWAY_APPROVAL_TIMEOUT_S = 300.0
ASK_TIMEOUT_S = 600.0
LOCAL_N_CTX = 4096
DB_FILE = "thinkloop.db"
TOML_FILE = "thinkloop.toml"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"
# The host variables a sandboxed command sees unless configured (thinkloop.sandbox): nothing
# that can hold a credential.
DEFAULT_ENV_ALLOW = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ")
Origin = Literal["default", "thinkloop.toml", "environment", "argument"]


def default_home() -> Path:
    return Path.home() / ".thinkloop"


def gateway_token_file(home: Path, port: int) -> Path:
    """Where a ``--no-auth`` gateway on ``port`` keeps its per-process token (mode 0600): the
    person's own programs read it there; a web page cannot."""
    return Path(home).expanduser() / "gateway" / f"{port}.token"


def workspace_under(home: Path) -> Path:
    """The file and shell tools' base directory inside a thinkloop home."""
    return Path(home).expanduser() / "workspaces" / "thinkloop"


class ToolSettings(BaseModel):
    """The built-in tools' settings (``[tools]`` in thinkloop.toml, ``THINKLOOP_TOOLS_*``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workspace: Path = Field(
        default_factory=lambda: workspace_under(default_home()),
        description="base directory; each user works in <workspace>/<sanitised user id>",
    )
    workspace_per_user: bool = Field(
        True, description="false: everyone works in <workspace> itself, not a folder per user "
                          "(one person on their own project: thinkloop run --workspace DIR)")
    shell_timeout_s: float = TOOL_TIMEOUT_S
    shell_max_timeout_s: float = RUN_TIMEOUT_S
    output_cap_bytes: int = MIB
    read_max_bytes: int = 256 * 1024
    grep_max_matches: int = 200
    fetch_timeout_s: float = 20.0
    ask_timeout_s: float = Field(ASK_TIMEOUT_S, gt=0,
                                 description="how long ask_human waits for the person")
    fetch_max_bytes: int = 5 * MIB
    fetch_max_chars: int = 100_000
    fetch_allow_private: bool = Field(
        False, description="let web_fetch reach loopback, private and link-local addresses")
    search_backend: str | None = Field(None, description="searxng, brave or tavily; off if unset")
    searxng_url: str | None = None
    brave_api_key: str | None = None
    tavily_api_key: str | None = None
    workflows: Path | None = Field(None, description="YAML registry of workflows")
    skills: Path | None = Field(None, description="directory of skill markdown files")
    workflow_timeout_s: float = 120.0
    chromium_path: Path = Path("/usr/bin/chromium")
    # Confinement of shell and run_workflow (thinkloop.sandbox); "none" runs them unconfined.
    sandbox: Literal["bwrap", "none"] = "bwrap"
    sandbox_network: bool = Field(False, description="let sandboxed commands use the network")
    sandbox_python: bool = Field(
        True, description="sandboxed commands see thinkloop's own Python environment, "
                          "read-only and first on PATH (python, pytest)")
    sandbox_memory_mb: int = 4096
    sandbox_cpu_s: int = 300
    sandbox_max_processes: int = 256
    sandbox_file_mb: int = 1024
    sandbox_env: tuple[str, ...] = Field(
        DEFAULT_ENV_ALLOW, description="host environment variables commands may see")


class ProviderSettings(BaseModel):
    """Model providers' endpoints and keys (``[models]``), under the providers' own names."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    openai_api_key: str | None = None
    openai_base_url: str | None = None
    openai_model: str = DEFAULT_OPENAI_MODEL
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    anthropic_model: str = DEFAULT_ANTHROPIC_MODEL
    openrouter_api_key: str | None = None
    openrouter_base_url: str | None = None
    gemini_api_key: str | None = None
    gemini_base_url: str | None = None
    ollama_host: str | None = None
    base_url: str | None = Field(None, description="endpoint of vllm:/compat: models")
    api_key: str | None = Field(None, description="key for the vllm:/compat: endpoint")
    max_attempts: int = Field(MODEL_MAX_ATTEMPTS, ge=1,
                              description="tries per model call (429/5xx/net)")
    local_n_ctx: int = Field(LOCAL_N_CTX, ge=256, description="context window of the local model")
    local_threads: int | None = Field(
        None, ge=1, description="llama.cpp threads of the local model (default: cores - 1)")
    local_kv_cache: bool = Field(True, description="keep the local model's KV cache file")
    local_runtime: Literal["auto", "xllamacpp", "llama-cpp-python"] = Field(
        "auto", description="llama.cpp runtime of the local model: the prebuilt xllamacpp "
        "wheel, a source-built llama-cpp-python, or auto (xllamacpp when installed)")


class GatewayDoors(BaseModel):
    """The gateway's limits on what comes in (docs/gateway-security.md): who may call it
    from a browser, and how much of the machine a client may hold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed_origins: tuple[str, ...] = Field(
        (), description="browser origins (https://app.example) that may call the gateway "
                        "besides its own page")
    allowed_hosts: tuple[str, ...] = Field(
        (), description="Host names the gateway answers to besides its address (and "
                        "localhost on loopback); checked always with --no-auth, else if set")
    max_header_bytes: int = Field(16 * 1024, ge=1024, description="a request's head, at most")
    max_body_bytes: int = Field(4 * MIB, ge=1024,
                                description="a request body or WebSocket message, at most")
    header_timeout_s: float = Field(10.0, gt=0, description="time to send a request's head")
    body_timeout_s: float = Field(30.0, gt=0, description="time to send a request's body")
    keep_alive_s: int = Field(5, ge=1, description="an idle connection is closed after this")
    per_client_connections: int = Field(64, ge=1, description="open connections per client "
                                        "address")
    max_connections: int = Field(1024, ge=8, description="open connections in all; lowered "
                                 "to the open-file limit less fd_reserve")
    fd_reserve: int = Field(128, ge=16, description="file descriptors kept for the store, "
                            "models and tools")
    key_recheck_s: float = Field(5.0, gt=0, description="how often an open WebSocket's key "
                                 "is checked again (a revoked key closes it)")


class GatewaySettings(GatewayDoors):
    """``thinkloop serve``'s settings (``[gateway]``, ``THINKLOOP_GATEWAY_*``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    per_user_runs: int = Field(3, ge=1, description="runs in progress per user")
    max_runs: int = Field(64, ge=1, description="runs in progress in all")
    agent_ttl_s: float = Field(30.0, ge=0, description="how long a resolved agent is "
                               "reused before its definition is read again")
    keep_finished_s: float = Field(3600.0, ge=0, description="how long a finished run stays "
                                   "readable (and its events replayable), up to keep_runs")
    keep_runs: int = Field(2000, ge=1)
    approval_timeout_s: float = Field(GATEWAY_APPROVAL_TIMEOUT_S, gt=0)


class WorkerSettings(BaseModel):
    """``thinkloop worker``'s settings (``[worker]``, ``THINKLOOP_WORKER_*``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int = Field(64, ge=1, description="runs one worker executes at once")
    lease_s: float = Field(10.0, gt=0, description="how long a run's lease lasts unrenewed: "
                           "a dead worker's runs go to another after this")
    max_deaths: int = Field(3, ge=1, description="workers that may die under one run before "
                            "it ends failed")
    drain_s: float = Field(20.0, ge=0, description="on SIGTERM, how long runs may finish "
                           "before the rest are handed back to other workers")
    poll_s: float = Field(0.1, gt=0, description="how often an idle worker looks for runs")
    prefix: str = Field("thinkloop", pattern=r"^[A-Za-z0-9_.-]{1,64}$",
                        description="Redis key prefix: fleets sharing one Redis stay apart")


# Environment names of the provider settings: the providers' standard variables.
PROVIDER_ENV = {
    "openai_api_key": "OPENAI_API_KEY", "openai_base_url": "OPENAI_BASE_URL",
    "openai_model": "OPENAI_MODEL", "anthropic_api_key": "ANTHROPIC_API_KEY",
    "anthropic_base_url": "ANTHROPIC_BASE_URL", "anthropic_model": "ANTHROPIC_MODEL",
    "openrouter_api_key": "OPENROUTER_API_KEY", "openrouter_base_url": "OPENROUTER_BASE_URL",
    "gemini_api_key": "GEMINI_API_KEY", "gemini_base_url": "GEMINI_BASE_URL",
    "ollama_host": "OLLAMA_HOST", "base_url": "THINKLOOP_BASE_URL",
    "api_key": "THINKLOOP_API_KEY", "max_attempts": "THINKLOOP_MODEL_MAX_ATTEMPTS",
    "local_n_ctx": "THINKLOOP_LOCAL_N_CTX", "local_threads": "THINKLOOP_LOCAL_THREADS",
    "local_kv_cache": "THINKLOOP_LOCAL_KV_CACHE", "local_runtime": "THINKLOOP_LOCAL_RUNTIME",
}
# Top-level settings whose variable is not THINKLOOP_<NAME>, in order of preference.
OTHER_ENV: dict[str, tuple[str, ...]] = {"otlp_endpoint": ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                               "OTEL_EXPORTER_OTLP_ENDPOINT")}
GROUPS = ("tools", "models", "gateway", "worker")
# Chat channels (thinkloop.channels validates each platform's section): [channels.telegram] in
# thinkloop.toml, THINKLOOP_CHANNELS_TELEGRAM_<KEY>, and the platforms' own token variables.
CHANNELS = "channels"
CHANNEL_PREFIX = "THINKLOOP_CHANNELS_"
CHANNEL_ENV = {
    "channels.telegram.token": "TELEGRAM_BOT_TOKEN", "channels.slack.bot_token": "SLACK_BOT_TOKEN",
    "channels.slack.app_token": "SLACK_APP_TOKEN", "channels.discord.token": "DISCORD_BOT_TOKEN",
    "channels.slack.signing_secret": "SLACK_SIGNING_SECRET",
}


class Settings(BaseSettings):
    """Everything thinkloop reads from outside; build it with :func:`load_settings`.

    ``Settings(**values)`` validates the given values over the defaults and reads nothing:
    the layers are assembled by :func:`load_settings`, so that each value's origin is known.
    """

    model_config = SettingsConfigDict(frozen=True, extra="forbid")

    home: Path = Field(default_factory=default_home,
                       description="thinkloop.db, agents/NAME/ bootstrap files, cache/")
    model: str | None = Field(None, description="default model string, e.g. openai:gpt-4o-mini")
    max_steps: int | None = Field(None, description="step limit; unset lets the step budget decide")
    timeout_s: float = RUN_TIMEOUT_S
    history_turns: int | None = Field(
        None, ge=1, description="each request keeps a session's last N user turns with their "
        "replies (GoClaw's historyLimit); unset: all, within the context window")
    keep_checkpoints: int = Field(
        20, ge=0, description="checkpoints kept of a session's finished runs: the latest N "
        "runs' (0: all, forever); a run not finished keeps its own")
    observation_max_tokens: int = Field(
        OBSERVATION_MAX_TOKENS, ge=0, description="a tool result over this many tokens goes "
        "into history truncated, with a note; read_more pages on (0: no cap)")
    tool_timeout_s: float = TOOL_TIMEOUT_S
    approval_timeout_s: float = Field(APPROVAL_TIMEOUT_S, gt=0,
                                      description="how long an approval asked on a terminal "
                                      "waits")
    protocol: str = "auto"
    judgement: str = Field("", description="judgement plugins: all, off, or a comma list "
                           "(assess, select, ...)")
    model_pool: str = Field("", description="models for judgement 'select': "
                            "provider:model=capability[/effort], comma separated")
    database_url: str | None = Field(None, description="a SQLite path or postgresql:// URL; "
                                     "unset: <home>/thinkloop.db")
    queue_url: str | None = Field(None, description="redis:// URL of the run queue: the "
                                  "gateway enqueues runs and `thinkloop worker`s execute them; "
                                  "unset: runs execute in the gateway's process")
    trace_verbose: bool = Field(False, description="keep each model call's full input in spans")
    otlp_endpoint: str | None = Field(None, description="OpenTelemetry collector for spans")
    models: ProviderSettings = Field(default_factory=ProviderSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    channels: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="chat channels by platform ([channels.telegram])")
    _origins: dict[str, Origin] = PrivateAttr(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)

    @model_validator(mode="before")
    @classmethod
    def _workspace_in_home(cls, data: Any) -> Any:
        """The tools' workspace defaults to one under *this* home, not the default home."""
        if not isinstance(data, dict) or isinstance(data.get("tools"), ToolSettings):
            return data
        tools = dict(data.get("tools") or {})
        tools.setdefault("workspace", workspace_under(Path(data.get("home") or default_home())))
        return {**data, "tools": tools}

    @property
    def store_location(self) -> str:
        """``database_url``, else the SQLite file in the home."""
        return self.database_url or str(self.home.expanduser() / DB_FILE)

    def model_spec(self) -> str:
        """``model``, else OpenAI if keyed, else Anthropic if keyed, else the local model."""
        m = self.models
        if self.model:
            return self.model
        if m.openai_api_key:
            return f"openai:{m.openai_model}"
        if m.anthropic_api_key:
            return f"anthropic:{m.anthropic_model}"
        return "local"

    def provider_env(self) -> dict[str, str]:
        """The provider settings under their variable names: what model factories read."""
        out = {"THINKLOOP_HOME": str(self.home)}
        for name, var in PROVIDER_ENV.items():
            value = getattr(self.models, name)
            if value is not None:
                out[var] = ("1" if value else "0") if isinstance(value, bool) else str(value)
        return out

    def origin(self, key: str) -> Origin:
        """Where the setting ``key`` (``tools.workspace`` for a group's) came from."""
        return self._origins.get(key, "default")

    def with_arguments(self, args: Mapping[str, Any]) -> Settings:
        """These settings with ``args`` (dotted keys; None means not given) over them, as
        arguments: how a command's flags join the settings it loaded."""
        given = {k: v for k, v in flatten(nest(args)).items() if v is not None}
        if not given:
            return self
        return _validated(flatten(self.model_dump()), dict(self._origins),
                          [("argument", given)])


def load_settings(
    args: Mapping[str, Any] | None = None, *, env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """The effective settings: ``args`` (dotted keys like ``tools.sandbox``; None: not given) over
    the environment (``env``, default this process's) over ``thinkloop.toml`` (in ``cwd``,
    else in the home) over the defaults."""
    env = os.environ if env is None else env
    argv = nest({k: v for k, v in (args or {}).items() if v is not None})  # None: not given
    env_layer = from_env(env)
    home = argv.get("home") or env_layer.get("home") or default_home()
    layers: list[tuple[Origin, dict[str, Any]]] = [
        ("thinkloop.toml", read_toml(find_toml(Path(home), cwd))),
        ("environment", env_layer), ("argument", argv)]
    return _validated({}, {}, layers)


def _validated(merged: dict[str, Any], origins: dict[str, Origin],
               layers: list[tuple[Origin, dict[str, Any]]]) -> Settings:
    """``layers`` over ``merged`` (flat), each value remembering the layer it came from."""
    for origin, layer in layers:
        flat = flatten(layer)
        merged.update(flat)
        origins.update(dict.fromkeys(flat, origin))
    try:
        settings = Settings(**nest(merged))
    except ValidationError as exc:
        raise ConfigError(_invalid(exc, origins)) from None
    settings._origins.update(origins)
    return settings


def _invalid(exc: ValidationError, origins: Mapping[str, Origin]) -> str:
    """One line per bad setting, naming where it came from (so the user knows what to fix)."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        lines.append(f"{key} ({origins.get(key, 'default')}): {err['msg']}")
    return "invalid settings: " + "; ".join(lines)


def env_names() -> dict[str, tuple[str, ...]]:
    """Each setting's environment variables (dotted name -> names, the first set wins)."""
    out: dict[str, tuple[str, ...]] = {
        n: OTHER_ENV.get(n, (f"THINKLOOP_{n.upper()}",))
        for n in Settings.model_fields if n not in (*GROUPS, CHANNELS)}
    out.update({f"models.{n}": (v,) for n, v in PROVIDER_ENV.items()})
    for group, fields in (("tools", ToolSettings.model_fields),
                          ("gateway", GatewaySettings.model_fields),
                          ("worker", WorkerSettings.model_fields)):
        out.update({f"{group}.{n}": (f"THINKLOOP_{group.upper()}_{n.upper()}",) for n in fields})
    return out


def from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings the environment sets, nested like the model; empty variables are unset."""
    found: dict[str, Any] = {}
    for key, names in env_names().items():
        value = next((env[v] for v in names if env.get(v)), None)
        if value is not None:
            found[key] = _decoded(value)
    found.update(_channel_env(env))
    return nest(found)


def _channel_env(env: Mapping[str, str]) -> dict[str, Any]:
    """``THINKLOOP_CHANNELS_TELEGRAM_API_URL`` -> ``channels.telegram.api_url`` (a platform's
    name has no underscore), and the platforms' token variables."""
    found: dict[str, Any] = {k: env[v] for k, v in CHANNEL_ENV.items() if env.get(v)}
    for var, value in env.items():
        platform, _, name = var.removeprefix(CHANNEL_PREFIX).lower().partition("_")
        if var.startswith(CHANNEL_PREFIX) and name and value:
            found[f"{CHANNELS}.{platform}.{name}"] = _decoded(value)
    return found


def _decoded(raw: str) -> Any:
    """A list or mapping variable is JSON (``["PATH","LANG"]``); anything else stays text."""
    return json.loads(raw) if raw.lstrip().startswith(("[", "{")) else raw


def find_toml(home: Path, cwd: Path | None = None) -> Path | None:
    for path in ((cwd or Path.cwd()) / TOML_FILE, home.expanduser() / TOML_FILE):
        if path.is_file():
            return path
    return None


def read_toml(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None


def nest(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{"tools.sandbox": "none"}`` -> ``{"tools": {"sandbox": "none"}}`` (at any depth:
    ``channels.telegram.api_url``)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        *groups, name = key.split(".")
        here = out
        for group in groups:
            here = here.setdefault(group, {})
        here[name] = value
    return out


def flatten(values: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`nest` for the groups; unknown keys pass to validation as they are."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in GROUPS and isinstance(value, Mapping):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        elif key == CHANNELS and isinstance(value, Mapping):
            out.update({f"{key}.{p}.{k}": v for p, section in value.items()
                        for k, v in (section.items() if isinstance(section, Mapping) else ())})
        else:
            out[key] = value
    return out


SECRET_SUFFIXES = ("api_key", "token", "password", "secret")


def describe(settings: Settings) -> list[tuple[str, Any, Origin]]:
    """Every setting as (dotted name, value fit to show, origin); secrets masked."""
    rows: list[tuple[str, Any, Origin]] = []
    for key, value in flatten(settings.model_dump(mode="json")).items():
        rows.append((key, _masked(key, value), settings.origin(key)))
    return rows


def _masked(key: str, value: Any) -> Any:
    if value is None or value == "":
        return value
    if key.endswith(SECRET_SUFFIXES):
        return "****" + str(value)[-4:] if len(str(value)) > 12 else "****"
    if key == "database_url" and "@" in str(value):
        # postgresql://user:password@host/db: the password goes, the rest says where.
        scheme, _, rest = str(value).partition("://")
        creds, _, where = rest.rpartition("@")
        return f"{scheme}://{creds.split(':')[0]}:****@{where}" if ":" in creds else value
    return value


def host_environment() -> dict[str, str]:
    """This process's environment, for building a child command's allow-listed one."""
    return dict(os.environ)


def export_environment(values: Mapping[str, str]) -> None:
    """Put ``values`` in this process's environment: for a one-run worker process whose
    secrets must reach the tools' commands (they join the sandbox's allow list)."""
    os.environ.update(values)


def quiet_model_loaders() -> None:
    """Keep model loaders' progress bars off a terminal the CLI draws on itself."""
    for var, value in (("HF_HUB_DISABLE_PROGRESS_BARS", "1"), ("TRANSFORMERS_NO_TQDM", "1"),
                       ("TRANSFORMERS_VERBOSITY", "error")):
        os.environ.setdefault(var, value)
