"""A loopback server that answers in the Anthropic Messages API shape, for the real SDK.

It reuses the OpenAI test server's HTTP handling (scripted ``Reply`` queue, recorded request
bodies and headers) and only changes how a stream is framed: Anthropic names each SSE event.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from thinkloop.testing.openai_server import OpenAIServer, Reply


def message(
    blocks: list[dict[str, Any]],
    stop_reason: str = "end_turn",
    *,
    model: str = "claude-test",
    input_tokens: int = 12,
    output_tokens: int = 7,
) -> dict[str, Any]:
    return {
        "id": "msg_test", "type": "message", "role": "assistant", "model": model,
        "content": blocks, "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Split a message into the stream events the Messages API sends for it."""
    start = {**body, "content": [], "stop_reason": None,
             "usage": {"input_tokens": body["usage"]["input_tokens"], "output_tokens": 1}}
    out: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(body["content"]):
        kind = block["type"]
        opening: dict[str, Any]
        if kind == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"][j:j + 5]}
                      for j in range(0, len(block["text"]), 5)]
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": block["signature"]}]
        else:
            opening = {**block, "input": {}}
            raw = orjson.dumps(block["input"]).decode()
            half = len(raw) // 2
            deltas = [{"type": "input_json_delta", "partial_json": part}
                      for part in (raw[:half], raw[half:])]
        out.append({"type": "content_block_start", "index": i, "content_block": opening})
        out += [{"type": "content_block_delta", "index": i, "delta": d} for d in deltas]
        out.append({"type": "content_block_stop", "index": i})
    out.append({"type": "message_delta",
                "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": body["usage"]["output_tokens"]}})
    out.append({"type": "message_stop"})
    return out


class AnthropicServer(OpenAIServer):
    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _send_sse(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for event in reply.sse or ():
            payload = (f"event: {event['type']}\n".encode() + b"data: " + orjson.dumps(event)
                       + b"\n\n")
            writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
