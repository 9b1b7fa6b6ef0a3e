"""Errors of the official SDKs (``anthropic``, ``openai``) mapped onto thinkloop's tree.

Both SDKs share one generated shape (``APITimeoutError``, ``APIConnectionError``,
``APIStatusError`` under a base error), so one mapping serves both.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from thinkloop.core.errors import ModelConnectionError, ModelError, ModelTimeoutError
from thinkloop.models.retry import RetryPolicy, with_retries
from thinkloop.models.transport import http_error

T = TypeVar("T")


def map_sdk_error(sdk: ModuleType, label: str, exc: Exception) -> ModelError:
    """``label`` names the endpoint in the message ("Anthropic", "the OpenAI endpoint")."""
    if isinstance(exc, sdk.APITimeoutError):
        return ModelTimeoutError(f"no answer from {label} in time: {exc}")
    if isinstance(exc, sdk.APIConnectionError):
        return ModelConnectionError(f"cannot reach {label}: {exc}")
    if isinstance(exc, sdk.APIStatusError):
        try:
            body = exc.response.text
        except Exception:  # a streamed response may be unread; the message still says why
            body = str(exc.message)
        return http_error(exc.status_code, body, exc.response.headers)
    return ModelError(f"{label} request failed: {exc}")


@dataclass(frozen=True)
class Sdk:
    """One official SDK as a provider sees it: its module (imported on first use), its base
    error, and how messages name its endpoint."""

    module: str
    base_error: str
    label: str

    def _loaded(self) -> tuple[ModuleType, type[Exception]]:
        sdk = importlib.import_module(self.module)
        return sdk, getattr(sdk, self.base_error)

    def map_error(self, exc: Exception) -> ModelError:
        return map_sdk_error(self._loaded()[0], self.label, exc)

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Await an SDK call, raising thinkloop errors instead of the SDK's."""
        sdk, base = self._loaded()
        try:
            return await fn()
        except base as exc:
            raise map_sdk_error(sdk, self.label, exc) from exc

    async def retried(self, policy: RetryPolicy, fn: Callable[[], Awaitable[T]]) -> T:
        """:meth:`call` under thinkloop's retry ``policy`` (a stream: only its opening is
        retried; one that broke mid-way is not replayed)."""
        return await with_retries(policy, lambda: self.call(fn))

    async def each(self, stream: Any) -> AsyncIterator[Any]:
        """The items of an opened SDK stream, its errors mapped; the stream is closed after."""
        sdk, base = self._loaded()
        try:
            async for item in stream:
                yield item
        except base as exc:
            raise map_sdk_error(sdk, self.label, exc) from exc
        finally:
            await stream.close()
