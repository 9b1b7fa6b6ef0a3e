"""``thinkloop host``: container mode's other side, a thin shell over :mod:`thinkloop.workers.host`.

It speaks the same protocol as ``thinkloop run --stdio``: the payload and follow-up lines on
stdin, blocks on stdout. In between, each run is a confined process of its own, retried with
backoff, and the person is told when the host gives up.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from thinkloop.cli.render import fail

if TYPE_CHECKING:  # asyncio loads with the command, not with `thinkloop --help`
    import asyncio

ENGINE_HELP = ("auto|bwrap|docker|podman|none: auto is docker or podman when --image is given "
               "and one is installed, else bubblewrap; none runs the process unconfined.")


def host(
    engine: Annotated[str | None, typer.Option(help=ENGINE_HELP, show_default="auto")] = None,
    image: Annotated[str | None, typer.Option(
        help="docker/podman image with thinkloop installed (deploy/Dockerfile).")] = None,
    network: Annotated[str | None, typer.Option(
        help="docker/podman network of the container (default: the engine's).")] = None,
    data: Annotated[Path | None, typer.Option(
        help="Folder of the groups' data, one folder each (default: THINKLOOP_HOME/host).",
        show_default=False)] = None,
    retries: Annotated[int | None, typer.Option(help="Retries of a failed run.",
                                                show_default="5")] = None,
    backoff: Annotated[float | None, typer.Option(
        help="Seconds before the first retry; each next one waits twice as long.",
        show_default="5")] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds one attempt may take.",
                                                  show_default="1800")] = None,
    notify_url: Annotated[str | None, typer.Option(
        help="Also POST the give-up notification to this webhook.")] = None,
    notify: Annotated[list[str] | None, typer.Option(
        help="Send the give-up notification to this chat too (platform:chat, e.g. "
             "telegram:42; 'chat' is the payload's chatJid), through a gateway serving that "
             "channel on the run queue (queue_url). Repeatable.", show_default=False)] = None,
) -> None:
    """Run the container-mode payload on stdin in a confined process, retrying on failure.
    Follow-up lines on stdin reach the run; its blocks are written on stdout. Every option
    is also a setting ([host] in thinkloop.toml, THINKLOOP_HOST_*)."""
    from thinkloop.core.errors import ConfigError
    from thinkloop.core.settings import load_settings
    from thinkloop.workers.confine import Confinement

    try:
        settings = load_settings({
            "host.engine": engine, "host.image": image, "host.network": network,
            "host.data": data, "host.retries": retries, "host.backoff_s": backoff,
            "host.timeout_s": timeout, "host.notify_url": notify_url,
            "host.notify": tuple(notify) if notify else None})
    except ConfigError as exc:
        raise fail(str(exc)) from None
    h = settings.host
    confinement = Confinement(h.engine, h.data or settings.home / "host", h.image, h.network)
    import asyncio

    raise typer.Exit(asyncio.run(_host(confinement, settings, _notifier(settings))))


async def _host(confinement: Any, settings: Any, notify: Any) -> int:
    import asyncio

    import orjson
    from pydantic import ValidationError

    from thinkloop.api import validation_summary
    from thinkloop.cli.stdio_channel import Output, Redactor
    from thinkloop.cli.stdio_payload import markers_for, parse, read_payload
    from thinkloop.workers import blocks
    from thinkloop.workers.host import HostRunner
    from thinkloop.workers.retry import RetryPolicy

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
    h = settings.host
    runner = HostRunner(confinement, emit, RetryPolicy(h.retries, h.backoff_s),
                        notify, h.timeout_s,
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


def _notifier(settings: Any) -> Any:
    """Where the give-up notice goes besides the last block: the webhook, and the chats
    (``telegram:42``), queued on the fleet's bus exactly as a scheduled run's ``deliver_to``
    answer is, for a gateway serving the channel to send."""
    h = settings.host
    if not h.notify_url and not h.notify:
        return None
    if h.notify and not settings.queue_url:
        raise fail("--notify needs the run queue (queue_url): a gateway serving the channel "
                   "sends it (thinkloop serve --channel PLATFORM with the same queue)")
    from thinkloop.core.channel import Outgoing, WebhookChannel

    hook = WebhookChannel(h.notify_url, name="notify") if h.notify_url else None

    async def notify(text: str, where: dict[str, Any]) -> None:
        if hook is not None:
            await hook.send(Outgoing(text, where.get("chat"), None, where.get("group"),
                                     where.get("session"), {"attempts": where.get("attempts")}))
        targets = [t.replace("{chat}", str(where.get("chat") or "")) for t in h.notify]
        if targets:
            await _deliver(settings, f"host-{where.get('session') or uuid.uuid4().hex}",
                           targets, text)

    return notify


async def _deliver(settings: Any, run_id: str, targets: list[str], text: str) -> None:
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    from thinkloop.core.errors import ChannelError
    from thinkloop.workers.bus import Bus

    redis = Redis.from_url(settings.queue_url)
    try:
        bus = Bus(redis, settings.worker.prefix)
        for target in targets:
            await bus.deliver(run_id, target, text)
    except RedisError as exc:
        raise ChannelError(f"the run queue refused the notice: {exc}") from None
    finally:
        await redis.aclose()
