"""``anthropic:NAME`` through the official ``anthropic`` SDK (the SDK does the HTTP).

The SDK's own retries are off: thinkloop's policy (backoff, Retry-After, attempt limit) applies
to every provider alike, and SDK errors are mapped onto thinkloop's error tree.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anthropic
import orjson

from thinkloop.core.errors import ConfigError
from thinkloop.core.model import THINKING_BUDGETS, ModelSettings
from thinkloop.core.settings import ProviderSettings, provider_settings
from thinkloop.core.types import Message, ModelResponse, TextDelta, ToolSpec, Usage
from thinkloop.models import anthropic_wire as wire
from thinkloop.models.openai_wire import decode_arguments
from thinkloop.models.pricing import priced
from thinkloop.models.retry import RetryPolicy
from thinkloop.models.sdk_errors import Sdk

DEFAULT_MAX_TOKENS = 4096
DEFAULT_RETRY = RetryPolicy()


SDK = Sdk("anthropic", "AnthropicError", "Anthropic")


class AnthropicModel:
    # Content parts this provider sends natively (see context.inputs.accepts).
    input_kinds = frozenset({"image", "document"})

    def __init__(
        self,
        model_id: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        name: str | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.model_id = model_id
        self.name = name or f"anthropic:{model_id}"
        self.api_key = api_key
        self.base_url = base_url
        self.retry = retry
        self._client: anthropic.AsyncAnthropic | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _sdk(self) -> anthropic.AsyncAnthropic:
        # The SDK's httpx pool is bound to the event loop; run_sync starts a new loop per run.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = anthropic.AsyncAnthropic(
                api_key=self.api_key or "unset", base_url=self.base_url, max_retries=0
            )
            self._loop = loop
        return self._client

    def _params(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> dict[str, Any]:
        system, turns = wire.encode(messages)
        params: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": settings.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": turns,
            "timeout": settings.timeout_s,
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = wire.encode_tools(tools)
            choice = wire.tool_choice(settings.tool_choice)
            if choice:
                params["tool_choice"] = choice
        if settings.reasoning_effort is not None:
            budget = THINKING_BUDGETS[settings.reasoning_effort]
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
            # The answer needs room beyond the thinking budget.
            params["max_tokens"] = max(params["max_tokens"], budget + DEFAULT_MAX_TOKENS)
        # SDK 2.x dropped ``temperature`` from its signature; older models still take it.
        extra = dict(settings.extra)
        if settings.temperature is not None:
            extra.setdefault("temperature", settings.temperature)
        if extra:
            params["extra_body"] = extra
        return params

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse:
        params = self._params(messages, tools, settings)

        raw = await SDK.retried(self.retry, lambda: self._sdk().messages.create(**params))
        return priced(wire.decode(raw), self.name)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        params = self._params(messages, tools, settings)

        events = await SDK.retried(
            self.retry, lambda: self._sdk().messages.create(**params, stream=True))
        acc = _StreamAccumulator()
        async for event in SDK.each(events):
            delta = acc.feed(event)
            if delta is not None:
                yield delta
        yield priced(acc.response(), self.name)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
        self._client = None


class _StreamAccumulator:
    """Folds raw Messages API stream events into one response."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json: dict[int, list[str]] = {}
        self.model = ""
        self.stop_reason: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0

    def feed(self, event: Any) -> TextDelta | None:
        kind = event.type
        if kind == "message_start":
            self.model = event.message.model
            self.input_tokens, self.output_tokens = wire.usage_of(event.message.usage)
        elif kind == "content_block_start":
            self.blocks[event.index] = event.content_block.model_dump()
            if event.content_block.type == "tool_use":
                self.json[event.index] = []
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            inp, out = wire.usage_of(event.usage)
            self.input_tokens = max(self.input_tokens, inp)
            self.output_tokens = out or self.output_tokens
        return None

    def _delta(self, index: int, delta: Any) -> TextDelta | None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        if delta.type == "text_delta":
            block["text"] = (block.get("text") or "") + delta.text
            return TextDelta(delta.text)
        if delta.type == "input_json_delta":
            self.json.setdefault(index, []).append(delta.partial_json)
            return TextDelta(delta.partial_json, "tool_call") if delta.partial_json else None
        if delta.type == "thinking_delta":
            block["thinking"] = (block.get("thinking") or "") + delta.thinking
            return TextDelta(delta.thinking, "thought")
        if delta.type == "signature_delta":
            block["signature"] = delta.signature
        return None

    def response(self) -> ModelResponse:
        blocks = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            if index in self.json:
                raw = "".join(self.json[index])
                args, err = decode_arguments(raw) if raw else (block.get("input") or {}, None)
                block["input"] = args if err is None else orjson.dumps(raw).decode()
            blocks.append(block)
        finish = wire.STOP_REASONS.get(self.stop_reason or "", self.stop_reason)
        usage = Usage(1, self.input_tokens, self.output_tokens)
        return ModelResponse(wire.assistant_message(blocks), usage, finish, self.model)


def build_anthropic(name: str,
                    settings: ProviderSettings | Mapping[str, str]) -> AnthropicModel:
    s = provider_settings(settings)
    if not name:
        raise ConfigError(
            "model string 'anthropic:' needs a model name, e.g. 'anthropic:claude-haiku-4-5'"
        )
    key = s.secret("anthropic_api_key")
    base_url = s.anthropic_base_url or None
    if not key and not base_url:
        from thinkloop.core.errors import MissingCredentialsError

        raise MissingCredentialsError(
            f"model 'anthropic:{name}' needs ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL)"
        )
    return AnthropicModel(name, api_key=key, base_url=base_url, name=f"anthropic:{name}",
                          retry=RetryPolicy.of(s))
