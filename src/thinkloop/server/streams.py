"""Live events: SSE per run (resumable with ``Last-Event-ID``) and a WebSocket for many.

WebSocket frames, client to server (JSON objects)::

    {"type": "run", "task": "...", "agent": "default", "session": null}   start and follow
    {"type": "subscribe", "run_id": "...", "after": 0}                    follow (resume)
    {"type": "abort", "run_id": "..."}
    {"type": "input", "run_id": "...", "id": "...", "approved": true}     or "answer": "..."

and server to client: ``{"type": "run.accepted", "run_id"}``, ``{"type": "event", "event":
{...}}`` (the same event objects as SSE data), ``{"type": "run.end", "run_id", "status"}``,
``{"type": "error", "status": 4xx, "message"}``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Header, Request, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from thinkloop.api import validation_summary
from thinkloop.core.errors import (
    ConfigError,
    NotFoundError,
    RequestError,
    RunLimitError,
    StoreError,
    UnknownAgentError,
)
from thinkloop.server.agents import DEFAULT_AGENT
from thinkloop.server.auth import Principal, authenticate, key_from_headers
from thinkloop.server.deps import caller, gateway, identify
from thinkloop.server.fleet import Followed
from thinkloop.server.gateway import Gateway
from thinkloop.server.inputs import Answer
from thinkloop.server.routes import InputRequest, RunRequest
from thinkloop.server.sse import EventStream, Last, frame

router = APIRouter(prefix="/v1")


@router.get("/runs/{run_id}/events")
async def run_events(
    run_id: str, request: Request, who: Annotated[Principal, Depends(caller)],
    gw: Annotated[Gateway, Depends(gateway)],
    last_event_id: Annotated[str | None, Header()] = None, after: int | None = None,
) -> EventStream:
    """The run's events as SSE: ``id`` is the event's number; reconnect with
    ``Last-Event-ID`` (or ``?after=N``) to get only what came after. Ends with the run."""
    run = await gw.run(who, run_id, to_follow=True)
    start = after if after is not None else _int(last_event_id)
    key = key_from_headers(request.headers.get("authorization"),
                           request.headers.get("x-api-key"))
    return event_stream(gw, run, start, key)


async def started_stream(gw: Gateway, who: Principal, run: Followed,
                         headers: Mapping[str, str]) -> EventStream:
    """The answer to a ``POST /v1/runs`` that asks for ``text/event-stream``: the run's
    events from its first, as ``GET /v1/runs/{id}/events`` streams them (the same ids, so
    that one resumes a cut stream with ``Last-Event-ID``), ``Location`` naming the run."""
    run = await gw.run(who, run.id, to_follow=True)  # its first follow (a fleet's fresh row)
    key = key_from_headers(headers.get("authorization"), headers.get("x-api-key"))
    stream = event_stream(gw, run, 0, key)
    stream.raw_headers.append((b"location", f"/v1/runs/{run.id}".encode()))
    return stream


def event_stream(gw: Gateway, run: Followed, start: int, key: str | None) -> EventStream:
    """The SSE response of ``run``'s events after ``start`` (the route's and the fast
    lane's): a revoked ``key`` ends it (with auth: the key is asked for every
    ``key_recheck_s`` beside the stream, not around each of its writes)."""

    async def events() -> AsyncIterator[bytes]:
        async for batch in run.follow_batches(start):  # one write for all the events ready
            chunk = b"".join(sse_event(seq, data) for seq, data in batch)
            # A run on a worker says when its end came with this batch: the end frame goes
            # in the same write (a socket write a run fewer).
            status = getattr(run, "ended", None)
            if status is not None:
                yield Last(chunk + end_frame(run.id, status))
                return
            yield chunk
        yield Last(end_frame(run.id, await run.end_status()))

    if gw.config.no_auth:
        return EventStream(events(), gw.streams)

    async def revoked() -> bytes | None:
        with contextlib.suppress(StoreError):  # down a moment: ask again later
            if await authenticate(gw.store, key) is None:
                return REVOKED
        return None

    return EventStream(events(), gw.streams, guard=revoked, guard_s=gw.config.key_recheck_s)


REVOKED = frame('{"status":401,"message":"the API key was revoked"}', "error")


def end_frame(run_id: str, status: str) -> bytes:
    return frame(orjson.dumps({"run_id": run_id, "status": status}).decode(), "end")


def sse_event(seq: int, data: bytes) -> bytes:
    """An event's SSE frame, byte for byte what sse_starlette's ``ServerSentEvent(data, id,
    event="event")`` encodes (the event JSON is one line: orjson escapes newlines)."""
    return b"id: %d\r\nevent: event\r\ndata: %s\r\n\r\n" % (seq, data)


def _int(value: str | None) -> int:
    try:
        return max(0, int(value)) if value else 0
    except ValueError:
        return 0


class Socket:
    """One WebSocket connection: its caller, a send lock, and the runs it follows."""

    def __init__(self, ws: WebSocket, gw: Gateway, who: Principal) -> None:
        self.ws, self.gw, self.who = ws, gw, who
        self._lock = asyncio.Lock()
        self.follows: dict[str, asyncio.Task[None]] = {}

    async def send(self, frame: dict[str, Any]) -> None:
        async with self._lock:
            await self.ws.send_text(orjson.dumps(frame, default=str).decode())

    async def error(self, status: int, message: str) -> None:
        await self.send({"type": "error", "status": status, "message": message})

    def follow(self, run: Followed, after: int = 0) -> None:
        old = self.follows.pop(run.id, None)
        if old is not None:
            old.cancel()
        self.follows[run.id] = asyncio.get_running_loop().create_task(self._forward(run, after))

    async def _forward(self, run: Followed, after: int) -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            async for _, data in run.follow(after):
                async with self._lock:
                    await self.ws.send_text('{"type":"event","event":' + data.decode() + "}")
            await self.send({"type": "run.end", "run_id": run.id,
                             "status": await run.end_status()})

    async def handle(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "run":
            body = RunRequest.model_validate({k: v for k, v in frame.items() if k != "type"})
            run = await self.gw.submit(self.who, body.agent or DEFAULT_AGENT, body.task,
                                       body.session, body.stream)
            await self.send({"type": "run.accepted", "run_id": run.id})
            self.follow(run)
        elif kind == "subscribe":
            run = await self.gw.run(self.who, str(frame.get("run_id")))
            self.follow(run, _int(str(frame.get("after") or 0)))
        elif kind == "abort":
            run = await self.gw.abort(self.who, str(frame.get("run_id")))
            await self.send({"type": "abort.accepted", "run_id": run.id})
        elif kind == "input":
            run_id = str(frame.get("run_id"))
            given = InputRequest.model_validate(
                {k: v for k, v in frame.items() if k not in ("type", "run_id")})
            await self.gw.answer(self.who, run_id, given.id,
                           Answer(given.approved, given.answer, given.reason))
            await self.send({"type": "input.accepted", "run_id": run_id, "id": given.id})
        else:
            await self.error(400, "frame type must be run, subscribe, abort or input")

    async def watch_key(self, key: str | None, every_s: float) -> None:
        """Close the socket once its key is revoked (``thinkloop keys revoke``, which may
        run in another process: the store is asked again every ``every_s``)."""
        while True:
            await asyncio.sleep(every_s)
            try:
                valid = await authenticate(self.gw.store, key) is not None
            except StoreError:  # the store is down a moment: ask again next time
                continue
            if not valid:
                with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                    await self.error(401, "the API key was revoked")
                    async with self._lock:
                        await self.ws.close(code=4401, reason="API key revoked")
                return

    async def close(self) -> None:
        for task in self.follows.values():
            task.cancel()
        if self.follows:
            await asyncio.gather(*self.follows.values(), return_exceptions=True)


@router.websocket("/ws")
async def websocket(ws: WebSocket) -> None:
    gw: Gateway = ws.app.state.gateway
    who = await identify(gw, ws.headers, ws.scope)
    if who is None:  # refused at the handshake (the doors answer 401 before this)
        await ws.close(code=4401)
        return
    await ws.accept()
    sock = Socket(ws, gw, who)
    key = key_from_headers(ws.headers.get("authorization"), ws.headers.get("x-api-key"))
    watch = None if gw.config.no_auth else asyncio.get_running_loop().create_task(
        sock.watch_key(key, gw.config.key_recheck_s))
    try:
        while True:
            raw = await ws.receive_text()
            try:
                frame = orjson.loads(raw)
                if not isinstance(frame, dict):
                    raise ValueError("a frame is a JSON object")
                await sock.handle(frame)
            except (ValueError, ValidationError, ConfigError) as exc:
                await sock.error(400 if not isinstance(exc, UnknownAgentError) else 404,
                                 _message(exc))
            except NotFoundError as exc:
                await sock.error(404, str(exc))
            except RunLimitError as exc:
                await sock.error(429, str(exc))
            except RequestError as exc:  # ConflictError, a paused session, ...
                await sock.error(409, str(exc))
    except WebSocketDisconnect:
        pass
    finally:
        if watch is not None:
            watch.cancel()
        await sock.close()


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return validation_summary(exc, root="frame")
    return str(exc)
