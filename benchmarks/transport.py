"""The transport candidates side by side (issue 38, goal 0): client CPU per request.

One loopback server in a subprocess (raw asyncio + ``httptools``, uvloop when installed, so
it has its own core and answers at once) serves a chat-completion-sized JSON answer with a
``content-length`` and, for ``/sse``, twenty ``data:`` events in a chunked body. Each
candidate posts the same 2 KB JSON body, reads the whole answer (or every SSE event), at 1
and at 200 concurrent requests, over plain HTTP and over TLS on a loopback self-signed
certificate (``trustme``):

* aiohttp        the tuned session thinkloop uses (TCPConnector(limit=0), one ClientTimeout)
* mini           a small client on asyncio + ``httptools`` (the parser uvicorn uses): a pool of
                 keep-alive connections per origin, chunked decoding, SSE lines, TLS through
                 asyncio, one deadline per request; nothing else (no redirects, proxies, auth)
* pyreqwest      Rust ``reqwest`` on its own tokio runtime
* rnet           Rust ``wreq`` (a reqwest fork) on its own tokio runtime
* httpr          Rust ``reqwest``; its AsyncClient runs the blocking client in a thread pool

``+uvloop`` rows run the same client on uvloop. Every figure is this process's CPU time per
request (``time.process_time``: all threads, so the Rust runtimes' threads count too), the
median over ``--repeat`` repeats, and its ratio to aiohttp on asyncio taken within each repeat
(the machine is shared; only same-run ratios mean anything).

Usage: python benchmarks/transport.py [--requests 2000] [--repeat 3] [--only aiohttp mini]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, Protocol

import httptools

ANSWER = (b'{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,'
          b'"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1",'
          b'"type":"function","function":{"name":"echo","arguments":"{\\"text\\":\\"hi\\"}"}}]},'
          b'"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":120,"completion_tokens":9,'
          b'"total_tokens":129}}')
EVENTS = 20
BODY = b'{"model":"m","messages":[' + b",".join(
    b'{"role":"user","content":"' + b"x" * 180 + b'"}' for _ in range(10)) + b"]}"
HEADERS = {"content-type": "application/json", "authorization": "Bearer x"}


# ---------------------------------------------------------------- the server (subprocess)

class _ServerProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_url(self, url: bytes) -> None:
        self.url = url

    def on_message_complete(self) -> None:
        if self.url.endswith(b"/sse"):
            chunks = [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                      b"transfer-encoding: chunked\r\n\r\n"]
            for i in range(EVENTS):
                event = b'data: {"i":%d,"choices":[{"delta":{"content":"tok"}}]}\n\n' % i
                chunks.append(b"%x\r\n%s\r\n" % (len(event), event))
            chunks.append(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
            self.transport.write(b"".join(chunks))
        else:
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))
        self.url = b""


def serve(cert_dir: str) -> None:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass

    async def main() -> None:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(f"{cert_dir}/server.pem")
        loop = asyncio.get_running_loop()
        plain = await loop.create_server(_ServerProtocol, "127.0.0.1", 0, backlog=2048)
        tls = await loop.create_server(_ServerProtocol, "127.0.0.1", 0, ssl=ctx, backlog=2048)
        ports = [s.getsockname()[1] for s in (*plain.sockets, *tls.sockets)]
        print(*ports, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# ---------------------------------------------------------------- the small httptools client

class _Conn(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: a request at a time, the answer through a queue."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.reusable = False
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.chunks.put_nowait(None)

    def on_body(self, body: bytes) -> None:
        self.chunks.put_nowait(body)

    def on_message_complete(self) -> None:
        self.reusable = self.parser.should_keep_alive()
        self.chunks.put_nowait(None)


class MiniClient:
    """POST to one origin over a pool of keep-alive connections."""

    def __init__(self, host: str, port: int, ssl_ctx: ssl.SSLContext | None) -> None:
        self.host, self.port, self.ssl = host, port, ssl_ctx
        self.idle: list[_Conn] = []
        self.head = (f"Host: {host}:{port}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in HEADERS.items())).encode()

    async def _conn(self) -> _Conn:
        while self.idle:
            conn = self.idle.pop()
            if not conn.lost:
                return conn
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            _Conn, self.host, self.port, ssl=self.ssl,
            server_hostname=self.host if self.ssl else None)
        return conn

    async def _stream(self, path: str, body: bytes, timeout_s: float) -> AsyncIterator[bytes]:
        async with asyncio.timeout(timeout_s):
            conn = await self._conn()
            conn.transport.write(b"POST %s HTTP/1.1\r\n%scontent-length: %d\r\n\r\n%s" % (
                path.encode(), self.head, len(body), body))
            while (chunk := await conn.chunks.get()) is not None:
                yield chunk
            if conn.reusable and not conn.lost:
                conn.reusable = False
                self.idle.append(conn)
            else:
                conn.transport.close()

    async def post(self, path: str, body: bytes, timeout_s: float = 60.0) -> bytes:
        return b"".join([c async for c in self._stream(path, body, timeout_s)])

    async def sse(self, path: str, body: bytes, timeout_s: float = 60.0) -> AsyncIterator[bytes]:
        buf = b""
        async for chunk in self._stream(path, body, timeout_s):
            buf += chunk
            *events, buf = buf.split(b"\n\n")
            for event in events:
                for line in event.split(b"\n"):
                    if line.startswith(b"data:"):
                        yield line[5:].lstrip()

    async def aclose(self) -> None:
        for conn in self.idle:
            conn.transport.close()


# ---------------------------------------------------------------- the candidates

def _sse_lines(buf: bytes, chunk: bytes) -> tuple[bytes, list[bytes]]:
    buf += chunk
    *events, buf = buf.split(b"\n\n")
    return buf, [line[5:].lstrip() for e in events for line in e.split(b"\n")
                 if line.startswith(b"data:")]


class Candidate(Protocol):
    async def post(self, path: str) -> bytes: ...
    async def sse(self, path: str) -> int: ...
    async def aclose(self) -> None: ...


class AiohttpC:
    def __init__(self, base: str, ca: str) -> None:
        import aiohttp
        self.base = base
        ctx = ssl.create_default_context(cafile=ca)
        self.s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ssl=ctx))
        self.t = aiohttp.ClientTimeout(total=60, sock_connect=10)

    async def post(self, path: str) -> bytes:
        async with self.s.post(self.base + path, data=BODY, headers=HEADERS, timeout=self.t) as r:
            return await r.read()

    async def sse(self, path: str) -> int:
        n, buf = 0, b""
        async with self.s.post(self.base + path, data=BODY, headers=HEADERS, timeout=self.t) as r:
            async for chunk in r.content.iter_any():
                buf, lines = _sse_lines(buf, chunk)
                n += len(lines)
        return n

    async def aclose(self) -> None:
        await self.s.close()


class MiniC:
    def __init__(self, base: str, ca: str) -> None:
        ctx = ssl.create_default_context(cafile=ca) if base.startswith("https") else None
        port = int(base.rsplit(":", 1)[1])
        self.c = MiniClient("127.0.0.1", port, ctx)

    async def post(self, path: str) -> bytes:
        return await self.c.post(path, BODY)

    async def sse(self, path: str) -> int:
        return len([e async for e in self.c.sse(path, BODY)])

    async def aclose(self) -> None:
        await self.c.aclose()


class PyreqwestC:
    def __init__(self, base: str, ca: str) -> None:
        from pyreqwest.client import ClientBuilder
        with open(ca, "rb") as f:
            pem = f.read()
        self.base = base
        self.c = (ClientBuilder().add_root_certificate_pem(pem).timeout(timedelta(seconds=60))
                  .connect_timeout(timedelta(seconds=10)).http1_only().build())

    async def post(self, path: str) -> bytes:
        r = await self.c.post(self.base + path).headers(HEADERS).body_bytes(BODY).build().send()
        return bytes(await r.bytes())

    async def sse(self, path: str) -> int:
        n, buf = 0, b""
        req = self.c.post(self.base + path).headers(HEADERS).body_bytes(BODY).build_streamed()
        async with req as r:
            while (chunk := await r.body_reader.read_chunk()) is not None:
                buf, lines = _sse_lines(buf, bytes(chunk))
                n += len(lines)
        return n

    async def aclose(self) -> None:
        await self.c.close()


class RnetC:
    def __init__(self, base: str, ca: str) -> None:
        import pathlib

        import rnet
        self.base = base
        self.c = rnet.Client(verify=pathlib.Path(ca), timeout=60, connect_timeout=10,
                             http1_only=True)

    async def post(self, path: str) -> bytes:
        r = await self.c.post(self.base + path, body=BODY, headers=HEADERS)
        return await r.bytes()

    async def sse(self, path: str) -> int:
        n, buf = 0, b""
        r = await self.c.post(self.base + path, body=BODY, headers=HEADERS)
        async with r.stream() as stream:
            async for chunk in stream:
                buf, lines = _sse_lines(buf, chunk)
                n += len(lines)
        return n

    async def aclose(self) -> None:
        pass


class HttprC:
    def __init__(self, base: str, ca: str) -> None:
        import httpr
        self.base = base
        self.c = httpr.AsyncClient(ca_cert_file=ca, timeout=60, max_concurrency=256)

    async def post(self, path: str) -> bytes:
        r = await self.c.post(self.base + path, content=BODY, headers=HEADERS)
        return bytes(r.content)

    async def sse(self, path: str) -> int:
        raise NotImplementedError

    async def aclose(self) -> None:
        await self.c.aclose()


CANDIDATES: dict[str, Callable[[str, str], Candidate]] = {
    "aiohttp": AiohttpC, "mini": MiniC, "pyreqwest": PyreqwestC, "rnet": RnetC, "httpr": HttprC}


# ---------------------------------------------------------------- measuring

async def _drive(c: Candidate, mode: str, n: int, concurrency: int) -> None:
    async def one() -> None:
        if mode == "sse":
            assert await c.sse("/v1/sse") == EVENTS + 1
        else:
            assert len(await c.post("/v1/chat/completions")) == len(ANSWER)

    left = n

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def sample(name: str, uv: bool, base: str, ca: str, mode: str, n: int, conc: int) -> float:
    """CPU µs per request for one candidate, on a fresh event loop."""
    factory = None
    if uv:
        import uvloop
        factory = uvloop.new_event_loop

    async def go() -> float:
        c = CANDIDATES[name](base, ca)
        try:
            await _drive(c, mode, min(n, 200), conc)  # connect and warm up
            cpu = time.process_time()
            await _drive(c, mode, n, conc)
            return (time.process_time() - cpu) / n * 1e6
        finally:
            await c.aclose()

    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(go())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", nargs="*", default=list(CANDIDATES))
    p.add_argument("--serve", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve)
        return
    import trustme
    ca = trustme.CA()
    tmp = tempfile.TemporaryDirectory()
    ca.cert_pem.write_to_path(f"{tmp.name}/ca.pem")
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        f"{tmp.name}/server.pem")
    server = subprocess.Popen([sys.executable, __file__, "--serve", tmp.name],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        plain, tls = server.stdout.readline().split()
        table(args, {"http": f"http://127.0.0.1:{plain}", "https": f"https://127.0.0.1:{tls}"},
              f"{tmp.name}/ca.pem")
    finally:
        server.terminate()
        server.wait()
        tmp.cleanup()


def table(args: argparse.Namespace, bases: dict[str, str], ca: str) -> None:
    try:
        import uvloop  # noqa: F401
        loops = [False, True]
    except ImportError:
        loops = [False]
    rows = [(n, uv) for n in args.only for uv in loops]
    cases = [(scheme, mode, conc) for scheme in bases for mode in ("post", "sse")
             for conc in (1, 200)]
    print(f"load {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores; "
          f"{args.requests} requests per sample, median of {args.repeat}")
    print("CPU µs per request (ratio to aiohttp on asyncio, same repeat)")
    header = f"{'client':<18}" + "".join(f"{s}/{m}/c{c:<4}".rjust(22) for s, m, c in cases)
    print(header)
    for name, uv in rows:
        cells = []
        for scheme, mode, conc in cases:
            if name == "httpr" and mode == "sse":
                cells.append("n/a".rjust(22))
                continue
            us, ratios = [], []
            for _ in range(args.repeat):
                base = sample("aiohttp", False, bases[scheme], ca, mode, args.requests, conc)
                mine = sample(name, uv, bases[scheme], ca, mode, args.requests, conc)
                us.append(mine)
                ratios.append(mine / base)
            cells.append(f"{statistics.median(us):7.0f} ({statistics.median(ratios):4.2f}x)"
                         .rjust(22))
        label = name + (" +uvloop" if uv else "")
        print(f"{label:<18}" + "".join(cells), flush=True)
    print(f"load {os.getloadavg()[0]:.1f} (1 min) at the end")


if __name__ == "__main__":
    main()
