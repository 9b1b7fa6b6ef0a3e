"""The httptools transport against raw loopback servers that write exact bytes."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trustme

from thinkloop import Agent
from thinkloop.core.errors import ModelConnectionError, ModelRateLimitError, ModelTimeoutError
from thinkloop.core.model import ModelSettings
from thinkloop.core.types import TextDelta
from thinkloop.models.h1 import H1Transport
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.transport import HttpTransport
from thinkloop.testing.openai_server import OpenAIServer

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
H = {"content-type": "application/json"}


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head + await reader.readexactly(length)


async def _serve(handler: Handler, ctx: ssl.SSLContext | None = None) -> asyncio.Server:
    return await asyncio.start_server(handler, "127.0.0.1", 0, ssl=ctx)


async def _stop(server: asyncio.Server) -> None:
    server.close()
    await asyncio.sleep(0.05)  # the handlers see the client's close and close their side


def _url(server: asyncio.Server, scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"


async def test_keep_alive_reuses_one_connection_and_sends_the_exact_request() -> None:
    seen: list[bytes] = []
    conns = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal conns
        conns += 1
        for _ in range(3):
            seen.append(await _read_request(reader))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        writer.close()

    server = await _serve(handler)
    t = H1Transport()
    assert [await t.post(_url(server), b"{}", H, 5) for _ in range(3)] == [b"ok"] * 3
    await t.aclose()
    await _stop(server)
    assert conns == 1
    assert seen[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:")
    assert seen[0].endswith(b"content-type: application/json\r\n\r\n{}")


async def test_a_pooled_connection_the_server_dropped_is_retried_once() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        await reader.read(1)  # the next request arrives: drop it unanswered, as if idle-closed
        writer.close()

    server = await _serve(handler)
    t = H1Transport()
    assert await t.post(_url(server), b"{}", H, 5) == b"ok"
    assert await t.post(_url(server), b"{}", H, 5) == b"ok"
    await t.aclose()
    await _stop(server)


async def test_sse_over_tls_with_chunks_split_inside_lines() -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    stream = ('data: {"a":1}\r\n\r\ndata: x\u2028y\n\ndata: two\ndata: lines\r\r'
              ': c\n\ndata: [DONE]\n\n')
    raw = stream.encode()
    conns = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal conns
        conns += 1
        for _ in range(2):
            request = await _read_request(reader)
            assert b"accept: text/event-stream" in request
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            # 5-byte chunks split CRLFs and UTF-8 sequences; the last comes with the body's end.
            frames = [b"%x\r\n%s\r\n" % (len(raw[i:i + 5]), raw[i:i + 5])
                      for i in range(0, len(raw), 5)]
            frames[-1] += b"0\r\n\r\n"
            for frame in frames:
                writer.write(frame)
                await writer.drain()
        await reader.read(1)
        writer.close()

    server = await _serve(handler, server_ctx)
    t = H1Transport(ssl_context=client_ctx)
    got = [d async for d in t.post_sse(_url(server, "https"), b"{}", H, 5)]
    assert got == ['{"a":1}', "x\u2028y", "two\nlines"]
    assert [d async for d in t.post_sse(_url(server, "https"), b"{}", H, 5)] == got
    assert conns == 1  # the stream was read to its end: its connection was reused
    await t.aclose()
    await _stop(server)


async def test_a_get_sse_stream_sends_a_bodiless_get_and_reuses_its_connection() -> None:
    """GET an SSE endpoint (the gateway's run events): no body, no content-length; the
    ``event:`` and ``id:`` lines are not data; the stream read to its end frees its
    connection."""
    heads: list[bytes] = []
    body = b"id: 1\r\nevent: event\r\ndata: {\"id\":1}\r\n\r\nevent: end\r\ndata: {}\r\n\r\n"

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            heads.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                         b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            await writer.drain()
        await reader.read(1)
        writer.close()

    server = await _serve(handler)
    t = H1Transport()
    url = _url(server).replace("/v1/chat/completions", "/v1/runs/r1/events?after=0")
    port = server.sockets[0].getsockname()[1]
    for _ in range(2):
        assert [b async for b in t.get_sse_batches(url, {"x-token": "t"}, 5)] == [
            ['{"id":1}', "{}"]]
    await t.aclose()
    await _stop(server)
    assert len(heads) == 2  # one connection served both
    assert heads[0] == (b"GET /v1/runs/r1/events?after=0 HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n"
                        b"x-token: t\r\naccept: text/event-stream\r\n\r\n"
                        % port)


async def test_one_network_read_of_token_events_is_one_batch_and_one_delta_per_kind(
) -> None:
    """A read holding many token events is folded before anything acts on it: one batch from
    the transport, one delta per kind from the model (the text and its order unchanged)."""
    def event(delta: str) -> str:
        return f'data: {{"model":"m","choices":[{{"index":0,"delta":{delta}}}]}}\n\n'

    body = "".join([event('{"reasoning_content":"hmm "}'), event('{"reasoning_content":"ok"}'),
                    *(event(f'{{"content":"{w} "}}') for w in ("one", "two", "three")),
                    "data: [DONE]\n\n"]).encode()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            await _read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        await reader.read(1)
        writer.close()

    server = await _serve(handler)
    t = H1Transport()
    batches = [b async for b in t.post_sse_batches(_url(server), b"{}", H, 5)]
    assert len(batches) == 1 and len(batches[0]) == 5
    model = OpenAICompatModel("m", base_url=_url(server).removesuffix("/chat/completions"),
                              transport=t)
    items = [i async for i in model.stream([], [], ModelSettings())]
    assert items[:-1] == [TextDelta("hmm ok", "thought"), TextDelta("one two three ")]
    await t.aclose()
    await _stop(server)


async def test_failures_are_typed() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = await _read_request(reader)
        if b"slow" in body:
            await reader.read(1)  # never answers; ends when the client gives up
        elif b"limit" in body:
            writer.write(b"HTTP/1.1 429 Too Many\r\nretry-after: 3\r\n"
                         b"content-length: 4\r\n\r\nslow")
        elif b"close" in body:
            writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil close")
        else:
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await _serve(handler)
    t = H1Transport()
    url = _url(server)
    assert await t.post(url, b"close", H, 5) == b"until close"
    with pytest.raises(ModelRateLimitError) as info:
        await t.post(url, b"limit", H, 5)
    assert info.value.retry_after == 3.0
    with pytest.raises(ModelTimeoutError):
        await t.post(url, b"slow", H, 0.2)
    await asyncio.sleep(0.05)
    with pytest.raises(ModelConnectionError):
        await t.post(url, b"garbage", H, 5)
    server.close()
    await server.wait_closed()
    with pytest.raises(ModelConnectionError, match="cannot reach"):
        await t.post(url, b"{}", H, 5)
    await t.aclose()


@pytest.mark.parametrize("transport", [H1Transport, HttpTransport])
async def test_both_transports_drive_a_model(transport: Callable[[], H1Transport],
                                             openai_server: OpenAIServer) -> None:
    model = OpenAICompatModel("steps-0", base_url=openai_server.base_url, api_key="k",
                              transport=transport())
    result = await Agent(model, tools=[], guard=False).run("hi")
    assert result.status == "completed" and result.text == "done after 0 steps"
    await model.aclose()


async def test_the_aiohttp_transports_batches_reach_the_model_with_the_same_deltas() -> None:
    """The aiohttp transport yields one event a list (httpx-sse reads them one at a time): its
    batches are its events, and the model makes the same deltas of them, one an event."""
    def event(delta: str) -> str:
        return f'data: {{"model":"m","choices":[{{"index":0,"delta":{delta}}}]}}\n\n'

    body = "".join([event('{"reasoning_content":"hmm"}'), event('{"content":"one "}'),
                    event('{"content":"two"}'), "data: [DONE]\n\n"]).encode()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    server = await _serve(handler)
    t = HttpTransport()
    events = [d async for d in t.post_sse(_url(server), b"{}", H, 5)]
    batches = [b async for b in t.post_sse_batches(_url(server), b"{}", H, 5)]
    assert batches == [[e] for e in events] and len(events) == 3
    model = OpenAICompatModel("m", base_url=_url(server).removesuffix("/chat/completions"),
                              transport=t)
    items = [i async for i in model.stream([], [], ModelSettings())]
    assert items[:-1] == [TextDelta("hmm", "thought"), TextDelta("one "), TextDelta("two")]
    await t.aclose()
    await _stop(server)


_OLD_TRANSPORT = """
from collections.abc import AsyncIterator, Mapping
from thinkloop.models.h1 import H1Transport
from thinkloop.models.transport import HttpTransport, Transport

class PostSseOnly:
    async def post(self, url: str, body: bytes, headers: Mapping[str, str],
                   timeout_s: float) -> bytes:
        return b""

    async def post_sse(self, url: str, body: bytes, headers: Mapping[str, str],
                       timeout_s: float) -> AsyncIterator[str]:
        yield ""

    async def aclose(self) -> None:
        pass

ours: list[Transport] = [HttpTransport(), H1Transport()]
theirs: Transport = PostSseOnly()
"""


def test_a_transport_without_batches_is_a_type_error(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The model reads ``post_sse_batches`` through the protocol: a transport with only
    ``post_sse`` is refused by mypy, the two shipped ones are accepted."""
    from mypy import api

    import thinkloop

    # This checkout's sources, not the installed package's.
    monkeypatch.setenv("MYPYPATH", str(Path(thinkloop.__file__).parents[1]))
    # Not the project's configuration (it names the files to check); only the two
    # transports' modules are read, the rest of what they import is skipped (a minute less).
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nfollow_imports = skip\n"
                      "[mypy-thinkloop.models.transport,thinkloop.models.h1]\n"
                      "follow_imports = silent\n")
    out, _, status = api.run(["--config-file", str(config), "--strict", "--cache-dir",
                              str(tmp_path / "cache"), "-c", _OLD_TRANSPORT])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1 and len(errors) == 1, out
    assert errors[0].startswith("<string>:19: error: Incompatible types in assignment"), out
    assert "protocol member:\n<string>:19: note:     post_sse_batches\n" in out
