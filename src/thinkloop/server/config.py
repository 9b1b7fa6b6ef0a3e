"""How a gateway is set up: the settings' ``[gateway]`` group plus what only a running
gateway has (its agents file, the auth switch, a store URL), read once and passed down."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from pydantic import ValidationError, model_validator

from thinkloop.api import validation_summary
from thinkloop.core.errors import ConfigError
from thinkloop.core.settings import GatewaySettings, Settings


class GatewayConfig(GatewaySettings):
    # Serve without API keys: everyone is the user "local". Only allowed on loopback.
    no_auth: bool = False
    agents_file: Path | None = None
    store_url: str | None = None  # None: the settings' store (Settings.store_location)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:  # a bad option is the caller's to fix: one clear error
            raise ConfigError(f"gateway settings: {validation_summary(exc)}") from None

    @model_validator(mode="after")
    def _auth_off_only_on_loopback(self) -> GatewayConfig:
        if self.no_auth and not is_loopback(self.host):
            raise ConfigError(
                f"--no-auth serves without keys and only on loopback; {self.host!r} is not "
                "(use 127.0.0.1, or create keys with 'thinkloop keys create --user NAME')")
        return self

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> GatewayConfig:
        """The settings' gateway group with ``options`` (the fields only a gateway has)."""
        return cls(**{**settings.gateway.model_dump(), **options})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
