"""A small price table: USD per million input / output tokens, matched by model-id prefix.

Prices change; the table covers common models and is easy to extend by passing a mapping.
A model with no entry costs 0.0 (unknown, not free), and local models cost nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace

from thinkloop.core.types import ModelResponse, Usage

# (input, output) USD per 1M tokens, list prices.
PRICES: Mapping[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "o3-mini": (1.10, 4.40),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
}


def price_for(model_id: str, table: Mapping[str, tuple[float, float]] = PRICES) -> (
    tuple[float, float] | None
):
    """The longest table key that prefixes the id (after any ``vendor/`` routing prefix)."""
    bare = model_id.rsplit("/", 1)[-1]
    best = max((k for k in table if bare.startswith(k)), key=len, default=None)
    return table[best] if best is not None else None


@functools.lru_cache(maxsize=256)
def _default_price(model_id: str) -> tuple[float, float] | None:
    # Every response asks; a run asks with the same id each step.
    return price_for(model_id)


def with_cost(usage: Usage, model_id: str, table: Mapping[str, tuple[float, float]] = PRICES) -> (
    Usage
):
    price = _default_price(model_id) if table is PRICES else price_for(model_id, table)
    if price is None:
        return usage
    cost = (usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1_000_000
    return Usage(usage.requests, usage.input_tokens, usage.output_tokens, cost)


def priced(response: ModelResponse, model_id: str) -> ModelResponse:
    """``response`` with its usage's cost, priced as the model that answered (else
    ``model_id``); the same object when the price is unknown."""
    usage = with_cost(response.usage, response.model or model_id)
    return replace(response, usage=usage) if usage is not response.usage else response
