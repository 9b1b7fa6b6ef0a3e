"""Retries with exponential backoff and full jitter, honouring Retry-After."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from thinkloop.errors import ModelError, ModelHTTPError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, attempt: int, error: ModelError) -> float:
        if isinstance(error, ModelHTTPError) and error.retry_after is not None:
            return min(error.retry_after, self.max_delay_s)
        return random.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**attempt))


async def with_retries(
    policy: RetryPolicy,
    attempt_fn: Callable[[], Awaitable[T]],
    on_retry: Callable[[int, ModelError, float], None] | None = None,
) -> T:
    """Run ``attempt_fn`` until it succeeds, a non-transient error occurs, or attempts run out."""
    attempt = 0
    while True:
        try:
            return await attempt_fn()
        except ModelError as exc:
            attempt += 1
            if not exc.transient or attempt >= policy.max_attempts:
                if attempt > 1:
                    exc.add_note(f"gave up after {attempt} attempts")
                raise
            delay = policy.delay(attempt - 1, exc)
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            await asyncio.sleep(delay)
