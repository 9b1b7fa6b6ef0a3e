"""A small HTTP/1.1 client on asyncio and ``httptools``: POST JSON, read bytes or SSE.

Chosen by measurement (benchmarks/transport.py): against the same loopback server it costs
a fifth to a third of aiohttp's client CPU per request, plain and TLS, at 1 and at 200
concurrent requests, and less than the Rust-backed clients (whose runtimes' threads count
too). It does what a model endpoint needs and nothing else: a pool of keep-alive connections
per origin, content-length and chunked bodies (``httptools``, the parser uvicorn uses), SSE
``data`` lines, TLS through asyncio with the system's trust store, a connect timeout and one
deadline per request. No redirects, proxies, cookies or compression: the aiohttp transport
(:class:`thinkloop.models.transport.HttpTransport`) stays for those.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import ssl
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httptools

from thinkloop.core.errors import ModelConnectionError, ModelTimeoutError
from thinkloop.lifetime import close_at_loop_exit, forget_at_loop_exit
from thinkloop.models.transport import http_error

_IDLE_S = 15.0  # as aiohttp: a connection idle longer may have been dropped by the server
_HIGH, _LOW = 64, 8  # queued body chunks at which reading pauses / resumes


@dataclass(frozen=True)
class _Origin:
    host: str
    port: int
    tls: bool
    path: bytes
    host_header: bytes


@functools.lru_cache(maxsize=64)  # a model posts to one URL: parse it once, not per call
def _origin(url: str) -> _Origin:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelConnectionError(f"cannot reach {url}: not an http(s) URL")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    default = port == (443 if tls else 80)
    return _Origin(host, port, tls, path.encode(),
                   (shown if default else f"{shown}:{port}").encode("idna"))


class _Conn(asyncio.Protocol):
    """One keep-alive connection: a request at a time, the answer's parts through a queue."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.headers: dict[str, str] = {}
        self.status = 0
        self.head_done = asyncio.get_running_loop().create_future()
        self.complete = False
        self.keep_alive = False
        self.lost = False
        self.got_bytes = False
        self.until_close = False
        self.error: Exception | None = None
        self.idle_since = 0.0
        self.transport: asyncio.Transport | None = None
        self._paused = False

    def reset(self) -> None:
        self.headers, self.status, self.complete, self.got_bytes = {}, 0, False, False
        self.head_done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if not self.complete and exc is None and self.until_close:
            self.on_message_complete()  # a body without a length ends with the connection
        elif not self.complete:
            self._fail(exc or ConnectionResetError("the server closed the connection"))

    def _fail(self, exc: Exception) -> None:
        self.error = self.error or exc
        if not self.head_done.done():
            self.head_done.set_exception(exc)
        self.chunks.put_nowait(None)
        if self.transport is not None:
            self.transport.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.until_close = ("content-length" not in self.headers
                            and "chunked" not in self.headers.get("transfer-encoding", ""))
        if not self.head_done.done():
            self.head_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.chunks.put_nowait(body)
        if self.chunks.qsize() > _HIGH and self.transport is not None and not self._paused:
            self._paused = True
            self.transport.pause_reading()  # the reader is slower than the server

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()
        self.chunks.put_nowait(None)

    async def next_chunk(self) -> bytes | None:
        chunk = await self.chunks.get()
        if self._paused and self.chunks.qsize() < _LOW and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        if chunk is None and self.error is not None:
            raise self.error
        return chunk


