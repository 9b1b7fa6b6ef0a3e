"""Entry-point plugins: the one loader for plugin tools (``thinkloop.tools``) and plugin hooks
(``thinkloop.hooks``).

A plugin that cannot load is logged and skipped, never fatal: one broken package must not stop
every agent on the machine. ``thinkloop tools`` lists the plugins that failed, and why.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

from thinkloop.core.errors import ConfigError

T = TypeVar("T")
log = logging.getLogger("thinkloop.plugins")


@dataclass(frozen=True, slots=True)
class PluginFailure:
    entry_point: str
    error: str
    group: str = ""


def discover(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of ``group``, by name."""
    return _discover_on(group, tuple(sys.path))


@functools.lru_cache(maxsize=8)
def _discover_on(group: str, path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    # Scanning every installed distribution costs ~10 ms and agents are made far more often
    # than packages are installed: memoised per import path.
    return tuple(sorted(entry_points(group=group), key=lambda e: e.name))


def load_plugins(
    group: str,
    convert: Callable[[EntryPoint, Any], list[T]],
    *,
    strict: bool = False,
    loader: Callable[[str], Iterable[EntryPoint]] | None = None,
) -> tuple[list[T], list[PluginFailure]]:
    """What every plugin of ``group`` gives (``convert(entry_point, loaded object)``), and the
    plugins that failed to load or convert (a ConfigError naming the first, if ``strict``)."""
    items: list[T] = []
    failures: list[PluginFailure] = []
    for ep in sorted((loader or discover)(group), key=lambda e: e.name):
        try:
            items.extend(convert(ep, ep.load()))
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if strict:
                raise ConfigError(f"plugin {ep.name!r} ({ep.value}) failed to load: {error}") \
                    from exc
            log.warning("plugin %r (%s) failed to load and is skipped: %s", ep.name, ep.value,
                        error)
            failures.append(PluginFailure(ep.name, error, group))
    return items, failures
