"""``thinkloop config``: the effective settings and where each came from."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from thinkloop.cli.render import console
from thinkloop.core.errors import ConfigError


def config(
    as_json: Annotated[bool, typer.Option("--json", help="Print the settings as JSON.")] = False,
    overrides: Annotated[list[str] | None, typer.Option(
        "--set", help="NAME=VALUE (e.g. tools.sandbox=none), over every other source.")] = None,
) -> None:
    """Print the effective settings, each with its source: default, thinkloop.toml,
    environment or argument (secrets masked)."""
    from thinkloop.core.settings import describe, load_settings  # pydantic: not for --help

    args: dict[str, str] = {}
    for item in overrides or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set takes NAME=VALUE, got {item!r}")
        args[name.strip()] = value
    rows = describe(load_settings(args))
    if as_json:
        out = {name: {"value": value, "source": origin} for name, value, origin in rows}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    from rich.table import Table

    table = Table("setting", "value", "source")
    for name, value, origin in rows:
        shown = "-" if value is None else str(value)
        table.add_row(name, shown, origin if origin == "default" else f"[bold]{origin}[/]")
    console().print(table)
