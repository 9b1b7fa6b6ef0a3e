"""Tries again after waits that double: the container host's runs (by default the seed's 5
retries, 5 s, 10 s, 20 s... up to 300 s), a worker's outbox writes and a gateway's reader of
the fleet's news (from 0.1 s)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_RETRIES = 5  # the seed's MAX_RETRIES
BASE_RETRY_S = 5.0
MAX_RETRY_S = 300.0


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = MAX_RETRIES  # retries after the first attempt
    base_s: float = BASE_RETRY_S
    max_s: float = MAX_RETRY_S

    def delay(self, failures: int) -> float:
        """The wait after ``failures`` failures in a row (1, 2, ...)."""
        return float(min(self.base_s * 2 ** (failures - 1), self.max_s))
