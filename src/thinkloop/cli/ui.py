"""``thinkloop ui``: the terminal UI (``thinkloop.tui``), in process or on a gateway."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from thinkloop.cli.render import fail

if TYPE_CHECKING:
    from thinkloop.tui.backend import Backend


def ui(
    gateway: Annotated[str | None, typer.Option(
        help="A thinkloop serve gateway's URL, e.g. http://127.0.0.1:8000 "
             "(default: the library in this process).")] = None,
    key: Annotated[str | None, typer.Option(
        envvar="THINKLOOP_API_KEY", help="The gateway's API key (thinkloop keys create).")]
    = None,
    agent: Annotated[str, typer.Option(help="The agent to chat with.")] = "default",
    agents: Annotated[Path | None, typer.Option(
        help="agents.yaml with named agents (in process; a gateway has its own).")] = None,
    session: Annotated[str | None, typer.Option(
        help="Continue this session (default: a new one).")] = None,
    user: Annotated[str | None, typer.Option(help="Who is asking (memory, workspace).")]
    = None,
    db: Annotated[str | None, typer.Option(
        "--db", help="SQLite path or postgresql:// URL (in process).")] = None,
    operator: Annotated[bool, typer.Option(
        "--operator", help="Open on the operator screen.")] = False,
    light: Annotated[bool, typer.Option("--light", help="Colours for a light terminal.")]
    = False,
) -> None:
    """Chat with an agent and watch and steer runs, in a terminal (F1: every key)."""
    try:
        from thinkloop.tui.app import ThinkloopApp
    except ImportError as exc:
        raise fail(f"thinkloop ui needs the 'tui' extra: pip install 'thinkloop[tui]' "
                   f"({exc.name} is missing)") from None
    if agents is not None and not agents.is_file():
        raise fail(f"--agents {agents}: no such file")
    backend = open_backend(gateway, key, agents, user, db)
    app = ThinkloopApp(backend, agent=agent, session=session,
                       start="operator" if operator else "chat")
    if light:
        app.theme = "textual-light"
    app.run()


def open_backend(gateway: str | None, key: str | None, agents: Path | None,
                 user: str | None, db: str | None) -> Backend:
    if gateway is not None:
        from thinkloop.tui.remote import GatewayBackend

        return GatewayBackend(gateway, key)
    from thinkloop.api import open_store
    from thinkloop.settings import load_settings
    from thinkloop.tui.local import LocalBackend

    settings = load_settings()
    return LocalBackend(settings, open_store(db, settings=settings), agents_file=agents,
                        user=user)
