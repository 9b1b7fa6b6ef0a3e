"""The gateway's SSE response: sse_starlette's bytes and headers, its ping, its ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest
from sse_starlette import EventSourceResponse, ServerSentEvent

from thinkloop.server.sse import EventStream, Last, Streams, frame, stop_streams_on_exit


class Client:
    """The ASGI server's side of one request: what the app sent, and a disconnect to give."""

    def __init__(self, method: str = "GET") -> None:
        self.scope = {"type": "http", "method": method, "path": "/", "headers": []}
        self.sent: list[MutableMapping[str, Any]] = []
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.inbox.put_nowait({"type": "http.request", "body": b"", "more_body": False})

    async def receive(self) -> MutableMapping[str, Any]:
        return await self.inbox.get()

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    @property
    def complete(self) -> bool:
        last = self.sent[-1]
        return last["type"] == "http.response.body" and not last.get("more_body", False)


async def chunks(items: list[bytes], closed: list[bool], wait: asyncio.Event | None = None
                 ) -> AsyncIterator[bytes]:
    try:
        for item in items:
            yield item
        if wait is not None:
            await wait.wait()
    finally:
        closed.append(True)


def test_the_bytes_and_headers_are_sse_starlettes() -> None:
    async def main() -> tuple[Client, Client]:
        ours, theirs = Client(), Client()
        data = [b"id: 1\r\nevent: event\r\ndata: {}\r\n\r\n", frame('{"status":"x"}', "end")]
        await EventStream(chunks(data, []), Streams())(ours.scope, ours.receive, ours.send)

        async def legacy() -> AsyncIterator[ServerSentEvent | bytes]:
            yield data[0]
            yield ServerSentEvent(data='{"status":"x"}', event="end")

        response = EventSourceResponse(legacy(), ping=15, headers={"Cache-Control": "no-store"})
        await response(theirs.scope, theirs.receive, theirs.send)
        return ours, theirs

    ours, theirs = asyncio.run(main())
    assert ours.sent[0] == theirs.sent[0]  # status and headers, in order
    assert ours.body() == theirs.body()
    assert ours.complete and theirs.complete


def test_a_last_chunk_goes_out_with_the_response_end_in_one_message() -> None:
    """The end frame and the body's end are one ASGI message (one socket write), the bytes
    as before; the source is closed."""
    async def main() -> tuple[Client, list[bool]]:
        client, closed = Client(), list[bool]()
        data = [b"id: 1\r\nevent: event\r\ndata: {}\r\n\r\n", Last(frame("{}", "end")),
                b"never sent"]
        await EventStream(chunks(data, closed), Streams())(client.scope, client.receive,
                                                            client.send)
        return client, closed

    client, closed = asyncio.run(main())
    assert [(m.get("body"), m.get("more_body")) for m in client.sent[1:]] == [
        (b"id: 1\r\nevent: event\r\ndata: {}\r\n\r\n", True),
        (b"event: end\r\ndata: {}\r\n\r\n", False)]
    assert closed == [True]


def test_a_last_chunk_taken_before_a_stop_still_goes_out_with_the_end() -> None:
    """A stream stopped (the server stopping) once its Last chunk was taken, while its
    watcher winds down, still ends with that chunk: it was due."""
    async def main() -> Client:
        client = Client()
        stream: EventStream | None = None

        async def source() -> AsyncIterator[bytes]:
            assert stream is not None
            stream.stop()  # delivered at the writer's next wait: the watcher's end
            yield Last(frame("{}", "end"))

        stream = EventStream(source(), Streams())
        await stream(client.scope, client.receive, client.send)
        return client

    client = asyncio.run(main())
    assert [(m.get("body"), m.get("more_body")) for m in client.sent[1:]] == [
        (b"event: end\r\ndata: {}\r\n\r\n", False)]


def test_a_quiet_stream_is_pinged() -> None:
    async def main() -> Client:
        client, release = Client(), asyncio.Event()
        stream = EventStream(chunks([b"a"], [], release), Streams(), ping_s=0.05)
        task = asyncio.create_task(stream(client.scope, client.receive, client.send))
        await asyncio.sleep(0.18)
        release.set()
        await task
        return client

    client = asyncio.run(main())
    bodies = [m["body"] for m in client.sent[1:-1]]
    assert bodies[0] == b"a"
    assert len(bodies) >= 3 and all(b.startswith(b": ping - ") and b.endswith(b"\r\n\r\n")
                                    for b in bodies[1:])
    assert client.complete


