"""``thinkloop guard scan``: what the input guard finds in a text, and why.

Mounted by the main app with ``app.add_typer(guard_app, name="guard")``. Exit code 0 when the
text is clean, 1 when a detector fired (so scripts can gate on it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer

from thinkloop.cli.render import console, escape

guard_app = typer.Typer(help="Check text for prompt injection.", no_args_is_help=True,
                        rich_markup_mode=None)


@guard_app.command("scan")
def scan(
    text: Annotated[str | None, typer.Argument(help="The text ('-' reads stdin).")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the text from a file.")
                    ] = None,
    classifier: Annotated[bool, typer.Option(help="Run the trained classifier too.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Findings as JSON lines.")] = False,
) -> None:
    """Scan a text with the patterns and the classifier; print each finding and its reason."""
    from thinkloop.api import Classifier, scan_input

    if file is not None:
        body = file.read_text("utf-8", errors="replace")
    elif text is None or text == "-":
        body = sys.stdin.read()
    else:
        body = text
    findings = scan_input(body) + (Classifier.load().scan(body) if classifier else [])
    if as_json:
        for f in findings:
            sys.stdout.write(orjson.dumps({
                "detector": f.detector, "pattern": f.pattern, "severity": f.severity,
                "view": f.view, "span": list(f.span), "why": f.why}).decode() + "\n")
    elif findings:
        from rich.table import Table

        table = Table("detector", "pattern", "severity", "where", "why")
        for f in findings:
            table.add_row(f.detector, f.pattern, f.severity, f"{f.span[0]}-{f.span[1]}",
                          escape(f.why))
        console().print(table)
    else:
        console().print("no injection found")
    raise typer.Exit(1 if findings else 0)
