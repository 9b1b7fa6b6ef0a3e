"""The one model catalog: each model's context window, price, input kinds and size class.

Prices come from ``genai-prices`` (a maintained price database, tiers and all); the hand
table :data:`HAND_PRICES` holds only what it lacks. Models that run here (``local``,
``ollama``, ``vllm``) cost nothing; a model with no known price has ``price=None``: its runs
record an unknown cost (``Usage.unpriced``), never a silent $0, and a cost cap on it is a
``ConfigError`` when the agent is built.

A model object may know its own facts better than its name does (the local model: the
context window it was configured with): it says so with a ``facts`` attribute, and every
wrapper (retry, fallback, overflow recovery, tracing) forwards its inner model's
(:func:`facts_of`).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from thinkloop.core.model import input_kinds
from thinkloop.core.types import Usage

DEFAULT_WINDOW = 32_768
# Models with a context window below this are "small": minimal prompt, few tools.
SMALL_WINDOW = 8192

# Context windows by model-id prefix (the longest matching prefix wins).
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "claude": 200_000,
    "gemini-1.5": 1_048_576,
    "gemini-2": 1_048_576,
    "gemini": 32_768,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama3.1": 131_072,
    "llama3": 8_192,
    "qwen2.5": 32_768,
    "qwen3": 40_960,
    "mistral": 32_768,
    "deepseek": 65_536,
    "smollm2": 8_192,
    "local": 4_096,  # the in-process default runs with n_ctx 4096 (THINKLOOP_LOCAL_N_CTX)
}

# (input, output) USD per 1M tokens: only models genai-prices does not know.
HAND_PRICES: Mapping[str, tuple[float, float]] = {
    "claude-3-haiku": (0.25, 1.25),
}

# Providers whose models run on the user's own machine: no price per token.
FREE_PROVIDERS = frozenset({"local", "ollama", "vllm", "scripted"})
# thinkloop's provider prefix -> genai-prices' provider id (None: found by the model id).
_GENAI_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google"}

Price = tuple[float, float]


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What thinkloop knows of one model."""

    name: str
    window: int
    # USD per 1M (input, output) tokens at the base tier; None: unknown.
    price: Price | None
    # What it reads: text, and "image" / "document" content parts (``core.model.input_kinds``).
    inputs: frozenset[str] = frozenset({"text"})
    # Where the price comes from: genai-prices, table, free, or unknown.
    price_source: str = "unknown"

    @property
    def size(self) -> Literal["small", "large"]:
        return "small" if self.window < SMALL_WINDOW else "large"

    @property
    def priced(self) -> bool:
        return self.price is not None


def _candidates(model_name: str) -> list[str]:
    """``ollama:llama3.1:8b`` -> itself, ``llama3.1:8b``, ``8b``; ``vendor/model`` too."""
    name = model_name.lower()
    out = [name]
    while (cut := min((i for i in (name.find(":"), name.find("/")) if i >= 0), default=-1)) >= 0:
        name = name[cut + 1 :]
        out.append(name)
    return out


def lookup(model_name: str, table: Mapping[str, Any]) -> Any:
    """The value of the longest ``table`` key that prefixes the name (or a shorter form of
    it, without its provider or vendor); None if none does."""
    for candidate in _candidates(model_name):
        best = max((p for p in table if candidate.startswith(p.lower())), key=len, default="")
        if best:
            return table[best]
    return None


def window_of(model_name: str, overrides: Mapping[str, int] | None = None) -> int:
    """The model's context window (``overrides`` first), else 32k."""
    if overrides:
        found = lookup(model_name, overrides)
        if found is not None:
            return int(found)
    return _window(model_name)


@functools.lru_cache(maxsize=256)
def _window(model_name: str) -> int:
    found = lookup(model_name, CONTEXT_WINDOWS)
    return int(found) if found is not None else DEFAULT_WINDOW


@functools.lru_cache(maxsize=256)
def facts(model_name: str) -> ModelFacts:
    """The catalog's facts for a ``provider:model`` name."""
    provider = model_name.split(":", 1)[0] if ":" in model_name else model_name
    kinds = frozenset({"text"})  # by name alone; a model object says what else it reads
    window = _window(model_name)
    if provider in FREE_PROVIDERS:
        return ModelFacts(model_name, window, (0.0, 0.0), kinds, "free")
    found = _genai(model_name)
    if found is not None:
        info, _ = found
        base = info.get_prices(datetime.now(UTC))
        price = (_per_mtok(base.input_mtok), _per_mtok(base.output_mtok))
        return ModelFacts(model_name, info.context_window or window, price, kinds,
                          "genai-prices")
    hand = lookup(model_name, HAND_PRICES)
    if hand is not None:
        return ModelFacts(model_name, window, hand, kinds, "table")
    return ModelFacts(model_name, window, None, kinds)


