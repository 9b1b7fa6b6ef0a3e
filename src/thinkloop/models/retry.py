"""Retries with exponential backoff and full jitter, honouring Retry-After."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from thinkloop.core.errors import ConfigError, ModelError, ModelHTTPError, RetriesExhaustedError
from thinkloop.core.settings import MODEL_MAX_ATTEMPTS, ProviderSettings

T = TypeVar("T")
log = logging.getLogger(__name__)

ATTEMPTS_ENV = "THINKLOOP_MODEL_MAX_ATTEMPTS"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = MODEL_MAX_ATTEMPTS
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"max_attempts must be at least 1, got {self.max_attempts}")

    @classmethod
    def of(cls, settings: ProviderSettings) -> RetryPolicy:
        """The policy the provider settings ask for (``models.max_attempts``)."""
        return cls(max_attempts=settings.max_attempts)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RetryPolicy:
        """Deprecated (kept for one release): use :meth:`of` with the typed settings."""
        raw = env.get(ATTEMPTS_ENV)
        if not raw:
            return cls()
        try:
            return cls(max_attempts=int(raw))
        except ValueError:
            raise ConfigError(f"{ATTEMPTS_ENV} must be a whole number, got {raw!r}") from None

    def delay(self, attempt: int, error: ModelError) -> float:
        if isinstance(error, ModelHTTPError) and error.retry_after is not None:
            return min(error.retry_after, self.max_delay_s)
        return random.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**attempt))


async def with_retries(
    policy: RetryPolicy,
    attempt_fn: Callable[[], Awaitable[T]],
    on_retry: Callable[[int, ModelError, float], None] | None = None,
) -> T:
    """Run ``attempt_fn`` until it succeeds, a non-transient error occurs, or attempts run out.

    Non-transient errors propagate as they are; running out of two or more attempts raises
    :class:`RetriesExhaustedError`.
    """
    attempt = 0
    while True:
        try:
            return await attempt_fn()
        except ModelError as exc:
            attempt += 1
            if not exc.transient:
                raise
            if attempt >= policy.max_attempts:
                if attempt == 1:
                    raise  # nothing was retried: the error itself says it best
                raise RetriesExhaustedError(attempt, exc) from exc
            delay = policy.delay(attempt - 1, exc)
            log.info("model call failed (%s); retry %d in %.2fs", exc, attempt, delay)
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            await asyncio.sleep(delay)
