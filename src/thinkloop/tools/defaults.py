"""Which built-in tools an agent gets, chosen by name: the CLI's ``--tools`` option."""

from __future__ import annotations

from typing import Any

from thinkloop.core.errors import ConfigError
from thinkloop.core.tool import Tool


def pick_tools(available: list[Tool], names: str) -> list[Tool]:
    """``"default"`` (all of ``available``), ``"none"``, or a comma-separated list of names."""
    names = names.strip()
    if names == "default":
        return available
    if names in ("", "none"):
        return []
    by_name = {t.name: t for t in available}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise ConfigError(
            f"unknown tool(s) {', '.join(unknown)}; available: {', '.join(sorted(by_name))}"
        )
    return [by_name[n] for n in wanted]


def default_tools(names: str = "default", **toolbox_options: Any) -> list[Tool]:
    """The chosen built-in tools (each carries its own prompt guidance, ``Tool.guidance``)."""
    from thinkloop.tools.builtin import Toolbox

    return pick_tools(Toolbox(**toolbox_options).tools, names)
