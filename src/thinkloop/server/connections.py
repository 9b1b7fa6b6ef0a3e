"""Connections under a budget: uvicorn's HTTP/1.1 protocol (httptools when installed, the
``perf`` extra; else h11) with what it leaves to the application, so that cheap floods cannot
take the gateway's file descriptors.

- A request's head must arrive within ``header_timeout_s`` of its first byte (of the
  connection's opening, for the first request): half-sent requests are dropped. uvicorn's own
  keep-alive timer stops at the first byte of the next request, so a head sent a byte at a
  time was never dropped.
- A head still arriving may grow to ``max_header_bytes`` (then 400 and the connection
  closes): h11 caps it itself; httptools has no cap, so the guarded protocol counts.
- Each client address holds at most ``per_client_connections``, and all together at most a
  budget under the open-file limit: ``max_connections``, lowered to ``RLIMIT_NOFILE -
  fd_reserve`` less what asyncio may accept before admitting (``3 * ACCEPT_BATCH``). At a cap, the
  oldest connection that is not serving a request (idle, or its head still coming) makes
  room; if every one is busy, the new connection may only ask ``/healthz`` (a few such
  places are kept above the budget), so the gateway can always say how it is.

Why httptools: per request and per SSE write it costs the gateway less CPU than h11's
pure-Python parser and framing (``benchmarks/server_parser.py``: 0.62-0.80x per request).
Complete heads over ``max_header_bytes`` are refused by :mod:`thinkloop.server.doors` (431),
bodies too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from thinkloop.server.config import GatewayConfig

# Connections kept above the budget for /healthz alone, and how long their head may take.
HEALTHZ_ROOM = 8
HEALTHZ_HEAD_S = 2.0
# The listen backlog, which is also how many connections asyncio accepts at a time: a batch
# is admitted two loop turns after it was accepted and what it evicted is closed a turn
# later, so three batches are kept out of the budget (uvicorn's 2048 took every file).
ACCEPT_BATCH = 64

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
                   Awaitable[None]]


@dataclass(eq=False, slots=True)
class _Conn:
    client: str
    transport: asyncio.Transport
    protocol: Guarded
    opened: float

    @property
    def gone(self) -> bool:
        return self.transport.is_closing()

    @property
    def evictable(self) -> bool:
        """Not serving a request: idle, or its head still coming (a WebSocket is busy)."""
        protocol: object = self.transport.get_protocol()
        return protocol is self.protocol and self.protocol.idle


class ConnectionBudget:
    """The open connections, oldest first, and who may open another."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self._conns: dict[asyncio.Transport, _Conn] = {}
        self._clients: dict[str, int] = {}  # open connections by client address
        self.evicted = 0  # for the tests and the logs: how many made room
        self.refused = 0

    def __len__(self) -> int:
        self._prune()
        return len(self._conns)

    def _prune(self) -> None:
        # Upgraded (WebSocket) connections end without telling us: closed ones go here.
        for transport in [t for t, c in self._conns.items() if c.gone]:
            self._drop(transport)

    def _drop(self, transport: asyncio.Transport) -> None:
        conn = self._conns.pop(transport, None)
        if conn is not None:
            left = self._clients[conn.client] - 1
            if left:
                self._clients[conn.client] = left
            else:
                del self._clients[conn.client]

    def admit(self, conn: _Conn) -> str:
        """``"ok"``, ``"healthz"`` (over a cap with nothing to evict: /healthz only) or
        ``"refused"``; the connection is counted unless refused. The open connections are
        walked only at a cap (each admission walked them all twice: O(n) per connection,
        0.1 ms a run at 400 open)."""
        if (self._clients.get(conn.client, 0) >= self.per_client
                or len(self._conns) >= self.total):
            self._prune()  # closed ones hold no place: count again without them
        place = "ok"
        if self._clients.get(conn.client, 0) >= self.per_client and not self._evict(
                [c for c in self._conns.values() if c.client == conn.client]):
            place = "healthz"
        if place == "ok" and len(self._conns) >= self.total and not self._evict(
                list(self._conns.values())):
            place = "healthz"
        if place == "healthz" and len(self._conns) >= self.total + HEALTHZ_ROOM:
            self.refused += 1
            return "refused"
        self._conns[conn.transport] = conn
        self._clients[conn.client] = self._clients.get(conn.client, 0) + 1
        return place

    def _evict(self, conns: list[_Conn]) -> bool:
        oldest = next((c for c in conns if c.evictable), None)  # dicts keep opening order
        if oldest is None:
            return False
        oldest.transport.close()
        self._drop(oldest.transport)
        self.evicted += 1
        return True

    def release(self, transport: asyncio.Transport) -> None:
        self._drop(transport)


