"""OpenAI-compatible presets as data: where each provider lives, its key, its wire quirks.

Stingyclaw's "Backend Detection" and GoClaw's provider registry both reduce to this table: every
backend speaks Chat Completions, and they differ in base URL, credentials and message shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from thinkloop.core.errors import ConfigError, MissingCredentialsError
from thinkloop.core.model import Model
from thinkloop.core.settings import FIELD_OF_VAR, ProviderSettings, provider_settings
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.openai_wire import WireQuirks
from thinkloop.models.retry import RetryPolicy

OPENAI = WireQuirks(tool_call_content="null")
# llama.cpp's server rejects a missing or null content next to tool calls; vLLM accepts "".
COMPAT = WireQuirks(tool_call_content="empty")
# Gemini behind OpenRouter rejects content "" with tool calls (Stingyclaw's sanitizer).
STRICT = WireQuirks(tool_call_content="omit")
GEMINI = WireQuirks(tool_call_content="omit", merge_consecutive_roles=True, send_stream_usage=False)


@dataclass(frozen=True, slots=True)
class Preset:
    """One OpenAI-compatible provider.

    ``base_url`` is the default endpoint (``None``: the user must give one through
    ``base_env``); ``key_env`` holds the API key, required only at the default endpoint when
    ``key_required``. ``custom_quirks`` applies when the base URL was overridden, because
    then the server is usually not the preset's own (e.g. ``openai:`` at a llama.cpp server).
    """

    prefix: str
    example: str
    base_url: str | None
    base_env: str
    key_env: str | None
    key_required: bool
    quirks: WireQuirks
    custom_quirks: WireQuirks = COMPAT
    headers: tuple[tuple[str, str], ...] = ()


PRESETS: dict[str, Preset] = {
    p.prefix: p
    for p in (
        Preset("openai", "gpt-4o-mini", "https://api.openai.com/v1", "OPENAI_BASE_URL",
               "OPENAI_API_KEY", True, OPENAI),
        Preset("openrouter", "meta-llama/llama-3.1-8b-instruct", "https://openrouter.ai/api/v1",
               "OPENROUTER_BASE_URL", "OPENROUTER_API_KEY", True, STRICT, STRICT,
               (("x-title", "thinkloop"),)),
        Preset("ollama", "llama3.2", "http://127.0.0.1:11434/v1", "OLLAMA_HOST", None, False,
               COMPAT),
        Preset("gemini", "gemini-2.0-flash",
               "https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_BASE_URL",
               "GEMINI_API_KEY", True, GEMINI, GEMINI),
        Preset("vllm", "meta-llama/Llama-3.1-8B-Instruct", None, "THINKLOOP_BASE_URL",
               "THINKLOOP_API_KEY", False, COMPAT),
        Preset("compat", "my-model", None, "THINKLOOP_BASE_URL", "THINKLOOP_API_KEY", False,
               COMPAT),
    )
}


def ollama_base(host: str) -> str:
    """OLLAMA_HOST is often ``host:port`` with no scheme and no ``/v1``."""
    url = host if "://" in host else f"http://{host}"
    url = url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


def build_preset(preset: Preset, name: str,
                 settings: ProviderSettings | Mapping[str, str]) -> Model:
    """``preset``'s model ``name`` with the endpoint and key the settings give it; the
    variable names (``base_env``, ``key_env``) say in messages which setting is missing."""
    s = provider_settings(settings)
    spec = f"{preset.prefix}:{name}"
    if not name:
        raise ConfigError(
            f"model string {spec!r} needs a model name, e.g. '{preset.prefix}:{preset.example}'"
        )
    custom = s.secret(FIELD_OF_VAR[preset.base_env])
    if custom and preset.prefix == "ollama":
        custom = ollama_base(custom)
    base_url = custom or preset.base_url
    if base_url is None:
        raise MissingCredentialsError(
            f"model {spec!r} needs a base URL: set {preset.base_env}, "
            "e.g. http://127.0.0.1:8000/v1"
        )
    key = s.secret(FIELD_OF_VAR[preset.key_env]) if preset.key_env else None
    if preset.key_required and not key and not custom:
        raise MissingCredentialsError(
            f"model {spec!r} needs {preset.key_env} (or {preset.base_env} for another server)"
        )
    return OpenAICompatModel(
        name,
        base_url=base_url,
        api_key=key,
        name=spec,
        quirks=preset.custom_quirks if custom else preset.quirks,
        retry=RetryPolicy.of(s),
        headers=dict(preset.headers),
    )
