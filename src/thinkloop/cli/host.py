"""``thinkloop host``: container mode's other side, a thin shell over :mod:`thinkloop.workers.host`.

It speaks the same protocol as ``thinkloop run --stdio``: the payload and follow-up lines on
stdin, blocks on stdout. In between, each run is a confined process of its own, retried with
backoff, and the person is told when the host gives up.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from thinkloop.cli.render import fail

ENGINE_HELP = ("auto|bwrap|docker|podman|none: auto is docker or podman when --image is given "
               "and one is installed, else bubblewrap; none runs the process unconfined.")


def host(
    engine: Annotated[str, typer.Option(help=ENGINE_HELP)] = "auto",
    image: Annotated[str | None, typer.Option(
        help="docker/podman image with thinkloop installed (deploy/Dockerfile).")] = None,
    network: Annotated[str | None, typer.Option(
        help="docker/podman network of the container (default: the engine's).")] = None,
    data: Annotated[Path | None, typer.Option(
        help="Folder of the groups' data, one folder each (default: THINKLOOP_HOME/host).",
        show_default=False)] = None,
    retries: Annotated[int, typer.Option(help="Retries of a failed run.")] = 5,
    backoff: Annotated[float, typer.Option(
        help="Seconds before the first retry; each next one waits twice as long.")] = 5.0,
    timeout: Annotated[float, typer.Option(help="Seconds one attempt may take.")] = 1800.0,
    notify_url: Annotated[str | None, typer.Option(
        help="Also POST the give-up notification to this webhook.")] = None,
) -> None:
    """Run the container-mode payload on stdin in a confined process, retrying on failure.
    Follow-up lines on stdin reach the run; its blocks are written on stdout."""
    from thinkloop.core.settings import load_settings
    from thinkloop.workers.confine import ENGINES, Confinement

    if engine not in ENGINES:
        raise fail(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if retries < 0 or backoff < 0 or not timeout > 0:
        raise fail("--retries and --backoff must be at least 0, --timeout more than 0")
    folder = data or load_settings().home / "host"
    confinement = Confinement(engine, folder, image, network)  # type: ignore[arg-type]
    raise typer.Exit(asyncio.run(_host(confinement, retries, backoff, timeout, notify_url)))


async def _host(confinement: Any, retries: int, backoff: float, attempt_s: float,
                notify_url: str | None) -> int:
    import orjson
    from pydantic import ValidationError

    from thinkloop.cli.stdio_channel import Output, Redactor
    from thinkloop.cli.stdio_payload import markers_for, parse, read_payload
    from thinkloop.text import validation_summary
    from thinkloop.workers import blocks
    from thinkloop.workers.host import HostRunner, RetryPolicy

    raw = await asyncio.to_thread(read_payload, sys.stdin)
    payload: Any = None
    try:
        payload = orjson.loads(raw or b"null")
        req = parse(payload)
    except (orjson.JSONDecodeError, ValidationError) as exc:
        why = validation_summary(exc, root="payload") if isinstance(exc, ValidationError) \
            else str(exc)
        blocks.write(sys.stdout, {"status": "error", "result": None, "retry": False,
                                  "error": f"invalid payload: {why}"}, markers_for(payload))
        return 1
    if req.seed and not payload.get("sessionId"):
        payload["sessionId"] = uuid.uuid4().hex  # every retry continues one conversation
    extra = {"newSessionId": payload["sessionId"]} if req.seed else None
    out = Output(sys.stdout, Redactor(req.secrets), req.markers, extra, seed=req.seed)

    async def emit(block: dict[str, Any]) -> None:
        out.block(block)

    follow_ups: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    _read_follow_ups(asyncio.get_running_loop(), follow_ups, out)
    runner = HostRunner(confinement, emit, RetryPolicy(retries, backoff),
                        _webhook(notify_url) if notify_url else None, attempt_s,
                        on_stderr=lambda line: _echo(out.redact(line)))
    result = await runner.run(payload, follow_ups)
    return 0 if result.status == "success" else 1


def _echo(line: str) -> None:
    """The child's stderr (its progress, its warnings) on ours, secrets cut out."""
    sys.stderr.write(line)


def _read_follow_ups(loop: asyncio.AbstractEventLoop,
                     queue: asyncio.Queue[dict[str, Any] | None], out: Any) -> None:
    """Further stdin lines, each a JSON object, for the running child; None at the end."""
    import orjson

    def put(item: dict[str, Any] | None) -> None:
        with contextlib.suppress(RuntimeError):  # the host is done and its loop closed
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def read() -> None:
        for line in iter(sys.stdin.readline, ""):
            if not line.strip():
                continue
            try:
                item = orjson.loads(line)
            except orjson.JSONDecodeError:
                item = None
            if isinstance(item, dict):
                put(item)
            else:
                out.block({"status": "running", "type": "error", "result": None,
                           "error": "follow-up ignored: not a JSON object"})
        put(None)

    threading.Thread(target=read, daemon=True, name="host-follow-ups").start()


def _webhook(url: str) -> Any:
    from thinkloop.core.channel import Outgoing, WebhookChannel

    channel = WebhookChannel(url, name="notify")

    async def notify(text: str, where: dict[str, Any]) -> None:
        await channel.send(Outgoing(text, where.get("chat"), None, where.get("group"),
                                    where.get("session"), {"attempts": where.get("attempts")}))

    return notify