class Guarded:
    """What the gateway adds to uvicorn's HTTP protocols (mixed in before one of them):
    admission by a :class:`ConnectionBudget`, a head timeout, a cap on a head still arriving.
    Subclassed per server by :func:`uvicorn_config` (uvicorn makes one per connection)."""

    budget: ClassVar[ConnectionBudget]
    head_timeout_s: ClassVar[float]
    # Set where the parser cannot cap a growing head itself (httptools); h11 does (None).
    max_head_bytes: ClassVar[int | None] = None
    _head_timer: asyncio.TimerHandle | None = None
    _heading = False  # a head is arriving (httptools' callbacks say so)
    _head_bytes = 0  # bytes of the head still arriving (with max_head_bytes)
    # uvicorn's protocols' own, typed here for the mixin.
    cycle: Any
    app: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    client: tuple[str, int] | None

    @property
    def idle(self) -> bool:
        return self.cycle is None or bool(self.cycle.response_complete)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        client = self.client[0] if self.client else "?"
        place = self.budget.admit(_Conn(client, cast(asyncio.Transport, transport), self,
                                        time.monotonic()))
        if place == "refused":
            transport.close()
            return
        timeout = self.head_timeout_s
        if place == "healthz":
            self.app = healthz_only(self.app)
            timeout = min(timeout, HEALTHZ_HEAD_S)
        self._arm(timeout)

    def _arm(self, timeout: float) -> None:
        self._head_timer = self.loop.call_later(timeout, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        protocol: object = self.transport.get_protocol()
        if self.idle and protocol is self:
            self.transport.close()  # a head that did not come in time: a slow client

    def data_received(self, data: bytes) -> None:
        was_heading = self._heading
        super().data_received(data)  # type: ignore[misc]
        # A chunk that only continued a head counts (the one it began in may hold a body's
        # end before it): what a head holds is at most the cap and one read.
        if (self.max_head_bytes is not None and was_heading and self._heading
                and not self.transport.is_closing()):
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes:
                self._head_too_large()
                return
        if not self.idle:
            self._disarm()  # a request is being served: its body has a timeout of its own
        elif self._head_timer is None and not self.transport.is_closing():
            self._arm(self.head_timeout_s)  # the first byte of the next head starts its clock

    # The httptools parser's callbacks (h11 never calls them): where a head begins and ends,
    # also one pipelined behind a request still being served.
    def on_message_begin(self) -> None:
        self._heading, self._head_bytes = True, 0
        super().on_message_begin()  # type: ignore[misc]

    def on_headers_complete(self) -> None:
        self._heading = False
        super().on_headers_complete()  # type: ignore[misc]

    def _head_too_large(self) -> None:
        """A head still arriving past the cap: 400 and closed, as h11 answers one."""
        self._disarm()
        send_400 = getattr(self, "send_400_response", None)
        if send_400 is not None:
            send_400("Request head too large (gateway.max_header_bytes).")
        else:
            self.transport.close()

    def handle_websocket_upgrade(self, *event: Any) -> None:
        self._disarm()
        super().handle_websocket_upgrade(*event)  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.budget.release(self.transport)
        super().connection_lost(exc)  # type: ignore[misc]


class GuardedH11(Guarded, H11Protocol):
    """uvicorn's h11 protocol, guarded (h11 caps a growing head itself)."""


def guarded_protocol(http: str) -> type[Guarded]:
    """The guarded protocol class for ``http``: ``"httptools"``, ``"h11"``, or ``"auto"``
    (httptools when it is installed)."""
    if http in ("auto", "httptools"):
        try:
            from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
        except ImportError:
            if http == "httptools":
                raise
        else:
            return type("GuardedHttpTools", (Guarded, HttpToolsProtocol), {})
    if http not in ("auto", "h11"):
        raise ValueError(f"http must be auto, httptools or h11, not {http!r}")
    return GuardedH11


def healthz_only(app: Any) -> ASGIApp:
    """``app`` for ``GET /healthz``; anything else is refused (the gateway is full)."""
    async def guarded(scope: Scope, receive: Callable[[], Awaitable[Any]],
                      send: Callable[[Any], Awaitable[None]]) -> None:
        if scope.get("path") == "/healthz":
            await app(scope, receive, send)
            return
        body = b'{"error":{"message":"the gateway is at its connection limit; try again",' \
               b'"type":"rate_limit_error","code":503}}'
        await send({"type": "http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"), (b"retry-after", b"1"),
            (b"connection", b"close"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return guarded


def connection_budget(cfg: GatewayConfig) -> int:
    """``max_connections``, lowered to what the open-file limit leaves after ``fd_reserve``."""
    try:
        import resource
    except ImportError:  # not a Unix: no limit to read
        return cfg.max_connections
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return cfg.max_connections
    room = soft - cfg.fd_reserve - HEALTHZ_ROOM - 3 * ACCEPT_BATCH
    return max(8, min(cfg.max_connections, room))


def uvicorn_config(app: Any, cfg: GatewayConfig, http: str = "auto",
                   **options: Any) -> uvicorn.Config:
    """The uvicorn configuration ``thinkloop serve`` runs ``app`` with: its limits from
    ``cfg``, on ``http`` (see :func:`guarded_protocol`; ``options``: any other of uvicorn's,
    e.g. ``log_level``)."""
    budget = ConnectionBudget(connection_budget(cfg), cfg.per_client_connections)
    base = guarded_protocol(http)
    protocol = type("GatewayHTTP", (base,), {
        "budget": budget, "head_timeout_s": cfg.header_timeout_s,
        "max_head_bytes": None if issubclass(base, GuardedH11) else cfg.max_header_bytes})
    options = {"log_level": "warning", "timeout_graceful_shutdown": 10, **options}
    # uvicorn formats each response's access-log line (its client and quoted path) before
    # the logger drops it below "info": only where the level lets it out.
    level = options["log_level"]
    quiet = isinstance(level, str) and level.lower() not in ("info", "debug", "trace")
    options.setdefault("access_log", not quiet)
    return uvicorn.Config(
        app, host=cfg.host, port=cfg.port, http=protocol,
        h11_max_incomplete_event_size=cfg.max_header_bytes, timeout_keep_alive=cfg.keep_alive_s,
        backlog=ACCEPT_BATCH,
        # uvicorn's own cap (503 at a request's head), as a backstop above ours.
        limit_concurrency=budget.total + HEALTHZ_ROOM + cfg.per_client_connections,
        ws_max_size=cfg.max_body_bytes, **options)
