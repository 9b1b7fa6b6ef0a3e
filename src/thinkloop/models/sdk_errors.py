"""Errors of the official SDKs (``anthropic``, ``openai``) mapped onto thinkloop's tree.

Both SDKs share one generated shape (``APITimeoutError``, ``APIConnectionError``,
``APIStatusError`` under a base error), so one mapping serves both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TypeVar

from thinkloop.errors import ModelConnectionError, ModelError, ModelTimeoutError
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


async def call_sdk(sdk: ModuleType, base: type[Exception], label: str,
                   fn: Callable[[], Awaitable[T]]) -> T:
    """Await an SDK call, raising thinkloop errors instead of the SDK's."""
    try:
        return await fn()
    except base as exc:
        raise map_sdk_error(sdk, label, exc) from exc
