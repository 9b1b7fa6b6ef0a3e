"""The gateway's doors: what a request must show before the application reads a byte of it.

In order, for every HTTP request and WebSocket handshake (an ASGI middleware):

1. **Host** (always with ``--no-auth``, else when ``allowed_hosts`` is set): the bound address,
   localhost on loopback, or a configured name. A page that rebinds its own DNS name to
   127.0.0.1 sends its name, not ours, so it is refused.
2. **Origin** (sent by browsers): a WebSocket handshake and every state-changing request
   (POST, PUT, PATCH, DELETE) from a browser must come from the gateway's own page or an
   ``allowed_origins`` entry.
3. **The process's token** (``--no-auth`` only): a token made for this process, which
   ``GET /`` sets as a cookie and which sits in a 0600 file under ``THINKLOOP_HOME``
   (``gateway/PORT.token``) for the person's own programs. Every state-changing request and
   WebSocket handshake must carry it (the cookie, ``X-Thinkloop-Token`` or
   ``Authorization: Bearer``), and so must every other request a browser makes (one with
   ``Origin`` or ``Sec-Fetch-Site``): a page from another site has neither the cookie nor the
   file, and any other program on the machine that can read the file is the person's own.
   Programs' reads (``GET``) pass without it. A chat platform's webhook is exempt: the
   platform cannot send the token; the channel checks its signature instead.
4. **An API key** (with auth) for everything under ``/v1``, the WebSocket included: checked
   here, so a request without a valid key is refused without its body being read.
5. **One of each**: a request naming a header the doors read (Host, Origin, the token or key
   headers, Cookie, Content-Length, Transfer-Encoding) twice, or the token's cookie twice,
   is refused (400). Readers disagree on which of two counts (Starlette and the fast lanes
   read the first, a proxy in front may read either), so one check could pass on one value
   while the application acts on the other: refused, no reader has to choose.
6. **Sizes**: a head over ``max_header_bytes`` is refused (431; h11 refuses one still
   arriving, 400). A body declared over ``max_body_bytes`` is refused at once (413), one
   that grows past it is cut off (413), one that takes over ``body_timeout_s`` ends with
   408. The application gets the body whole. A refused request's body up to 64 KB is read
   and dropped first (within 2 s), so the client gets the refusal rather than a reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from thinkloop.server.auth import Principal, authenticate, key_from_headers
from thinkloop.server.config import GatewayConfig, is_loopback

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OPEN_PATHS = frozenset({"/", "/healthz"})  # what a browser may GET without the page's token
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
PRINCIPAL = "thinkloop.principal"  # where the caller found here waits for the routes
HEADERS = "thinkloop.headers"  # the request's headers by lowercase name, as read here
TOKEN_HEADER = "x-thinkloop-token"  # how a program sends a --no-auth gateway's token
DRAIN_BYTES = 64 * 1024  # a refused body up to this size is read first (see drain)
DRAIN_S = 2.0  # for at most this long
HOSTS_SEEN = 64  # Host headers whose answer is kept (forgotten all at once past this)
# The headers the doors decide by: named twice, the request is refused (see 5. above).
ONCE = frozenset({"host", "origin", "authorization", "x-api-key", TOKEN_HEADER, "cookie",
                  "content-length", "transfer-encoding"})


class Refused(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.headers = status, message, kind, headers


# Where the channels mount their webhooks (``POST /v1/channels/NAME/webhook``).
CHANNEL_HOOKS = "/v1/channels/"


def cookie_name(scope: Scope) -> str:
    # Cookies ignore the port: two gateways on one host must not overwrite each other's.
    server = scope.get("server") or ("", 0)
    return f"thinkloop_page_{server[1]}"


class Doors:
    """ASGI middleware: the checks above, then the application. ``token``: this process's
    page token (``--no-auth``)."""

    def __init__(self, app: ASGIApp, config: GatewayConfig, token: str) -> None:
        self.app = app
        self.config = config
        self.token = token
        names = {*config.allowed_hosts, config.host}
        if is_loopback(config.host):
            names.update(LOOPBACK_NAMES)
        self.hosts = frozenset(n.lower() for n in names)
        self.check_host = config.no_auth or bool(config.allowed_hosts)
        self.origins = frozenset(o.rstrip("/").lower() for o in config.allowed_origins)
        self._hosts_seen: dict[str, bool] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        # The first of a repeated name, as Starlette's ``Headers.get`` reads it (the names
        # the doors decide by are refused when repeated); kept for the lanes (HEADERS).
        headers = {k.decode("latin-1"): v.decode("latin-1")
                   for k, v in reversed(scope["headers"])}
        scope[HEADERS] = headers
        unread = scope["type"] == "http" and _has_body(headers)
        try:
            self.measure(scope)
            if len(headers) < len(scope["headers"]):  # some name came twice
                _once(scope["headers"])
            self.knock(scope, headers)
            if not self.config.no_auth and _needs_key(scope["path"]):
                scope[PRINCIPAL] = await self.key(scope, headers)
            if unread:
                unread = False  # read now, whole or cut off: nothing to drain after
                receive = await self.body(headers, receive)
        except Refused as no:
            if unread:
                await drain(headers, receive, min(DRAIN_S, self.config.body_timeout_s))
            await refuse(scope, receive, send, no)
            return
        await self.app(scope, receive, send)

    def measure(self, scope: Scope) -> None:
        # h11 caps a head still arriving; one that came whole in a packet is measured here.
        size = sum(len(k) + len(v) + 4 for k, v in scope["headers"]) + len(scope["path"])
        if size > self.config.max_header_bytes:
            raise Refused(431, f"the request's head is over {self.config.max_header_bytes} "
                               "bytes (gateway.max_header_bytes)")

    def knock(self, scope: Scope, headers: dict[str, str]) -> None:
        """Host, Origin and the page's token: raises :class:`Refused`."""
        host = headers.get("host", "")
        if self.check_host and not self._known_host(host):
            raise Refused(400, f"this gateway does not answer to Host {host!r} (add the name "
                               "to gateway.allowed_hosts)")
        origin = headers.get("origin")
        changes = scope["type"] == "websocket" or scope.get("method") not in SAFE_METHODS
        if origin is not None and changes and not self._same_origin(scope, origin, host):
            raise Refused(403, f"requests from {origin!r} are not allowed (add the origin to "
                               "gateway.allowed_origins)", "permission_error")
        if self.config.no_auth and not _open(scope) and not _is_hook(scope["path"]) \
                and (changes or _from_browser(headers)):
            given = _cookie(headers.get("cookie", ""), cookie_name(scope)) \
                or headers.get(TOKEN_HEADER) or _bearer(headers.get("authorization", ""))
            # Bytes: compare_digest refuses a str with non-ASCII characters (a 500).
            if given is None or not secrets.compare_digest(given.encode("latin-1"),
                                                           self.token.encode()):
                raise Refused(403, "open the gateway's page (/) first: a browser needs its "
                                   "token (a program sends X-Thinkloop-Token with the token in "
                                   "THINKLOOP_HOME/gateway/PORT.token)", "permission_error")

    def _known_host(self, host: str) -> bool:
        """Whether ``host`` names this gateway; the answers for the last few names kept
        (parsing the header was a share of every request's cost)."""
        known = self._hosts_seen.get(host)
        if known is None:
            if len(self._hosts_seen) >= HOSTS_SEEN:
                self._hosts_seen.clear()
            known = self._hosts_seen[host] = _hostname(host) in self.hosts
        return known

    def _same_origin(self, scope: Scope, origin: str, host: str) -> bool:
        origin = origin.rstrip("/").lower()
        scheme = {"ws": "http", "wss": "https"}.get(scope["scheme"], scope["scheme"])
        return origin == f"{scheme}://{host.lower()}" or origin in self.origins

    async def key(self, scope: Scope, headers: dict[str, str]) -> Principal:
        key = key_from_headers(headers.get("authorization"), headers.get("x-api-key"))
        who = await authenticate(scope["app"].state.gateway.store, key)
        if who is None:
            raise Refused(401, "invalid API key" if key else
                          "an API key is required (Authorization: Bearer KEY)",
                          "authentication_error", ((b"www-authenticate", b"Bearer"),))
        return who

    async def body(self, headers: dict[str, str], receive: Receive) -> Receive:
        """The whole body within the limits, replayed to the application."""
        limit = self.config.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise Refused(413, f"the body is over {limit} bytes (gateway.max_body_bytes)")
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.config.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # gone: nobody to answer
                        return replayed(b"", receive, message)
                    chunks.append(message.get("body", b""))
                    size += len(chunks[-1])
                    if size > limit:
                        raise Refused(413, f"the body is over {limit} bytes "
                                           "(gateway.max_body_bytes)")
                    if not message.get("more_body"):
                        return replayed(b"".join(chunks), receive)
        except TimeoutError:
            raise Refused(408, f"the body took over {self.config.body_timeout_s:g}s "
                               "(gateway.body_timeout_s)") from None


