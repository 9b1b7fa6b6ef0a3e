"""Any server that speaks OpenAI Chat Completions: OpenAI itself, vLLM, llama.cpp, Ollama...

Transport (``HttpTransport``), wire format (``openai_wire``) and quirks (``WireQuirks``) are
separate so presets differ only in data.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from thinkloop.core.model import ModelSettings
from thinkloop.core.types import Message, ModelResponse, TextDelta, ToolSpec
from thinkloop.models.openai_wire import (
    StreamAccumulator,
    ToolsEncoder,
    WireQuirks,
    decode_response,
    encode_messages,
    request_body,
)
from thinkloop.models.pricing import priced
from thinkloop.models.retry import RetryPolicy, with_retries
from thinkloop.models.transport import Transport, default_transport

DEFAULT_QUIRKS = WireQuirks()
DEFAULT_RETRY = RetryPolicy()


class OpenAICompatModel:
    def __init__(
        self,
        model_id: str,
        *,
        base_url: str,
        api_key: str | None = None,
        name: str | None = None,
        quirks: WireQuirks = DEFAULT_QUIRKS,
        retry: RetryPolicy = DEFAULT_RETRY,
        transport: Transport | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.model_id = model_id
        self.name = name or f"openai:{model_id}"
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.quirks = quirks
        self.retry = retry
        self.transport = transport or default_transport()
        self.headers = {"content-type": "application/json", **(headers or {})}
        if api_key:
            self.headers["authorization"] = f"Bearer {api_key}"
        self._tools = ToolsEncoder()

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings,
        stream: bool,
    ) -> bytes:
        return request_body(
            self.model_id,
            encode_messages(messages, self.quirks),
            self._tools.encode(tools) if tools else None,
            settings,
            stream=stream,
            quirks=self.quirks,
        )

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse:
        body = self._body(messages, tools, settings, False)

        async def attempt() -> ModelResponse:
            raw = await self.transport.post(self.url, body, self.headers, settings.timeout_s)
            return decode_response(raw)

        return priced(await with_retries(self.retry, attempt), self.name)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        body = self._body(messages, tools, settings, True)

        async def opened() -> tuple[AsyncIterator[list[str]], list[str] | None]:
            # Retry only the opening of the stream; a stream that broke mid-way is not replayed.
            events = self.transport.post_sse_batches(self.url, body, self.headers,
                                                     settings.timeout_s)
            first = await anext(events, None)
            return events, first

        events, first = await with_retries(self.retry, opened)
        acc = StreamAccumulator()
        pending = [first] if first is not None else []
        async for batch in _chain(pending, events):
            # A read's events are folded before anything downstream sees them: one delta per
            # kind and read, not one per token (each costs a hop and a chunk event).
            text, kind = "", "text"
            for raw in batch:
                piece, piece_kind = acc.feed(raw)
                if not piece:
                    continue
                if text and piece_kind != kind:
                    yield TextDelta(text, kind)  # type: ignore[arg-type]
                    text = ""
                text, kind = text + piece, piece_kind
            if text:
                yield TextDelta(text, kind)  # type: ignore[arg-type]
        yield priced(acc.response(), self.name)

    async def aclose(self) -> None:
        await self.transport.aclose()


async def _chain(first: list[list[str]], rest: AsyncIterator[list[str]]
                 ) -> AsyncIterator[list[str]]:
    for item in first:
        yield item
    async for item in rest:
        yield item