class H1Transport:
    """POST JSON bytes, get bytes back or a stream of SSE ``data`` payloads."""

    def __init__(self, *, connect_timeout_s: float = 10.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.connect_timeout_s = connect_timeout_s
        self._ssl = ssl_context
        self._idle: dict[tuple[str, int, bool], list[_Conn]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def _pool(self, origin: _Origin) -> list[_Conn]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Connections belong to their event loop; run_sync starts a fresh loop each call.
            self._drop_all()
            self._loop = loop
            close_at_loop_exit(self, self.aclose)
        return self._idle.setdefault((origin.host, origin.port, origin.tls), [])

    async def _connect(self, origin: _Origin) -> tuple[_Conn, bool]:
        """A connection to the origin, and whether it was reused from the pool."""
        pool = self._pool(origin)
        now = time.monotonic()
        while pool:
            conn = pool.pop()
            if not conn.lost and now - conn.idle_since < _IDLE_S:
                conn.reset()
                return conn, True
            if conn.transport is not None:
                conn.transport.close()
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.connect_timeout_s):
            _, conn = await loop.create_connection(
                _Conn, origin.host, origin.port,
                ssl=self._context() if origin.tls else None,
                server_hostname=origin.host if origin.tls else None)
        return conn, False

    async def _open(self, origin: _Origin, body: bytes | None,
                    headers: Mapping[str, str]) -> _Conn:
        """Send the request (a POST of ``body``, a GET when None) and wait for the answer's
        head; one retry when a pooled connection turns out dead before the server said
        anything (it dropped it idle)."""
        head = b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in headers.items())
        if body is None:
            request = b"GET %s HTTP/1.1\r\nhost: %s\r\n%s\r\n" % (
                origin.path, origin.host_header, head)
        else:
            request = b"POST %s HTTP/1.1\r\nhost: %s\r\ncontent-length: %d\r\n%s\r\n%s" % (
                origin.path, origin.host_header, len(body), head, body)
        for attempt in (0, 1):
            conn, reused = await self._connect(origin)
            assert conn.transport is not None
            conn.transport.write(request)
            try:
                await conn.head_done
                return conn
            except BaseException as exc:  # a timeout or cancel too: the caller never sees it
                conn.transport.close()
                retry = isinstance(exc, OSError) and reused and not conn.got_bytes
                if attempt or not retry:
                    raise
        raise AssertionError("unreachable")

    def _release(self, origin: _Origin, conn: _Conn) -> None:
        if conn.complete and conn.keep_alive and not conn.lost:
            conn.idle_since = time.monotonic()
            self._pool(origin).append(conn)
        elif conn.transport is not None:
            conn.transport.close()  # an answer read only in part cannot be reused

    async def _body(self, conn: _Conn) -> bytes:
        parts = []
        while (chunk := await conn.next_chunk()) is not None:
            parts.append(chunk)
        return b"".join(parts)

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> bytes:
        origin = _origin(url)
        conn: _Conn | None = None
        try:
            with _model_errors(url, timeout_s):
                async with asyncio.timeout(timeout_s):
                    conn = await self._open(origin, body, headers)
                    data = await self._body(conn)
        finally:
            if conn is not None:
                self._release(origin, conn)
        if conn.status >= 400:
            raise http_error(conn.status, data.decode("utf-8", "replace"), conn.headers)
        return data

    async def post_sse(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> AsyncIterator[str]:
        async for batch in self.post_sse_batches(url, body, headers, timeout_s):
            for data in batch:
                yield data

    def post_sse_batches(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> AsyncIterator[list[str]]:
        """The SSE ``data`` payloads, a list per network read: a reader that folds a read's
        events before acting on them pays its per-item costs (a generator hop, a deadline,
        an event for subscribers) once per read instead of once per token."""
        return self._sse_batches(url, body, headers, timeout_s)

    def get_sse_batches(
        self, url: str, headers: Mapping[str, str], timeout_s: float
    ) -> AsyncIterator[list[str]]:
        """:meth:`post_sse_batches` of a GET (an SSE endpoint that streams what exists, as
        the gateway's ``/v1/runs/{id}/events``)."""
        return self._sse_batches(url, None, headers, timeout_s)

    async def _sse_batches(
        self, url: str, body: bytes | None, headers: Mapping[str, str], timeout_s: float
    ) -> AsyncIterator[list[str]]:
        origin = _origin(url)
        deadline = asyncio.get_running_loop().time() + timeout_s
        conn: _Conn | None = None
        try:
            with _model_errors(url, timeout_s):
                # The deadline covers every wait, never a yield: the consumer's own work
                # between events is not cancelled by it.
                async with asyncio.timeout_at(deadline):
                    conn = await self._open(origin, body,
                                            {**headers, "accept": "text/event-stream"})
                    if conn.status >= 400:
                        text = (await self._body(conn)).decode("utf-8", "replace")
                        raise http_error(conn.status, text, conn.headers)
                async for batch in _sse_data(conn, deadline):
                    if "[DONE]" in batch:
                        # The body's end usually came in the same read: take it without
                        # waiting, and the connection goes back to the pool.
                        while not conn.chunks.empty():
                            conn.chunks.get_nowait()
                        done = [d for d in batch[:batch.index("[DONE]")] if d]
                        if done:
                            yield done
                        break
                    batch = [d for d in batch if d]
                    if batch:
                        yield batch
        finally:
            if conn is not None:
                self._release(origin, conn)

    def _drop_all(self) -> None:
        for pool in self._idle.values():
            for conn in pool:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()

    async def aclose(self) -> None:
        if self._loop is not None:
            forget_at_loop_exit(self)
        had = bool(self._idle)
        self._drop_all()
        self._loop = None
        if had:
            # close() finishes on the loop's next turn; the loop may be about to close.
            await asyncio.sleep(0)


@contextlib.contextmanager
def _model_errors(url: str, timeout_s: float) -> Iterator[None]:
    """The socket's and the parser's failures as the model errors retries are decided by."""
    try:
        yield
    except TimeoutError as exc:
        raise ModelTimeoutError(f"no answer from {url} within {timeout_s:g}s") from exc
    except (OSError, httptools.HttpParserError) as exc:
        raise ModelConnectionError(f"cannot reach {url}: {exc}") from exc


async def _sse_data(conn: _Conn, deadline: float) -> AsyncIterator[list[str]]:
    """Each event's ``data`` (its lines joined by newlines), as the SSE spec reads them: lines
    end at CRLF, LF or CR (only those: JSON may hold a raw U+2028), a blank line ends an event.
    One list per wake-up: every body part already received is read at once."""
    decoder: Any = codecs.getincrementaldecoder("utf-8")("replace")
    buf, data = "", list[str]()
    ended = False
    while not ended:
        if conn.chunks.empty():
            async with asyncio.timeout_at(deadline):
                parts = [await conn.next_chunk()]
        else:
            parts = []
        while not conn.chunks.empty() and (not parts or parts[-1] is not None):
            parts.append(await conn.next_chunk())  # queued: returns without waiting
        ended = parts[-1] is None
        raw = b"".join(p for p in parts if p is not None)
        buf += decoder.decode(raw, final=ended)
        if not ended and buf.endswith("\r"):
            text, buf = buf[:-1], "\r"  # its LF may come in the next chunk
        else:
            text, buf = buf, ""
        *lines, rest = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        buf = rest + buf
        if ended:
            lines.append(buf)
            lines.append("")
        out: list[str] = []
        for line in lines:
            if not line:
                if data:
                    out.append("\n".join(data))
                data = []
            elif line == "data" or line.startswith("data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(" ") else value)
        if out:
            yield out