async def drain(headers: dict[str, str], receive: Receive, timeout_s: float) -> None:
    """Read and drop a small body refused before it was read, so the refusal is not lost to a
    reset (a socket closed with unread bytes resets, and the client may see that instead of
    the answer). A body declared over ``DRAIN_BYTES`` is left unread: refused at once."""
    declared = headers.get("content-length", "")
    if not (declared.isdigit() and int(declared) <= DRAIN_BYTES) \
            and "transfer-encoding" not in headers:
        return
    size = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            while size <= DRAIN_BYTES:
                message = await receive()
                size += len(message.get("body", b""))
                if message["type"] != "http.request" or not message.get("more_body"):
                    return


def replayed(body: bytes, receive: Receive, first: Message | None = None) -> Receive:
    """``receive`` with the body already read (``first``, else ``body`` as one message)
    given again first."""
    pending: list[Message] = [first or {"type": "http.request", "body": body,
                                        "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


async def refuse(scope: Scope, receive: Receive, send: Send, no: Refused) -> None:
    """The error in the gateway's one shape; the connection closes (a large unread body is
    left unread)."""
    body = orjson.dumps({"error": {"message": no.message, "type": no.kind, "code": no.status}})
    headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
               (b"content-length", str(len(body)).encode()), *no.headers]
    if scope["type"] == "websocket":
        # Closed before it is accepted: the handshake gets HTTP 403. (A denial response could
        # say 401 and why, but uvicorn then logs an error for every refused handshake.)
        await receive()  # the handshake's websocket.connect
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "http.response.start", "status": no.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _needs_key(path: str) -> bool:
    """The API wants a key, but for a chat platform's webhook: the platform cannot send one,
    and the channel checks the platform's own signature or secret token on it instead."""
    if _is_hook(path):
        return False
    return path == "/v1" or path.startswith("/v1/")


def _is_hook(path: str) -> bool:
    return path.startswith(CHANNEL_HOOKS) and path.endswith("/webhook")


def _bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def publish_token(path: Path, token: str) -> None:
    """Write the process's token where the person's programs find it: readable by them alone
    (created 0600 in a 0700 folder, never through a link someone planted)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token)


def withdraw_token(path: Path, token: str) -> None:
    """Remove the token file, unless another gateway on the same port has replaced it."""
    with contextlib.suppress(OSError):
        if path.read_text(encoding="ascii").strip() == token:
            path.unlink()


def _has_body(headers: dict[str, str]) -> bool:
    return headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers


def _from_browser(headers: dict[str, str]) -> bool:
    """Browsers send ``Origin`` (cross-site, POST, WebSocket) or ``Sec-Fetch-Site`` (every
    request since 2023); programs send neither."""
    return "origin" in headers or "sec-fetch-site" in headers


def _open(scope: Scope) -> bool:
    return scope["type"] == "http" and scope["method"] in ("GET", "HEAD") \
        and scope["path"] in OPEN_PATHS


def _hostname(host: str) -> str:
    try:
        return (urlsplit("//" + host).hostname or "").lower()
    except ValueError:
        return ""


def _once(raw: list[tuple[bytes, bytes]]) -> None:
    """Refuse a request that names one of :data:`ONCE` more than once."""
    seen: set[str] = set()
    for key, _ in raw:
        name = key.decode("latin-1").lower()
        if name in ONCE:
            if name in seen:
                raise Refused(400, f"the request names its {name} header more than once")
            seen.add(name)


def _cookie(header: str, name: str) -> str | None:
    """The cookie ``name``'s value; one named twice is refused (Starlette reads the last of
    them, browsers put the one of the longest path first)."""
    found = None
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            if found is not None:
                raise Refused(400, f"the request names its cookie {name} more than once")
            found = value
    return found
