"""How a gateway is set up: read once (``thinkloop serve`` options) and passed down."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from thinkloop.errors import ConfigError


@dataclass(frozen=True)
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    # Serve without API keys: everyone is the user "local". Only allowed on loopback.
    no_auth: bool = False
    agents_file: Path | None = None
    store_url: str | None = None  # None: the settings' store (Settings.store_location)
    per_user_runs: int = 3
    max_runs: int = 64
    # How long a resolved agent is reused before its definition is read again.
    agent_ttl_s: float = 30.0
    # A finished run stays readable (and its events replayable) this long, up to keep_runs.
    keep_finished_s: float = 3600.0
    keep_runs: int = 2000
    approval_timeout_s: float = 300.0
    ask_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.per_user_runs < 1 or self.max_runs < 1:
            raise ConfigError("run limits must be at least 1")
        if self.no_auth and not is_loopback(self.host):
            raise ConfigError(
                f"--no-auth serves without keys and only on loopback; {self.host!r} is not "
                "(use 127.0.0.1, or create keys with 'thinkloop keys create --user NAME')")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