def test_the_client_going_ends_the_stream_and_closes_its_source() -> None:
    async def main() -> tuple[Client, list[bool], int]:
        client, closed = Client(), list[bool]()
        streams = Streams()
        stream = EventStream(chunks([b"a"], closed, asyncio.Event()), streams)
        task = asyncio.create_task(stream(client.scope, client.receive, client.send))
        await asyncio.sleep(0.02)
        open_before = len(streams)
        client.inbox.put_nowait({"type": "http.disconnect"})
        await asyncio.wait_for(task, 2)
        assert not task.cancelled()
        return client, closed, open_before

    client, closed, open_before = asyncio.run(main())
    assert open_before == 1 and closed == [True]
    assert client.complete


def test_the_server_stopping_ends_every_stream() -> None:
    async def main() -> list[Client]:
        from sse_starlette.sse import AppStatus

        streams = Streams()
        clients = [Client(), Client()]
        tasks = [asyncio.create_task(EventStream(chunks([b"a"], [], asyncio.Event()), streams)(
            c.scope, c.receive, c.send)) for c in clients]
        watcher = asyncio.create_task(stop_streams_on_exit(streams))
        await asyncio.sleep(0.02)
        assert len(streams) == 2
        AppStatus.should_exit = True
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), 3)
        finally:
            AppStatus.should_exit = False
            watcher.cancel()
        assert len(streams) == 0
        return clients

    for client in asyncio.run(main()):
        assert client.body() == b"a" and client.complete


def test_a_head_request_gets_the_headers_only() -> None:
    async def main() -> tuple[Client, list[bool]]:
        client, closed = Client("HEAD"), list[bool]()
        source = chunks([b"a"], closed)
        await EventStream(source, Streams())(client.scope, client.receive, client.send)
        return client, closed

    client, closed = asyncio.run(main())
    assert client.sent[0]["status"] == 200 and client.body() == b"" and client.complete
    assert closed == []  # never started


def test_a_revoked_key_ends_a_stream_whose_events_keep_coming(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With auth the key is asked for every ``key_recheck_s`` beside the stream, events or
    not (it was asked only after ``key_recheck_s`` without an event, so a busy run's stream
    outlived its revoked key); the stream ends with the error frame, its source closed."""
    from types import SimpleNamespace

    from thinkloop.server import streams

    asked: list[str | None] = []

    async def authenticate(store: Any, key: str | None) -> Any:
        asked.append(key)
        return None  # revoked

    monkeypatch.setattr(streams, "authenticate", authenticate)
    closed: list[bool] = []

    class Run:
        id, ended = "r1", None

        async def follow_batches(self, after: int) -> AsyncIterator[list[tuple[int, bytes]]]:
            try:
                for seq in range(after + 1, after + 201):  # an event every 10 ms for 2 s
                    yield [(seq, b"{}")]
                    await asyncio.sleep(0.01)
            finally:
                closed.append(True)

        async def end_status(self) -> str:
            return "completed"

    gw = SimpleNamespace(config=SimpleNamespace(no_auth=False, key_recheck_s=0.1),
                         streams=Streams(), store=None)

    async def main() -> Client:
        client = Client()
        stream = streams.event_stream(gw, Run(), 0, "tlk_key")  # type: ignore[arg-type]
        await stream(client.scope, client.receive, client.send)
        return client

    client = asyncio.run(main())
    body = client.body()
    assert body.endswith(b'event: error\r\ndata: {"status":401,"message":"the API key was '
                         b'revoked"}\r\n\r\n')
    assert b"event: end" not in body and b"id: 200\r\n" not in body
    assert asked[:1] == ["tlk_key"] and closed == [True] and client.complete


def test_a_guard_that_fails_ends_the_stream() -> None:
    """What the guard checks cannot be told: the stream ends (its source closed)."""
    async def guard() -> bytes | None:
        raise RuntimeError("the store broke")

    async def main() -> tuple[Client, list[bool]]:
        client, closed = Client(), list[bool]()
        stream = EventStream(chunks([b"a"], closed, asyncio.Event()), Streams(), guard=guard,
                             guard_s=0.01)
        await asyncio.wait_for(stream(client.scope, client.receive, client.send), 5)
        return client, closed

    client, closed = asyncio.run(main())
    assert client.body() == b"a" and client.complete and closed == [True]
