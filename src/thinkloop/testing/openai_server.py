"""A small deterministic OpenAI-compatible server on loopback, for tests and benchmarks.

It speaks just enough HTTP/1.1 (keep-alive, Content-Length, chunked SSE) to be driven by any
real client. Two ways to decide a reply:

* scripted: ``server.enqueue(Reply(...))`` queues exact replies (status, body, delay), which is
  how tests inject 429 / 5xx / context-overflow faults;
* automatic, when the queue is empty: a model named ``steps-N`` asks for one ``echo`` tool call
  per step until the request holds N tool results, then answers. This is the benchmark workload.

Every request body is recorded in ``server.requests`` for assertions.

Run standalone: ``python -m thinkloop.testing.openai_server --port 8765``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson

_STEPS = re.compile(r"steps-(\d+)")


@dataclass
class Reply:
    """One scripted answer. ``body`` dicts are JSON-encoded; ``sse`` sends events instead."""

    status: int = 200
    body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    sse: list[dict[str, Any]] | None = None
    # Seconds between streamed events, as a real model's tokens arrive over time; without
    # it a stream comes in one burst, which a client reads (and folds) as one delta.
    pace_s: float = 0.0


def completion(
    content: str | None = None,
    tool_calls: list[tuple[str, dict[str, Any]]] | None = None,
    *,
    model: str = "fake",
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    reasoning: str | None = None,
) -> dict[str, Any]:
    """Build a Chat Completions response body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": orjson.dumps(args).decode()},
            }
            for i, (name, args) in enumerate(tool_calls)
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def stream_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Split a completion body into the chunk events a streaming server would send."""
    msg = body["choices"][0]["message"]
    model = body.get("model", "fake")
    events: list[dict[str, Any]] = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events.append(chunk({"role": "assistant", "content": ""}))
    text = msg.get("content") or ""
    # Token-sized pieces (8 characters), except that a very long text comes in at most 4,096
    # pieces: a megabyte in 131,250 events would test this server's speed, not the client's.
    step = max(8, -(-len(text) // 4096))
    for i in range(0, len(text), step):
        events.append(chunk({"content": text[i : i + step]}))
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc["function"]
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": tc["id"],
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        args = fn["arguments"]
        half = len(args) // 2
        for part in (args[:half], args[half:]):
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
    events.append(chunk({}, body["choices"][0]["finish_reason"]))
    final = chunk({}, None)
    final["choices"] = []
    final["usage"] = body["usage"]
    events.append(final)
    return events


def auto_reply(request: dict[str, Any]) -> dict[str, Any]:
    """The benchmark workload: ``steps-N`` asks for N echo calls, one per step."""
    model = str(request.get("model", ""))
    m = _STEPS.search(model)
    steps = int(m.group(1)) if m else 0
    tools = [msg for msg in request.get("messages", ()) if msg.get("role") == "tool"]
    done = len(tools)
    # A long run's middle steps are compacted out of the history: the last result's
    # "step N" says how far the run got when the count of results no longer does.
    last = str(tools[-1].get("content", "")).split() if tools else []
    if len(last) > 1 and last[0] == "step" and last[1].isdigit():
        done = max(done, int(last[1]))
    if done < steps:
        return completion(tool_calls=[("echo", {"text": f"step {done + 1}"})], model=model)
    return completion(f"done after {done} steps", model=model)


class OpenAIServer:
    """Serve on 127.0.0.1 in a background thread: ``with OpenAIServer() as srv: srv.base_url``."""

    def __init__(self, port: int = 0, record: bool = True, delay_s: float = 0.0) -> None:
        self.port = port
        self.record = record
        self.delay_s = delay_s  # how long every automatic reply takes: a model's latency
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._queue: deque[Reply] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        # Open connections and their handler tasks, closed on stop: a connection left open
        # (a client's keep-alive pool) would otherwise leak a socket and a pending task.
        self._conns: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}
        # pause(): requests wait (counted in ``held``) until resume(): a test can catch every
        # run of a fleet waiting for its model, at a known point, and act then.
        self._open: asyncio.Event | None = None
        self.held = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def clear(self) -> None:
        self._queue.clear()
        self.requests.clear()
        self.headers.clear()

    def pause(self) -> None:
        """Hold every request from now on until :meth:`resume`."""
        assert self._loop is not None and self._open is not None
        self._loop.call_soon_threadsafe(self._open.clear)

    def resume(self) -> None:
        assert self._loop is not None and self._open is not None
        self._loop.call_soon_threadsafe(self._open.set)

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> OpenAIServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_thread, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start")

    def stop(self) -> None:
        if self._loop and self._server and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread:
            self._thread.join(10)
            self._thread = None

    def _run_thread(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._server = loop.run_until_complete(self.serve())
        self._ready.set()
        loop.run_forever()
        # Stopped: close the listener and every connection, and let the handlers finish
        # inside this loop before it closes (no unclosed sockets, no pending tasks).
        loop.run_until_complete(self.shutdown())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    async def shutdown(self) -> None:
        """Stop listening, close every open connection and wait for their handlers."""
        if self._open is not None:
            self._open.set()  # held requests end as their connections close
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        tasks = list(self._conns)
        for task, writer in list(self._conns.items()):
            writer.close()
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._conns.clear()

    async def serve(self) -> asyncio.Server:
        self._open = asyncio.Event()
        self._open.set()
        server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, backlog=1024)
        self.port = server.sockets[0].getsockname()[1]
        return server

    # -- HTTP --------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns[task] = writer
        try:
            await self._serve_connection(reader, writer)
        finally:
            self._conns.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length", "0"))
                raw = await reader.readexactly(length) if length else b""
                await self._respond(writer, raw, headers)
                if headers.get("connection", "").lower() == "close":
                    break

    async def _respond(
        self, writer: asyncio.StreamWriter, raw: bytes, headers: dict[str, str]
    ) -> None:
        request = orjson.loads(raw) if raw else {}
        if self._open is not None and not self._open.is_set():
            self.held += 1
            try:
                await self._open.wait()
            finally:
                self.held -= 1
        if self.record:
            self.requests.append(request)
            self.headers.append(headers)
        reply = (self._queue.popleft() if self._queue
                 else Reply(body=auto_reply(request), delay_s=self.delay_s))
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if request.get("stream") and reply.status == 200 and reply.sse is None:
            assert isinstance(reply.body, dict)
            reply.sse = stream_events(reply.body)
        if reply.sse is not None and reply.status == 200:
            await self._send_sse(writer, reply)
            return
        body = reply.body if reply.body is not None else {}
        data = body.encode() if isinstance(body, str) else orjson.dumps(body)
        extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        writer.write(
            f"HTTP/1.1 {reply.status} X\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n{extra}\r\n".encode()
            + data
        )
        await writer.drain()

    async def _send_sse(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for event in [*(reply.sse or ()), None]:
            payload = b"data: " + (orjson.dumps(event) if event else b"[DONE]") + b"\n\n"
            writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            await writer.drain()
            if reply.pace_s:
                await asyncio.sleep(reply.pace_s)
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay-ms", type=float, default=0.0,
                        help="how long every automatic reply takes (a model's latency)")
    args = parser.parse_args()

    async def run() -> None:
        srv = OpenAIServer(args.port, record=False, delay_s=args.delay_ms / 1000)
        server = await srv.serve()
        print(f"listening on {srv.base_url}", flush=True)
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
