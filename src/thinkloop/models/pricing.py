"""What a response cost, from the model catalog (``models/catalog.py``: genai-prices, then a
hand table for what it lacks). A model with no known price leaves the cost unknown
(``Usage.unpriced``), not $0; models that run here cost nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from thinkloop.core.types import ModelResponse, Usage
from thinkloop.models.catalog import HAND_PRICES, cost_of, lookup

# The earlier name of the hand table (USD per 1M input / output tokens, by model-id prefix).
PRICES = HAND_PRICES


def price_for(model_id: str, table: Mapping[str, tuple[float, float]] | None = None) -> (
    tuple[float, float] | None
):
    """The base (input, output) USD per 1M tokens of a model; None: unknown."""
    if table is not None:
        found = lookup(model_id, table)
        return None if found is None else (float(found[0]), float(found[1]))
    from thinkloop.models.catalog import facts

    return facts(model_id).price


def with_cost(usage: Usage, model_id: str,
              table: Mapping[str, tuple[float, float]] | None = None) -> Usage:
    """``usage`` with its cost on ``model_id`` (``provider:model``); unknown: ``unpriced``."""
    if table is not None:
        price = price_for(model_id, table)
        cost = None if price is None else (
            usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1_000_000
    else:
        cost = cost_of(usage, model_id)
    # Built directly: dataclasses.replace walks the fields (about 4 µs, on every model call).
    u = usage
    if cost is None:
        return Usage(u.requests, u.input_tokens, u.output_tokens, 0.0, max(u.requests, 1))
    return Usage(u.requests, u.input_tokens, u.output_tokens, cost, 0)


def priced(response: ModelResponse, model_name: str) -> ModelResponse:
    """``response`` with its usage's cost, priced as the model that answered (its reported
    id, under ``model_name``'s provider), else as ``model_name``."""
    provider = model_name.split(":", 1)[0] if ":" in model_name else ""
    name = f"{provider}:{response.model}" if response.model and provider else (
        response.model or model_name)
    r = response
    return ModelResponse(r.message, with_cost(r.usage, name), r.finish_reason, r.model,
                         r.fallbacks, r.cut_chars, r.window)
