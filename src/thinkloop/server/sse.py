"""A lean SSE response: the bytes and headers of sse_starlette's ``EventSourceResponse``, at a
fraction of its cost per stream.

``EventSourceResponse`` runs four tasks in an anyio task group for every stream (the data,
the ping, the client's disconnect, the server's shutdown) and opens a cancel scope for every
write; at 200 followed runs that was one in eight of the gateway's busy samples and most of
its tasks. :class:`EventStream` writes from the request's own task and runs one task beside
it, which waits for the client to go and sends the ping comment every ``ping_s``. The
server's shutdown is one watcher per application (:func:`stop_streams_on_exit`), which ends
every open stream, as sse_starlette's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any

from starlette.responses import Response

log = logging.getLogger("thinkloop.server")
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# EventSourceResponse's, in its order (``Cache-Control: no-store`` is its default too).
HEADERS = [(b"cache-control", b"no-store"), (b"connection", b"keep-alive"),
           (b"x-accel-buffering", b"no"), (b"content-type", b"text/event-stream; charset=utf-8")]
PING_S = 15.0
EXIT_POLL_S = 0.5  # how often the shutdown watcher looks (sse_starlette's figure)


class Last(bytes):
    """A stream's last chunk (its end frame): written with the response's end, in one write
    (one socket send a stream fewer, where the end frame and the body's end were two)."""


def frame(data: str, event: str) -> bytes:
    """One SSE frame of a one-line ``data`` (``ServerSentEvent(data, event=...)``'s bytes)."""
    return f"event: {event}\r\ndata: {data}\r\n\r\n".encode()


def ping() -> bytes:
    return f": ping - {datetime.now(UTC)}\r\n\r\n".encode()


def wants_stream(accept: str | None) -> bool:
    """Whether a ``POST /v1/runs`` asks for the run's event stream as its answer: its
    ``Accept`` names ``text/event-stream`` (and not with ``q=0``)."""
    if not accept or "text/event-stream" not in accept.lower():
        return False
    for part in accept.lower().split(","):
        kind, *params = part.split(";")
        if kind.strip() != "text/event-stream":
            continue
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    return float(value.strip()) > 0
                except ValueError:
                    return False
        return True
    return False


class Streams:
    """The open streams of one application, ended together when the server stops."""

    def __init__(self) -> None:
        self._open: dict[asyncio.Task[Any], EventStream] = {}

    def __len__(self) -> int:
        return len(self._open)

    def stop_all(self) -> None:
        for stream in list(self._open.values()):
            stream.stop()


class EventStream(Response):
    """An SSE response of ``chunks`` (SSE frames, one or more each): written as they come,
    a ping comment every ``ping_s``, until they end or one is :class:`Last` (then the
    response ends), the client goes or the server stops (``streams``). ``guard``, if
    given, is asked every ``guard_s`` beside the stream: the frame it gives ends the stream
    (a revoked key's error), None lets it go on."""

    def __init__(self, chunks: AsyncIterator[bytes], streams: Streams,
                 ping_s: float = PING_S,
                 guard: Callable[[], Awaitable[bytes | None]] | None = None,
                 guard_s: float = 5.0) -> None:
        self.chunks = chunks
        self.streams = streams
        self.ping_s = ping_s
        self.guard, self.guard_s = guard, guard_s
        self._task: asyncio.Task[Any] | None = None
        self._stopped = False
        self._last = b""  # a Last chunk, sent with the response's end
        self.status_code = 200
        self.background = None  # what FastAPI may hand a Response to run after it
        self.raw_headers = list(HEADERS)

    def stop(self) -> None:
        """End the stream from outside (the client went, the server stops)."""
        if self._task is not None and not self._stopped:
            self._stopped = True
            self._task.cancel()

    def end_with(self, last: bytes) -> None:
        """End the stream from outside with ``last`` as its last frame (unless its own
        last frame has come: then it ends with that)."""
        if self._task is not None and not self._stopped and not self._last:
            self._last = last
            self.stop()

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        if scope.get("method") == "HEAD":  # headers only: a HEAD never opens the stream
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            await self._stream(receive, send)
        if self.background is not None:
            await self.background()

    async def _stream(self, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self.streams._open[task] = self
        loop = asyncio.get_running_loop()
        watch = loop.create_task(self._watch(receive, send))
        guarding = loop.create_task(self._guarding()) if self.guard is not None else None
        try:
            await self._write(send, watch)
        except asyncio.CancelledError:
            if not self._stopped:
                raise  # cancelled by the server itself: not ours to swallow
            task.uncancel()
        finally:
            self.streams._open.pop(task, None)
            watch.cancel()
            if guarding is not None:
                guarding.cancel()
            with contextlib.suppress(Exception):
                await self.chunks.aclose()  # type: ignore[attr-defined]
        # The end, with the last chunk if one came (even if stopped meanwhile: it was due);
        # uvicorn drops what a gone client is sent.
        await send({"type": "http.response.body", "body": self._last, "more_body": False})

    async def _write(self, send: Send, watch: asyncio.Task[None]) -> None:
        """Every chunk, a :class:`Last` one kept for the response's end."""
        async for chunk in self.chunks:
            if isinstance(chunk, Last):
                self._last = chunk
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        watch.cancel()
        await asyncio.wait({watch})  # its last ping is out before the response ends
        self._stopped = True  # ended on its own: stop() does nothing from here

    async def _guarding(self) -> None:
        """Ask ``guard`` every ``guard_s``; end the stream with the frame it gives (or if
        it fails: what it guards cannot be told)."""
        assert self.guard is not None
        while True:
            await asyncio.sleep(self.guard_s)
            try:
                last = await self.guard()
            except Exception:
                log.exception("an event stream's guard failed; the stream ends")
                self.stop()
                return
            if last is not None:
                self.end_with(last)
                return

    async def _watch(self, receive: Receive, send: Send) -> None:
        """The client's disconnect ends the stream; every ``ping_s`` a ping goes out."""
        while True:
            try:
                async with asyncio.timeout(self.ping_s):
                    message = await receive()
            except TimeoutError:
                await send({"type": "http.response.body", "body": ping(), "more_body": True})
                continue
            if message["type"] == "http.disconnect":
                self.stop()
                return


async def stop_streams_on_exit(streams: Streams) -> None:
    """End every open stream once the server begins to stop (run for as long as it serves):
    uvicorn waits for open responses before it tells the application, so a stream of a run
    that waits for hours would hold the shutdown. Seen as sse_starlette sees it: its flag,
    set by its wrapper of uvicorn's signal handler, or the uvicorn server behind SIGTERM's."""
    from sse_starlette.sse import AppStatus

    while True:
        await asyncio.sleep(EXIT_POLL_S)
        if AppStatus.should_exit or (AppStatus.enable_automatic_graceful_drain
                                     and _uvicorn_exiting()):
            streams.stop_all()


def _uvicorn_exiting() -> bool:
    handler = signal.getsignal(signal.SIGTERM)
    server = getattr(handler, "__self__", None)
    return bool(getattr(server, "should_exit", False))
