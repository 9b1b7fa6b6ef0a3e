"""Third-party tools through the ``thinkloop.tools`` entry point group.

A package declares, in its ``pyproject.toml``::

    [project.entry-points."thinkloop.tools"]
    weather = "my_pkg.tools:weather"

The target may be a :class:`Tool`, a plain function (made a tool), a list of those, or a
zero-argument factory returning either (``factory = true`` is not needed: a function whose
signature takes no parameters and which is not already a tool is called as a factory).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint
from typing import Any

from thinkloop.core.plugins import PluginFailure, load_plugins
from thinkloop.core.tool import Tool, make_tool

GROUP = "thinkloop.tools"
__all__ = ["GROUP", "PluginFailure", "load_plugin_tools"]


def _as_tools(obj: Any, source: str) -> list[Tool]:
    if isinstance(obj, Tool):
        return [obj]
    if callable(obj) and not inspect.signature(obj).parameters:
        # A zero-argument callable is a factory; a zero-argument tool would be a Tool already.
        return _as_tools(obj(), source)
    if callable(obj):
        return [make_tool(obj)]
    if isinstance(obj, Iterable) and not isinstance(obj, str | bytes):
        return [t for item in obj for t in _as_tools(item, source)]
    raise TypeError(f"{source} gave {type(obj).__name__}, not a tool, function or list of them")


def load_plugin_tools(
    group: str = GROUP,
    *,
    strict: bool = False,
    loader: Callable[[str], Iterable[EntryPoint]] | None = None,
) -> tuple[list[Tool], list[PluginFailure]]:
    """Every plugin tool, and the plugins that failed to load (raised instead if ``strict``)."""
    return load_plugins(
        group, lambda ep, obj: _as_tools(obj, f"plugin {ep.name!r} ({ep.value})"),
        strict=strict, loader=loader)
