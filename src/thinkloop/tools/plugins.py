"""Third-party tools through the ``thinkloop.tools`` entry point group.

A package declares, in its ``pyproject.toml``::

    [project.entry-points."thinkloop.tools"]
    weather = "my_pkg.tools:weather"

The target may be a :class:`Tool`, a plain function (made a tool), a list of those, or a
zero-argument factory returning either (``factory = true`` is not needed: a function whose
signature takes no parameters and which is not already a tool is called as a factory).
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from thinkloop.errors import ConfigError
from thinkloop.tools.base import Tool, make_tool

GROUP = "thinkloop.tools"
log = logging.getLogger("thinkloop.plugins")


@dataclass(frozen=True, slots=True)
class PluginFailure:
    entry_point: str
    error: str


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


def _discover(group: str) -> tuple[EntryPoint, ...]:
    return _discover_on(group, tuple(sys.path))


@functools.lru_cache(maxsize=8)
def _discover_on(group: str, path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    # Scanning every installed distribution costs ~10 ms and agents are made far more often
    # than packages are installed: memoised per import path.
    return tuple(entry_points(group=group))


def load_plugin_tools(
    group: str = GROUP,
    *,
    strict: bool = False,
    loader: Callable[[str], Iterable[EntryPoint]] | None = None,
) -> tuple[list[Tool], list[PluginFailure]]:
    """Every plugin tool, and the plugins that failed to load (raised instead if ``strict``)."""
    found = (loader or _discover)(group)
    tools: list[Tool] = []
    failures: list[PluginFailure] = []
    for ep in sorted(found, key=lambda e: e.name):
        source = f"plugin {ep.name!r} ({ep.value})"
        try:
            tools.extend(_as_tools(ep.load(), source))
        except Exception as exc:
            if strict:
                raise ConfigError(f"{source} failed to load: {exc}") from exc
            log.warning("%s failed to load: %s", source, exc)
            failures.append(PluginFailure(ep.name, f"{type(exc).__name__}: {exc}"))
    return tools, failures
