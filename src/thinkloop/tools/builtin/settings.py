"""The built-in tools' settings: the ``tools`` group of :class:`thinkloop.settings.Settings`,
and the sandbox they ask for."""

from __future__ import annotations

from thinkloop.core.settings import MIB, ToolSettings
from thinkloop.sandbox import Sandbox, SandboxLimits, sandbox_for

__all__ = ["MIB", "ToolSettings", "make_sandbox"]


def make_sandbox(settings: ToolSettings) -> Sandbox:
    """The sandbox asked for; raises ``SandboxUnavailableError`` when it cannot run."""
    limits = SandboxLimits(settings.sandbox_memory_mb * MIB, settings.sandbox_cpu_s,
                           settings.sandbox_max_processes, settings.sandbox_file_mb * MIB,
                           settings.sandbox_network)
    return sandbox_for(settings.sandbox, limits)
