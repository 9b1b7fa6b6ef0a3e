"""An injected official ``openai`` client as a Model: ``OpenAISDKModel(AsyncOpenAI(), "gpt-4o")``.

For users who already configure the SDK (Azure, proxies, custom auth). The same wire encoding
and decoding as the lean provider is used, so both behave alike; the HTTP, and by default the
retries, are the SDK's own. Its errors are mapped onto thinkloop's tree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson

from thinkloop.core.model import ModelSettings
from thinkloop.core.types import Message, ModelResponse, TextDelta, ToolSpec
from thinkloop.models.openai_wire import (
    StreamAccumulator,
    WireQuirks,
    decode_response,
    encode_messages,
)
from thinkloop.models.pricing import priced
from thinkloop.models.retry import RetryPolicy
from thinkloop.models.sdk_errors import Sdk

# The SDK retries by itself (its max_retries); a second layer would multiply the attempts.
SDK_RETRIES = RetryPolicy(max_attempts=1)


SDK = Sdk("openai", "OpenAIError", "the OpenAI endpoint")


class OpenAISDKModel:
    def __init__(
        self,
        client: Any,
        model_id: str,
        *,
        name: str | None = None,
        quirks: WireQuirks = WireQuirks(),  # noqa: B008 - frozen, shared safely
        retry: RetryPolicy = SDK_RETRIES,
    ) -> None:
        self.client = client
        self.model_id = model_id
        self.name = name or f"openai:{model_id}"
        self.quirks = quirks
        self.retry = retry

    def _params(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model_id,
            "messages": orjson.loads(encode_messages(messages, self.quirks)),
            "timeout": settings.timeout_s,
        }
        if tools:
            params["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description,
                                                  "parameters": t.parameters}}
                for t in tools
            ]
            if settings.tool_choice:
                params["tool_choice"] = settings.tool_choice
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            params["max_tokens"] = settings.max_tokens
        if settings.reasoning_effort is not None and self.quirks.reasoning_effort:
            params["reasoning_effort"] = settings.reasoning_effort
        if settings.extra:
            params["extra_body"] = settings.extra
        return params

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse:
        params = self._params(messages, tools, settings)

        raw = await SDK.retried(self.retry, lambda: self.client.chat.completions.create(**params))
        body = raw.model_dump_json(exclude_none=True).encode()
        return priced(decode_response(body), self.name)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        params = self._params(messages, tools, settings)
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}

        chunks = await SDK.retried(self.retry,
                                   lambda: self.client.chat.completions.create(**params))
        acc = StreamAccumulator()
        async for chunk in SDK.each(chunks):
            text, kind = acc.feed(chunk.model_dump_json(exclude_none=True))
            if text:
                yield TextDelta(text, kind)  # type: ignore[arg-type]
        yield priced(acc.response(), self.name)

    async def aclose(self) -> None:
        await self.client.close()
