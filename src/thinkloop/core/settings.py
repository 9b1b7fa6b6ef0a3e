"""The one ``Settings``: arguments > environment > ``thinkloop.toml`` > defaults.

:func:`load_settings` is the only reader of the environment in thinkloop: the CLI, the gateway,
workers and ``Agent`` call it once at their edge and pass the result down (model providers get
the typed ``settings.models``, the tools ``settings.tools``, stores ``settings.store_location``).
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
from typing import Any

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from thinkloop.core.errors import ConfigError

# The sections and defaults are part of Settings: everything there is re-exported here.
from thinkloop.core.sections import *  # noqa: F403
from thinkloop.core.sections import (
    APPROVAL_TIMEOUT_S,
    DB_FILE,
    OBSERVATION_MAX_TOKENS,
    PROVIDER_ENV,
    RUN_TIMEOUT_S,
    TOML_FILE,
    TOOL_TIMEOUT_S,
    GatewaySettings,
    HostSettings,
    Origin,
    ProviderSettings,
    ToolSettings,
    WorkerSettings,
    default_home,
    llama_cache_under,
    workspace_clash,
    workspace_under,
)

# Top-level settings whose variable is not THINKLOOP_<NAME>, in order of preference.
OTHER_ENV: dict[str, tuple[str, ...]] = {"otlp_endpoint": ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                               "OTEL_EXPORTER_OTLP_ENDPOINT")}
GROUPS = ("tools", "models", "gateway", "worker", "host")
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
    fallbacks: list[str] = Field(
        default_factory=list, max_length=8, description="models tried in order when the model "
        "fails after its own retries (comma separated); an agent's own fallbacks win")
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
    host: HostSettings = Field(default_factory=HostSettings)
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

    @field_validator("fallbacks", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        """``THINKLOOP_FALLBACKS=openai:gpt-4o-mini,anthropic:claude-haiku-4-5`` is a list."""
        if isinstance(value, str):
            return [m.strip() for m in value.split(",") if m.strip()]
        return value

    @model_validator(mode="before")
    @classmethod
    def _workspace_in_home(cls, data: Any) -> Any:
        """The tools' workspace and the local model's cache default to ones under *this*
        home, not the default home."""
        if not isinstance(data, dict):
            return data
        home = Path(data.get("home") or default_home())
        for group, cls_, key, where in (
                ("tools", ToolSettings, "workspace", workspace_under(home)),
                ("models", ProviderSettings, "local_cache_dir", llama_cache_under(home))):
            if not isinstance(data.get(group), cls_):
                data = {**data, group: {key: where, **dict(data.get(group) or {})}}
        return data

    @model_validator(mode="after")
    def _workspace_outside_home(self) -> Settings:
        """Checked here, where every shell and the library read the settings, not only on
        ``run --workspace``: THINKLOOP_TOOLS_WORKSPACE inside the home is refused alike."""
        clash = workspace_clash(self.tools.workspace, self.home)
        if clash:
            raise PydanticCustomError("workspace_clash", "{path} {clash}", {
                "path": str(self.tools.workspace), "clash": clash, "setting": "tools.workspace"})
        return self

    @property
    def store_location(self) -> str:
        """``database_url``, else the SQLite file in the home."""
        return self.database_url or str(self.home.expanduser() / DB_FILE)

    def model_spec(self) -> str:
        """``model``, else OpenAI if keyed, else Anthropic if keyed, else the local model."""
        m = self.models
        if self.model:
            return self.model
        if m.secret("openai_api_key"):
            return f"openai:{m.openai_model}"
        if m.secret("anthropic_api_key"):
            return f"anthropic:{m.anthropic_model}"
        return "local"

    def provider_env(self) -> dict[str, str]:
        """Deprecated (kept for one release): the provider settings as variables by name.
        Model factories now get ``self.models``, typed."""
        out = {"THINKLOOP_HOME": str(self.home)}
        for var in PROVIDER_ENV.values():
            value = self.models.get(var)
            if value is not None:
                out[var] = value
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
        # A check across settings names the one to change (model-level errors have no loc).
        key = ".".join(str(p) for p in err["loc"]) or err.get("ctx", {}).get("setting", "")
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
                          ("worker", WorkerSettings.model_fields),
                          ("host", HostSettings.model_fields)):
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


def provider_settings(value: ProviderSettings | Mapping[str, str] | None) -> ProviderSettings:
    """``value`` as the typed section: a mapping of variables (the old form) is read once here;
    None loads the settings (environment, thinkloop.toml)."""
    if isinstance(value, ProviderSettings):
        return value
    return load_settings().models if value is None else providers_from_env(value)


def providers_from_env(env: Mapping[str, str]) -> ProviderSettings:
    """The section from variables by name (``OPENAI_API_KEY``...): for callers that still
    pass the old environment dict; everyone else gets ``load_settings().models``."""
    layer = from_env(env)
    models = dict(layer.get("models") or {})
    if layer.get("home"):
        models.setdefault("local_cache_dir", llama_cache_under(Path(layer["home"])))
    try:
        return ProviderSettings(**models)
    except ValidationError as exc:
        raise ConfigError("; ".join(
            f"{PROVIDER_ENV.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}, "
            f"got {e.get('input')!r}" for e in exc.errors())) from None


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
    typed = flatten(settings.model_dump())
    for key, value in flatten(settings.model_dump(mode="json")).items():
        if isinstance(typed.get(key), SecretStr):  # masked below, its last 4 characters shown
            value = typed[key].get_secret_value()
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
