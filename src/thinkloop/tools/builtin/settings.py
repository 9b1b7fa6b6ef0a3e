"""Settings of the built-in tools, read at the edge (env ``THINKLOOP_TOOLS_*`` or a file)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from thinkloop.sandbox import DEFAULT_ENV_ALLOW, Sandbox, SandboxLimits, sandbox_for

MIB = 1024 * 1024


class ToolSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="THINKLOOP_TOOLS_", extra="ignore")

    workspace: Path = Field(
        default_factory=lambda: Path.home() / ".thinkloop" / "workspaces" / "thinkloop",
        description="base directory; each user works in <workspace>/<sanitised user id>",
    )
    shell_timeout_s: float = 60.0
    shell_max_timeout_s: float = 600.0
    output_cap_bytes: int = MIB
    read_max_bytes: int = 256 * 1024
    grep_max_matches: int = 200
    fetch_timeout_s: float = 20.0
    fetch_max_bytes: int = 5 * MIB
    fetch_max_chars: int = 100_000
    fetch_allow_private: bool = Field(
        False, description="let web_fetch reach loopback, private and link-local addresses"
    )
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
    sandbox_memory_mb: int = 4096
    sandbox_cpu_s: int = 300
    sandbox_max_processes: int = 256
    sandbox_file_mb: int = 1024
    sandbox_env: tuple[str, ...] = Field(
        DEFAULT_ENV_ALLOW, description="host environment variables commands may see")

    def make_sandbox(self) -> Sandbox:
        """The sandbox asked for; raises ``SandboxUnavailableError`` when it cannot run."""
        limits = SandboxLimits(self.sandbox_memory_mb * MIB, self.sandbox_cpu_s,
                               self.sandbox_max_processes, self.sandbox_file_mb * MIB,
                               self.sandbox_network)
        return sandbox_for(self.sandbox, limits)
