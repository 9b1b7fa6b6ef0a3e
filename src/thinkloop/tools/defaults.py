"""Which tools an agent gets by default, and the full list for ``thinkloop tools``."""

from __future__ import annotations

from collections.abc import Mapping

from thinkloop.tools.base import Tool
from thinkloop.tools.builtin.calculator import calculator


def all_builtin_tools() -> list[Tool]:
    """Every built-in tool thinkloop ships, in a stable order."""
    tools = [calculator]
    try:
        from thinkloop.tools.builtin import builtin_tools  # type: ignore[attr-defined]
    except ImportError:
        return tools
    return tools + [t for t in builtin_tools() if t.name != "calculator"]


def default_tools(env: Mapping[str, str]) -> list[Tool]:
    """The tools ``thinkloop run`` gives an agent: safe ones only."""
    return [calculator]
