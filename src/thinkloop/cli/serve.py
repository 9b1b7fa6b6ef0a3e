"""``thinkloop serve`` (the gateway) and ``thinkloop keys`` (its API keys)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from thinkloop.cli.render import console
from thinkloop.cli.sessions import with_store
from thinkloop.core.errors import ChannelError, ConfigError

if TYPE_CHECKING:
    from thinkloop.core.settings import Settings

keys_app = typer.Typer(help="API keys of the gateway (stored hashed).", no_args_is_help=True,
                       rich_markup_mode=None)


def serve(
    host: Annotated[str | None, typer.Option(
        help="Address to listen on (default: gateway.host, 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: gateway.port, 8080).")] = None,
    agents: Annotated[Path | None, typer.Option(
        help="YAML file of agents (default: agents in the store, else 'default').")] = None,
    no_auth: Annotated[bool, typer.Option(
        "--no-auth", help="No API keys, for local development; loopback only.")] = False,
    per_user_runs: Annotated[int | None, typer.Option(
        help="Runs in progress per user (default: gateway.per_user_runs, 3).")] = None,
    max_runs: Annotated[int | None, typer.Option(
        help="Runs in progress in all (default: gateway.max_runs, 64).")] = None,
    queue: Annotated[str | None, typer.Option(
        help="redis:// URL: queue runs for 'thinkloop worker' processes instead of running "
             "them here (default: THINKLOOP_QUEUE_URL; needs PostgreSQL).")] = None,
    channel: Annotated[list[str] | None, typer.Option(
        help="Also serve this chat channel (repeatable): telegram, slack, discord, email, webhook.")
    ] = None,
    fallback: Annotated[list[str] | None, typer.Option(
        "--fallback", metavar="MODEL", help="A model tried when an agent's model fails "
        "(repeatable, in order), for agents without fallbacks of their own (default: "
        "THINKLOOP_FALLBACKS).",
        show_default=False)] = None,
) -> None:
    """Serve agents over HTTP: REST, SSE, WebSocket, an OpenAI-compatible API and a web page.
    Every option is also a setting ([gateway] in thinkloop.toml, THINKLOOP_GATEWAY_*)."""
    try:
        import uvicorn

        from thinkloop.api import freeze_for_exit, tune_gc
        from thinkloop.core.settings import load_settings, quiet_model_loaders
        from thinkloop.server import GatewayConfig, create_app
        from thinkloop.server.connections import uvicorn_config
    except ImportError:
        raise ConfigError("the gateway needs its extra: pip install 'thinkloop[server]'") \
            from None
    quiet_model_loaders()  # the gateway's embedding model draws no progress bar either
    if agents is not None and not agents.is_file():
        raise ConfigError(f"agents file not found: {agents}")
    settings = load_settings({"gateway.host": host, "gateway.port": port,
                              "gateway.per_user_runs": per_user_runs,
                              "gateway.max_runs": max_runs, "queue_url": queue,
                              "fallbacks": fallback or None})
    config = GatewayConfig.from_settings(settings, no_auth=no_auth, agents_file=agents)
    check_store(config.store_url, settings)
    fleet = None
    if settings.queue_url:
        from thinkloop.workers.fleet import fleet_factory

        fleet = fleet_factory(settings)  # a queue without PostgreSQL fails here, in one line
    services = []
    refused: list[ChannelError] = []  # a channel the platform refused at startup
    if channel:
        from thinkloop.channels.service import ChannelService, gateway_service

        # Their settings checked now (a missing token is one line), before anything listens.
        ChannelService(settings, None, channel, agents_file=agents, gateway=True)
        services.append(gateway_service(channel, agents, refused))
    console(stderr=True).print(
        f"thinkloop gateway on http://{config.host}:{config.port}/"
        + (" [yellow](no auth: everyone is 'local')[/]" if no_auth else "")
        + (" (runs queued for workers)" if fleet else ""), highlight=False)
    server = uvicorn.Server(uvicorn_config(
        create_app(config, settings=settings, services=services, fleet=fleet), config))
    # A process of many runs: the start-up objects out of the collector's full passes (each
    # walked them all and stalled the loop ~80 ms: most of the event p99 at 200 runs) and
    # rarer young passes (benchmarks/server.py --as-served; docs/performance.md, goal 4).
    tune_gc()
    # uvicorn stops on Ctrl-C and then raises it again (as uvicorn.run does, ends here).
    try:
        with contextlib.suppress(KeyboardInterrupt), _quiet_after(refused):
            server.run()
    except SystemExit:  # uvicorn exits (3) when the app's startup fails
        if not refused:
            raise
    finally:
        # Stopped, the stores closed and the post-turn jobs done: nothing left for the
        # interpreter's exit collections to walk (a second of a Ctrl-C with torch loaded).
        freeze_for_exit()
    if refused:  # one line, as `thinkloop channel` says it, not uvicorn's startup traceback
        raise refused[0]
    if not server.started:  # it said why (the port is taken, ...): uvicorn.run's exit code
        raise typer.Exit(3)


@contextlib.contextmanager
def _quiet_after(failures: list[ChannelError]) -> Iterator[None]:
    """uvicorn's log says nothing more once ``failures`` has one: the CLI says it once."""
    import logging

    def keep(record: logging.LogRecord) -> bool:
        return not failures

    log = logging.getLogger("uvicorn.error")
    log.addFilter(keep)
    try:
        yield
    finally:
        log.removeFilter(keep)


