"""Typed settings from the environment (``THINKLOOP_*``) and an optional TOML/JSON file.

Settings are read when asked for and passed down explicitly; nothing here is global.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="THINKLOOP_", extra="ignore")

    model: str | None = Field(None, description="default model string, e.g. openai:gpt-4o-mini")
    max_steps: int | None = Field(None, description="step limit; unset lets the step budget decide")
    timeout_s: float = 600.0
    tool_timeout_s: float = 60.0
    home: Path = Field(default_factory=lambda: Path.home() / ".thinkloop")
    protocol: str = "auto"
    # Read by the model registry from the same THINKLOOP_* variables (see models/presets.py).
    base_url: str | None = Field(None, description="endpoint of vllm:/compat: models")
    api_key: str | None = Field(None, description="key for the vllm:/compat: endpoint")
    model_max_attempts: int = Field(3, ge=1, description="tries per model call (429/5xx/net)")
    local_n_ctx: int = Field(4096, ge=256, description="context window of the local model")
    local_threads: int | None = Field(
        None, ge=1, description="llama.cpp threads of the local model (default: cores - 1)")
    judgement: str = Field("", description="judgement plugins: all, off, or a comma list "
                           "(assess, select, ...)")
    model_pool: str = Field("", description="models for judgement 'select': "
                            "provider:model=capability[/effort], comma separated")


DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"


def default_model_spec(env: Mapping[str, str] | None = None) -> str:
    """THINKLOOP_MODEL, else OpenAI if keyed, else Anthropic if keyed, else the local model."""
    env = os.environ if env is None else env
    if env.get("THINKLOOP_MODEL"):
        return env["THINKLOOP_MODEL"]
    if env.get("OPENAI_API_KEY"):
        return f"openai:{env.get('OPENAI_MODEL') or DEFAULT_OPENAI_MODEL}"
    if env.get("ANTHROPIC_API_KEY"):
        return f"anthropic:{env.get('ANTHROPIC_MODEL') or DEFAULT_ANTHROPIC_MODEL}"
    return "local"
