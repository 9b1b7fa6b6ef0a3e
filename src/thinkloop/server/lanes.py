"""Fast lanes for the two requests every run makes: ``POST /v1/runs`` (with ``Accept:
text/event-stream``, the one request: it answers with the run's stream) and ``GET
/v1/runs/{id}/events``, answered from the ASGI scope past FastAPI's routing, dependency
solving and exception layers. Those cost a run more CPU than the gateway's own work on the
two requests (a py-spy profile at 500 runs: 20% of the gateway's busy samples in the stack
around the routes, 6% solving the routes' dependencies, against 7% starting the runs).

Only the plain case takes a lane: a whole JSON body that :class:`RunRequest` accepts, a known
caller, a query of at most ``after=N``. Anything else (an invalid body, a missing key, another
content type) goes on to the application with its body intact, which answers it as before,
so every error keeps its one source. The lanes sit inside the doors (``doors.py``): every
check there (host, origin, token, key, sizes) comes first.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import orjson

from thinkloop.server.deps import identify
from thinkloop.server.doors import HEADERS, ASGIApp, Message, Receive, Scope, Send, replayed
from thinkloop.server.errors import error_response
from thinkloop.server.gateway import Gateway
from thinkloop.server.sse import wants_stream

T = TypeVar("T")

RUNS = "/v1/runs"
RUN_PREFIX = RUNS + "/"
EVENTS = "/events"


class Lanes:
    """ASGI middleware: the lanes above, else the application."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            path, method = scope["path"], scope["method"]
            if method == "POST" and path == RUNS:
                await self.start(scope, receive, send)
                return
            if method == "GET" and path.startswith(RUN_PREFIX) and path.endswith(EVENTS):
                run_id = path[len(RUN_PREFIX):-len(EVENTS)]
                if run_id and "/" not in run_id:
                    await self.events(scope, receive, send, run_id)
                    return
        await self.app(scope, receive, send)

    async def start(self, scope: Scope, receive: Receive, send: Send) -> None:
        from thinkloop.server.routes import started, submit

        message = await receive()  # the doors read the body whole: one message
        unread, receive = receive, replayed(b"", receive, first=message)
        headers = _headers(scope)
        gw: Gateway = scope["app"].state.gateway
        body = _run_request(message, headers)
        who = await identify(gw, headers, scope) if body is not None else None
        if body is None or who is None:
            await self.app(scope, receive, send)  # the application says what is wrong
            return
        run = await _or_error(submit(gw, who, body), scope, receive, send)
        if run is None:
            return
        if not wants_stream(headers.get("accept")):
            await _json(send, 202, started(run, body))
            return
        from thinkloop.server.streams import started_stream

        # The body is read: the stream's watcher reads on from the disconnect.
        await (await started_stream(gw, who, run, headers))(scope, unread, send)

    async def events(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        from thinkloop.server.auth import key_from_headers
        from thinkloop.server.streams import event_stream

        headers = _headers(scope)
        gw: Gateway = scope["app"].state.gateway
        start = _after(scope["query_string"], headers.get("last-event-id"))
        who = await identify(gw, headers, scope) if start is not None else None
        if start is None or who is None:
            await self.app(scope, receive, send)
            return
        run = await _or_error(gw.run(who, run_id, to_follow=True), scope, receive, send)
        if run is None:
            return
        key = key_from_headers(headers.get("authorization"), headers.get("x-api-key"))
        await event_stream(gw, run, start, key)(scope, receive, send)


async def _or_error(
    work: Awaitable[T], scope: Scope, receive: Receive, send: Send
) -> T | None:
    """What ``work`` gives, or None once the error table's answer to its error is sent (an
    error the table does not know goes up, to the application's own handler)."""
    try:
        return await work
    except Exception as exc:
        response = error_response(exc)
        if response is None:
            raise
        await response(scope, receive, send)
        return None


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lowercase name, the first of a repeated one (as Starlette's
    ``Headers.get``): as the doors read them, if they did."""
    read: dict[str, str] | None = scope.get(HEADERS)
    if read is not None:
        return read
    found: dict[str, str] = {}
    for k, v in scope["headers"]:
        found.setdefault(k.decode("latin-1"), v.decode("latin-1"))
    return found


def _run_request(message: Message, headers: dict[str, str]) -> Any:
    """The body as a :class:`RunRequest`, or None when the lane does not take it."""
    from thinkloop.server.routes import RunRequest

    if message["type"] != "http.request" or message.get("more_body"):
        return None
    kind = headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if kind != "application/json":
        return None
    try:
        return RunRequest.model_validate(orjson.loads(message.get("body", b"")))
    except ValueError:  # not JSON, or not a run request (pydantic's error is a ValueError)
        return None


def _after(query: bytes, last_event_id: str | None) -> int | None:
    """Where the stream starts (``?after=N``, else ``Last-Event-ID``), or None for a query
    the lane does not read."""
    from thinkloop.server.streams import _int

    if not query:
        return _int(last_event_id)
    name, _, value = query.partition(b"=")
    if name == b"after" and value.isdigit() and len(value) < 19:
        return int(value)
    return None


async def _json(send: Send, status: int, content: dict[str, Any]) -> None:
    """``content`` as JSONResponse sends it (the same headers, in its order)."""
    body = orjson.dumps(content)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