def check_store(url: str | None, settings: Settings) -> None:
    """Open the gateway's store once before serving: a damaged or unreachable one is one
    error line (exit 1), not a traceback from the server's startup."""
    import asyncio

    from thinkloop.api import open_store

    async def probe() -> None:
        store = open_store(url, settings=settings)
        try:
            await store.connect()
        finally:
            await store.aclose()

    asyncio.run(probe())


def worker(
    agents: Annotated[Path | None, typer.Option(
        help="YAML file of agents, as 'serve' takes (default: agents in the store, else "
             "'default').")] = None,
    queue: Annotated[str | None, typer.Option(
        help="redis:// URL of the queue (default: THINKLOOP_QUEUE_URL).")] = None,
    concurrency: Annotated[int | None, typer.Option(
        help="Runs executed at once (default: worker.concurrency, 64).")] = None,
    name: Annotated[str | None, typer.Option(
        help="This worker's name in /metrics (default: host-pid).")] = None,
) -> None:
    """Execute the runs 'thinkloop serve --queue' queues (needs PostgreSQL and Redis).
    SIGTERM finishes the runs in progress for worker.drain_s, then hands the rest back
    (each once its tool calls in flight are checkpointed, for up to worker.handback_s)."""
    import asyncio

    try:
        from thinkloop.api import freeze_for_exit
        from thinkloop.core.settings import load_settings, quiet_model_loaders
        from thinkloop.workers.connect import check_store as check_queue
        from thinkloop.workers.worker import serve_worker
    except ImportError:
        raise ConfigError("workers need their extra: pip install 'thinkloop[worker]'") \
            from None
    quiet_model_loaders()
    if agents is not None and not agents.is_file():
        raise ConfigError(f"agents file not found: {agents}")
    settings = load_settings({"queue_url": queue, "worker.concurrency": concurrency})
    check_queue(settings)  # no queue, or no PostgreSQL: one line, before anything starts
    console(stderr=True).print(
        f"thinkloop worker on {_redacted(settings.queue_url)} "
        f"({settings.worker.concurrency} runs at once)", highlight=False)
    try:
        asyncio.run(serve_worker(settings, agents, name))
    finally:
        # As serve does: stopped, runs handed back and stores closed, nothing is left for
        # the interpreter's exit collections to walk (seconds of a stop with torch loaded).
        freeze_for_exit()


def _redacted(url: str | None) -> str:
    from urllib.parse import urlsplit

    if not url:
        return "(no queue)"
    parts = urlsplit(url)
    return url.replace(parts.password, "***") if parts.password else url


@keys_app.command("create")
def create(
    user: Annotated[str, typer.Option(help="The user the key acts as.")],
    admin: Annotated[bool, typer.Option("--admin", help="May define agents.")] = False,
) -> None:
    """Create a key for USER and print it (it is shown only this once)."""
    from thinkloop.server.auth import create_key

    roles = ("user", "admin") if admin else ("user",)
    key = with_store(None, lambda s: create_key(s, user, roles))
    sys.stdout.write(key + "\n")


@keys_app.command("list")
def list_keys(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List keys: id, user, roles, created, revoked (never the keys)."""
    rows = with_store(None, lambda s: s.list_api_keys())
    if as_json:
        sys.stdout.write(json.dumps([{"id": k.id, "user": k.user_id, "roles": list(k.roles),
                                      "created_at": k.created_at, "revoked_at": k.revoked_at}
                                     for k in rows]) + "\n")
        return
    for k in rows:
        state = "revoked" if k.revoked_at else "active"
        sys.stdout.write(f"{k.id}  {k.user_id}  {','.join(k.roles)}  {state}\n")


@keys_app.command("revoke")
def revoke(key_id: Annotated[str, typer.Argument(help="The key's id (from 'keys list').")]) -> None:
    """Revoke a key: requests with it are refused from now on."""
    if not with_store(None, lambda s: s.revoke_api_key(key_id)):
        raise ConfigError(f"no active key with id {key_id!r}")
    sys.stdout.write(f"revoked {key_id}\n")