# A model object's facts, kept while the object lives: asked before every model call (the
# history pipeline's window, a wrapper's facts), and building them cost a dataclass replace.
_OF_MODEL: weakref.WeakKeyDictionary[Any, tuple[str, Any, ModelFacts]] = (
    weakref.WeakKeyDictionary())


def facts_of(model: Any) -> ModelFacts:
    """A model object's facts: its own (``model.facts``, which every wrapper forwards from
    the model it wraps) where it has them, else the catalog's for its name with the window
    the object says it has (``context_window``: the local model's n_ctx)."""
    own = getattr(model, "facts", None)
    if isinstance(own, ModelFacts):
        return own
    name = str(model.name)
    window = getattr(model, "context_window", None)
    try:
        kept = _OF_MODEL.get(model)
    except TypeError:  # not weakly referable or not hashable: worked out each time
        kept = None
    if kept is not None and kept[0] == name and kept[1] == window:
        return kept[2]
    found = facts(name)
    made = replace(found, window=window if isinstance(window, int) else found.window,
                   inputs=frozenset({"text"}) | input_kinds(model))
    with contextlib.suppress(TypeError):
        _OF_MODEL[model] = (name, window, made)
    return made


def facts_of_all(models: Sequence[Any]) -> ModelFacts:
    """A fallback list's facts: the smallest window, a price only if every model has one."""
    each = [facts_of(m) for m in models]
    first = each[0]
    priced = all(f.priced for f in each)
    inputs = frozenset.intersection(*(f.inputs for f in each))
    return replace(first, name=" -> ".join(f.name for f in each), inputs=inputs,
                   window=min(f.window for f in each), price=first.price if priced else None,
                   price_source=first.price_source if priced else "unknown")


def cost_of(usage: Usage, model_name: str) -> float | None:
    """What ``usage`` cost on ``model_name`` in USD (tiers applied); None: unknown."""
    provider = model_name.split(":", 1)[0] if ":" in model_name else ""
    if provider in FREE_PROVIDERS:
        return 0.0
    found = _genai(model_name)
    if found is not None:
        info, where = found
        from genai_prices import Usage as GenaiUsage

        calc = info.calc_price(GenaiUsage(input_tokens=usage.input_tokens,
                                          output_tokens=usage.output_tokens), where)
        return float(calc.total_price)
    hand = _hand_price(model_name, len(HAND_PRICES))
    if hand is None:
        return None
    return float(usage.input_tokens * hand[0] + usage.output_tokens * hand[1]) / 1_000_000


@functools.lru_cache(maxsize=256)
def _hand_price(model_name: str, rows: int) -> tuple[float, float] | None:
    """The hand table's price, looked up once per name (every model call is priced; a name
    the table lacks was looked up anew each time). ``rows``: a price added later to the
    table is found."""
    found = lookup(model_name, HAND_PRICES)
    return None if found is None else (float(found[0]), float(found[1]))


@functools.lru_cache(maxsize=256)
def _genai(model_name: str) -> tuple[Any, Any] | None:
    """genai-prices' model and provider for a name (cached: every response asks)."""
    from genai_prices import Usage as GenaiUsage
    from genai_prices import calc_price

    provider, _, model_id = model_name.partition(":") if ":" in model_name else (
        "", "", model_name)
    bare = model_id.rsplit("/", 1)[-1]
    for ref, where in ((bare, _GENAI_PROVIDERS.get(provider)), (model_id, None), (bare, None)):
        try:
            calc = calc_price(GenaiUsage(input_tokens=0, output_tokens=0), ref,
                              provider_id=where)
        except LookupError:
            continue
        return calc.model, calc.provider
    return None


def _per_mtok(value: Any) -> float:
    """A base price (a number, or genai-prices' tiered price: its first tier's base)."""
    if value is None:
        return 0.0
    base = getattr(value, "base", value)
    return float(base)
