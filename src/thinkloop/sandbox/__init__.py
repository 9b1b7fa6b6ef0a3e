"""Confinement for code the model runs (``shell``, ``run_workflow``): see :mod:`.bwrap`.

:func:`sandbox_for` picks one by name: ``"bwrap"`` (the default) or ``"none"`` (explicitly
unconfined). A sandbox that cannot run here raises :class:`SandboxUnavailableError` naming
what is missing; thinkloop never silently falls back to running unconfined.
"""

from __future__ import annotations

from thinkloop.core.errors import ConfigError, SandboxUnavailableError

# Names copied from the host environment by default: nothing that can hold a credential.
from thinkloop.core.settings import DEFAULT_ENV_ALLOW
from thinkloop.sandbox.base import (
    SANDBOXES_PER_PROCESS,
    SANDBOXES_PER_RUN,
    SYSTEM_PATH,
    CommandSlots,
    NoSandbox,
    Sandbox,
    SandboxLimits,
    allowed_env,
)
from thinkloop.sandbox.bwrap import BwrapSandbox

__all__ = [
    "DEFAULT_ENV_ALLOW",
    "SANDBOXES_PER_PROCESS",
    "SANDBOXES_PER_RUN",
    "SYSTEM_PATH",
    "BwrapSandbox",
    "CommandSlots",
    "NoSandbox",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailableError",
    "allowed_env",
    "sandbox_for",
]


def sandbox_for(kind: str, limits: SandboxLimits | None = None) -> Sandbox:
    """The sandbox called ``kind``; raises when it cannot work on this machine."""
    if kind == "none":
        return NoSandbox()
    if kind == "bwrap":
        return BwrapSandbox(limits or SandboxLimits())
    raise ConfigError(f"unknown sandbox {kind!r}; choose 'bwrap' or 'none'")
