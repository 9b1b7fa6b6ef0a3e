"""The sections of the one ``Settings`` (``[tools]``, ``[models]``, ``[gateway]``,
``[worker]``, ``[host]``) and the defaults every module imports rather than repeat a number. Read by
:mod:`thinkloop.core.settings`, which also re-exports all of this."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

__all__ = [
    "APPROVAL_TIMEOUT_S",
    "ASK_TIMEOUT_S",
    "DB_FILE",
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_ENV_ALLOW",
    "DEFAULT_OPENAI_MODEL",
    "FIELD_OF_VAR",
    "GATEWAY_APPROVAL_TIMEOUT_S",
    "LOCAL_N_CTX",
    "MAX_PARALLEL_CALLS",
    "MIB",
    "MODEL_MAX_ATTEMPTS",
    "OBSERVATION_MAX_TOKENS",
    "PROVIDER_ENV",
    "RUN_TIMEOUT_S",
    "TOML_FILE",
    "TOOL_OUTPUT_CHARS",
    "TOOL_TIMEOUT_S",
    "GatewayDoors",
    "GatewaySettings",
    "HostSettings",
    "Origin",
    "ProviderSettings",
    "ToolSettings",
    "WorkerSettings",
    "default_home",
    "gateway_token_file",
    "llama_cache_under",
    "workspace_clash",
    "workspace_under",
]

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


def workspace_clash(workspace: Path, home: Path) -> str | None:
    """Why the tools may not work in ``workspace`` with this ``home`` (None: they may): one
    that holds the home, or lies inside it but for its own ``workspaces`` folder, would give
    the model the session store and the agent's own bootstrap files to edit."""
    chosen, home = Path(workspace).expanduser().resolve(), Path(home).expanduser().resolve()
    if home == chosen or chosen in home.parents:
        clash = "holds"
    elif home in chosen.parents and (home / "workspaces") not in (chosen, *chosen.parents):
        clash = "is inside"  # e.g. home/agents/thinkloop
    else:
        return None
    return (f"{clash} THINKLOOP_HOME ({home}); choose the project's own directory, or set "
            "THINKLOOP_HOME outside it")


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
    search_backend: str | None = Field(
        None, description="web_search's backend: ddgs (keyless; the default when unset), "
                          "searxng, brave, tavily, or none (no web_search)")
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


def llama_cache_under(home: Path) -> Path:
    """Where the local model keeps its KV cache files inside a thinkloop home."""
    return Path(home).expanduser() / "cache" / "llama"


class ProviderSettings(BaseModel):
    """Model providers' endpoints and keys (``[models]``), under the providers' own names.

    Model factories receive this section, typed, as it was read once at the edge; keys are
    :class:`~pydantic.SecretStr` (read them with :meth:`secret`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    openai_model: str = DEFAULT_OPENAI_MODEL
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    anthropic_model: str = DEFAULT_ANTHROPIC_MODEL
    openrouter_api_key: SecretStr | None = None
    openrouter_base_url: str | None = None
    gemini_api_key: SecretStr | None = None
    gemini_base_url: str | None = None
    ollama_host: str | None = None
    base_url: str | None = Field(None, description="endpoint of vllm:/compat: models")
    api_key: SecretStr | None = Field(None, description="key for the vllm:/compat: endpoint")
    max_attempts: int = Field(MODEL_MAX_ATTEMPTS, ge=1,
                              description="tries per model call (429/5xx/net)")
    local_n_ctx: int = Field(LOCAL_N_CTX, ge=256, description="context window of the local model")
    local_threads: int | None = Field(
        None, ge=1, description="llama.cpp threads of the local model (default: cores - 1)")
    local_kv_cache: bool = Field(True, description="keep the local model's KV cache file")
    local_cache_dir: Path = Field(
        default_factory=lambda: llama_cache_under(default_home()),
        description="where the local model's KV cache files go (default: <home>/cache/llama)")
    local_runtime: Literal["auto", "xllamacpp", "llama-cpp-python"] = Field(
        "auto", description="llama.cpp runtime of the local model: the prebuilt xllamacpp "
        "wheel, a source-built llama-cpp-python, or auto (xllamacpp when installed)")

    def secret(self, name: str) -> str | None:
        """The field ``name`` as plain text (a key unwrapped), None if unset or empty."""
        value = getattr(self, name)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        return None if value is None or value == "" else str(value)

    def get(self, var: str, default: str | None = None) -> str | None:
        """The setting of the environment variable ``var`` as text: the view a provider
        factory written for the old ``factory(name, env)`` dict reads (kept for one release)."""
        if var == "THINKLOOP_HOME":
            return str(self.local_cache_dir.parent.parent)
        name = FIELD_OF_VAR.get(var)
        value = self.secret(name) if name else None
        if isinstance(getattr(self, name or "", None), bool):
            value = "1" if getattr(self, name or "") else "0"
        return default if value is None else value


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
    handback_s: float = Field(30.0, ge=0, description="on SIGTERM after drain_s, how long "
                              "tool calls in flight may take to finish (a run is handed back "
                              "once its calls are checkpointed); after it, the worker exits "
                              "and their runs move when their leases expire")
    poll_s: float = Field(1.0, gt=0, description="how often a worker looks for runs it was "
                          "not woken for (a gateway's queued run wakes it at once; handed-back "
                          "runs and a dead worker's wait for this)")
    prefix: str = Field("thinkloop", pattern=r"^[A-Za-z0-9_.-]{1,64}$",
                        description="Redis key prefix: fleets sharing one Redis stay apart")


class HostSettings(BaseModel):
    """``thinkloop host``'s settings (``[host]``, ``THINKLOOP_HOST_*``); its flags override
    them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: Literal["auto", "bwrap", "docker", "podman", "none"] = Field(
        "auto", description="what confines each run: auto is docker or podman when an image "
        "is set and one is installed, else bubblewrap; none runs it unconfined")
    image: str | None = Field(None, description="docker/podman image with thinkloop installed")
    network: str | None = Field(None, description="docker/podman network of the container")
    data: Path | None = Field(None, description="folder of the groups' data, one folder each "
                              "(unset: <home>/host)")
    retries: int = Field(5, ge=0, description="retries of a failed run")
    backoff_s: float = Field(5.0, ge=0, description="seconds before the first retry; each "
                             "next one waits twice as long (at most 300)")
    timeout_s: float = Field(1800.0, gt=0, description="seconds one attempt may take")
    notify_url: str | None = Field(None, description="webhook the give-up notice is POSTed to")
    notify: tuple[str, ...] = Field(
        (), description="chats the give-up notice goes to (platform:chat, e.g. telegram:42; "
        "'chat' is the payload's own chat), sent by a gateway serving that channel through "
        "the run queue (queue_url)")

    @field_validator("notify", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        """``THINKLOOP_HOST_NOTIFY=telegram:42,slack:C1`` is a list, as ``THINKLOOP_FALLBACKS``
        is (a JSON list is accepted too)."""
        if isinstance(value, str) and not value.lstrip().startswith("["):
            return tuple(c.strip() for c in value.split(",") if c.strip())
        return value


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
    "local_cache_dir": "THINKLOOP_LOCAL_CACHE_DIR",
}
FIELD_OF_VAR = {var: name for name, var in PROVIDER_ENV.items()}
