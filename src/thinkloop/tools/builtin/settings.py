"""The built-in tools' settings: the ``tools`` group of :class:`thinkloop.settings.Settings`."""

from __future__ import annotations

from thinkloop.settings import MIB, ToolSettings

__all__ = ["MIB", "ToolSettings"]
